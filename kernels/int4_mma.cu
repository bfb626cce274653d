// com.microsoft MatMulNBits (4 bits, CompFp32) for ONE row of x on the tensor cores (sm_80 and
// later): the one-row kernel of gemv_decode_int4_f32 (int4_decode.cu) spends ~14 instructions
// per weight converting nibbles to f32 and re-reading x from L1; here a lane turns 8 nibbles
// into four f16 pairs (q - zp, exact for integer zero points) with 9 instructions and the
// products run as mma.m16n8k16 (f16 x f16, f32 accumulation).
//
// Exactness. A = q - zp is an integer in [-15, 15] (exact in f16). x is split per block into
// x * 2^-e = hi + lo with hi = f16(x * 2^-e), lo = f16(x * 2^-e - hi), e a power-of-two scale
// putting max|x| in [2^14, 2^15) (no f16 overflow, exact to undo): hi + lo carries ~22 bits of
// x, every product (q - zp) * hi or * lo is exact in f32 and the mma sums them in f32. The host
// picks this kernel only for integer zero points (or none: 8) and power-of-two block sizes of
// 32 or more (a block index is then a shift of the chunk index).
//
// Layout. A warp owns 16 weight rows (output columns col0 + g and col0 + g + 8 for lane
// (g = lane / 4, t = lane % 4)) and walks the row in quads of four 16-byte chunks (32 values,
// one quantisation block or part of one): lane t loads chunk 4q + t of both its rows. `split`
// warps of a block share the 16 rows, taking every split-th quad. The 8 values of a packed
// word pair with x as (0,4), (1,5) for one mma and (2,6), (3,7) for the next, so x is staged in
// shared memory word by word in that order (values 0,4,1,5,2,6,3,7 as f16), hi words then lo
// words. Each lane's chunk has its own block scale, so the B operand keeps the lanes apart:
// column 2t + h of B holds x_h at the k-slots of the lanes with t (zero elsewhere), and the
// accumulator a lane gets back (rows g, g + 8 x columns 2t, 2t + 1) is exactly its own chunk's
// sum, hi and lo, which it scales and adds. The four lanes of a row are summed by butterfly,
// the split warps in warp order: the bits depend on (k, n, block) and the values only.

#define I4M_WARPS 8
// Blocks per SM the launch bounds leave registers for (110 registers at 2; 3 spills and lost,
// docs/cuda.md round 10).
#define I4M_MIN_BLOCKS 2
// Chunks per row a lane loads per round (two rows: 128 bytes of weights in flight per lane);
// fewer chunks a round, or the next round in flight during the current one, lost (round 13).
#define I4M_ROUND 4
// The wide entries (`_wide`) trade loads in flight per warp for warps per SM: one chunk per row
// a round and up to 4 blocks per SM (62 registers). The host runs them where the deep launch
// needs more than one wave (round 13: 8B gate/up 36.7 -> 26.8 us, lm_head 132 -> 105), the
// deep ones on narrow layers (8B o 6.5 against 8.2). Same split, same products in the same
// order: the same bits.
#define I4M_WIDE_ROUND 1
#define I4M_WIDE_BLOCKS 4

__device__ __forceinline__ void i4m_mma(float (&d)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                        u32 b1) {
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// A word's eight nibbles as the four f16 pairs (q - zp) the mmas take, nibbles (0,4), (1,5),
// (2,6), (3,7), in nine instructions. Masking a nibble into the mantissa of 0x6400 (1024) gives
// 1024 + q for the low nibble of a byte and 1024 + 16q for the high one: the first pair then
// subtracts `lo` (the pair 1024 + zp), the second is scaled by 1/16 and added to `hi` (the pair
// -(64 + zp)). Every step is exact in f16 (integers below 2048, a power-of-two scale).
struct I4mBase {
    u32 lo, hi;
};

// (v & mask) | 0x64006400 as one lop3 (written as C, the compiler splits it in two).
template <u32 MASK>
__device__ __forceinline__ u32 i4m_mantissa(u32 v) {
    u32 h;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(h) : "r"(v), "n"(MASK), "n"(0x64006400u));
    return h;
}

__device__ __forceinline__ u32 i4m_low(u32 v, u32 lo) {
    u32 r;
    asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(i4m_mantissa<0x000f000fu>(v)), "r"(lo));
    return r;
}

