// RMSNorm / LayerNorm with the residual (skip) add fused in. Row r of x lives at
// (r / per_row) * ld + (r % per_row) * width, so the same kernel normalises hidden rows
// (per_row 1) and per-head q/k rows inside the fused qkv buffer (per_row = heads).
//
//   s = x + round(delta)                 (delta null: s = x)
//   out = round(norm(s) * weight (+ bias))
//   x = round(s)                         (only when write_sum)
//
// This is the CPU decoder's order: the norm sees the unrounded sum, the residual handed on is
// rounded. One block per row, each thread holding up to NORM_VALUES values of it in registers
// (blockDim.x * NORM_VALUES >= width), so `out` may alias `x`. The norm's weight and bias are
// read before waiting for the kernel before (programmatic dependent launch: no kernel writes
// them), so their latency overlaps that kernel's tail. The host launches whole warps, at
// least width / NORM_VALUES threads.
#define NORM_VALUES 8

// The row's values (thread t holds t + j * blockDim.x in v[j], zeros past the row) split into
// hi and lo halves at their slots (split_stride, split_slot in prelude.cuh), zeros past the
// row, and 2^e after them. Every thread of the block must call it (it synchronises).
__device__ __forceinline__ void split_row(const float (&v)[NORM_VALUES], int width,
                                          float* scratch, u16* split) {
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) m = fmaxf(m, fabsf(v[j]));
    int e = split_exponent(block_max(m, scratch));  // (its first barrier frees scratch)
    float down = __int_as_float((127 - e) << 23);  // 2^-e, exactly
    int stride = split_stride(width), slots = stride * 8;
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        if (i < width) {
            u16 hi, lo;
            split_halves(v[j] * down, hi, lo);
            split[split_slot(i)] = hi;
            split[slots + split_slot(i)] = lo;
        }
    }
    for (int i = width + threadIdx.x; i < slots; i += blockDim.x) {
        split[split_slot(i)] = 0;
        split[slots + split_slot(i)] = 0;
    }
    if (threadIdx.x == 0) *(float*)(split + 2 * slots) = __int_as_float((127 + e) << 23);
}

// SPLIT (one row): `out` also written split for the int4 tensor-core GEMV after it
// (split_stride in prelude.cuh): the halves int4_mma.cu's stage would make of it, so that GEMV
// skips its stage and gives the same bits. HALF: `out` also written rounded to f16 (half_bf 0)
// or bf16 (1) into `half`, rows `width` apart: what a prompt GEMM's cast (blas.cu) would make
// of it, so that GEMM skips its cast.
// FIXED: delta is read from `fixed`, mlp_fused.cu's 64-bit fixed-point sums (value * 2^32,
// MF_ACC_STRIDE words apart), and each word is cleared once read, for the next layer's sums.
template <bool SPLIT, bool HALF, bool FIXED = false>
__device__ __forceinline__ void skip_norm_body(float* __restrict__ x,
                                               const float* __restrict__ delta,
                                               const float* __restrict__ weight,
                                               const float* __restrict__ bias, float* out,
                                               int width, int per_row, int ld, float eps, int rms,
                                               int write_sum, int act, u16* split,
                                               u16* half, int half_bf,
                                               unsigned long long* fixed = nullptr) {
    __shared__ float scratch[32];
    int r = blockIdx.x;
    size_t base = (size_t)(r / per_row) * ld + (size_t)(r % per_row) * width;
    float v[NORM_VALUES], w[NORM_VALUES], b[NORM_VALUES];
    pdl_trigger();
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        w[j] = i < width ? weight[i] : 0.0f;
        b[j] = bias && i < width ? bias[i] : 0.0f;
    }
    pdl_wait();
    float sum = 0.0f;
    // Every value of x and delta is read before any is used: with the rounding's branches
    // between one read and the next, each read would otherwise wait for the one before (one
    // L2 round trip per value a thread holds, in the machine code).
    float xs[NORM_VALUES], ds[NORM_VALUES];
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        xs[j] = i < width ? x[base + i] : 0.0f;
        if (FIXED) {
            ds[j] = 0.0f;
            if (i < width) {
                unsigned long long* word = fixed + (base + i) * MF_ACC_STRIDE;
                ds[j] = __ll2float_rn((long long)*word) * 2.3283064365386963e-10f;  // 2^-32
                *word = 0ull;
            }
        } else {
            ds[j] = delta && i < width ? delta[base + i] : 0.0f;
        }
    }
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        float s = 0.0f;
        if (i < width) {
            s = xs[j];
            if (FIXED || delta) s += round_act(ds[j], act);
        }
        v[j] = s;
        sum += s;
    }
    float mean = 0.0f;
    if (!rms) mean = block_sum(sum, scratch) / (float)width;
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        float d = i < width ? v[j] - mean : 0.0f;
        sq += d * d;
    }
    float var = block_sum(sq, scratch) / (float)width;
    float inv = 1.0f / sqrtf(var + eps);
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        if (i < width) {
            float o = (v[j] - mean) * inv * w[j];
            if (bias) o += b[j];
            if (write_sum) x[base + i] = round_act(v[j], act);
            float y = round_act(o, act);
            out[base + i] = y;
            if (SPLIT) v[j] = y;
            if (HALF) half[(size_t)r * width + i] = (u16)half_bits(y, half_bf);
        }
    }
    if (SPLIT) split_row(v, width, scratch, split);
}

extern "C" __global__ void skip_norm_f32(float* __restrict__ x, const float* __restrict__ delta,
                                         const float* __restrict__ weight,
                                         const float* __restrict__ bias, float* out, int width,
                                         int per_row, int ld, float eps, int rms, int write_sum,
                                         int act) {
    skip_norm_body<false, false>(x, delta, weight, bias, out, width, per_row, ld, eps, rms,
                                 write_sum, act, nullptr, nullptr, 0);
}

// skip_norm_f32, its output also written rounded to 16 bits into `half` (rows width apart).
extern "C" __global__ void skip_norm_half_f32(float* __restrict__ x,
                                              const float* __restrict__ delta,
                                              const float* __restrict__ weight,
                                              const float* __restrict__ bias, float* out,
                                              int width, int per_row, int ld, float eps, int rms,
                                              int write_sum, int act, u16* half, int half_bf) {
    skip_norm_body<false, true>(x, delta, weight, bias, out, width, per_row, ld, eps, rms,
                                write_sum, act, nullptr, half, half_bf);
}

// One row (per_row 1), also written split into `split`.
extern "C" __global__ void skip_norm_split_f32(float* __restrict__ x,
                                               const float* __restrict__ delta,
                                               const float* __restrict__ weight,
                                               const float* __restrict__ bias, float* out,
                                               int width, float eps, int rms, int write_sum,
                                               int act, u16* split) {
    skip_norm_body<true, false>(x, delta, weight, bias, out, width, 1, width, eps, rms, write_sum,
                                act, split, nullptr, 0);
}

// One row (per_row 1, write_sum 1), delta read from mlp_fused.cu's fixed-point sums at `fixed`
// (cleared as read).
extern "C" __global__ void skip_norm_fixed_f32(float* __restrict__ x,
                                               unsigned long long* __restrict__ fixed,
                                               const float* __restrict__ weight,
                                               const float* __restrict__ bias, float* out,
                                               int width, float eps, int rms, int act) {
    skip_norm_body<false, false, true>(x, nullptr, weight, bias, out, width, 1, width, eps, rms,
                                       1, act, nullptr, nullptr, 0, fixed);
}
