// The one-row feed-forward block in one launch: gate/up, the GLU and the down projection, in
// two forms, both off by default: mlp_fused_* (decode steps of models whose whole MLP fits in
// the device's shared memory at once) and, below, mlp_walk_* (clusters, any width).
//
// Why: a small model's decode layer is a chain of launches each too short to reach the
// bandwidth (CUDA_NOTES, rounds 17-30). The MLP's two launches cost ~10.9 µs of a Qwen2.5-0.5B
// layer for 6.2 µs of bytes: the down projection's weights cannot start loading until the
// gate/up blocks leave the SMs. Here block b owns intermediate units [b * slice, b * slice +
// slice): its (gate, up) rows (one contiguous run of the interleaved weight) and the matching
// `slice` columns of every down row. Before the PDL wait each thread copies (cp.async) exactly
// the 16-byte pieces it will read itself into shared memory, so the whole MLP's weights are in
// flight while the norm before runs, and no barrier guards the copies.
//
// After the wait (MF_THREADS 512; 256 was 4% slower end to end, CUDA_NOTES round 37): each
// warp takes (gate, up) pairs p = warp, warp + MF_WARPS, ...; lane l sums pieces l, l + 32,
// ... against x (held in registers), the pair is summed across lanes
// (butterfly) and h[p] = act(gate + bias) * (up + bias) goes to shared memory (f32, not
// rounded: the MLP runs in f32, as the unfused launches). One barrier; then thread t sums down
// rows o = t, t + MF_THREADS, ... over the block's units in unit order and adds the partial into
// acc[o * MF_ACC_STRIDE] as a 64-bit fixed-point integer (round(partial * 2^32)). Integer
// addition does not depend on the order the blocks arrive in, so the sum is deterministic;
// skip_norm_fixed_f32 (norm.cu) reads it back as f32 and clears it for the next layer.
// Range: a partial or a sum past 2^31 in magnitude wraps (an fp16 model's delta past 65504 is
// already infinite); resolution 2^-32 absolute, below any half-precision step of a delta that
// matters against the residual it is added to. The host takes this path for half-precision
// activations only.
//
// Measured (round 37, off by default): the same sums as the host's f64 MLP within 2.7e-7 and
// bitwise from launch to launch, parity passes under it, but Qwen2.5-0.5B fp16 decodes 4.8%
// slower than with the two launches: alone the launch takes ~15 µs for 6.2 µs of bytes (DRAM
// 36%, ncu), and its 215 KB blocks become resident only once an SM is empty, so its copies
// start late. Neither the atomics, the block size nor the down rows' gather is the cost: the
// chain itself is (each warp's pairs one after the other; CUDA_NOTES round 37).
//
// Shared memory (the host sizes it, `fused_bytes` in src/cuda/kernels/mlp.rs): the pairs'
// rows (2 * slice rows of hidden / 8 pieces), the down rows (hidden rows of `dstride` pieces,
// dstride = slice / 8 rounded up to odd so a warp's 16-byte reads of 32 rows hit distinct
// banks), then h (slice floats). hidden % 8 == 0, inter % 8 == 0, slice % 8 == 0, hidden <= 32 * 8 * MF_XUNITS.

#define MF_THREADS 512
#define MF_WARPS 16
#define MF_XUNITS 8  // x pieces (8 values) a lane holds: hidden <= 2,048

__device__ __forceinline__ int mf_dstride(int slice) { return (slice / 8) | 1; }

// A unit's GLU value from its (gate, up) sums: act(g + bias) * (u + bias), in f32.
__device__ __forceinline__ float mf_glu(float g, float u, const float* gu_bias, int unit, int act) {
    if (gu_bias) {
        g += gu_bias[2 * unit];
        u += gu_bias[2 * unit + 1];
    }
    return activation_outlined(g, act) * u;
}

// Adds a partial of output o into the sums as 64-bit fixed point (round(s * 2^32)).
__device__ __forceinline__ void mf_fixed_add(unsigned long long* acc, int o, float s) {
    long long fixed = __float2ll_rn(s * 4294967296.0f);
    atomicAdd(acc + (size_t)o * MF_ACC_STRIDE, (unsigned long long)fixed);
}