__device__ __forceinline__ u32 i4m_high(u32 v, u32 hi) {
    u32 r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;"
        : "=r"(r)
        : "r"(i4m_mantissa<0x00f000f0u>(v)), "r"(0x2c002c00u), "r"(hi));
    return r;
}

// The pairs of a block with zero point zp (8 without zero points).
__device__ __forceinline__ I4mBase i4m_base(float zp) {
    u32 lo = f32_to_f16(1024.0f + zp), hi = f32_to_f16(-64.0f - zp);
    return {lo | (lo << 16), hi | (hi << 16)};
}

// A chunk of a packed row: one 16-byte load when rows are 16-byte aligned (VEC), else four words.
template <bool VEC>
__device__ __forceinline__ uint4 i4m_chunk(const u8* row, int ch) {
    if (VEC) return load_stream16(row + (size_t)ch * 16);
    const u32* w = (const u32*)(row + (size_t)ch * 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// A block scale as f32: stored as f32, or as the model's f16 (gemv_decode_int4_mma_s16: half the
// bytes, and exactly the same value once converted).
__device__ __forceinline__ float i4m_scale(const float* p) { return load_stream_f32(p); }

__device__ __forceinline__ float i4m_scale(const u16* p) {
    u16 h;
    asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(h) : "l"(p));
    return f16_to_f32(h);
}

__device__ __forceinline__ u32 i4m_word(const uint4& q, int i) {
    return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// Word i of the stage from its 8 values of x (xv[0..8), zero past k), scaled by `down`: the hi
// halves to xs[i], the lo halves to xs[words + i], in the order 0,4,1,5,2,6,3,7.
__device__ __forceinline__ void i4m_split_word(const float (&xv)[8], float down, int words, int i,
                                               uint4* xs) {
    u16 hi[8], lo[8];
#pragma unroll
    for (int v = 0; v < 8; v++) split_halves(xv[(v >> 1) + (v & 1) * 4] * down, hi[v], lo[v]);
    xs[i] = make_uint4(hi[0] | ((u32)hi[1] << 16), hi[2] | ((u32)hi[3] << 16),
                       hi[4] | ((u32)hi[5] << 16), hi[6] | ((u32)hi[7] << 16));
    xs[words + i] = make_uint4(lo[0] | ((u32)lo[1] << 16), lo[2] | ((u32)lo[3] << 16),
                               lo[4] | ((u32)lo[5] << 16), lo[6] | ((u32)lo[7] << 16));
}

// Word i of x (8 values from i * 8) into xv: a padding word past k is zeros.
__device__ __forceinline__ void i4m_load_word(const float* x, int k, int i, float (&xv)[8]) {
    if (i * 8 < k) {
        load8(x + (size_t)i * 8, xv);  // k a multiple of 8: the word is whole
    } else {
#pragma unroll
        for (int v = 0; v < 8; v++) xv[v] = 0.0f;
    }
}

// i4m_stage for 16-byte aligned x and k a multiple of 8, with every read of x issued before its
// first use (otherwise each read is used before the next is issued: one L2 round trip per 1,024
// values of k in the max pass and per 2,048 in the split pass, 21 for the 8B down projection):
// while a thread has at most two words (k <= 16 * blockDim.x: every layer of the bench shapes
// but the down projections) x is read once and kept in registers through the block max;
// otherwise a max pass of 4 float4 a thread a round and a split pass of 2 words.
// The same values as i4m_stage (the max is exact in any order; words are independent).
__device__ __forceinline__ float i4m_stage_batched(const float* x, int k, int words, uint4* xs,
                                                   float* scratch) {
    int step = blockDim.x;
    float m = 0.0f;
    if (words <= 2 * step) {
        float xv[2][8];
#pragma unroll
        for (int u = 0; u < 2; u++) {
            i4m_load_word(x, k, threadIdx.x + u * step, xv[u]);
#pragma unroll
            for (int v = 0; v < 8; v++) m = fmaxf(m, fabsf(xv[u][v]));
        }
        int e = split_exponent(block_max(m, scratch));
        float down = __int_as_float((127 - e) << 23);  // 2^-e, exactly
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int i = threadIdx.x + u * step;
            if (i < words) i4m_split_word(xv[u], down, words, i, xs);
        }
        __syncthreads();
        return __int_as_float((127 + e) << 23);
    }
    const float4* x4 = (const float4*)x;
    int quads = k >> 2;
    for (int i0 = threadIdx.x; i0 < quads; i0 += 4 * step) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = i0 + u * step < quads ? x4[i0 + u * step] : make_float4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++)
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v[u].x), fabsf(v[u].y)),
                               fmaxf(fabsf(v[u].z), fabsf(v[u].w))));
    }
    int e = split_exponent(block_max(m, scratch));
    float down = __int_as_float((127 - e) << 23);
    for (int i0 = threadIdx.x; i0 < words; i0 += 2 * step) {
        float xv[2][8];
#pragma unroll
        for (int u = 0; u < 2; u++) i4m_load_word(x, k, i0 + u * step, xv[u]);
#pragma unroll
        for (int u = 0; u < 2; u++)
            if (i0 + u * step < words) i4m_split_word(xv[u], down, words, i0 + u * step, xs);
    }
    __syncthreads();
    return __int_as_float((127 + e) << 23);
}

