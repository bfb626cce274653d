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
// Blocks an SM should hold (registers: 40 with the batch of 2, no spills; 4 spills at 12)
#define SHARED_MIN_BLOCKS 12

template <typename W, int KIND>
__device__ __forceinline__ void gemv_decode_shared_body(const W* __restrict__ w,
                                                        const float* __restrict__ x,
                                                        const float* __restrict__ bias,
                                                        float* __restrict__ y, int n, int k,
                                                        int split, int glu, int act) {
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
    pdl_trigger();
    for (int i = 0; i < slots; i++) {
        int u = u0 + i * stride;
        if (u >= units) break;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!valid[j]) continue;
            uint4* slot = mine + (size_t)(j * slots + i) * H * 32;
            if (vec) {
#pragma unroll
                for (int h = 0; h < H; h++)
                    cp_async16_dense(slot + h * 32, wr[j] + u * 8 + h * (16 / sizeof(W)));
            } else {
                uint4 raw[H];
                fetch_unit<W, W_SHARED>(wr[j], u * 8, k, false, raw);
#pragma unroll
                for (int h = 0; h < H; h++) slot[h * 32] = raw[h];
            }
        }
    }
    cp_async_commit();
    pdl_wait();
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
            if (i0 + b < slots && u < units) x_unit(nullptr, 0, x, 0, 0, u * 8, k, false, xvec, xv[b]);
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
    gemv_decode_shared_body<float, 0>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128, SHARED_MIN_BLOCKS)
    gemv_decode_shared_f16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_shared_body<u16, 1>(w, x, bias, y, n, k, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128, SHARED_MIN_BLOCKS)
    gemv_decode_shared_bf16(const u16* w, const float* x, const float* bias, float* y, int n,
        int k, int split, int glu, int act) {
    gemv_decode_shared_body<u16, 2>(w, x, bias, y, n, k, split, glu, act);
}
