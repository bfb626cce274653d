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
        out[2 * i] = bf ? bf16_to_f32(lo) : f16_to_f32(lo);
        out[2 * i + 1] = bf ? bf16_to_f32(hi) : f16_to_f32(hi);
    }
}

__device__ __forceinline__ float load1(const float* w, bool) { return *w; }
__device__ __forceinline__ float load1(const u16* w, bool bf) {
    return bf ? bf16_to_f32(*w) : f16_to_f32(*w);
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
// DEC_BOUNDS: the one-row kernels' launch bounds; a tuning run may define DEC_MIN_BLOCKS
// (GENAI_BRIDGE_NVRTC_DEFINES) to make the compiler leave room for that many blocks per SM.
// None of 64, 80 or 48 registers (8, 1, 10) beat the default 68 on the H200 (CUDA_NOTES,
// round 9); the wave-aware split follows the resident blocks, so the outputs change with it.
// Two more tuning knobs of the gemv_decode_* entries for GENAI_BRIDGE_NVRTC_DEFINES: DEC_UNITS,
// 16-byte loads per column per lane in a round (4), and DEC_PIPE=1, a warp's next round of loads
// issued before the current round's arithmetic (twice the load registers). Neither changes which
// products a lane adds in which order. (gemv_decode_pipe_*, below, is 2 and 1.)
#ifndef DEC_UNITS
#define DEC_UNITS 4
#endif
#ifndef DEC_PIPE
#define DEC_PIPE 0
#endif
#ifdef DEC_MIN_BLOCKS
#define DEC_BOUNDS __launch_bounds__(128, DEC_MIN_BLOCKS)
#else
#define DEC_BOUNDS __launch_bounds__(128)
#endif

// The raw bytes of the 8-value unit at column c of a weight row (zero past k).
template <typename W>
__device__ __forceinline__ void fetch_unit(const W* wr, int c, int k, bool vec,
                                           uint4 (&raw)[sizeof(W) / 2]) {
    if (vec) {
#pragma unroll
        for (int h = 0; h < (int)sizeof(W) / 2; h++) raw[h] = load_stream16(wr + c + h * (16 / sizeof(W)));
    } else {
        W tmp[8];
#pragma unroll
        for (int e = 0; e < 8; e++) tmp[e] = c + e < k ? wr[c + e] : (W)0;
#pragma unroll
        for (int h = 0; h < (int)sizeof(W) / 2; h++) raw[h] = ((const uint4*)tmp)[h];
    }
}

// acc + the unit's 8 products, in order. kind: 0 f32, 1 f16, 2 bf16 weights.
template <int KIND, int H>
__device__ __forceinline__ float dot_unit(const uint4 (&raw)[H], const float* xv, float acc) {
    u32 words[4 * H];
#pragma unroll
    for (int h = 0; h < H; h++) {
        words[4 * h] = raw[h].x;
        words[4 * h + 1] = raw[h].y;
        words[4 * h + 2] = raw[h].z;
        words[4 * h + 3] = raw[h].w;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float wv;
        if (KIND == 0) {
            wv = __uint_as_float(words[e]);
        } else {
            u16 bits = (u16)(e & 1 ? words[e / 2] >> 16 : words[e / 2] & 0xffffu);
            wv = KIND == 1 ? f16_to_f32(bits) : bf16_to_f32(bits);
        }
        acc = fmaf(wv, xv[e], acc);
    }
    return acc;
}

// One iteration's loads: L units (stride apart from u0) of each valid column.
template <typename W, int L, int H>
__device__ __forceinline__ void fetch_units(const W* const (&wr)[DEC_COLS],
                                            const bool (&valid)[DEC_COLS], int u0, int stride,
                                            int units, int k, bool vec,
                                            uint4 (&raw)[DEC_COLS][L][H]) {
#pragma unroll
    for (int l = 0; l < L; l++) {
        int u = u0 + l * stride;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++)
            if (u < units && valid[j]) fetch_unit(wr[j], u * 8, k, vec, raw[j][l]);
    }
}

// ---- A decode step's RMSNorm spread over the GEMVs around it (GENAI_BRIDGE_NORM_SPREAD=1) -----
//
// The producer (the o or down projection, SPREAD_OUT) stores its outputs, then for each of its
// columns c adds the output to the residual, s = resid[c] + round(y[c]), writes resid[c] =
// round(s) and y[c] = s, and writes the sum of s^2 over its columns (leader warps, then columns,
// in order) to partials[blockIdx.x]. Each consumer (qkv, gate/up, lm_head; SPREAD_IN) sums the
// partials in one fixed order in every block, and normalises x = s as it reads it:
// round(s * inv * weight (+ bias)), inv = 1 / sqrt(sum / width + eps). No norm launch, no
// block that waits for the others; the sums run in an order of their own (not skip_norm_f32's).
// With a ticket the producer's last block sums the partials itself, in the consumers' order,
// into partials[gridDim.x], so each consumer reads one value (the same bits either way).
#define SPREAD_NONE 0
#define SPREAD_OUT 1
#define SPREAD_IN 2