// x (k values, zero to `words` * 8) into shared memory as described above; returns 2^e, the
// factor that undoes the scaling. Every thread of the block calls it (it synchronises). BATCH:
// the float4 stage issues its reads first (i4m_stage_batched; more registers live).
template <bool BATCH>
__device__ __forceinline__ float i4m_stage(const float* x, int k, int words, uint4* xs) {
    __shared__ float scratch[32];
    float m = 0.0f;
    bool vec = ((size_t)x & 15) == 0 && (k & 7) == 0;
    if (BATCH && vec) return i4m_stage_batched(x, k, words, xs, scratch);
    if (vec) {
        const float4* x4 = (const float4*)x;
        int quads = k >> 2;
#pragma unroll 8
        for (int i = threadIdx.x; i < quads; i += blockDim.x) {
            float4 v = x4[i];
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
    } else {
        for (int i = threadIdx.x; i < k; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
    }
    m = block_max(m, scratch);
    int e = split_exponent(m);
    float down = __int_as_float((127 - e) << 23);  // 2^-e, exactly
    for (int i = threadIdx.x; i < words; i += blockDim.x) {
        float xv[8];
        if (vec && i * 8 < k) {
            load8(x + (size_t)i * 8, xv);  // k a multiple of 8: the word is whole
        } else {
#pragma unroll
            for (int v = 0; v < 8; v++) xv[v] = i * 8 + v < k ? x[i * 8 + v] : 0.0f;
        }
        i4m_split_word(xv, down, words, i, xs);
    }
    __syncthreads();
    return __int_as_float((127 + e) << 23);
}

// One round's loads: chunk 4 (q0 + u * split) + t of both rows, u < R (I4M_ROUND, or
// I4M_WIDE_ROUND in the wide entries), with the block
// scale of each (and, with zero points, its pairs). A chunk past the row loads the row's first
// chunk instead and scale 0: its x in B is zero (see i4m_rows), so its products are +0 whatever
// the weights, as the row's own zero padding would give.
template <bool ZP, int R>
struct I4mRound {
    uint4 w[2][R];
    float s[2][R];
    I4mBase base[2][ZP ? R : 1];
};

template <bool VEC, bool ZP, typename S, int R>
__device__ __forceinline__ void i4m_fetch(const u8* const (&row)[2], const S* const (&sc)[2],
                                          const float* const (&zr)[2], int q0, int split, int t,
                                          int chunks, int bshift, I4mRound<ZP, R>& r) {
#pragma unroll
    for (int u = 0; u < R; u++) {
        int ch = 4 * (q0 + u * split) + t;
        bool in = ch < chunks;
        int c = in ? ch : 0, b = c >> bshift;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            r.w[j][u] = i4m_chunk<VEC>(row[j], c);
            float s = i4m_scale(sc[j] + b);
            r.s[j][u] = in ? s : 0.0f;
            if (ZP) r.base[j][u] = i4m_base(load_stream_f32(zr[j] + b));
        }
    }
}

// The two rows' sums (row g, row g + 8 of the warp's 16) over the quads part, part + split, ...
// of the row, scaled by 2^-e (undone by the caller). `r` holds the first round's loads.
template <bool VEC, bool ZP, typename S, int R>
__device__ __forceinline__ void i4m_rows(const u8* const (&row)[2], const S* const (&sc)[2],
                                         const float* const (&zr)[2], int part, int split,
                                         int chunks, int bshift, const uint4* xb,
                                         const uint4* zero, I4mRound<ZP, R>& r,
                                         float (&acc)[2]) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int quads = (chunks + 3) / 4;
    // Lanes (g, t) with g / 2 == t give B its column g: x_(g % 2) at lane t's k-slots; every
    // other lane (and every lane past the row) gives zeros.
    bool feeds = (g >> 1) == t;
    I4mBase sym = i4m_base(8.0f);
    for (int q0 = part; q0 < quads; q0 += R * split) {
        if (q0 != part)
            i4m_fetch<VEC, ZP, S, R>(row, sc, zr, q0, split, t, chunks, bshift, r);
#pragma unroll
        for (int u = 0; u < R; u++) {
            int q = q0 + u * split;
            if (q >= quads) break;  // uniform over the warp
            int ch = 4 * q + t;
            bool in = ch < chunks;
            const uint4* bp = feeds && in ? xb + ch * 4 : zero;
            I4mBase za = ZP ? r.base[0][ZP ? u : 0] : sym, zb = ZP ? r.base[1][ZP ? u : 0] : sym;
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint4 b = bp[i];
                u32 wa = i4m_word(r.w[0][u], i), wb = i4m_word(r.w[1][u], i);
                i4m_mma(d, i4m_low(wa, za.lo), i4m_low(wb, zb.lo), i4m_high(wa, za.hi),
                        i4m_high(wb, zb.hi), b.x, b.y);
                wa >>= 8;
                wb >>= 8;
                i4m_mma(d, i4m_low(wa, za.lo), i4m_low(wb, zb.lo), i4m_high(wa, za.hi),
                        i4m_high(wb, zb.hi), b.z, b.w);
            }
            acc[0] = fmaf(r.s[0][u], d[0] + d[1], acc[0]);
            acc[1] = fmaf(r.s[1][u], d[2] + d[3], acc[1]);
        }
    }
}

