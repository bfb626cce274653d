// Dense linear layers y = x W (+ bias) for f32 activations and f32/f16/bf16 weights stored
// `[n, k]` (one output per row, transposed from MatMul's B at upload). `split` warps (1, 2, 4
// or 8) per output column; each warp computes up to GEMV_ROWS rows of x (grid.y covers the
// rest), so prefill re-reads the weights m / GEMV_ROWS times. Decode steps (one row) use the
// gemv_decode_* entries below, written for bytes in flight rather than reuse of x.
//
// Bandwidth: a lane owns 8-value units u = part * 32 + lane + i * 32 * split (i = 0, 1, ...)
// of its column and issues GEMV_LOADS independent 16-byte weight loads per iteration before
// any arithmetic. x is staged once per block in (dynamic) shared memory as f32, zero-padded to
// whole units, when the launch provides the room (gemv_stage_floats); otherwise it is read from
// global memory. Neither the staging, the unrolling, nor the load width (16-byte vectors only
// when the addresses allow, else scalar loads) changes which products a lane adds in which
// order, so the bits depend on (m, k, n) and the values only, never on addresses.
//
// Epilogue, as the CPU decoder: act 0 gives y = xW + b; otherwise y = round(xW), then
// y = round(y + b). Rows of x are `ldx` apart, rows of y `ldy` apart (y may be a column slice
// of a wider buffer).

__device__ __forceinline__ void load8(const u16* w, float* out, bool bf) {
    uint4 raw = *(const uint4*)w;
    u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        u16 lo = (u16)(words[i] & 0xffffu), hi = (u16)(words[i] >> 16);
        out[2 * i] = half_value(lo, bf);
        out[2 * i + 1] = half_value(hi, bf);
    }
}

__device__ __forceinline__ float load1(const float* w, bool) { return *w; }
__device__ __forceinline__ float load1(const u16* w, bool bf) {
    return half_value(*w, bf);
}

// The 8 weights of the unit at column c (values past k read as 0).
template <typename W>
__device__ __forceinline__ void weight_unit(const W* wr, int c, int k, bool vec, bool bf,
                                            float* out) {
    if (vec) {
        if (sizeof(W) == 4) load8((const float*)(wr + c), out);
        else load8((const u16*)(wr + c), out, bf);
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) out[e] = c + e < k ? load1(wr + c + e, bf) : 0.0f;
    }
}

template <typename W, int R>
__device__ __forceinline__ void gemv_body(const W* __restrict__ w, const float* __restrict__ x,
                                          int ldx, const float* __restrict__ bias,
                                          float* __restrict__ y, int ldy, int n, int k, int m,
                                          int split, int glu, int act, bool bf) {
    extern __shared__ float4 gemv_stage4[];
    float* xs = (float*)gemv_stage4;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col = blockIdx.x * (GEMV_WARPS / split) + warp / split;
    int part = warp % split;
    int r0 = blockIdx.y * R;
    bool valid = col < n;
    int rows = min(R, m - r0);
    int units = (k + 7) / 8, kp = units * 8;
    const W* wr = w + (size_t)(valid ? col : 0) * k;
    const float* xr = x + (size_t)r0 * ldx;
    bool xvec = (ldx % 4) == 0 && (((size_t)x & 15) == 0);
    bool staged = stage_rows(xs, kp, xr, ldx, k, rows, R, xvec);
    // Rows of W are 16-byte aligned when k is a multiple of 8 and W is.
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    const int stride = 32 * split;
    const int loads = GEMV_LOAD_BYTES / (8 * (int)sizeof(W));  // units per lane per iteration
    for (int u0 = valid ? part * 32 + lane : units; u0 < units; u0 += loads * stride) {
        float wv[GEMV_LOAD_BYTES / 16][8];
#pragma unroll
        for (int j = 0; j < loads; j++) {
            int u = u0 + j * stride;
            if (u < units) weight_unit(wr, u * 8, k, vec, bf, wv[j]);
        }
#pragma unroll
        for (int j = 0; j < loads; j++) {
            int u = u0 + j * stride;
            if (u >= units) break;
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r < rows) {
                    float xv[8];
                    x_unit(xs, kp, xr, ldx, r, u * 8, k, staged, xvec, xv);
#pragma unroll
                    for (int e = 0; e < 8; e++) acc[r] = fmaf(wv[j][e], xv[e], acc[r]);
                }
            }
        }
    }
    split_reduce_store(acc, rows, split, valid, bias, col, act, y, ldy, r0, glu);
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_f32(const float* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
            int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<float, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}


extern "C" __global__ void __launch_bounds__(256)
    gemv_f16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
            int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<u16, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}


extern "C" __global__ void __launch_bounds__(256)
    gemv_bf16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
             int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<u16, GEMV_ROWS>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, true);
}

// ---- Decode: one row of x -------------------------------------------------------------------
//
// Blocks of DEC_WARPS warps and no shared-memory staging, so a warp issues its weight loads at
// once instead of after a block-wide barrier. A warp owns DEC_COLS adjacent columns (a GLU
// launch's (gate, up) pair lives in one warp) and `split` warps of a block share a column
// pair, each taking every split-th 32-unit stretch of the row. Per iteration a lane issues
// 4 independent 16-byte weight loads per column (8 units of f32 need two) that bypass L1,
// keeping L1 for x, which every warp of the SM re-reads. A lane adds its units in increasing
// order, the warp sums by butterfly and the split partials are summed in warp order: the same
// products in the same order whatever the alignment (scalar loads of the same values when a
// row or x is not 16-byte aligned), so the bits depend on (k, n) and the values only.

