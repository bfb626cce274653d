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

// HALF: `out` also written rounded to f16 (half_bf 0) or bf16 (1) into `half`, rows `width`
// apart: what a prompt GEMM's cast (blas.cu) would make of it, so that GEMM skips its cast.
template <bool HALF>
__device__ __forceinline__ void skip_norm_body(float* __restrict__ x,
                                               const float* __restrict__ delta,
                                               const float* __restrict__ weight,
                                               const float* __restrict__ bias, float* out,
                                               int width, int per_row, int ld, float eps, int rms,
                                               int write_sum, int act, u16* half,
                                               int half_bf) {
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
        ds[j] = delta && i < width ? delta[base + i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < NORM_VALUES; j++) {
        int i = threadIdx.x + j * blockDim.x;
        float s = 0.0f;
        if (i < width) {
            s = xs[j];
            if (delta) s += round_act(ds[j], act);
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
            if (HALF) half[(size_t)r * width + i] = (u16)half_bits(y, half_bf);
        }
    }
}

extern "C" __global__ void skip_norm_f32(float* __restrict__ x, const float* __restrict__ delta,
                                         const float* __restrict__ weight,
                                         const float* __restrict__ bias, float* out, int width,
                                         int per_row, int ld, float eps, int rms, int write_sum,
                                         int act) {
    skip_norm_body<false>(x, delta, weight, bias, out, width, per_row, ld, eps, rms, write_sum,
                          act, nullptr, 0);
}

// skip_norm_f32, its output also written rounded to 16 bits into `half` (rows width apart).
extern "C" __global__ void skip_norm_half_f32(float* __restrict__ x,
                                              const float* __restrict__ delta,
                                              const float* __restrict__ weight,
                                              const float* __restrict__ bias, float* out,
                                              int width, int per_row, int ld, float eps, int rms,
                                              int write_sum, int act, u16* half, int half_bf) {
    skip_norm_body<true>(x, delta, weight, bias, out, width, per_row, ld, eps, rms, write_sum,
                         act, half, half_bf);
}