template <int KIND>
__device__ __forceinline__ void mlp_fused_body(const u16* __restrict__ wgu,
                                               const float* __restrict__ gu_bias,
                                               const u16* __restrict__ wd,
                                               const float* __restrict__ x,
                                               unsigned long long* __restrict__ acc, int hidden,
                                               int inter, int slice, int act) {
    extern __shared__ uint4 mf_smem[];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int j0 = blockIdx.x * slice;
    int units = min(slice, inter - j0);
    int hu = hidden / 8, dstride = mf_dstride(slice), du = units / 8;
    uint4* gu_rows = mf_smem;
    uint4* d_rows = gu_rows + (size_t)2 * slice * hu;
    float* h = (float*)(d_rows + (size_t)hidden * dstride);
    const uint4* gsrc = (const uint4*)(wgu + (size_t)2 * j0 * hidden);
    pdl_trigger();
    for (int p = warp; p < units; p += MF_WARPS)
        for (int c = lane; c < hu; c += 32) {
            cp_async16_dense(gu_rows + (size_t)(2 * p) * hu + c, gsrc + (size_t)(2 * p) * hu + c);
            cp_async16_dense(gu_rows + (size_t)(2 * p + 1) * hu + c,
                             gsrc + (size_t)(2 * p + 1) * hu + c);
        }
    for (int o = tid; o < hidden; o += MF_THREADS)
        for (int q = 0; q < du; q++)
            cp_async16_dense(d_rows + (size_t)o * dstride + q, wd + (size_t)o * inter + j0 + q * 8);
    cp_async_commit();
    pdl_wait();
    float xv[MF_XUNITS][8];
#pragma unroll
    for (int i = 0; i < MF_XUNITS; i++) {
        int c = lane + 32 * i;
        if (c < hu) load8(x + c * 8, xv[i]);
    }
    cp_async_wait<0>();
    for (int p = warp; p < units; p += MF_WARPS) {
        float g = 0.0f, u = 0.0f;
        const uint4* gr = gu_rows + (size_t)(2 * p) * hu;
#pragma unroll
        for (int i = 0; i < MF_XUNITS; i++) {
            int c = lane + 32 * i;
            if (c < hu) {
                uint4 rg[1] = {gr[c]}, ru[1] = {gr[hu + c]};
                g = dot_unit<KIND, 1>(rg, xv[i], g);
                u = dot_unit<KIND, 1>(ru, xv[i], u);
            }
        }
        g = warp_sum(g);
        u = warp_sum(u);
        if (lane == 0) h[p] = mf_glu(g, u, gu_bias, j0 + p, act);
    }
    __syncthreads();
    for (int o = tid; o < hidden; o += MF_THREADS) {
        float s = 0.0f;
        const uint4* dr = d_rows + (size_t)o * dstride;
        for (int q = 0; q < du; q++) {
            float hv[8];
            load8(h + q * 8, hv);
            uint4 raw[1] = {dr[q]};
            s = dot_unit<KIND, 1>(raw, hv, s);
        }
        mf_fixed_add(acc, o, s);
    }
}

extern "C" __global__ void __launch_bounds__(MF_THREADS, 1)
    mlp_fused_f16(const u16* wgu, const float* gu_bias, const u16* wd, const float* x,
                  unsigned long long* acc, int hidden, int inter, int slice, int act) {
    mlp_fused_body<1>(wgu, gu_bias, wd, x, acc, hidden, inter, slice, act);
}

extern "C" __global__ void __launch_bounds__(MF_THREADS, 1)
    mlp_fused_bf16(const u16* wgu, const float* gu_bias, const u16* wd, const float* x,
                   unsigned long long* acc, int hidden, int inter, int slice, int act) {
    mlp_fused_body<2>(wgu, gu_bias, wd, x, acc, hidden, inter, slice, act);
}

