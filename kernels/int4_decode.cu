// com.microsoft MatMulNBits (4 bits) linear layers for ONE row of x (decode steps), built for
// bytes in flight like the dense gemv_decode_* (gemv.cu). Weight layout as int4.cu: packed
// `[n, nb, block/2]` (low nibble first along K), scales f32 `[n, nb]`, zero points one per
// block (f32 for CompFp32, u8 for CompInt8; null: 8).
//
// Blocks of DEC_WARPS warps, no shared-memory stage or barrier before the weight loads; a
// warp owns DEC_COLS adjacent columns (a GLU (gate, up) pair lives in one warp) and `split`
// warps of a block share a column pair. A lane owns the 16-byte chunks (32 values)
// ch = part * 32 + lane + i * 32 * split (i = 0, 1, ...) of both rows; per iteration it issues
// I4D_LOADS chunk loads per column (streaming, L1 bypassed) with their scales and zero
// points before any arithmetic, the first iteration's before pdl_wait() (they read weights
// only). It adds its chunks in increasing order, word by word and value by value; the warp
// sums by butterfly and the split partials are summed in warp order (decode_reduce_store in
// prelude.cuh). Alignment only chooses between 16-byte and word loads of the same bytes (and
// vector or scalar loads of x), so the bits depend on (k, n, block) and the values only.
//
// CompFp32 (accuracy levels 0-3): w = (q - zp) * scale, acc = fma(w, x, acc), x read through
// L1 (every warp of the SM reads the same row). CompInt8 (level 4, after quantize_blocks_f32
// of int4.cu): per chunk and quantisation block the exact integer d = sum qa * (q - zp)
// (dp4a; the activations' sum is shared by both columns), then acc = fma(d, sw * sa, acc) —
// the same products in the same grouping as gemv_int4_i8.

// Chunks per column a lane loads per iteration (16 bytes each; two columns: 64 bytes in
// flight per lane). 4 (one load round for k = 4096) needs ~115-126 registers (16 warps per
// SM) against ~80 (24 warps); rows of k <= 2048 give a lane at most 2 chunks either way.
// The split rule (decode_split_int4 in src/cuda/kernels/int4.rs) keeps a warp to two rounds.
#define I4D_LOADS 2

// One chunk of a column as loaded: 4 words (8 values each) and the scale and zero point of
// the block of words 0-1 ([0]) and of words 2-3 ([1]; another block only at block size 16).
template <typename Z>
struct I4Chunk {
    uint4 q;
    float s[2];
    Z z[2];
};

__device__ __forceinline__ float i4d_zero(const float* zr, int b) {
    return zr ? load_stream_f32(zr + b) : 8.0f;
}

__device__ __forceinline__ int i4d_zero(const u8* zr, int b) {
    return zr ? load_stream_u8(zr + b) : 8;
}

// Chunk `ch` of a packed row of `words` words: one 16-byte load when rows are 16-byte aligned
// (then every chunk is whole), else word loads (words past the row read as 0, never used; the
// caller guarantees 4-byte alignment).
template <typename ZP, typename Z>
__device__ __forceinline__ void i4d_fetch(const u8* row, const float* sc, const ZP* zr, int ch,
                                          int words, int kp, int bs, bool vec, I4Chunk<Z>& c) {
    if (vec) {
        c.q = load_stream16(row + (size_t)ch * 16);
    } else {
        const u32* w = (const u32*)row + (size_t)ch * 4;
        c.q.x = w[0];  // a chunk has at least two words
        c.q.y = w[1];
        c.q.z = ch * 4 + 2 < words ? w[2] : 0u;
        c.q.w = ch * 4 + 3 < words ? w[3] : 0u;
    }
    int b0 = ch * 32 / bs, b1 = min(ch * 32 + 16, kp - 1) / bs;
    c.s[0] = load_stream_f32(sc + b0);
    c.z[0] = i4d_zero(zr, b0);
    if (b1 != b0) {
        c.s[1] = load_stream_f32(sc + b1);
        c.z[1] = i4d_zero(zr, b1);
    } else {
        c.s[1] = c.s[0];
        c.z[1] = c.z[0];
    }
}

// One column pair's rows and where the lane's walk starts.
template <typename ZP>
struct I4Rows {
    const u8* row[DEC_COLS];
    const float* sc[DEC_COLS];
    const ZP* zr[DEC_COLS];
    bool valid[DEC_COLS];
    int col0, first, stride, nb, kp, words, chunks;
    bool vec;
};

