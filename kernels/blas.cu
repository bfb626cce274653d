// Prompt linear layers through cuBLAS (src/cuda/blas.rs): the cast of the activations to the
// weight type that a half-precision GEMM reads, the epilogue of a GEMM written to a scratch
// buffer, the same as the GEMV kernels' (linear_store and split_reduce_store in prelude.cuh),
// and the dequantisation of 4-bit (MatMulNBits) weights that a GEMM reads.

// Whether four floats at a time may be read at x (rows ldx apart) and written at y (rows ldy
// apart, `bytes` a value), with rows of a multiple of four values and fewer than 2^31 quads.
__device__ __forceinline__ bool quads_fit(const void* x, int ldx, const void* y, int ldy,
                                          int bytes, int m, int cols) {
    return (cols & 3) == 0 && (ldx & 3) == 0 && (ldy & 3) == 0 && ((size_t)x & 15) == 0 &&
           ((size_t)y & (4 * bytes - 1)) == 0 && (size_t)m * (cols / 4) < (1u << 31);
}

// The GLU output of one (gate, up) column pair c of a GEMM's sums: activation(gate + b, glu) *
// (up + b), no rounding (split_reduce_store's).
__device__ __forceinline__ float glu_pair(float g, float u, const float* bias, int c, int glu) {
    if (bias) {
        g += bias[2 * c];
        u += bias[2 * c + 1];
    }
    return activation_outlined(g, glu) * u;
}

// out [m, k] (rows k apart) = x [m, k] (rows ldx apart) rounded to nearest even in f16 (bf 0)
// or bf16 (bf 1). Four values a thread where the rows allow (the same values, fewer index
// divisions and loads).
__device__ __forceinline__ void cast_rows(const float* x, int ldx, u16* out, int m, int k,
                                          bool bf) {
    if (quads_fit(x, ldx, out, k, 2, m, k)) {
        unsigned quads = (unsigned)k / 4, total = (unsigned)m * quads;
        unsigned stride = gridDim.x * blockDim.x;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
            unsigned r = i / quads, c = 4 * (i - r * quads);
            float4 v = *(const float4*)(x + (size_t)r * ldx + c);
            u32 lo = half_bits(v.x, bf) | (half_bits(v.y, bf) << 16);
            u32 hi = half_bits(v.z, bf) | (half_bits(v.w, bf) << 16);
            *(uint2*)(out + (size_t)r * k + c) = make_uint2(lo, hi);
        }
        return;
    }
    size_t total = (size_t)m * k;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / k, c = i % k;
        float v = x[r * ldx + c];
        out[i] = (u16)half_bits(v, bf);
    }
}

extern "C" __global__ void cast_rows_f16(const float* x, int ldx, u16* out, int m, int k) {
    pdl_enter();
    cast_rows(x, ldx, out, m, k, false);
}

extern "C" __global__ void cast_rows_bf16(const float* x, int ldx, u16* out, int m, int k) {
    pdl_enter();
    cast_rows(x, ldx, out, m, k, true);
}