// DEC_WARPS, DEC_COLS, load_stream16 and the epilogue (decode_reduce_store): prelude.cuh.
// DEC_BOUNDS: the one-row kernels' launch bounds. None of 64, 80 or 48 registers (8, 1, 10
// blocks an SM forced by a second bound) beat 68 on the H200 without the L2 policy (docs/cuda.md,
// round 9); with it (W_EVICT, the default) the walk takes 64 (8 blocks an SM). The wave-aware
// split follows the resident blocks, so the outputs change with them.
// DEC_UNITS: 16-byte loads per column per lane in a round. 2 or 8, or the next round's loads
// issued before the current round's arithmetic, lost alone (round 10); the pipelined entries
// below are 2 units with the next round in flight.
#define DEC_UNITS 4
#define DEC_BOUNDS __launch_bounds__(128)

// One iteration's loads: L units (stride apart from u0) of each valid column.
template <typename W, int L, int H, int ENTRY>
__device__ __forceinline__ void fetch_units(const W* const (&wr)[DEC_COLS],
                                            const bool (&valid)[DEC_COLS], int u0, int stride,
                                            int units, int k, bool vec,
                                            uint4 (&raw)[DEC_COLS][L][H]) {
#pragma unroll
    for (int l = 0; l < L; l++) {
        int u = u0 + l * stride;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++)
            if (u < units && valid[j]) fetch_unit<W, ENTRY>(wr[j], u * 8, k, vec, raw[j][l]);
    }
}

// UNITS: 16-byte loads per column per lane in a round; PIPE: the next round's loads go out
// before this round's arithmetic (units past the row are not loaded and never used); ENTRY:
// W_WALK or W_PIPE, the entry's bit of the W_EVICT mask (prelude.cuh).
template <typename W, int KIND, int UNITS, bool PIPE, int ENTRY>
__device__ __forceinline__ void gemv_decode_body(const W* __restrict__ w,
                                                 const float* __restrict__ x,
                                                 const float* __restrict__ bias,
                                                 float* __restrict__ y, int n, int k, int split,
                                                 int glu, int act) {
    constexpr int H = sizeof(W) / 2;  // 16-byte loads per unit
    constexpr int L = UNITS / H;      // units per column per lane per iteration
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    int part = warp % split;
    int units = (k + 7) / 8;
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    bool xvec = ((size_t)x & 15) == 0;
    const W* wr[DEC_COLS];
    bool valid[DEC_COLS];
    decode_columns(w, n, k, col0, wr, valid);
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    const int stride = 32 * split;
    uint4 raw[DEC_COLS][L][H];
    // The first loads read weights only, so they go out before waiting for the kernel that
    // writes x (programmatic dependent launch; see pdl_enter in prelude.cuh).
    pdl_trigger();
    int u0 = part * 32 + lane;
    fetch_units<W, L, H, ENTRY>(wr, valid, u0, stride, units, k, vec, raw);
    pdl_wait();
    for (; u0 < units; u0 += L * stride) {
        uint4 next[DEC_COLS][L][H];
        if (PIPE)
            fetch_units<W, L, H, ENTRY>(wr, valid, u0 + L * stride, stride, units, k, vec, next);
        else if (u0 != part * 32 + lane)
            fetch_units<W, L, H, ENTRY>(wr, valid, u0, stride, units, k, vec, raw);
#pragma unroll
        for (int l = 0; l < L; l++) {
            int u = u0 + l * stride;
            if (u >= units) break;
            float xv[8];
            x_unit(nullptr, 0, x, 0, 0, u * 8, k, false, xvec, xv);
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++)
                if (valid[j]) acc[j] = dot_unit<KIND, H>(raw[j][l], xv, acc[j]);
        }
        if (PIPE) {
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++)
#pragma unroll
                for (int l = 0; l < L; l++)
#pragma unroll
                    for (int h = 0; h < H; h++) raw[j][l][h] = next[j][l][h];
        }
    }
    decode_reduce_store(acc, valid, col0, split, bias, y, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_f32(const float* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<float, 0, DEC_UNITS, false, W_WALK>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_f16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<u16, 1, DEC_UNITS, false, W_WALK>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_bf16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<u16, 2, DEC_UNITS, false, W_WALK>(w, x, bias, y, n, k, split, glu, act);
}

// The pipelined one-row entries for long rows (a warp would walk three or more rounds at the
// split the rule gives the entries above; `LinearShape::one_row_plan` in kernels/waves.rs):
// rounds of 2 loads per column per lane, the next round in flight during the current one's
// arithmetic (60 registers for f16, 8 blocks per SM on sm_90). The same products in the same
// order as gemv_decode_* at the same split: the same bits.
extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_f32(const float* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<float, 0, 2, true, W_PIPE>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<u16, 1, 2, true, W_PIPE>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<u16, 2, 2, true, W_PIPE>(w, x, bias, y, n, k, split, glu, act);
}