template <typename ZP>
__device__ __forceinline__ I4Rows<ZP> i4d_rows(const u8* packed, const float* scales,
                                               const ZP* zp, int n, int k, int bs, int split) {
    I4Rows<ZP> r;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    r.col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    r.first = (warp % split) * 32 + lane;
    r.stride = 32 * split;
    r.nb = (k + bs - 1) / bs;
    r.kp = r.nb * bs;
    r.words = r.kp / 8;
    r.chunks = (r.words + 3) / 4;
    r.vec = ((r.kp / 2) % 16) == 0 && (((size_t)packed & 15) == 0);
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        r.valid[j] = r.col0 + j < n;
        size_t c = r.valid[j] ? r.col0 + j : 0;
        r.row[j] = packed + c * (r.kp / 2);
        r.sc[j] = scales + c * r.nb;
        r.zr[j] = zp ? zp + c * r.nb : nullptr;
    }
    return r;
}

// One iteration's loads: I4D_LOADS chunks (stride apart from c0) of each valid column.
template <typename ZP, typename Z>
__device__ __forceinline__ void i4d_fetch_all(const I4Rows<ZP>& r, int c0, int bs,
                                              I4Chunk<Z> (&w)[DEC_COLS][I4D_LOADS]) {
#pragma unroll
    for (int l = 0; l < I4D_LOADS; l++) {
        int ch = c0 + l * r.stride;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++)
            if (ch < r.chunks && r.valid[j])
                i4d_fetch(r.row[j], r.sc[j], r.zr[j], ch, r.words, r.kp, bs, r.vec, w[j][l]);
    }
}

__device__ __forceinline__ u32 i4d_word(const uint4& q, int i) {
    return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// The walk both one-row int4 kernels share: a warp's chunks of its column pair, I4D_LOADS
// chunks a round with every load of the round issued first (the first round before the PDL
// wait: weights only), then `chunk(ch, w, l)` for each chunk l of the round in order.
template <typename ZP, typename Z, typename Chunk>
__device__ __forceinline__ void i4d_walk(const I4Rows<ZP>& r, int bs, Chunk chunk) {
    I4Chunk<Z> w[DEC_COLS][I4D_LOADS];
    pdl_trigger();
    int c0 = r.first;
    i4d_fetch_all(r, c0, bs, w);
    pdl_wait();
    for (; c0 < r.chunks; c0 += I4D_LOADS * r.stride) {
        if (c0 != r.first) i4d_fetch_all(r, c0, bs, w);
#pragma unroll
        for (int l = 0; l < I4D_LOADS; l++) {
            int ch = c0 + l * r.stride;
            if (ch >= r.chunks) break;
            chunk(ch, w, l);
        }
    }
}

__device__ __forceinline__ void int4_decode_f32_body(const u8* __restrict__ packed,
                                                     const float* __restrict__ scales,
                                                     const float* __restrict__ zp,
                                                     const float* __restrict__ x,
                                                     const float* __restrict__ bias,
                                                     float* __restrict__ y, int n, int k, int bs,
                                                     int split, int glu, int act) {
    I4Rows<float> r = i4d_rows(packed, scales, zp, n, k, bs, split);
    bool xvec = ((size_t)x & 15) == 0;
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    // x is read only after the wait (it is written by the kernel before).
    i4d_walk<float, float>(r, bs, [&](int ch, const I4Chunk<float> (&w)[DEC_COLS][I4D_LOADS], int l) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int word = ch * 4 + i;
            if (word >= r.words) break;  // the half chunk at the end (block size 16)
            float xv[8];
            x_unit(nullptr, 0, x, 0, 0, word * 8, k, false, xvec, xv);
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++) {
                if (!r.valid[j]) continue;
                u32 q = i4d_word(w[j][l].q, i);
                float s = w[j][l].s[i >> 1], z = w[j][l].z[i >> 1];
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    float wv = ((float)((q >> (4 * e)) & 15u) - z) * s;
                    acc[j] = fmaf(wv, xv[e], acc[j]);
                }
            }
        }
    });
    decode_reduce_store(acc, r.valid, r.col0, split, bias, y, glu, act);
}