// y (rows ldy apart) from the GEMM's sums acc [m, n] (rows n apart). glu < 0: y [m, n], each
// value through linear_store (bias; with act != 0, round(acc) then round(+ bias)). glu >= 0:
// the n columns are (gate, up) pairs and y [m, n / 2] gets activation(gate + b, glu) * (up + b)
// with no rounding, as split_reduce_store. Where `half` is not null, y is also written there
// rounded to f16 (half_bf 0) or bf16 (1), rows `cols` apart: what the cast before the next GEMM
// would make of it.
extern "C" __global__ void gemm_epilogue_f32(const float* acc, const float* bias, float* y,
                                             int ldy, int m, int n, int act, int glu, u16* half,
                                             int half_bf) {
    pdl_enter();
    int cols = glu >= 0 ? n / 2 : n;
    // Four outputs a thread where the rows allow: the same values, fewer index divisions.
    if (quads_fit(acc, n, y, ldy, 4, m, cols) && ((size_t)half & 7) == 0) {
        unsigned quads = (unsigned)cols / 4, total = (unsigned)m * quads;
        unsigned stride = gridDim.x * blockDim.x;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
            unsigned r = i / quads, c = 4 * (i - r * quads);
            const float* a = acc + (size_t)r * n;
            float* out = y + (size_t)r * ldy + c;
            float o[4];
            if (glu >= 0) {
                float4 p = *(const float4*)(a + 2 * c), q = *(const float4*)(a + 2 * c + 4);
                float g[4] = {p.x, p.z, q.x, q.z}, u[4] = {p.y, p.w, q.y, q.w};
#pragma unroll
                for (int e = 0; e < 4; e++) o[e] = glu_pair(g[e], u[e], bias, c + e, glu);
            } else {
                float4 p = *(const float4*)(a + c);
                float v[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
                for (int e = 0; e < 4; e++) linear_store(v[e], bias, c + e, act, &o[e]);
            }
            *(float4*)out = make_float4(o[0], o[1], o[2], o[3]);
            if (half) {
                u32 lo = half_bits(o[0], half_bf) | (half_bits(o[1], half_bf) << 16);
                u32 hi = half_bits(o[2], half_bf) | (half_bits(o[3], half_bf) << 16);
                *(uint2*)(half + (size_t)r * cols + c) = make_uint2(lo, hi);
            }
        }
        return;
    }
    size_t total = (size_t)m * cols;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / cols;
        int c = (int)(i % cols);
        const float* a = acc + r * n;
        float* out = y + r * ldy + c;
        if (glu >= 0) {
            *out = glu_pair(a[2 * c], a[2 * c + 1], bias, c, glu);
        } else {
            linear_store(a[c], bias, c, act, out);
        }
        if (half) half[i] = (u16)half_bits(*out, half_bf);
    }
}

// The weight of a MatMulNBits layer (CompFp32) for a prompt GEMM: out [rows, k] (row-major,
// rows k apart) holds columns first .. first + rows of packed [n, nb, bs/2] (low nibble first),
// f32 scales [n, nb] and f32 zero points [n, nb] (null: 8), each w = (q - zp) * scale in f32 as
// the GEMV kernels compute it, then stored as f32 (ty 0) or rounded to nearest even in f16
// (ty 1) or bf16 (ty 2). Padding past k in the last block is not written.
// The weight of a nibble q: (q - zp) * scale in f32, the value every prompt path here takes
// (before rounding to the GEMM's type).
__device__ __forceinline__ float int4_weight(u32 q, float zp, float scale) {
    return ((float)q - zp) * scale;
}

__device__ __forceinline__ void dequant_store(void* out, size_t i, float w, int ty) {
    if (ty == 0)
        ((float*)out)[i] = w;
    else
        ((u16*)out)[i] = (u16)half_bits(w, ty == 2);
}

// Values a thread of the vector path dequantises: 8 packed bytes, one load.
#define DEQUANT_GROUP 16

// The vector path's 16 values of one group, stored with 16-byte writes at `o` (16-aligned).
__device__ __forceinline__ void dequant_group_store(const float* w, void* o, int ty) {
    if (ty == 0) {
        float4* f = (float4*)o;
#pragma unroll
        for (int q = 0; q < DEQUANT_GROUP / 4; q++)
            f[q] = make_float4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
        return;
    }
    u32 pairs[DEQUANT_GROUP / 2];
#pragma unroll
    for (int j = 0; j < DEQUANT_GROUP / 2; j++)
        pairs[j] = half_bits(w[2 * j], ty == 2) | (half_bits(w[2 * j + 1], ty == 2) << 16);
    uint4* h = (uint4*)o;
    h[0] = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    h[1] = make_uint4(pairs[4], pairs[5], pairs[6], pairs[7]);
}