// ---- The MLP as one launch with the walk's parallelism (sm_90 clusters) ---------------------
//
// mlp_walk_f16 / mlp_walk_bf16: grid = clusters * MW_CLUSTER blocks of MW_THREADS, launched in
// clusters of MW_CLUSTER along x; cluster c covers the MW_SPAN intermediate units [c * MW_SPAN,
// c * MW_SPAN + MW_SPAN). Why (CUDA_NOTES round 38): round 37's one-launch MLP ran one block an
// SM, each warp taking its (gate, up) pairs one after the other, and its chain cost more than
// the two launches' boundary; the atomics microbenchmark then showed that one fixed-point add per
// output per block is too many adds once blocks are as many as the walk's. Here every warp owns
// one pair, as in the decode walk, and the down projection is split by *outputs* inside the
// cluster instead of summed across blocks:
// - block rank r, warp w: the pair of unit c * MW_SPAN + r * MW_WARPS + w; lane l loads pieces
//   l, l + 32, ... of both rows (the first MW_PAIR of them before the PDL wait), sums them
//   against x in that order, the warp butterfly-sums, and h = act(g + bias) * (u + bias) goes to
//   the block's shared memory (f32, as the two launches' GLU);
// - the down rows are split over the cluster's blocks: block r owns rows [r * rows, r * rows +
//   rows), rows = ceil(hidden / MW_CLUSTER), and reads the cluster's MW_SPAN units of each (128
//   contiguous bytes a row for half weights): thread t takes piece q = t % 8 (units 8q..8q+7 of
//   the span: block q's h) of rows t / 8, t / 8 + 32, ... (the first MW_DOWN of them loaded
//   before the PDL wait);
// - one cluster barrier makes every block's h visible; 16 threads copy the cluster's 64 h
//   values into the block's shared memory (distributed shared memory, a float4 each); each
//   thread sums its piece's 8 products against h[8q..8q+7] in unit order, the 8
//   threads of a row sum their pieces by butterfly (xor 1, 2, 4) and one adds the row's partial
//   into acc as 64-bit fixed point (as mlp_fused). A second barrier keeps every block's h alive
//   until all its readers are done.
// So every weight byte is loaded once, the whole cluster's loads are in flight at the PDL
// trigger, and the adds are hidden * clusters (Qwen2.5-0.5B: 76 clusters, 68k adds) instead of
// hidden * blocks. Every summation order is fixed by (hidden, inter): deterministic bits.
// Units past `inter` (the last span) have h = 0 and their down pieces are not read.
// Measured (round 38, off by default; `GENAI_BRIDGE_MLP_FUSED=walk`): the same sums as the
// host's f64 MLP within 2.8e-7 and bitwise from launch to launch, parity passes under it, but
// it decodes Qwen2.5-0.5B fp16 6% and 1.5B 15% slower than the two launches. Timing-only
// variants (CUDA_NOTES round 38): with no exchange at all (each block its own h: wrong sums)
// it only equals the two launches; the two cluster barriers cost ~1.4 µs a layer on top.
// hidden % 8 == 0, inter % 8 == 0; no dynamic shared memory (h's MW_WARPS floats and the
// span's MW_SPAN are static).

#define MW_THREADS 256
#define MW_WARPS 8
#define MW_CLUSTER 8
#define MW_SPAN (MW_CLUSTER * MW_WARPS)  // units a cluster covers: 8 pieces of 8
#define MW_PAIR 4                         // pieces a lane loads per pair row before the wait
#ifndef MW_DOWN
#define MW_DOWN 4                         // down rows a thread loads before the wait
#endif
// Blocks an SM the compiler leaves registers for (a tuning define; 0: no bound).
#ifndef MW_MIN_BLOCKS
#define MW_MIN_BLOCKS 0
#endif
#if MW_MIN_BLOCKS > 0
#define MW_BOUNDS __launch_bounds__(MW_THREADS, MW_MIN_BLOCKS)
#else
#define MW_BOUNDS __launch_bounds__(MW_THREADS)
#endif

// One down row's share of a cluster: this thread's piece (8 units) against h, summed with the
// row's other 7 pieces (adjacent lanes, butterfly), added into acc by the piece-0 lane. Every
// lane of the warp calls it (the shuffles); `ok` says whether this thread holds a piece of a row.
template <int KIND>
__device__ __forceinline__ void mw_row_add(uint4 piece, bool ok, int o, int q, const float* hv,
                                           unsigned long long* __restrict__ acc) {
    float s = 0.0f;
    if (ok) {
        uint4 raw[1] = {piece};
        s = dot_unit<KIND, 1>(raw, hv, 0.0f);
    }
    s += __shfl_xor_sync(FULL_MASK, s, 1);
    s += __shfl_xor_sync(FULL_MASK, s, 2);
    s += __shfl_xor_sync(FULL_MASK, s, 4);
    if (ok && q == 0) mf_fixed_add(acc, o, s);
}