// 16 int8 activations from p (16-byte loads when aligned, else bytes: the same values).
__device__ __forceinline__ uint4 i4d_acts(const i8* p, bool qvec) {
    if (qvec) return *(const uint4*)p;
    const u8* b = (const u8*)p;
    u32 v[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
        v[q] = b[4 * q] | (b[4 * q + 1] << 8) | (b[4 * q + 2] << 16) | ((u32)b[4 * q + 3] << 24);
    return make_uint4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ int i4d_dp4a(int a, int b, int c) {
    asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(c) : "r"(a), "r"(b));
    return c;
}

// sum over the word's 8 values of q * qa (without the zero point), exactly: dp4a on the even
// and on the odd nibbles. ax, ay: the word's 8 activations.
__device__ __forceinline__ int i4d_dot8(u32 word, u32 ax, u32 ay) {
    int even = (int)__byte_perm(ax, ay, 0x6420), odd = (int)__byte_perm(ax, ay, 0x7531);
    int lo = (int)(word & 0x0f0f0f0fu), hi = (int)((word >> 4) & 0x0f0f0f0fu);
    return i4d_dp4a(hi, odd, i4d_dp4a(lo, even, 0));
}

// The sum of 16 int8 activations.
__device__ __forceinline__ int i4d_sum16(uint4 a) {
    int s = i4d_dp4a(0x01010101, (int)a.x, 0);
    s = i4d_dp4a(0x01010101, (int)a.y, s);
    s = i4d_dp4a(0x01010101, (int)a.z, s);
    return i4d_dp4a(0x01010101, (int)a.w, s);
}

__device__ __forceinline__ void int4_decode_i8_body(const u8* __restrict__ packed,
                                                    const float* __restrict__ scales,
                                                    const u8* __restrict__ zp,
                                                    const i8* __restrict__ qa,
                                                    const float* __restrict__ sa,
                                                    const float* __restrict__ bias,
                                                    float* __restrict__ y, int n, int k, int bs,
                                                    int split, int glu, int act) {
    I4Rows<u8> r = i4d_rows(packed, scales, zp, n, k, bs, split);
    bool qvec = ((size_t)qa & 15) == 0;
    float acc[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    // qa and sa are written by quantize_blocks_f32: read only after the wait.
    i4d_walk<u8, int>(r, bs, [&](int ch, const I4Chunk<int> (&w)[DEC_COLS][I4D_LOADS], int l) {
        // Words 2-3 are past the row in the half chunk at the end (block size 16): their
        // activations are never read.
        bool second = ch * 4 + 2 < r.words;
        uint4 a0 = i4d_acts(qa + (size_t)ch * 32, qvec);
        uint4 a1 = second ? i4d_acts(qa + (size_t)ch * 32 + 16, qvec) : make_uint4(0, 0, 0, 0);
        int b0 = ch * 32 / bs, b1 = min(ch * 32 + 16, r.kp - 1) / bs;
        float sa0 = sa[b0], sa1 = bs == 16 && second ? sa[b1] : sa0;
        int sum0 = i4d_sum16(a0), sum1 = i4d_sum16(a1);
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!r.valid[j]) continue;
            int d0 = i4d_dot8(w[j][l].q.y, a0.z, a0.w) + i4d_dot8(w[j][l].q.x, a0.x, a0.y);
            d0 -= w[j][l].z[0] * sum0;
            int d1 = i4d_dot8(w[j][l].q.w, a1.z, a1.w) + i4d_dot8(w[j][l].q.z, a1.x, a1.y);
            d1 -= w[j][l].z[1] * sum1;  // zero in a half chunk: its words and activations are 0
            if (bs == 16) {
                acc[j] = fmaf((float)d0, w[j][l].s[0] * sa0, acc[j]);
                if (second) acc[j] = fmaf((float)d1, w[j][l].s[1] * sa1, acc[j]);
            } else {
                acc[j] = fmaf((float)(d0 + d1), w[j][l].s[0] * sa0, acc[j]);
            }
        }
    });
    decode_reduce_store(acc, r.valid, r.col0, split, bias, y, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_int4_f32(const u8* packed, const float* scales, const float* zp, const float* x,
                         const float* bias, float* y, int n, int k, int bs, int split, int glu,
                         int act) {
    int4_decode_f32_body(packed, scales, zp, x, bias, y, n, k, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(128)
    gemv_decode_int4_i8(const u8* packed, const float* scales, const u8* zp, const i8* qa,
                        const float* sa, const float* bias, float* y, int n, int k, int bs,
                        int split, int glu, int act) {
    int4_decode_i8_body(packed, scales, zp, qa, sa, bias, y, n, k, bs, split, glu, act);
}