// Two paths, the same values. Vector (k and bs multiples of 16, aligned pointers): a thread
// takes a group of 16 values (one 8-byte load, one scale: bs is a multiple of the group) and
// writes it with 16-byte stores; one 32-bit division a group. Otherwise one thread per packed
// byte (two values; bs is even, so both lie in one block).
__device__ __forceinline__ void dequant_int4(const u8* packed, const float* scales,
                                             const float* zp, void* out, int first, int rows,
                                             int k, int bs, int ty) {
    int nb = (k + bs - 1) / bs;
    int half = (k + 1) / 2;
    size_t row_bytes = (size_t)nb * (bs / 2);
    unsigned groups = (unsigned)k / DEQUANT_GROUP;
    bool vec = (k % DEQUANT_GROUP) == 0 && (bs % DEQUANT_GROUP) == 0 &&
               ((size_t)packed & 7) == 0 && ((size_t)out & 15) == 0 &&
               (size_t)rows * groups < (1u << 31);
    if (vec) {
        unsigned total = (unsigned)rows * groups, stride = gridDim.x * blockDim.x;
        int per = DEQUANT_GROUP * (ty == 0 ? 4 : 2);  // bytes of a group's output
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
            unsigned r = i / groups, g = i - r * groups;
            size_t col = (size_t)first + r;
            uint2 q = *(const uint2*)(packed + col * row_bytes + (size_t)g * (DEQUANT_GROUP / 2));
            size_t at = col * nb + (g * DEQUANT_GROUP) / (unsigned)bs;
            float s = scales[at], z = zp ? zp[at] : 8.0f;
            float w[DEQUANT_GROUP];
#pragma unroll
            for (int j = 0; j < DEQUANT_GROUP / 2; j++) {
                u32 byte = ((j < 4 ? q.x : q.y) >> (8 * (j & 3))) & 255u;
                w[2 * j] = int4_weight(byte & 15u, z, s);
                w[2 * j + 1] = int4_weight(byte >> 4, z, s);
            }
            dequant_group_store(w, (char*)out + (size_t)i * per, ty);
        }
        return;
    }
    size_t total = (size_t)rows * half;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / half;
        int b = (int)(i % half), c = 2 * b;
        size_t col = (size_t)first + r;
        u8 byte = packed[col * row_bytes + b];
        size_t at = col * nb + c / bs;
        float s = scales[at], z = zp ? zp[at] : 8.0f;
        dequant_store(out, r * k + c, int4_weight(byte & 15u, z, s), ty);
        if (c + 1 < k) dequant_store(out, r * k + c + 1, int4_weight(byte >> 4, z, s), ty);
    }
}

extern "C" __global__ void dequant_int4_f32(const u8* packed, const float* scales,
                                            const float* zp, float* out, int first, int rows,
                                            int k, int bs) {
    pdl_enter();
    dequant_int4(packed, scales, zp, out, first, rows, k, bs, 0);
}

extern "C" __global__ void dequant_int4_f16(const u8* packed, const float* scales,
                                            const float* zp, u16* out, int first, int rows,
                                            int k, int bs) {
    pdl_enter();
    dequant_int4(packed, scales, zp, out, first, rows, k, bs, 1);
}

extern "C" __global__ void dequant_int4_bf16(const u8* packed, const float* scales,
                                             const float* zp, u16* out, int first, int rows,
                                             int k, int bs) {
    pdl_enter();
    dequant_int4(packed, scales, zp, out, first, rows, k, bs, 2);
}