template <int KIND>
__device__ __forceinline__ void mlp_walk_body(const u16* __restrict__ wgu,
                                              const float* __restrict__ gu_bias,
                                              const u16* __restrict__ wd,
                                              const float* __restrict__ x,
                                              unsigned long long* __restrict__ acc, int hidden,
                                              int inter, int act) {
#if __CUDA_ARCH__ >= 900
    __shared__ __align__(16) float h[MW_WARPS];
    __shared__ __align__(16) float span_h[MW_SPAN];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int rank = (int)cluster_rank();
    int span0 = (blockIdx.x / MW_CLUSTER) * MW_SPAN;
    int unit = span0 + rank * MW_WARPS + warp;
    bool has_unit = unit < inter;
    int hu = hidden / 8;
    const uint4* grow = (const uint4*)(wgu + (size_t)2 * (has_unit ? unit : 0) * hidden);
    int rows = (hidden + MW_CLUSTER - 1) / MW_CLUSTER;
    int row0 = rank * rows, row_end = min(hidden, row0 + rows);
    int q = tid & 7, dunit = span0 + 8 * q;
    bool has_piece = dunit < inter;
    const u16* dcol = wd + (has_piece ? dunit : 0);
    uint4 gw[MW_PAIR], uw[MW_PAIR], dw[MW_DOWN];
    pdl_trigger();
#pragma unroll
    for (int i = 0; i < MW_PAIR; i++) {
        int c = lane + 32 * i;
        if (has_unit && c < hu) {
            gw[i] = load_dense16<W_WALK>(grow + c);
            uw[i] = load_dense16<W_WALK>(grow + hu + c);
        }
    }
#pragma unroll
    for (int i = 0; i < MW_DOWN; i++) {
        int o = row0 + (tid >> 3) + (MW_THREADS / 8) * i;
        if (has_piece && o < row_end) dw[i] = load_dense16<W_WALK>(dcol + (size_t)o * inter);
    }
    pdl_wait();
    float g = 0.0f, u = 0.0f;
    if (has_unit) {
#pragma unroll
        for (int i = 0; i < MW_PAIR; i++) {
            int c = lane + 32 * i;
            if (c < hu) {
                float xv[8];
                load8(x + c * 8, xv);
                uint4 rg[1] = {gw[i]}, ru[1] = {uw[i]};
                g = dot_unit<KIND, 1>(rg, xv, g);
                u = dot_unit<KIND, 1>(ru, xv, u);
            }
        }
        for (int c = lane + 32 * MW_PAIR; c < hu; c += 32) {
            float xv[8];
            load8(x + c * 8, xv);
            uint4 rg[1] = {load_dense16<W_WALK>(grow + c)};
            uint4 ru[1] = {load_dense16<W_WALK>(grow + hu + c)};
            g = dot_unit<KIND, 1>(rg, xv, g);
            u = dot_unit<KIND, 1>(ru, xv, u);
        }
    }
    g = warp_sum(g);
    u = warp_sum(u);
    if (lane == 0) h[warp] = has_unit ? mf_glu(g, u, gu_bias, unit, act) : 0.0f;
    // The cluster's h (MW_SPAN floats) into this block's shared memory: 16 threads read one
    // float4 each from the block that computed it (one remote read per 4 values; a remote
    // read per thread and value cost ~11 µs a launch, CUDA_NOTES round 38).
    cluster_arrive();
    cluster_wait();
    if (tid < MW_SPAN / 4) {
        u32 peer = cluster_map(smem_u32(h + 4 * (tid & 1)), (u32)(tid >> 1));
        float4 v = cluster_load4(peer);
        *(float4*)(span_h + 4 * tid) = v;
    }
    __syncthreads();
    // Done reading the others' shared memory (the values are stored above, so the reads have
    // returned; a block may leave once every block has arrived).
    cluster_arrive_relaxed();
    float hv[8];
    load8(span_h + 8 * q, hv);
#pragma unroll
    for (int i = 0; i < MW_DOWN; i++) {
        if (row0 + (MW_THREADS / 8) * i >= row_end) break;  // the same for the whole block
        int o = row0 + (tid >> 3) + (MW_THREADS / 8) * i;
        mw_row_add<KIND>(dw[i], has_piece && o < row_end, o, q, hv, acc);
    }
    for (int i = MW_DOWN; row0 + (MW_THREADS / 8) * i < row_end; i++) {
        int o = row0 + (tid >> 3) + (MW_THREADS / 8) * i;
        bool ok = has_piece && o < row_end;
        uint4 raw = ok ? load_dense16<W_WALK>(dcol + (size_t)o * inter) : make_uint4(0, 0, 0, 0);
        mw_row_add<KIND>(raw, ok, o, q, hv, acc);
    }
    cluster_wait();  // no block leaves while another may still read its h
#endif
}

extern "C" __global__ void MW_BOUNDS
    mlp_walk_f16(const u16* wgu, const float* gu_bias, const u16* wd, const float* x,
                 unsigned long long* acc, int hidden, int inter, int act) {
    mlp_walk_body<1>(wgu, gu_bias, wd, x, acc, hidden, inter, act);
}

extern "C" __global__ void MW_BOUNDS
    mlp_walk_bf16(const u16* wgu, const float* gu_bias, const u16* wd, const float* x,
                  unsigned long long* acc, int hidden, int inter, int act) {
    mlp_walk_body<2>(wgu, gu_bias, wd, x, acc, hidden, inter, act);
}
