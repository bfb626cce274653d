// One-row dense linear layers (decode steps) with every weight of a launch in flight before
// the PDL wait: gemv.cu's one-row kernels hold a round of loads in registers, these copy a
// lane's whole share of its columns into shared memory (a family of its own, so that its
// entries cannot change how NVRTC compiles gemv.cu's: adding them there did, round 17).

// ---- One row, every weight in flight before the wait ------------------------------------------
//
// gemv_decode_shared_*: the lanes, units, products and order of gemv_decode_* at the same split
// (so the same bits), but before waiting for the kernel that writes x, each lane copies ALL of
// its units (cp.async, 16 bytes, through L2 only) into its own slots of dynamic shared memory,
// where gemv_decode_* holds one round of them in registers. A launch whose blocks are all
// resident at once thus has its whole weight in flight while the kernel before it (a one-block
// norm, the decode attention) runs, and the register file no longer bounds the bytes in flight
// (H200: ~128 KB of loads an SM in registers against 228 KB of shared memory). The host sizes
// the shared memory (`slots_bytes` in src/cuda/kernels/shared.rs: DEC_WARPS * DEC_COLS *
// slots * H * 512 bytes, slots = ceil(units / (32 * split))) and takes this entry, by default,
// for the launches gemv_decode_* cannot have wholly in flight, where every block is resident
// (`Ops::one_row_plan`). Slot (column j, unit i, piece h) of a lane sits at
// ((warp * DEC_COLS + j) * slots + i) * H + h) * 32 + lane, so a warp's 16-byte reads of one
// slot row are contiguous. Each lane reads only its own slots: waiting for its own copies is
// enough, no barrier. Rows that are not 16-byte aligned are copied through registers.
#define SHARED_X_BATCH 2  // units whose x values a lane reads before their products
// The norm-folding entries hold the norm's values in registers too (48 registers at 10 blocks;
// the f32 entry spills 8 bytes).
#define SHARED_NORM_MIN_BLOCKS 10

// Row r[0, k) of f32 into shared memory s (the block's threads together): 16-byte copies when
// r is 16-byte aligned and k a multiple of 4, else plain loads and stores.
__device__ __forceinline__ void shared_row(float* s, const float* r, int k) {
    if ((k % 4) == 0 && ((size_t)r & 15) == 0) {
        for (int c = threadIdx.x * 4; c < k; c += blockDim.x * 4) cp_async16(s + c, r + c);
    } else {
        for (int i = threadIdx.x; i < k; i += blockDim.x) s[i] = r[i];
    }
}

// The skip-norm a gemv_decode_shared_norm_* launch applies to its x (the residual) before its
// products: norm_stats and skip_norm_f32's outputs with skip_norm_f32's layout for `threads`
// (at most the block's 128) threads, so the same bits. Block 0 writes the new residual
// round(x + round(delta)) to x_out (never x: the other blocks still read it); every block
// stages the normed row, rounded, in shared memory after the weights' slots, zeros past k.
struct FoldNorm {
    const float* delta;
    const float* weight;
    const float* bias;
    float* x_out;
    float eps;
    int rms, act, threads;
};
// Blocks an SM should hold (registers: 40 with the batch of 2, no spills; 4 spills at 12)
#define SHARED_MIN_BLOCKS 12

