// com.microsoft MatMulNBits (4 bits) linear layers with the dequantisation fused in, on the
// ONNX layout as stored: packed `[n, nb, block/2]` (two values per byte, low nibble first along
// K), scales f32 `[n, nb]`, zero points unpacked to one per block (default 8). One warp per
// output column, lanes over blocks; up to GEMV_ROWS rows of x per warp, as gemv.cu.
//
// gemv_int4_f32 (ONNX Runtime's CompFp32, accuracy levels 0-3, float zero points):
//   w = (q - zp) * scale, acc = fma(w, x, acc).
// quantize_blocks_f32 + gemv_int4_i8 (CompInt8, accuracy level 4): x is quantized per block the
// way MLAS does (amax, scale = amax / 127, inv = 127 / amax, round half to even, zeros past K),
// then per block d = sum qa * (q - zp) in integers and acc = fma(d, scale_w * scale_a, acc).

#define GEMV_ROWS 4
#define GEMV_WARPS 8

__device__ __forceinline__ void int4_store(float acc, const float* bias, int col, int act,
                                           float* y) {
    if (act == 0) {
        *y = bias ? acc + bias[col] : acc;
    } else {
        float v = round_act(acc, act);
        if (bias) v = round_act(v + bias[col], act);
        *y = v;
    }
}

extern "C" __global__ void gemv_int4_f32(const u8* __restrict__ packed,
                                         const float* __restrict__ scales,
                                         const float* __restrict__ zp,  // null: 8
                                         const float* __restrict__ x, int ldx,
                                         const float* __restrict__ bias, float* __restrict__ y,
                                         int ldy, int n, int k, int m, int bs, int act) {
    int lane = threadIdx.x & 31;
    int col = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    int r0 = blockIdx.y * GEMV_ROWS;
    if (col >= n) return;
    int rows = min(GEMV_ROWS, m - r0);
    int nb = (k + bs - 1) / bs;
    const float* xr = x + (size_t)r0 * ldx;
    float acc[GEMV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int b = lane; b < nb; b += 32) {
        float scale = scales[(size_t)col * nb + b];
        float z = zp ? zp[(size_t)col * nb + b] : 8.0f;
        const u32* words = (const u32*)(packed + ((size_t)col * nb + b) * (bs / 2));
        for (int j = 0; j < bs / 8; j++) {
            u32 word = words[j];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                int idx = b * bs + j * 8 + e;
                if (idx < k) {
                    float wv = ((float)((word >> (4 * e)) & 15u) - z) * scale;
#pragma unroll
                    for (int r = 0; r < GEMV_ROWS; r++)
                        if (r < rows) acc[r] = fmaf(wv, xr[(size_t)r * ldx + idx], acc[r]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0 && r < rows) int4_store(v, bias, col, act, y + (size_t)(r0 + r) * ldy + col);
    }
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

extern "C" __global__ void gemv_int4_i8(const u8* __restrict__ packed,
                                        const float* __restrict__ scales,
                                        const u8* __restrict__ zp,  // null: 8
                                        const i8* __restrict__ qa, const float* __restrict__ sa,
                                        const float* __restrict__ bias, float* __restrict__ y,
                                        int ldy, int n, int k, int m, int bs, int act) {
    int lane = threadIdx.x & 31;
    int col = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    int r0 = blockIdx.y * GEMV_ROWS;
    if (col >= n) return;
    int rows = min(GEMV_ROWS, m - r0);
    int nb = (k + bs - 1) / bs;
    float acc[GEMV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int b = lane; b < nb; b += 32) {
        float scale = scales[(size_t)col * nb + b];
        int z = zp ? (int)zp[(size_t)col * nb + b] : 8;
        const u32* words = (const u32*)(packed + ((size_t)col * nb + b) * (bs / 2));
        int d[GEMV_ROWS] = {0, 0, 0, 0};
        for (int j = 0; j < bs / 8; j++) {
            u32 word = words[j];
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) {
                if (r < rows) {
                    const i8* a = qa + (size_t)(r0 + r) * nb * bs + b * bs + j * 8;
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        d[r] += (int)a[e] * ((int)((word >> (4 * e)) & 15u) - z);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            if (r < rows)
                acc[r] = fmaf((float)d[r], scale * sa[(size_t)(r0 + r) * nb + b], acc[r]);
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0 && r < rows) int4_store(v, bias, col, act, y + (size_t)(r0 + r) * ldy + col);
    }
}
