// One-row dense linear layers (decode steps) with four columns a warp (`gemv_decode_wide_*`;
// the `wide` rule, `GENAI_BRIDGE_DECODE_GEMV=wide`): gemv.cu's walk holds two columns a warp,
// and every warp reads its share of x from L1 once per column pair, as many L1 bytes as the
// pair's f16 weights cost in DRAM (CUDA_NOTES round 21: a norm fold that tripled those reads
// made every step 25-37% slower). Four columns a warp halve the x reads a weight byte.
//
// A lane's units, loads and products are the walk's at the same split for each of its columns
// (units u0, u0 + 32 * split, ... in order; the warp's butterfly; the split warps in warp
// order), so the bits are the walk's. WIDE_UNITS 16-byte loads a column a lane a round (2: the
// walk's bytes in flight a lane at twice the columns), the first round before the PDL wait.
// Blocks of DEC_WARPS warps; `split` warps share a group of WIDE_COLS adjacent columns, so a
// GLU launch's (gate, up) pairs stay in one warp. The host's grid: ceil(n / WIDE_COLS) groups,
// DEC_WARPS / split groups a block (`LinearShape::plan_grid`).
#define WIDE_COLS 4
#ifndef WIDE_UNITS
#define WIDE_UNITS 2
#endif

// One round's loads: L units (stride apart from u0) of each valid column.
template <typename W, int L, int H>
__device__ __forceinline__ void wide_fetch(const W* const (&wr)[WIDE_COLS],
                                           const bool (&valid)[WIDE_COLS], int u0, int stride,
                                           int units, int k, bool vec,
                                           uint4 (&raw)[WIDE_COLS][L][H]) {
#pragma unroll
    for (int l = 0; l < L; l++) {
        int u = u0 + l * stride;
#pragma unroll
        for (int j = 0; j < WIDE_COLS; j++)
            if (u < units && valid[j]) fetch_unit(wr[j], u * 8, k, vec, raw[j][l]);
    }
}

template <typename W, int KIND, int UNITS>
__device__ __forceinline__ void gemv_wide_body(const W* __restrict__ w,
                                               const float* __restrict__ x,
                                               const float* __restrict__ bias,
                                               float* __restrict__ y, int n, int k, int split,
                                               int glu, int act) {
    constexpr int H = sizeof(W) / 2;                // 16-byte loads a unit
    constexpr int L = UNITS / H > 0 ? UNITS / H : 1;  // units a column a lane a round
    __shared__ float red[DEC_WARPS][WIDE_COLS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * WIDE_COLS;
    int part = warp % split;
    int units = (k + 7) / 8;
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    bool xvec = ((size_t)x & 15) == 0;
    const W* wr[WIDE_COLS];
    bool valid[WIDE_COLS];
    float acc[WIDE_COLS];
#pragma unroll
    for (int j = 0; j < WIDE_COLS; j++) {
        valid[j] = col0 + j < n;
        wr[j] = w + (size_t)(valid[j] ? col0 + j : 0) * k;
        acc[j] = 0.0f;
    }
    const int stride = 32 * split;
    uint4 raw[WIDE_COLS][L][H];
    // The first round reads weights only: it goes out before the wait (PDL).
    pdl_trigger();
    const int first = part * 32 + lane;
    wide_fetch<W, L, H>(wr, valid, first, stride, units, k, vec, raw);
    pdl_wait();
    for (int u0 = first; u0 < units; u0 += L * stride) {
        if (u0 != first) wide_fetch<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
#pragma unroll
        for (int l = 0; l < L; l++) {
            int u = u0 + l * stride;
            if (u >= units) break;
            float xv[8];
            x_unit(nullptr, 0, x, 0, 0, u * 8, k, false, xvec, xv);
#pragma unroll
            for (int j = 0; j < WIDE_COLS; j++)
                if (valid[j]) acc[j] = dot_unit<KIND, H>(raw[j][l], xv, acc[j]);
        }
    }
    // The walk's epilogue (decode_reduce_store) over WIDE_COLS columns.
#pragma unroll
    for (int j = 0; j < WIDE_COLS; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0) red[warp][j] = v;
    }
    if (split > 1) __syncthreads();
    if (lane != 0 || warp % split != 0) return;
    float sum[WIDE_COLS];
#pragma unroll
    for (int j = 0; j < WIDE_COLS; j++) {
        sum[j] = 0.0f;
        for (int p = 0; p < split; p++) sum[j] += red[warp + p][j];
    }
    if (glu >= 0) {
#pragma unroll
        for (int q = 0; q < WIDE_COLS; q += 2) {
            if (!valid[q + 1]) return;
            float g = sum[q], u = sum[q + 1];
            if (bias) {
                g += bias[col0 + q];
                u += bias[col0 + q + 1];
            }
            y[(col0 + q) / 2] = activation_outlined(g, glu) * u;
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < WIDE_COLS; j++)
        if (valid[j]) linear_store(sum[j], bias, col0 + j, act, y + col0 + j);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_wide_f32(const float* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_wide_body<float, 0, WIDE_UNITS>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_wide_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_wide_body<u16, 1, WIDE_UNITS>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_wide_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_wide_body<u16, 2, WIDE_UNITS>(w, x, bias, y, n, k, split, glu, act);
}
