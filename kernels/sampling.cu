// Logits processing on the device. Argmax in two launches: argmax_partial_f32 (any grid of
// 256-thread blocks) leaves each block's best (value, index) in `pv`/`pi`; argmax_final_f32
// (one block of 1024 threads) reduces the `parts` partials to out[0]. The largest logit wins,
// the lowest index among equals; NaN never wins.

__device__ __forceinline__ void better(float& bv, int& bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) {
        bv = v;
        bi = i;
    }
}

// Block-wide best of (bv, bi); thread 0 gets the result.
__device__ __forceinline__ void block_best(float& bv, int& bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1)
        better(bv, bi, __shfl_xor_sync(FULL_MASK, bv, o), __shfl_xor_sync(FULL_MASK, bi, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x >> 5;
        bv = lane < warps ? sv[lane] : NEG_INF;
        bi = lane < warps ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1)
            better(bv, bi, __shfl_xor_sync(FULL_MASK, bv, o), __shfl_xor_sync(FULL_MASK, bi, o));
    }
}

extern "C" __global__ void argmax_partial_f32(const float* __restrict__ logits, int n,
                                              float* __restrict__ pv, int* __restrict__ pi) {
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        better(bv, bi, logits[i], i);
    block_best(bv, bi);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = bv;
        pi[blockIdx.x] = bi;
    }
}

extern "C" __global__ void argmax_final_f32(const float* __restrict__ pv,
                                            const int* __restrict__ pi, int parts,
                                            int* __restrict__ out) {
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) better(bv, bi, pv[i], pi[i]);
    block_best(bv, bi);
    if (threadIdx.x == 0) out[0] = bi == 0x7fffffff ? 0 : bi;
}
