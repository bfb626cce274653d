// One-row dense linear layers (decode steps) whose blocks loop over the launch's column groups:
// gemv_decode_* runs one column group a block and a launch of more groups than the device holds
// at once in waves (each block loads its round, multiplies, leaves, and the next block starts
// cold); these entries launch at most as many blocks as are resident, and each block walks
// groups b, b + gridDim.x, ... with the next load round (of this group or the next) in flight
// while it multiplies the current one. A family of its own, so its entries cannot change how
// NVRTC compiles gemv.cu (adding entries there did, round 17).
//
// gemv_decode_loop_*: the lanes, units, products and order of gemv_decode_* at the same split
// for every column group (so the same bits whatever the grid): a lane adds its units of a column
// in increasing order, the warp sums by butterfly and the split partials are summed in warp
// order. The host takes it for walk launches of more groups than the walk kernel holds at once
// under GENAI_BRIDGE_DECODE_GEMV=loop (an A/B switch; src/cuda/kernels/one_row.rs).
// 16-byte loads per column per lane in a round (gemv_decode_*'s DEC_UNITS). With the next round
// in flight the f16 entry takes 119 registers at 4 (4 blocks an SM on sm_90); a tuning run may
// set LOOP_UNITS=2 (GENAI_BRIDGE_NVRTC_DEFINES) for fewer registers and more blocks.
#ifndef LOOP_UNITS
#define LOOP_UNITS 4
#endif

// A warp's position: column group `item` and load round `r` (units from part * 32 + r * step).
struct LoopAt {
    int item, r;
};

// The warp's rows for column group `item`.
template <typename W>
__device__ __forceinline__ void loop_columns(const W* w, int n, int k, int item, int split,
                                             int warp, const W* (&wr)[DEC_COLS],
                                             bool (&valid)[DEC_COLS], int& col0) {
    col0 = (item * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    decode_columns(w, n, k, col0, wr, valid);
}

template <typename W, int KIND>
__device__ __forceinline__ void gemv_decode_loop_body(const W* __restrict__ w,
                                                      const float* __restrict__ x,
                                                      const float* __restrict__ bias,
                                                      float* __restrict__ y, int n, int k,
                                                      int split, int glu, int act) {
    constexpr int H = sizeof(W) / 2;  // 16-byte loads per unit
    constexpr int L = LOOP_UNITS / H; // units per column per lane per round
    __shared__ float red[2][DEC_WARPS][DEC_COLS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int part = warp % split;
    int units = (k + 7) / 8;
    int items = ((n + DEC_COLS - 1) / DEC_COLS + DEC_WARPS / split - 1) / (DEC_WARPS / split);
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    bool xvec = ((size_t)x & 15) == 0;
    const int stride = 32 * split, step = L * stride;
    // Rounds of a group for this warp: its first unit of a round, part * 32 + r * step, is in
    // the row (the same for every lane of the warp; lanes past the row load nothing).
    int rounds = units > part * 32 ? (units - part * 32 + step - 1) / step : 1;
    LoopAt at = {(int)blockIdx.x, 0};
    pdl_trigger();
    // A block past the groups (never launched so by the host) finds its columns invalid and
    // stores nothing.
    const W* wr[DEC_COLS];
    bool valid[DEC_COLS];
    int col0;
    loop_columns(w, n, k, at.item, split, warp, wr, valid, col0);
    uint4 raw[DEC_COLS][L][H];
    // The first round reads weights only: out before waiting for the kernel that writes x.
    int u0 = part * 32 + lane;
    fetch_units<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
    pdl_wait();
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    int parity = 0;
    while (true) {
        LoopAt next = {at.item, at.r + 1};
        bool ends = next.r >= rounds || at.item >= items;  // the group's last round
        if (ends) next = {at.item + (int)gridDim.x, 0};
        bool more = next.item < items;
        const W* nwr[DEC_COLS];
        bool nvalid[DEC_COLS];
        int ncol0 = col0;
        if (ends && more) {
            loop_columns(w, n, k, next.item, split, warp, nwr, nvalid, ncol0);
        } else {
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++) {
                nwr[j] = wr[j];
                nvalid[j] = valid[j];
            }
        }
        uint4 nraw[DEC_COLS][L][H];
        int nu0 = part * 32 + lane + next.r * step;
        if (more) fetch_units<W, L, H>(nwr, nvalid, nu0, stride, units, k, vec, nraw);
        round_products<KIND, L, H>(raw, valid, u0, stride, units, x, k, xvec, acc);
        if (ends) {  // the group is done: its sums, then a fresh one
            // The block's partials alternate between two arrays, so one barrier a group suffices.
            decode_reduce_store_in(red[parity], acc, valid, col0, split, bias, y, glu, act);
            parity ^= 1;
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
        }
        if (!more) break;
        at = next;
        u0 = nu0;
        col0 = ncol0;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            wr[j] = nwr[j];
            valid[j] = nvalid[j];
#pragma unroll
            for (int l = 0; l < L; l++)
#pragma unroll
                for (int h = 0; h < H; h++) raw[j][l][h] = nraw[j][l][h];
        }
    }
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_loop_f32(const float* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_loop_body<float, 0>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_loop_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_loop_body<u16, 1>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_loop_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_loop_body<u16, 2>(w, x, bias, y, n, k, split, glu, act);
}