// ---- int4 prompt rows on the tensor cores, no dequantised copy ------------------------------
//
// gemm_int4_skinny{,2}_*: x [m, k] (f16 or bf16, rows ldx apart) · W^T for m <= 16 (16 * RT,
// RT = 2 for the `2` entries) rows and a MatMulNBits W (packed [n, nb, bs/2], f32 scales and
// integral zero points in 0..15 [n, nb], null zero points: 8; bs a multiple of 32), each weight
// w = (q - zp) * scale rounded once to x's type: the value dequant_int4 stores, so the same
// products as the dequantised GEMM in another summation order. The host takes this only where
// every scale is exactly a value of x's type (the scales' own type) and the zero points are
// integral, so the pair arithmetic below is exact up to that one rounding: a nibble masked into
// the mantissa of `magic` (1024 in f16, 128 in bf16) is magic + q, minus (magic + zp) is q - zp
// exactly, times the scale is the exact product rounded once (an fma with -0).
//
// Layout. Block (bx, by) takes 32 weight columns (four n8 tiles) from bx * 32 and the by-th
// run of `per` groups of 32 k values (per a multiple of 4); its 8 warps take every 8th quad of
// four groups, each loading its next quad before the current quad's products (two quads'
// registers in turn). In a quad, lane
// (g = lane / 4, t = lane % 4) holds group 4 * quad + t of column g of each tile: the four
// lanes of a column read 64 consecutive bytes. The mma's k slots are assigned per lane, which
// the sum does not see: in k16 step i (0..7) lane t's slots 2t, 2t + 1 are its group's values
// 4i, 4i + 1 and slots 2t + 8, 2t + 9 its values 4i + 2, 4i + 3, in b (byte 2i and 2i + 1 of
// its 16 bytes, each byte's two nibbles one pair) and in a (x's values at the same k: one
// 16-byte load per row for two steps). The x rows are the a rows of the RT row tiles (rows
// past m read as 0). Weights, scales and zero points stream past L1 (load_stream*), which keeps
// x, read by every column block.
// The warps' sums meet in shared memory, added in warp order; with one run (gridDim.y 1) the
// block writes c [m, n] (rows ldc apart), else its run's partial sums to part [gridDim.y, m,
// n], which skinny_sum_f32 adds in run order. The host takes this for k a multiple of 32,
// 16-byte aligned packed rows and x rows.
#define SKINNY_WARPS 8
#define SKINNY_TILES 4
#define SKINNY_COLS (8 * SKINNY_TILES)
// SKINNY_XPF=1 (a define for A/B runs; 0, the default, leaves the machine code as it was): a
// warp asks L1 for its next quad's x rows when it issues that quad's weight loads, so the
// quad's x reads hit L1 instead of waiting on L2 mid-quad (round 36's ncu: 37% of the cycles
// between issues were L1TEX waits, the L1 hit rate 53%).
#ifndef SKINNY_XPF
#define SKINNY_XPF 0
#endif

// One lane's share of a quad for its four columns: 16 packed bytes each, the scale as a pair
// of halves and -(magic + zp) as a pair (all 0 where the group or column is out of range).
struct SkinnyQuad {
    uint4 q[SKINNY_TILES];
    u32 s[SKINNY_TILES], z[SKINNY_TILES];
};

// 1024 (f16) or 128 (bf16), whose last mantissa bits a nibble fills, in both halves.
__device__ __forceinline__ u32 skinny_magic(bool bf) { return bf ? 0x43004300u : 0x64006400u; }

template <bool BF>
__device__ __forceinline__ u32 half2_fma(u32 a, u32 b, u32 c) {
    u32 d = 0u;
#if __CUDA_ARCH__ >= 800  // the host runs the skinny kernel only here (as mma_16816)
    if constexpr (BF)
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    else
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
#endif
    return d;
}

// Where a lane reads its columns: the packed row, scales and zero points of column col0 + g
// (tile j adds 8 * j rows), and how many of its four columns are inside n.
struct SkinnyLane {
    const u8* q;
    const float *s, *z;
    size_t q_tile;
    int s_tile, tiles;
};

template <bool BF>
__device__ __forceinline__ void skinny_load(SkinnyQuad& w, const SkinnyLane& at, int bs,
                                            int group, int last) {
    bool live = group < last;
    int block = group * 32 / bs;
#pragma unroll
    for (int j = 0; j < SKINNY_TILES; j++) {
        if (live && j < at.tiles) {
            w.q[j] = load_stream16(at.q + at.q_tile * j + (size_t)group * 16);
            int i = at.s_tile * j + block;
            u32 sh = half_bits(load_stream_f32(at.s + i), BF);
            u32 zh = (skinny_magic(BF) & 0xffffu) | (u32)(at.z ? load_stream_f32(at.z + i) : 8.0f) |
                     0x8000u;
            w.s[j] = sh | (sh << 16);
            w.z[j] = zh | (zh << 16);
        } else {
            w.q[j] = make_uint4(0u, 0u, 0u, 0u);
            w.s[j] = w.z[j] = 0u;
        }
    }
}

// The L1 lines holding a lane's 64 bytes of each of its x rows for group `group` (x must be
// written by now: after the PDL wait).
template <int RT>
__device__ __forceinline__ void skinny_prefetch_x(const u16* x, int ldx, int m, int g, int group,
                                                  bool live) {
#if SKINNY_XPF
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = 16 * r + 8 * h + g;
            if (live && row < m) {
                const u16* at = x + (size_t)row * ldx + (size_t)group * 32;
                asm volatile("prefetch.global.L1 [%0];" ::"l"(at));
                asm volatile("prefetch.global.L1 [%0];" ::"l"(at + 31));
            }
        }