// The rows' sums for one alignment and zero-point case: the first round of weight loads goes
// out before waiting for the kernel that writes x (programmatic dependent launch; see pdl_enter
// in prelude.cuh), then x is staged and the rows walked.
template <bool VEC, bool ZP, typename S, int R>
__device__ __forceinline__ float i4m_body(const u8* const (&row)[2], const S* const (&sc)[2],
                                          const float* const (&zr)[2], const float* x, int k,
                                          int part, int split, int chunks, int bshift, uint4* xs,
                                          const uint4* zero, float (&acc)[2]) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int words = chunks * 4;
    pdl_trigger();
    I4mRound<ZP, R> r;
    // The branch (a warp past the row has nothing to fetch) also keeps the loads before the
    // wait: without it ptxas puts griddepcontrol.wait first in the aligned kernels, and the
    // first weights leave only once the kernel before has finished (kernel_pdl.py checks).
    if (part * 4 < chunks)
        i4m_fetch<VEC, ZP, S, R>(row, sc, zr, part, split, t, chunks, bshift, r);
    pdl_wait();
    // The deep entries stage with their reads batched (round 16: the 8B down projection 17.5 ->
    // 16.2 us); the wide ones, at 4 blocks per SM, keep the plain stage (batched it spilled and
    // lost: lm_head 104.9 -> 107.7 us).
    float up = i4m_stage<R != I4M_WIDE_ROUND>(x, k, words, xs);
    i4m_rows<VEC, ZP, S, R>(row, sc, zr, part, split, chunks, bshift, xs + (g & 1) * words, zero,
                            r, acc);
    return up;
}

