// com.microsoft MatMulNBits (4 bits) linear layers with the dequantisation fused in, on the
// ONNX layout as stored: packed `[n, nb, block/2]` (two values per byte, low nibble first along
// K), scales f32 `[n, nb]`, zero points unpacked to one per block (default 8). One warp per
// output column (`split` warps per column, as gemv.cu), lanes over consecutive 16-byte chunks
// of 32 values (4 words), INT4_LOADS chunks per lane issued before the arithmetic; up to
// GEMV_ROWS rows of x per warp. Activations are staged per block in shared memory when the
// launch provides the room (f32 rows for CompFp32, int8 rows and their block scales for
// CompInt8); which chunks a lane adds in which order depends on (m, k, n, block) only.
//
// gemv_int4_f32 (ONNX Runtime's CompFp32, accuracy levels 0-3, float zero points):
//   w = (q - zp) * scale, acc = fma(w, x, acc).
// quantize_blocks_f32 + gemv_int4_i8 (CompInt8, accuracy level 4): x is quantized per block the
// way MLAS does (amax, scale = amax / 127, inv = 127 / amax, round half to even, zeros past K),
// then per block d = sum qa * (q - zp) in integers and acc = fma(d, scale_w * scale_a, acc).
//
// One-row layers (decode steps) run the kernels of int4_decode.cu.


#define INT4_LOADS 2

// Chunk `ch` (4 words) of a packed row of `words` words: one 16-byte load when the rows are
// 16-byte aligned, else word loads (absent words read as 0; the caller skips them).
__device__ __forceinline__ void int4_chunk(const u8* row, int ch, int words, bool vec, u32* out) {
    if (vec) {
        uint4 v = *(const uint4*)(row + (size_t)ch * 16);
        out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++)
            out[i] = ch * 4 + i < words ? ((const u32*)row)[ch * 4 + i] : 0u;
    }
}

// What a warp of the multi-row bodies works on: its column (0 past n, with `valid` false),
// its part of the column's chunks, the block's first row and rows, and the packed row.
struct Int4Warp {
    int col, part, r0, rows, nb, kp, words, chunks;
    bool valid, vec;
    const u8* row;
};

__device__ __forceinline__ Int4Warp int4_warp(const u8* packed, int n, int k, int m, int bs,
                                              int split, int R) {
    Int4Warp w;
    int warp = threadIdx.x >> 5;
    w.col = blockIdx.x * (GEMV_WARPS / split) + warp / split;
    w.part = warp % split;
    w.r0 = blockIdx.y * R;
    w.valid = w.col < n;
    w.rows = min(R, m - w.r0);
    w.nb = (k + bs - 1) / bs;
    w.kp = w.nb * bs;
    w.words = w.kp / 8;
    w.chunks = (w.words + 3) / 4;
    w.col = w.valid ? w.col : 0;
    w.row = packed + (size_t)w.col * w.nb * (bs / 2);
    w.vec = ((w.kp / 2) % 16) == 0 && (((size_t)packed & 15) == 0);
    return w;
}

// The INT4_LOADS chunks of one iteration from c0 (stride apart): packed words, the scales and
// zero points (Z: float or int; absent zero points are 8) of the two 16-value halves' blocks.
template <typename ZP, typename Z>
__device__ __forceinline__ void int4_fetch(const Int4Warp& w, int c0, int stride, int bs,
                                           const float* sc, const ZP* zr,
                                           u32 (&wq)[INT4_LOADS][4], float (&s)[INT4_LOADS][2],
                                           Z (&z)[INT4_LOADS][2], int2 (&b)[INT4_LOADS]) {
#pragma unroll
    for (int j = 0; j < INT4_LOADS; j++) {
        int ch = c0 + j * stride;
        if (ch >= w.chunks) break;
        b[j] = make_int2(ch * 32 / bs, min(ch * 32 + 16, w.kp - 1) / bs);
        int4_chunk(w.row, ch, w.words, w.vec, wq[j]);
        s[j][0] = sc[b[j].x];
        s[j][1] = sc[b[j].y];
        z[j][0] = zr ? (Z)zr[b[j].x] : (Z)8;
        z[j][1] = zr ? (Z)zr[b[j].y] : (Z)8;
    }
}