#endif
}

// The weights of byte B of a word (its two nibbles, lower k first) as a pair of halves;
// `shifted` is the word >> 4.
template <bool BF, int B>
__device__ __forceinline__ u32 skinny_pair(u32 word, u32 shifted, u32 neg_zp, u32 scale) {
    u32 p = __byte_perm(word, shifted, B | (B << 4) | ((B + 4) << 8) | ((B + 4) << 12));
    u32 v = (p & 0x000f000fu) | skinny_magic(BF);
    u32 one = BF ? 0x3f803f80u : 0x3c003c00u;
    return half2_fma<BF>(half2_fma<BF>(v, one, neg_zp), scale, 0x80008000u);
}

// The products of one quad (lane t's group `group`, its weights `w`) into d.
template <bool BF, int RT>
__device__ __forceinline__ void skinny_quad(float (&d)[RT][SKINNY_TILES][4], const SkinnyQuad& w,
                                            const u16* __restrict__ x, int ldx, int m, int g,
                                            int group, bool live) {
#pragma unroll
    for (int i2 = 0; i2 < 4; i2++) {
        // x's values 8 * i2 .. + 7 of the group for rows g and g + 8 of each row tile: the a
        // fragments of steps 2 * i2 (the first half) and 2 * i2 + 1.
        uint4 lo[RT], hi[RT];
#pragma unroll
        for (int r = 0; r < RT; r++) {
            int row = 16 * r + g;
            const u16* xr = x + (size_t)row * ldx + (size_t)group * 32 + 8 * i2;
            uint4 zero = make_uint4(0u, 0u, 0u, 0u);
            lo[r] = live && row < m ? *(const uint4*)xr : zero;
            hi[r] = live && row + 8 < m ? *(const uint4*)(xr + (size_t)8 * ldx) : zero;
        }
#pragma unroll
        for (int half = 0; half < 2; half++) {
            u32 a[RT][4];
#pragma unroll
            for (int r = 0; r < RT; r++) {
                a[r][0] = half ? lo[r].z : lo[r].x;
                a[r][1] = half ? hi[r].z : hi[r].x;
                a[r][2] = half ? lo[r].w : lo[r].y;
                a[r][3] = half ? hi[r].w : hi[r].y;
            }
#pragma unroll
            for (int j = 0; j < SKINNY_TILES; j++) {
                u32 words[4] = {w.q[j].x, w.q[j].y, w.q[j].z, w.q[j].w};
                u32 word = words[i2], shifted = word >> 4;
                u32 b0, b1;
                if (half) {
                    b0 = skinny_pair<BF, 2>(word, shifted, w.z[j], w.s[j]);
                    b1 = skinny_pair<BF, 3>(word, shifted, w.z[j], w.s[j]);
                } else {
                    b0 = skinny_pair<BF, 0>(word, shifted, w.z[j], w.s[j]);
                    b1 = skinny_pair<BF, 1>(word, shifted, w.z[j], w.s[j]);
                }
#pragma unroll
                for (int r = 0; r < RT; r++) mma_16816<BF>(d[r][j], a[r], b0, b1);
            }
        }
    }
}