template <typename W, int KIND, bool NORM>
__device__ __forceinline__ void gemv_decode_shared_body(const W* __restrict__ w,
                                                        const float* __restrict__ x,
                                                        const float* __restrict__ bias,
                                                        float* __restrict__ y, int n, int k,
                                                        int split, int glu, int act,
                                                        FoldNorm fold) {
    constexpr int H = sizeof(W) / 2;  // 16-byte pieces per unit
    extern __shared__ uint4 shared_slots[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    int part = warp % split;
    int units = (k + 7) / 8;
    int stride = 32 * split;
    int slots = (units + stride - 1) / stride;
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    bool xvec = ((size_t)x & 15) == 0;
    const W* wr[DEC_COLS];
    bool valid[DEC_COLS];
    decode_columns(w, n, k, col0, wr, valid);
    uint4* mine = shared_slots + (size_t)warp * DEC_COLS * slots * H * 32 + lane;
    int u0 = part * 32 + lane;
    // With NORM: the normed row's place (units * 8 floats after the slots), which first holds
    // the norm's weight, and after it the norm's bias; both copied before the wait (no kernel
    // writes them), as their own copy group ahead of the weights'.
    float* staged = (float*)(shared_slots + (size_t)DEC_WARPS * DEC_COLS * slots * H * 32);
    float* staged_bias = staged + units * 8;
    pdl_trigger();
    if (NORM) {
        shared_row(staged, fold.weight, k);
        if (fold.bias) shared_row(staged_bias, fold.bias, k);
        cp_async_commit();
    }
    for (int i = 0; i < slots; i++) {
        int u = u0 + i * stride;
        if (u >= units) break;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!valid[j]) continue;
            uint4* slot = mine + (size_t)(j * slots + i) * H * 32;
            if (vec) {
#pragma unroll
                for (int h = 0; h < H; h++) cp_async16(slot + h * 32, wr[j] + u * 8 + h * (16 / sizeof(W)));
            } else {
                uint4 raw[H];
                fetch_unit(wr[j], u * 8, k, false, raw);
#pragma unroll
                for (int h = 0; h < H; h++) slot[h * 32] = raw[h];
            }
        }
    }
    cp_async_commit();
    pdl_wait();
    if (NORM) {
        __shared__ float scratch[32];
        // This thread's copies of the norm's rows are done (the older group); the block sums'
        // barriers below make every thread's visible before any is read.
        cp_async_wait<1>();
        float xs[NORM_VALUES], ds[NORM_VALUES], v[NORM_VALUES];
        int t = threadIdx.x;
#pragma unroll
        for (int j = 0; j < NORM_VALUES; j++) {
            int i = t + j * fold.threads;
            bool in = t < fold.threads && i < k;
            xs[j] = in ? x[i] : 0.0f;
            ds[j] = in && fold.delta ? fold.delta[i] : 0.0f;
        }
        float2 stats = norm_stats<true>(xs, ds, fold.delta != nullptr, t, fold.threads, k,
                                        fold.eps, fold.rms, fold.act, scratch, v);
#pragma unroll
        for (int j = 0; j < NORM_VALUES; j++) {
            int i = t + j * fold.threads;
            if (t < fold.threads && i < k) {
                float o = (v[j] - stats.x) * stats.y * staged[i];
                if (fold.bias) o += staged_bias[i];
                staged[i] = round_act(o, fold.act);
                if (blockIdx.x == 0) fold.x_out[i] = round_act(v[j], fold.act);
            }
        }
        for (int i = k + t; i < units * 8; i += blockDim.x) staged[i] = 0.0f;
        __syncthreads();
    }
    cp_async_wait<0>();
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    for (int i0 = 0; i0 < slots; i0 += SHARED_X_BATCH) {
        // A batch's x values are read before any product, so its reads wait for L2 once.
        float xv[SHARED_X_BATCH][8];
#pragma unroll
        for (int b = 0; b < SHARED_X_BATCH; b++) {
            int u = u0 + (i0 + b) * stride;
            if (i0 + b < slots && u < units)
                x_unit(staged, 0, x, 0, 0, u * 8, k, NORM, xvec, xv[b]);
        }
#pragma unroll
        for (int b = 0; b < SHARED_X_BATCH; b++) {
            int i = i0 + b, u = u0 + i * stride;
            if (i >= slots || u >= units) break;
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++) {
                if (!valid[j]) continue;
                const uint4* slot = mine + (size_t)(j * slots + i) * H * 32;
                uint4 raw[H];
#pragma unroll
                for (int h = 0; h < H; h++) raw[h] = slot[h * 32];
                acc[j] = dot_unit<KIND, H>(raw, xv[b], acc[j]);
            }
        }
    }
    decode_reduce_store(acc, valid, col0, split, bias, y, glu, act);
}

extern "C" __global__ void __launch_bounds__(128, SHARED_MIN_BLOCKS)
    gemv_decode_shared_f32(const float* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_shared_body<float, 0, false>(w, x, bias, y, n, k, split, glu, act, FoldNorm{});
}

extern "C" __global__ void __launch_bounds__(128, SHARED_MIN_BLOCKS)
    gemv_decode_shared_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_shared_body<u16, 1, false>(w, x, bias, y, n, k, split, glu, act, FoldNorm{});
}

extern "C" __global__ void __launch_bounds__(128, SHARED_MIN_BLOCKS)
    gemv_decode_shared_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_shared_body<u16, 2, false>(w, x, bias, y, n, k, split, glu, act, FoldNorm{});
}

// x (the residual) through the folded skip-norm (FoldNorm), then gemv_decode_shared_f32.
extern "C" __global__ void __launch_bounds__(128, SHARED_NORM_MIN_BLOCKS)
    gemv_decode_shared_norm_f32(const float* w, const float* x, const float* delta,
        const float* norm_weight, const float* norm_bias, float* x_out, float eps, int rms,
        int norm_act, int norm_threads, const float* bias, float* y, int n, int k, int split,
        int glu, int act) {
    FoldNorm fold = {delta, norm_weight, norm_bias, x_out, eps, rms, norm_act, norm_threads};
    gemv_decode_shared_body<float, 0, true>(w, x, bias, y, n, k, split, glu, act, fold);
}

// x (the residual) through the folded skip-norm (FoldNorm), then gemv_decode_shared_f16.
extern "C" __global__ void __launch_bounds__(128, SHARED_NORM_MIN_BLOCKS)
    gemv_decode_shared_norm_f16(const u16* w, const float* x, const float* delta,
        const float* norm_weight, const float* norm_bias, float* x_out, float eps, int rms,
        int norm_act, int norm_threads, const float* bias, float* y, int n, int k, int split,
        int glu, int act) {
    FoldNorm fold = {delta, norm_weight, norm_bias, x_out, eps, rms, norm_act, norm_threads};
    gemv_decode_shared_body<u16, 1, true>(w, x, bias, y, n, k, split, glu, act, fold);
}

// x (the residual) through the folded skip-norm (FoldNorm), then gemv_decode_shared_bf16.
extern "C" __global__ void __launch_bounds__(128, SHARED_NORM_MIN_BLOCKS)
    gemv_decode_shared_norm_bf16(const u16* w, const float* x, const float* delta,
        const float* norm_weight, const float* norm_bias, float* x_out, float eps, int rms,
        int norm_act, int norm_threads, const float* bias, float* y, int n, int k, int split,
        int glu, int act) {
    FoldNorm fold = {delta, norm_weight, norm_bias, x_out, eps, rms, norm_act, norm_threads};
    gemv_decode_shared_body<u16, 2, true>(w, x, bias, y, n, k, split, glu, act, fold);
}