template <int R>
__device__ __forceinline__ void int4_f32_body(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int split, int glu,
                                         int act) {
    extern __shared__ float4 int4_stage4[];
    float* xs = (float*)int4_stage4;
    int lane = threadIdx.x & 31;
    Int4Warp w = int4_warp(packed, n, k, m, bs, split, R);
    int rows = w.rows, kp = w.kp, nb = w.nb;
    const float* xr = x + (size_t)w.r0 * ldx;
    bool xvec = (ldx % 4) == 0 && (((size_t)x & 15) == 0);
    bool staged = stage_rows(xs, kp, xr, ldx, k, rows, R, xvec);
    const float* sc = scales + (size_t)w.col * nb;
    const float* zr = zp ? zp + (size_t)w.col * nb : 0;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    const int stride = 32 * split;
    for (int c0 = w.valid ? w.part * 32 + lane : w.chunks; c0 < w.chunks;
         c0 += INT4_LOADS * stride) {
        u32 wq[INT4_LOADS][4];
        float s[INT4_LOADS][2], z[INT4_LOADS][2];
        int2 b[INT4_LOADS];
        int4_fetch(w, c0, stride, bs, sc, zr, wq, s, z, b);
#pragma unroll
        for (int j = 0; j < INT4_LOADS; j++) {
            int ch = c0 + j * stride;
            if (ch >= w.chunks) break;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int word = ch * 4 + i;
                if (word >= w.words) break;
                float wv[8];
#pragma unroll
                for (int e = 0; e < 8; e++)
                    wv[e] = ((float)((wq[j][i] >> (4 * e)) & 15u) - z[j][i >> 1]) * s[j][i >> 1];
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (r < rows) {
                        float xv[8];
                        x_unit(xs, kp, xr, ldx, r, word * 8, k, staged, xvec, xv);
#pragma unroll
                        for (int e = 0; e < 8; e++) acc[r] = fmaf(wv[e], xv[e], acc[r]);
                    }
                }
            }
        }
    }
    split_reduce_store(acc, rows, split, w.valid, bias, w.col, act, y, ldy, w.r0, glu);
}

extern "C" __global__ void __launch_bounds__(256) gemv_int4_f32(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int split, int glu,
                                         int act) {
    pdl_enter();
    int4_f32_body<GEMV_ROWS>(packed, scales, zp, x, ldx, bias, y, ldy, n, k, m, bs, split, glu, act);
}

// One warp per (block, row): qa `[m, nb * bs]`, sa `[m, nb]`.
extern "C" __global__ void quantize_blocks_f32(const float* __restrict__ x, int ldx, int k,
                                               int bs, i8* __restrict__ qa,
                                               float* __restrict__ sa) {
    pdl_enter();
    int b = blockIdx.x, r = blockIdx.y, lane = threadIdx.x;
    int nb = gridDim.x;
    const float* xr = x + (size_t)r * ldx;
    float amax = 0.0f;
    for (int j = lane; j < bs; j += 32) {
        int idx = b * bs + j;
        if (idx < k) amax = fmaxf(amax, fabsf(xr[idx]));
    }
    amax = warp_max(amax);
    float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = lane; j < bs; j += 32) {
        int idx = b * bs + j;
        float v = idx < k ? xr[idx] : 0.0f;
        qa[(size_t)r * nb * bs + idx] = (i8)(int)rintf(v * inv);
    }
    if (lane == 0) sa[(size_t)r * nb + b] = amax / 127.0f;
}

// sum over 8 values of qa * (q - z) for one packed word and its 8 int8 activations, exactly
// (dp4a on the even and odd nibbles, minus z times the activations' sum).
__device__ __forceinline__ int dot_word(u32 word, uint2 a, int z) {
    int even = (int)__byte_perm(a.x, a.y, 0x6420), odd = (int)__byte_perm(a.x, a.y, 0x7531);
    int lo = (int)(word & 0x0f0f0f0fu), hi = (int)((word >> 4) & 0x0f0f0f0fu);
    int d = 0, sum = 0;
    asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(d) : "r"(lo), "r"(even));
    asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(d) : "r"(hi), "r"(odd));
    asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(sum) : "r"(0x01010101), "r"((int)a.x));
    asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(sum) : "r"(0x01010101), "r"((int)a.y));
    return d - z * sum;
}

