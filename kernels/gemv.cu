// Dense linear layers y = x W (+ bias) for f32 activations and f32/f16/bf16 weights stored
// `[n, k]` (one output per row, transposed from MatMul's B at upload). `split` warps (1, 2, 4
// or 8) per output column; each warp computes up to GEMV_ROWS rows of x (grid.y covers the
// rest), so prefill re-reads the weights m / GEMV_ROWS times; the gemv_decode_* entries are the
// same code for one row (fewer registers, more warps in flight) and serve decode steps.
//
// Epilogue, as the CPU decoder: act 0 gives y = xW + b; otherwise y = round(xW), then
// y = round(y + b). Rows of x are `ldx` apart, rows of y `ldy` apart (y may be a column slice
// of a wider buffer).


__device__ __forceinline__ void load8(const float* w, float* out) {
    float4 a = *(const float4*)w, b = *(const float4*)(w + 4);
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
}

__device__ __forceinline__ void load8(const u16* w, float* out, bool bf) {
    uint4 raw = *(const uint4*)w;
    u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        u16 lo = (u16)(words[i] & 0xffffu), hi = (u16)(words[i] >> 16);
        out[2 * i] = bf ? bf16_to_f32(lo) : f16_to_f32(lo);
        out[2 * i + 1] = bf ? bf16_to_f32(hi) : f16_to_f32(hi);
    }
}

__device__ __forceinline__ float load1(const float* w, bool) { return *w; }
__device__ __forceinline__ float load1(const u16* w, bool bf) {
    return bf ? bf16_to_f32(*w) : f16_to_f32(*w);
}

template <typename W, int R>
__device__ __forceinline__ void gemv_body(const W* __restrict__ w, const float* __restrict__ x,
                                          int ldx, const float* __restrict__ bias,
                                          float* __restrict__ y, int ldy, int n, int k, int m,
                                          int split, int glu, int act, bool bf) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col = blockIdx.x * (GEMV_WARPS / split) + warp / split;
    int part = warp % split;
    int r0 = blockIdx.y * R;
    bool valid = col < n;
    int rows = min(R, m - r0);
    const W* wr = w + (size_t)(valid ? col : 0) * k;
    const float* xr = x + (size_t)r0 * ldx;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    bool vec = (k % 8) == 0 && (ldx % 4) == 0 && (((size_t)x & 15) == 0) &&
               (((size_t)w & 15) == 0);
    if (valid && vec) {
        int units = k / 8;
#pragma unroll 4
        for (int u = part * 32 + lane; u < units; u += 32 * split) {
            int c = u * 8;
            float wv[8];
            if (sizeof(W) == 4) load8((const float*)(wr + c), wv);
            else load8((const u16*)(wr + c), wv, bf);
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r < rows) {
                    float xv[8];
                    load8(xr + (size_t)r * ldx + c, xv);
#pragma unroll
                    for (int e = 0; e < 8; e++) acc[r] = fmaf(wv[e], xv[e], acc[r]);
                }
            }
        }
    } else if (valid) {
        for (int c = part * 32 + lane; c < k; c += 32 * split) {
            float wv = load1(wr + c, bf);
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < rows) acc[r] = fmaf(wv, xr[(size_t)r * ldx + c], acc[r]);
        }
    }
    split_reduce_store(acc, rows, split, valid, bias, col, act, y, ldy, r0, glu);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_f32(const float* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
            int k, int m, int split, int glu, int act) {
    gemv_body<float, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_decode_f32(const float* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
                   int k, int m, int split, int glu, int act) {
    gemv_body<float, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_f16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
            int k, int m, int split, int glu, int act) {
    gemv_body<u16, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_decode_f16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
                   int k, int m, int split, int glu, int act) {
    gemv_body<u16, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_bf16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
             int k, int m, int split, int glu, int act) {
    gemv_body<u16, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, true);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_decode_bf16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
                    int k, int m, int split, int glu, int act) {
    gemv_body<u16, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, true);
}
