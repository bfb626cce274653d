// com.microsoft MatMulNBits (4 bits) linear layers with the dequantisation fused in, on the
// ONNX layout as stored: packed `[n, nb, block/2]` (two values per byte, low nibble first along
// K), scales f32 `[n, nb]`, zero points unpacked to one per block (default 8). One warp per
// output column, lanes over consecutive 8-value words (coalesced); up to GEMV_ROWS rows of x
// per warp, as gemv.cu.
//
// gemv_int4_f32 (ONNX Runtime's CompFp32, accuracy levels 0-3, float zero points):
//   w = (q - zp) * scale, acc = fma(w, x, acc).
// quantize_blocks_f32 + gemv_int4_i8 (CompInt8, accuracy level 4): x is quantized per block the
// way MLAS does (amax, scale = amax / 127, inv = 127 / amax, round half to even, zeros past K),
// then per block d = sum qa * (q - zp) in integers and acc = fma(d, scale_w * scale_a, acc).


template <int R>
__device__ __forceinline__ void int4_f32_body(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int split, int glu,
                                         int act) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col = blockIdx.x * (GEMV_WARPS / split) + warp / split;
    int part = warp % split;
    int r0 = blockIdx.y * R;
    bool valid = col < n;
    int rows = min(R, m - r0);
    int nb = (k + bs - 1) / bs;
    int words = valid ? nb * bs / 8 : 0;
    col = valid ? col : 0;
    const u32* wr = (const u32*)(packed + (size_t)col * nb * (bs / 2));
    const float* xr = x + (size_t)r0 * ldx;
    bool vec = (k % 8) == 0 && (ldx % 4) == 0 && (((size_t)x & 15) == 0);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    // Lanes over consecutive 8-value words of the row: one coalesced 128-byte load per warp.
#pragma unroll 4
    for (int wi = part * 32 + lane; wi < words; wi += 32 * split) {
        u32 word = wr[wi];
        int b = wi * 8 / bs;
        float scale = scales[(size_t)col * nb + b];
        float z = zp ? zp[(size_t)col * nb + b] : 8.0f;
        int base = wi * 8;
        float wv[8];
#pragma unroll
        for (int e = 0; e < 8; e++) wv[e] = ((float)((word >> (4 * e)) & 15u) - z) * scale;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= rows) break;
            const float* xp = xr + (size_t)r * ldx + base;
            if (vec && base < k) {
                float4 a = *(const float4*)xp, c = *(const float4*)(xp + 4);
                float xv[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
                for (int e = 0; e < 8; e++) acc[r] = fmaf(wv[e], xv[e], acc[r]);
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++)
                    if (base + e < k) acc[r] = fmaf(wv[e], xp[e], acc[r]);
            }
        }
    }
    split_reduce_store(acc, rows, split, valid, bias, col, act, y, ldy, r0, glu);
}

extern "C" __global__ void __launch_bounds__(256) gemv_int4_f32(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int split, int glu,
                                         int act) {
    int4_f32_body<GEMV_ROWS>(packed, scales, zp, x, ldx, bias, y, ldy, n, k, m, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(256) gemv_decode_int4_f32(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int split, int glu,
                                         int act) {
    int4_f32_body<1>(packed, scales, zp, x, ldx, bias, y, ldy, n, k, m, bs, split, glu, act);
}

// One warp per (block, row): qa `[m, nb * bs]`, sa `[m, nb]`.
extern "C" __global__ void quantize_blocks_f32(const float* __restrict__ x, int ldx, int k,
                                               int bs, i8* __restrict__ qa,
                                               float* __restrict__ sa) {
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

template <int R>
__device__ __forceinline__ void int4_i8_body(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int split, int glu,
                                        int act) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col = blockIdx.x * (GEMV_WARPS / split) + warp / split;
    int part = warp % split;
    int r0 = blockIdx.y * R;
    bool valid = col < n;
    int rows = min(R, m - r0);
    int nb = (k + bs - 1) / bs;
    int words = valid ? nb * bs / 8 : 0;
    col = valid ? col : 0;
    const u32* wr = (const u32*)(packed + (size_t)col * nb * (bs / 2));
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    // Lanes over consecutive 8-value words; the 8 int8 activations of a word are one 8-byte load
    // (qa rows are nb * bs bytes, a multiple of 8).
#pragma unroll 4
    for (int wi = part * 32 + lane; wi < words; wi += 32 * split) {
        u32 word = wr[wi];
        int b = wi * 8 / bs;
        float scale = scales[(size_t)col * nb + b];
        int z = zp ? (int)zp[(size_t)col * nb + b] : 8;
        int wq[8];
#pragma unroll
        for (int e = 0; e < 8; e++) wq[e] = (int)((word >> (4 * e)) & 15u) - z;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r >= rows) break;
            const i8* a = qa + (size_t)(r0 + r) * nb * bs + wi * 8;
            uint2 raw = *(const uint2*)a;
            int d = 0;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                d += (int)(signed char)(raw.x >> (8 * e)) * wq[e];
                d += (int)(signed char)(raw.y >> (8 * e)) * wq[4 + e];
            }
            acc[r] = fmaf((float)d, scale * sa[(size_t)(r0 + r) * nb + b], acc[r]);
        }
    }
    split_reduce_store(acc, rows, split, valid, bias, col, act, y, ldy, r0, glu);
}

extern "C" __global__ void __launch_bounds__(256) gemv_int4_i8(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int split, int glu,
                                        int act) {
    int4_i8_body<GEMV_ROWS>(packed, scales, zp, qa, sa, bias, y, ldy, n, k, m, bs, split, glu, act);
}

extern "C" __global__ void __launch_bounds__(256) gemv_decode_int4_i8(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int split, int glu,
                                        int act) {
    int4_i8_body<1>(packed, scales, zp, qa, sa, bias, y, ldy, n, k, m, bs, split, glu, act);
}