// Per 32-value chunk the integer products of each quantisation block are summed exactly
// (one block per chunk from block size 32 up, two at 16), then acc = fma(d, sw * sa, acc).
template <int R>
__device__ __forceinline__ void int4_i8_body(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int split, int glu,
                                        int act) {
    extern __shared__ float4 int8_stage4[];
    int lane = threadIdx.x & 31;
    Int4Warp w = int4_warp(packed, n, k, m, bs, split, R);
    int rows = w.rows, kp = w.kp, nb = w.nb, r0 = w.r0;
    // Stage: R rows of block scales (nb floats each), then R rows of kp int8 values.
    size_t sa_bytes = ((size_t)R * nb * sizeof(float) + 15) / 16 * 16;
    bool staged = sa_bytes + (size_t)R * kp <= dynamic_smem_bytes();
    const i8* qr = qa + (size_t)r0 * kp;
    const float* sr = sa + (size_t)r0 * nb;
    if (staged) {
        float* ss = (float*)int8_stage4;
        uint4* qs = (uint4*)((char*)int8_stage4 + sa_bytes);
        for (int i = threadIdx.x; i < R * nb; i += blockDim.x)
            ss[i] = i < rows * nb ? sr[i] : 0.0f;
        // kp is a multiple of 16: whole 16-byte pieces, rows contiguous in qa.
        bool qvec = (((size_t)qa & 15) == 0);
        for (int i = threadIdx.x; i < R * kp / 16; i += blockDim.x) {
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (i < rows * kp / 16) {
                if (qvec) {
                    v = ((const uint4*)qr)[i];
                } else {
                    u32 b[4];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const u8* p = (const u8*)qr + (size_t)i * 16 + 4 * q;
                        b[q] = p[0] | (p[1] << 8) | (p[2] << 16) | ((u32)p[3] << 24);
                    }
                    v = make_uint4(b[0], b[1], b[2], b[3]);
                }
            }
            qs[i] = v;
        }
        __syncthreads();
        qr = (const i8*)qs;
        sr = ss;
    }
    const float* sc = scales + (size_t)w.col * nb;
    const u8* zr = zp ? zp + (size_t)w.col * nb : 0;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    const int stride = 32 * split;
    for (int c0 = w.valid ? w.part * 32 + lane : w.chunks; c0 < w.chunks;
         c0 += INT4_LOADS * stride) {
        u32 wq[INT4_LOADS][4];
        float s[INT4_LOADS][2];
        int z[INT4_LOADS][2];
        int2 b[INT4_LOADS];
        int4_fetch(w, c0, stride, bs, sc, zr, wq, s, z, b);
#pragma unroll
        for (int j = 0; j < INT4_LOADS; j++) {
            int ch = c0 + j * stride;
            if (ch >= w.chunks) break;
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r >= rows) break;
                // Words past the row (a half chunk at block size 16) are never read.
                const uint2* a = (const uint2*)(qr + (size_t)r * kp + (size_t)ch * 32);
                int d0 = dot_word(wq[j][0], a[0], z[j][0]) + dot_word(wq[j][1], a[1], z[j][0]);
                bool second = ch * 4 + 2 < w.words;
                int d1 = 0;
                if (second)
                    d1 = dot_word(wq[j][2], a[2], z[j][1]) + dot_word(wq[j][3], a[3], z[j][1]);
                const float* sar = sr + (size_t)r * nb;
                if (bs == 16) {
                    acc[r] = fmaf((float)d0, s[j][0] * sar[b[j].x], acc[r]);
                    if (second) acc[r] = fmaf((float)d1, s[j][1] * sar[b[j].y], acc[r]);
                } else {
                    acc[r] = fmaf((float)(d0 + d1), s[j][0] * sar[b[j].x], acc[r]);
                }
            }
        }
    }
    split_reduce_store(acc, rows, split, w.valid, bias, w.col, act, y, ldy, r0, glu);
}

extern "C" __global__ void __launch_bounds__(256) gemv_int4_i8(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int split, int glu,
                                        int act) {
    pdl_enter();
    int4_i8_body<GEMV_ROWS>(packed, scales, zp, qa, sa, bias, y, ldy, n, k, m, bs, split, glu, act);
}

