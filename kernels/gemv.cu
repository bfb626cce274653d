// Dense linear layers y = x W (+ bias) for f32 activations and f32/f16/bf16 weights stored
// `[n, k]` (one output per row, transposed from MatMul's B at upload). One warp per output
// column; each warp computes up to GEMV_ROWS rows of x (grid.y covers the rest), so decode
// (m = 1) reads every weight once and prefill re-reads it m / GEMV_ROWS times.
//
// Epilogue, as the CPU decoder: act 0 gives y = xW + b; otherwise y = round(xW), then
// y = round(y + b). Rows of x are `ldx` apart, rows of y `ldy` apart (y may be a column slice
// of a wider buffer).

#define GEMV_ROWS 4
#define GEMV_WARPS 8

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

__device__ __forceinline__ void gemv_store(float acc, const float* bias, int col, int act,
                                           float* y) {
    if (act == 0) {
        *y = bias ? acc + bias[col] : acc;
    } else {
        float v = round_act(acc, act);
        if (bias) v = round_act(v + bias[col], act);
        *y = v;
    }
}

template <typename W>
__device__ __forceinline__ void gemv_body(const W* __restrict__ w, const float* __restrict__ x,
                                          int ldx, const float* __restrict__ bias,
                                          float* __restrict__ y, int ldy, int n, int k, int m,
                                          int act, bool bf) {
    int lane = threadIdx.x & 31;
    int col = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    int r0 = blockIdx.y * GEMV_ROWS;
    if (col >= n) return;
    int rows = min(GEMV_ROWS, m - r0);
    const W* wr = w + (size_t)col * k;
    const float* xr = x + (size_t)r0 * ldx;
    float acc[GEMV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    bool vec = (k % 8) == 0 && (ldx % 4) == 0 && (((size_t)x & 15) == 0) &&
               (((size_t)w & 15) == 0);
    int done = 0;
    if (vec) {
        for (int c = lane * 8; c < k; c += 256) {
            float wv[8];
            if (sizeof(W) == 4) load8((const float*)(wr + c), wv);
            else load8((const u16*)(wr + c), wv, bf);
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) {
                if (r < rows) {
                    float xv[8];
                    load8(xr + (size_t)r * ldx + c, xv);
#pragma unroll
                    for (int e = 0; e < 8; e++) acc[r] = fmaf(wv[e], xv[e], acc[r]);
                }
            }
        }
        done = k;
    }
    for (int c = done + lane; c < k; c += 32) {
        float wv = load1(wr + c, bf);
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            if (r < rows) acc[r] = fmaf(wv, xr[(size_t)r * ldx + c], acc[r]);
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0 && r < rows) gemv_store(v, bias, col, act, y + (size_t)(r0 + r) * ldy + col);
    }
}

extern "C" __global__ void gemv_f32(const float* w, const float* x, int ldx, const float* bias,
                                    float* y, int ldy, int n, int k, int m, int act) {
    gemv_body<float>(w, x, ldx, bias, y, ldy, n, k, m, act, false);
}

extern "C" __global__ void gemv_f16(const u16* w, const float* x, int ldx, const float* bias,
                                    float* y, int ldy, int n, int k, int m, int act) {
    gemv_body<u16>(w, x, ldx, bias, y, ldy, n, k, m, act, false);
}

extern "C" __global__ void gemv_bf16(const u16* w, const float* x, int ldx, const float* bias,
                                     float* y, int ldy, int n, int k, int m, int act) {
    gemv_body<u16>(w, x, ldx, bias, y, ldy, n, k, m, act, true);
}
