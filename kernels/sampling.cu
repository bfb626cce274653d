// Logits processing on the device. argmax_f32: index of the largest logit (the lowest index
// among equals; NaN never wins), written to out[0]. One block of 1024 threads.

extern "C" __global__ void argmax_f32(const float* __restrict__ logits, int n,
                                      int* __restrict__ out) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = logits[i];
        if (v > bv || (v == bv && i < bi)) {
            bv = v;
            bi = i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(FULL_MASK, bv, o);
        int oi = __shfl_xor_sync(FULL_MASK, bi, o);
        if (ov > bv || (ov == bv && oi < bi)) {
            bv = ov;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        best_v[warp] = bv;
        best_i[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x >> 5;
        bv = lane < warps ? best_v[lane] : NEG_INF;
        bi = lane < warps ? best_i[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(FULL_MASK, bv, o);
            int oi = __shfl_xor_sync(FULL_MASK, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0) out[0] = bi == 0x7fffffff ? 0 : bi;
    }
}
