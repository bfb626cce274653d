// The one-row feed-forward block in one launch: gate/up, the GLU and the down projection
// (decode steps of models whose whole MLP fits in the device's shared memory at once).
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
// start late. The down rows' 80-byte pieces (a gather of 109k of them) are the likely cost.
//
// Shared memory (the host sizes it, `fused_bytes` in src/cuda/kernels/mlp.rs): the pairs' rows (2 * slice rows of
// hidden / 8 pieces), the down rows (hidden rows of `dstride` pieces, dstride = slice / 8
// rounded up to odd so a warp's 16-byte reads of 32 rows hit distinct banks), then h (slice
// floats). hidden % 8 == 0, inter % 8 == 0, slice % 8 == 0, hidden <= 32 * 8 * MF_XUNITS.

#define MF_THREADS 512
#define MF_WARPS 16
#define MF_XUNITS 8  // x pieces (8 values) a lane holds: hidden <= 2,048

__device__ __forceinline__ int mf_dstride(int slice) { return (slice / 8) | 1; }

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
        if (lane == 0) {
            if (gu_bias) {
                g += gu_bias[2 * (j0 + p)];
                u += gu_bias[2 * (j0 + p) + 1];
            }
            h[p] = activation_outlined(g, act) * u;
        }
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
        long long fixed = __float2ll_rn(s * 4294967296.0f);
        atomicAdd(acc + (size_t)o * MF_ACC_STRIDE, (unsigned long long)fixed);
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
