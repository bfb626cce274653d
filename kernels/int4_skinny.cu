// com.microsoft MatMulNBits (4 bits, CompFp32) for prompts of up to 32 rows on the tensor cores,
// dequantising the packed weights in the kernel's own loads (the skinny GEMM), and the sum of its
// k runs. The longer prompts' path (dequantised slices and cuBLAS) is in blas.cu.
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
// Layout. Block (bx, by) takes 32 weight columns (four n8 tiles) from bx * 32 and the by-th run of
// `per` groups of 32 k values (per a multiple of 4); its 8 warps take every 8th quad of four
// groups, each loading its next quad before the current quad's products (two quads' registers in
// turn). In a quad, lane (g = lane / 4, t = lane % 4) holds group 4 * quad + t of column g of each
// tile: the four lanes of a column read 64 consecutive bytes. The mma's k slots are assigned per
// lane, which the sum does not see: in k16 step i (0..7) lane t's slots 2t, 2t + 1 are its group's
// values 4i, 4i + 1 and slots 2t + 8, 2t + 9 its values 4i + 2, 4i + 3, in b (byte 2i and 2i + 1
// of its 16 bytes, each byte's two nibbles one pair) and in a (x's values at the same k: one
// 16-byte load per row for two steps). The x rows are the a rows of the RT row tiles (rows past m
// read as 0). Weights, scales and zero points stream past L1 (load_stream*), which keeps x, read
// by every column block. The warps' sums meet in shared memory, added in warp order; with one run
// (gridDim.y 1) the block writes c [m, n] (rows ldc apart), else its run's partial sums to part
// [gridDim.y, m, n], which skinny_sum_f32 adds in run order. The host takes this for k a multiple
// of 32, 16-byte aligned packed rows and x rows.
#define SKINNY_WARPS 8
#define SKINNY_TILES 4
#define SKINNY_COLS (8 * SKINNY_TILES)
// Blocks an SM the launch bounds leave registers for (128 registers: a quad in flight a warp;
// three blocks with no quad ahead spilled and lost up to 49%, docs/cuda.md round 37).
#define SKINNY_MIN_BLOCKS 2

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
            float z = at.z ? load_stream_f32(at.z + i) : 8.0f;
            u32 zh = (skinny_magic(BF) & 0xffffu) | (u32)z | 0x8000u;
            w.s[j] = sh | (sh << 16);
            w.z[j] = zh | (zh << 16);
        } else {
            w.q[j] = make_uint4(0u, 0u, 0u, 0u);
            w.s[j] = w.z[j] = 0u;
        }
    }
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

// The products of one quad (lane t's group `group`, its weights `w`; none past `last`) into d.
template <bool BF, int RT>
__device__ __forceinline__ void skinny_quad(float (&d)[RT][SKINNY_TILES][4], const SkinnyQuad& w,
                                            const u16* __restrict__ x, int ldx, int m, int g,
                                            int group, int last) {
    bool live = group < last;
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
        if (later < quads) skinny_load<BF>(odd, at, bs, 4 * later + t, last);
        skinny_quad<BF, RT>(d, even, x, ldx, m, g, 4 * quad + t, last);
        if (later >= quads) break;
        if (later + SKINNY_WARPS < quads)
            skinny_load<BF>(even, at, bs, 4 * (later + SKINNY_WARPS) + t, last);
        skinny_quad<BF, RT>(d, odd, x, ldx, m, g, 4 * later + t, last);
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

// Both row-tile counts at two blocks an SM by default (two tiles would take 170 registers
// unbounded; bounded, they spill ~100 bytes).
extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, SKINNY_MIN_BLOCKS)
    gemm_int4_skinny_f16(const u16* x, int ldx, const u8* packed, const float* scales,
        const float* zp, float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<false, 1>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, SKINNY_MIN_BLOCKS)
    gemm_int4_skinny_bf16(const u16* x, int ldx, const u8* packed, const float* scales,
        const float* zp, float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<true, 1>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, SKINNY_MIN_BLOCKS)
    gemm_int4_skinny2_f16(const u16* x, int ldx, const u8* packed, const float* scales,
        const float* zp, float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
    gemm_int4_skinny_body<false, 2>(x, ldx, packed, scales, zp, c, ldc, part, m, n, k, bs, per);
}

extern "C" __global__ void __launch_bounds__(32 * SKINNY_WARPS, SKINNY_MIN_BLOCKS)
    gemm_int4_skinny2_bf16(const u16* x, int ldx, const u8* packed, const float* scales,
        const float* zp, float* c, int ldc, float* part, int m, int n, int k, int bs, int per) {
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