template <bool BF, int RT>
__device__ __forceinline__ void gemm_int4_skinny_body(const u16* __restrict__ x, int ldx,
                                                 const u8* __restrict__ packed,
                                                 const float* __restrict__ scales,
                                                 const float* __restrict__ zp,
                                                 float* __restrict__ c, int ldc,
                                                 float* __restrict__ part, int m, int n, int k,
                                                 int bs, int per) {
    __shared__ float partial[SKINNY_WARPS][16 * RT][SKINNY_COLS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int col0 = blockIdx.x * SKINNY_COLS;
    int nb = (k + bs - 1) / bs;
    int first = blockIdx.y * per, last = min(first + per, k / 32);
    int quads = (last + 3) / 4;
    size_t row_bytes = (size_t)nb * (bs / 2);
    SkinnyLane at;
    at.q = packed + (size_t)(col0 + g) * row_bytes;
    at.s = scales + (size_t)(col0 + g) * nb;
    at.z = zp ? zp + (size_t)(col0 + g) * nb : nullptr;
    at.q_tile = 8 * row_bytes;
    at.s_tile = 8 * nb;
    at.tiles = max(0, (n - col0 - g + 7) / 8);
    float d[RT][SKINNY_TILES][4];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < SKINNY_TILES; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) d[r][j][e] = 0.0f;
    // Two quads' loads in turn (no copy between them): a warp's next quad loads before the
    // current quad's products. The weights are never written by a kernel: the first quad
    // loads before the wait.
    SkinnyQuad even, odd;
    int quad = first / 4 + warp;
    if (quad < quads) skinny_load<BF>(even, at, bs, 4 * quad + t, last);
    pdl_enter();
    for (; quad < quads; quad += 2 * SKINNY_WARPS) {
        int later = quad + SKINNY_WARPS;
        if (later < quads) {
            skinny_load<BF>(odd, at, bs, 4 * later + t, last);
            skinny_prefetch_x<RT>(x, ldx, m, g, 4 * later + t, 4 * later + t < last);
        }
        skinny_quad<BF, RT>(d, even, x, ldx, m, g, 4 * quad + t, 4 * quad + t < last);
        if (later >= quads) break;
        if (later + SKINNY_WARPS < quads) {
            int next = 4 * (later + SKINNY_WARPS) + t;
            skinny_load<BF>(even, at, bs, next, last);
            skinny_prefetch_x<RT>(x, ldx, m, g, next, next < last);
        }
        skinny_quad<BF, RT>(d, odd, x, ldx, m, g, 4 * later + t, 4 * later + t < last);
    }
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int j = 0; j < SKINNY_TILES; j++) {
            int cc = 8 * j + 2 * t, row = 16 * r + g;
            partial[warp][row][cc] = d[r][j][0];
            partial[warp][row][cc + 1] = d[r][j][1];
            partial[warp][row + 8][cc] = d[r][j][2];
            partial[warp][row + 8][cc + 1] = d[r][j][3];
        }
    __syncthreads();
    float* out = gridDim.y == 1 ? c : part + (size_t)blockIdx.y * m * n;
    int ld = gridDim.y == 1 ? ldc : n;
    for (int i = threadIdx.x; i < 16 * RT * SKINNY_COLS; i += blockDim.x) {
        int r = i / SKINNY_COLS, cc = i % SKINNY_COLS, col = col0 + cc;
        if (r >= m || col >= n) continue;
        float sum = 0.0f;
#pragma unroll
        for (int w = 0; w < SKINNY_WARPS; w++) sum += partial[w][r][cc];
        out[(size_t)r * ld + col] = sum;
    }
}

// Both row-tile counts at two blocks an SM (two tiles would take 170 registers unbounded;
// bounded, they spill ~100 bytes).
extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, 2)
    gemm_int4_skinny_f16(const u16* x, int ldx, const u8* packed, const float* scales, const float* zp,
        float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<false, 1>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, 2)
    gemm_int4_skinny_bf16(const u16* x, int ldx, const u8* packed, const float* scales, const float* zp,
        float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<true, 1>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, 2)
    gemm_int4_skinny2_f16(const u16* x, int ldx, const u8* packed, const float* scales, const float* zp,
        float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<false, 2>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, 2)
    gemm_int4_skinny2_bf16(const u16* x, int ldx, const u8* packed, const float* scales, const float* zp,
        float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<true, 2>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

// c [m, n] (rows ldc apart) = the sum of the skinny kernel's `runs` partial sums part [runs, m,
// n], added in run order (the same bits for the same runs).
extern "C" __global__ void skinny_sum_f32(const float* __restrict__ part, int runs, int m,
                                          int n, float* __restrict__ c, int ldc) {
    pdl_enter();
    int total = m * n;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int r = 0; r < runs; r++) sum += part[(size_t)r * total + i];
        c[(size_t)(i / n) * ldc + i % n] = sum;
    }
}