struct SpreadNorm {
    float* resid;           // producer: the residual, updated
    float* partials;        // producer: written, one per block; consumer: read
    const float* weight;    // consumer: the norm's weight (width values)
    const float* bias;      // consumer: its bias, or null
    int parts;              // consumer: the producer's block count
    float eps;
    int act;                // the norm's rounding (the model's activations)
    int* ticket;            // producer: with one, its last block also sums the partials
};

// The sum of `parts` partials in one fixed order (per thread, then block_sum): the same bits in
// every block. Every thread of the block must call it (it synchronises).
__device__ __forceinline__ float spread_total(const float* partials, int parts) {
    __shared__ float scratch[32];
    float t = 0.0f;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) t += __ldcg(partials + i);
    return block_sum(t, scratch);
}

// 1 / sqrt(mean of s^2 + eps) from the producer's partials (or its one total).
__device__ __forceinline__ float spread_inv(const SpreadNorm& sn, int width) {
    float total = spread_total(sn.partials, sn.parts);
    return 1.0f / sqrtf(total / (float)width + sn.eps);
}

// The 8 sums s at column c (read as x) normalised in place.
__device__ __forceinline__ void spread_normalize(float* xv, const SpreadNorm& sn, int c, int k,
                                                 float inv, bool wvec) {
    float w[8], b[8];
    x_unit(nullptr, 0, sn.weight, 0, 0, c, k, false, wvec, w);
    if (sn.bias) x_unit(nullptr, 0, sn.bias, 0, 0, c, k, false, wvec, b);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float o = xv[e] * inv * w[e];
        if (sn.bias) o += b[e];
        xv[e] = round_act(o, sn.act);
    }
}

// The producer's epilogue: decode_reduce_store's sums and store (no GLU), then the residual
// update and the block's partial as described above. Every thread of the block must call it.
__device__ __forceinline__ void decode_store_spread(float (&acc)[DEC_COLS],
                                                   const bool (&valid)[DEC_COLS], int col0,
                                                   int split, const float* bias, float* y,
                                                   int act, const SpreadNorm& sn) {
    __shared__ float red[DEC_WARPS][DEC_COLS];
    __shared__ float squares[DEC_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0) red[warp][j] = v;
    }
    __syncthreads();
    if (lane == 0 && warp % split == 0) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!valid[j]) continue;
            float sum = 0.0f;
            for (int p = 0; p < split; p++) sum += red[warp + p][j];
            float v;
            linear_store(sum, bias, col0 + j, act, &v);
            float s = sn.resid[col0 + j] + round_act(v, sn.act);
            sn.resid[col0 + j] = round_act(s, sn.act);
            y[col0 + j] = s;
            part += s * s;
        }
        squares[warp] = part;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < DEC_WARPS; w += split) total += squares[w];
        sn.partials[blockIdx.x] = total;
    }
    if (sn.ticket && last_block_ticket(sn.ticket)) {
        float total = spread_total(sn.partials, (int)gridDim.x);
        if (threadIdx.x == 0) sn.partials[gridDim.x] = total;
    }
}