// The whole launch for scales of type S (f32, or the model's f16 as u16 bits) and R chunks per
// row a round.
template <typename S, int R>
__device__ __forceinline__ void i4m_main_body(const u8* packed, const S* scales, const float* zp,
                                              const float* x, const float* bias, float* y, int n,
                                              int k, int bs, int split, int glu, int act) {
    extern __shared__ uint4 i4m_xs[];
    __shared__ float red[I4M_WARPS][16];
    __shared__ uint4 zero[4];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int groups = I4M_WARPS / split, part = warp % split;
    int col0 = (blockIdx.x * groups + warp / split) * 16;
    // The host runs this kernel for power-of-two block sizes of 32 or more only.
    int nb = (k + bs - 1) / bs, kp = nb * bs, chunks = kp / 32, bshift = __ffs(bs) - 6;
    // Written before the stage's barrier, read after it.
    if (threadIdx.x < 4) zero[threadIdx.x] = make_uint4(0u, 0u, 0u, 0u);
    const u8* row[2];
    const S* sc[2];
    const float* zr[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int c = col0 + g + 8 * j;
        size_t at = c < n ? c : 0;
        row[j] = packed + at * (kp / 2);
        sc[j] = scales + at * nb;
        zr[j] = zp ? zp + at * nb : nullptr;
    }
    float acc[2] = {0.0f, 0.0f}, up;
    bool vec = ((size_t)packed & 15) == 0;
    if (vec && zp)
        up = i4m_body<true, true, S, R>(row, sc, zr, x, k, part, split, chunks, bshift,
                                        i4m_xs, zero, acc);
    else if (vec)
        up = i4m_body<true, false, S, R>(row, sc, zr, x, k, part, split, chunks, bshift,
                                        i4m_xs, zero, acc);
    else if (zp)
        up = i4m_body<false, true, S, R>(row, sc, zr, x, k, part, split, chunks, bshift,
                                        i4m_xs, zero, acc);
    else
        up = i4m_body<false, false, S, R>(row, sc, zr, x, k, part, split, chunks, bshift,
                                        i4m_xs, zero, acc);
#pragma unroll
    for (int j = 0; j < 2; j++) {
        acc[j] += __shfl_xor_sync(FULL_MASK, acc[j], 1);
        acc[j] += __shfl_xor_sync(FULL_MASK, acc[j], 2);
    }
    if (t == 0) {
        red[warp][g] = acc[0];
        red[warp][g + 8] = acc[1];
    }
    __syncthreads();
    // One thread per output: column c of group gg (a GLU pair's leader: even c).
    int gg = threadIdx.x / 16, c = threadIdx.x % 16;
    if (gg >= groups) return;
    int col = (blockIdx.x * groups + gg) * 16 + c;
    if (col >= n) return;
    float sum = 0.0f;
    for (int p = 0; p < split; p++) sum += red[gg * split + p][c] * up;
    if (glu >= 0) {
        if ((c & 1) || col + 1 >= n) return;
        float u = 0.0f;
        for (int p = 0; p < split; p++) u += red[gg * split + p][c + 1] * up;
        if (bias) {
            sum += bias[col];
            u += bias[col + 1];
        }
        y[col / 2] = activation_outlined(sum, glu) * u;
        return;
    }
    linear_store(sum, bias, col, act, y + col);
}

// The entries: f32 or f16 (u16 bits) scales; deep (I4M_ROUND chunks a round) or wide
// (I4M_WIDE_ROUND). All four give the same bits.
extern "C" __global__ void __launch_bounds__(32 * I4M_WARPS, I4M_MIN_BLOCKS)
    gemv_decode_int4_mma(
        const u8* packed, const float* scales, const float* zp, const float* x, const float* bias,
        float* y, int n, int k, int bs, int split, int glu, int act) {
    i4m_main_body<float, I4M_ROUND>(packed, scales, zp, x, bias, y, n, k, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(32 * I4M_WARPS, I4M_MIN_BLOCKS)
    gemv_decode_int4_mma_s16(
        const u8* packed, const u16* scales, const float* zp, const float* x, const float* bias,
        float* y, int n, int k, int bs, int split, int glu, int act) {
    i4m_main_body<u16, I4M_ROUND>(packed, scales, zp, x, bias, y, n, k, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(32 * I4M_WARPS, I4M_WIDE_BLOCKS)
    gemv_decode_int4_mma_wide(
        const u8* packed, const float* scales, const float* zp, const float* x, const float* bias,
        float* y, int n, int k, int bs, int split, int glu, int act) {
    i4m_main_body<float, I4M_WIDE_ROUND>(packed, scales, zp, x, bias, y, n, k, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(32 * I4M_WARPS, I4M_WIDE_BLOCKS)
    gemv_decode_int4_mma_s16_wide(
        const u8* packed, const u16* scales, const float* zp, const float* x, const float* bias,
        float* y, int n, int k, int bs, int split, int glu, int act) {
    i4m_main_body<u16, I4M_WIDE_ROUND>(packed, scales, zp, x, bias, y, n, k, bs, split, glu, act);
}