// UNITS: 16-byte loads per column per lane in a round; PIPE: the next round's loads go out
// before this round's arithmetic (units past the row are not loaded and never used). SPREAD:
// SPREAD_NONE, or this launch is the producer or a consumer of a spread norm `sn`.
template <typename W, int KIND, int UNITS, bool PIPE, int SPREAD = SPREAD_NONE>
__device__ __forceinline__ void gemv_decode_body(const W* __restrict__ w,
                                                 const float* __restrict__ x,
                                                 const float* __restrict__ bias,
                                                 float* __restrict__ y, int n, int k, int split,
                                                 int glu, int act,
                                                 const SpreadNorm sn = SpreadNorm()) {
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
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        valid[j] = col0 + j < n;
        wr[j] = w + (size_t)(valid[j] ? col0 + j : 0) * k;
    }
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    const int stride = 32 * split;
    uint4 raw[DEC_COLS][L][H];
    // The first loads read weights only, so they go out before waiting for the kernel that
    // writes x (programmatic dependent launch; see pdl_enter in prelude.cuh).
    pdl_trigger();
    int u0 = part * 32 + lane;
    fetch_units<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
    pdl_wait();
    float inv = 0.0f;
    if (SPREAD == SPREAD_IN) inv = spread_inv(sn, k);
    bool wvec = ((size_t)sn.weight & 15) == 0 && (sn.bias == nullptr || ((size_t)sn.bias & 15) == 0);
    for (; u0 < units; u0 += L * stride) {
        uint4 next[DEC_COLS][L][H];
        if (PIPE)
            fetch_units<W, L, H>(wr, valid, u0 + L * stride, stride, units, k, vec, next);
        else if (u0 != part * 32 + lane)
            fetch_units<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
#pragma unroll
        for (int l = 0; l < L; l++) {
            int u = u0 + l * stride;
            if (u >= units) break;
            float xv[8];
            x_unit(nullptr, 0, x, 0, 0, u * 8, k, false, xvec, xv);
            if (SPREAD == SPREAD_IN) spread_normalize(xv, sn, u * 8, k, inv, wvec);
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
    if (SPREAD == SPREAD_OUT)
        decode_store_spread(acc, valid, col0, split, bias, y, act, sn);
    else
        decode_reduce_store(acc, valid, col0, split, bias, y, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_f32(const float* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<float, 0, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_f16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<u16, 1, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_bf16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int glu, int act) {
    gemv_decode_body<u16, 2, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, glu, act);
}

// One row through the multi-row body (x staged in shared memory, 8 warps per block).
extern "C" __global__ void __launch_bounds__(256, 4)
    gemv_staged_decode_f32(const float* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
        int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<float, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

// One row through the multi-row body (x staged in shared memory, 8 warps per block).
extern "C" __global__ void __launch_bounds__(256, 4)
    gemv_staged_decode_f16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
        int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<u16, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, false);
}

// One row through the multi-row body (x staged in shared memory, 8 warps per block).
extern "C" __global__ void __launch_bounds__(256, 4)
    gemv_staged_decode_bf16(const u16* w, const float* x, int ldx, const float* bias, float* y, int ldy, int n,
        int k, int m, int split, int glu, int act) {
    pdl_enter();
    gemv_body<u16, 1>(w, x, ldx, bias, y, ldy, n, k, m, split, glu, act, true);
}

// The pipelined one-row entries for long rows (a warp would walk three or more rounds at the
// split the rule gives the entries above; `LinearShape::one_row_plan` in kernels/waves.rs):
// rounds of 2 loads per column per lane, the next round in flight during the current one's
// arithmetic (60 registers for f16, 8 blocks per SM on sm_90). The same products in the same
// order as gemv_decode_* at the same split: the same bits.
extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_f32(const float* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<float, 0, 2, true>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<u16, 1, 2, true>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_body<u16, 2, 2, true>(w, x, bias, y, n, k, split, glu, act);
}

// The one-row entries with the skip-norm after them folded in (o and down projections of a
// decode step): y (the row's delta, n values, no GLU) as gemv_decode_* / gemv_decode_pipe_*
// compute it, then the grid's last block adds it to the residual `resid` and writes the norm
// of the sum to `normed` (norm_fold_tail in prelude.cuh): the same bits as the GEMV then
// skip_norm_f32 with write_sum (rounding to `nact`), one launch fewer. `ticket` is zero between launches; the
// launch gives n floats of dynamic shared memory (the tail's values).
extern "C" __global__ void DEC_BOUNDS
    gemv_decode_fold_f32(const float* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<float, 0, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_fold_f16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<u16, 1, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_fold_bf16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<u16, 2, DEC_UNITS, DEC_PIPE != 0>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_fold_f32(const float* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<float, 0, 2, true>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_fold_f16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<u16, 1, 2, true>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_fold_bf16(const u16* w, const float* x, const float* bias, float* y, int n, int k,
        int split, int act, float* resid, const float* nweight, const float* nbias, float* normed,
        float eps, int rms, int nact, int* ticket) {
    extern __shared__ float fold_values[];
    gemv_decode_body<u16, 2, 2, true>(w, x, bias, y, n, k, split, -1, act);
    norm_fold_tail(y, resid, nweight, nbias, normed, n, eps, rms, nact, ticket, fold_values);
}


// The spread norm's producer and consumer entries (walk and pipelined kernels; see SpreadNorm).

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_out_f32(const float* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<float, 0, DEC_UNITS, DEC_PIPE != 0, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_in_f32(const float* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<float, 0, DEC_UNITS, DEC_PIPE != 0, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_out_f32(const float* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<float, 0, 2, true, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_in_f32(const float* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<float, 0, 2, true, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_out_f16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<u16, 1, DEC_UNITS, DEC_PIPE != 0, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_in_f16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<u16, 1, DEC_UNITS, DEC_PIPE != 0, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_out_f16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<u16, 1, 2, true, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_in_f16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<u16, 1, 2, true, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_out_bf16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<u16, 2, DEC_UNITS, DEC_PIPE != 0, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void DEC_BOUNDS
    gemv_decode_spread_in_bf16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<u16, 2, DEC_UNITS, DEC_PIPE != 0, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_out_bf16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int act, float* resid, float* partials, int nact, int* ticket) {
    SpreadNorm sn = {resid, partials, nullptr, nullptr, 0, 0.0f, nact, ticket};
    gemv_decode_body<u16, 2, 2, true, SPREAD_OUT>(w, x, bias, y, n, k, split, -1, act, sn);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_pipe_spread_in_bf16(const u16* w, const float* x, const float* bias, float* y,
        int n, int k, int split, int glu, int act, const float* nweight, const float* nbias,
        float* partials, int parts, float eps, int nact) {
    SpreadNorm sn = {nullptr, partials, nweight, nbias, parts, eps, nact, nullptr};
    gemv_decode_body<u16, 2, 2, true, SPREAD_IN>(w, x, bias, y, n, k, split, glu, act, sn);
}

