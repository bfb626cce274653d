// Prompt linear layers through cuBLAS (src/cuda/blas.rs): the cast of the activations to the
// weight type that a half-precision GEMM reads, the epilogue of a GEMM written to a scratch
// buffer, the same as the GEMV kernels' (linear_store and split_reduce_store in prelude.cuh),
// and the dequantisation of 4-bit (MatMulNBits) weights that a GEMM reads.

// out [m, k] (rows k apart) = x [m, k] (rows ldx apart) rounded to nearest even in f16 (bf 0)
// or bf16 (bf 1).
__device__ __forceinline__ void cast_rows(const float* x, int ldx, u16* out, int m, int k,
                                          bool bf) {
    size_t total = (size_t)m * k;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / k, c = i % k;
        float v = x[r * ldx + c];
        out[i] = bf ? f32_to_bf16(v) : f32_to_f16(v);
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
// with no rounding, as split_reduce_store.
extern "C" __global__ void gemm_epilogue_f32(const float* acc, const float* bias, float* y,
                                             int ldy, int m, int n, int act, int glu) {
    pdl_enter();
    int cols = glu >= 0 ? n / 2 : n;
    size_t total = (size_t)m * cols;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / cols;
        int c = (int)(i % cols);
        const float* a = acc + r * n;
        float* out = y + r * ldy + c;
        if (glu >= 0) {
            float g = a[2 * c], u = a[2 * c + 1];
            if (bias) {
                g += bias[2 * c];
                u += bias[2 * c + 1];
            }
            *out = activation_outlined(g, glu) * u;
        } else {
            linear_store(a[c], bias, c, act, out);
        }
    }
}

// The weight of a MatMulNBits layer (CompFp32) for a prompt GEMM: out [rows, k] (row-major,
// rows k apart) holds columns first .. first + rows of packed [n, nb, bs/2] (low nibble first),
// f32 scales [n, nb] and f32 zero points [n, nb] (null: 8), each w = (q - zp) * scale in f32 as
// the GEMV kernels compute it, then stored as f32 (ty 0) or rounded to nearest even in f16
// (ty 1) or bf16 (ty 2). One thread per packed byte (two values; bs is even, so both lie in one
// block); padding past k in the last block is not written.
__device__ __forceinline__ void dequant_store(void* out, size_t i, float w, int ty) {
    if (ty == 0)
        ((float*)out)[i] = w;
    else
        ((u16*)out)[i] = ty == 2 ? f32_to_bf16(w) : f32_to_f16(w);
}

__device__ __forceinline__ void dequant_int4(const u8* packed, const float* scales,
                                             const float* zp, void* out, int first, int rows,
                                             int k, int bs, int ty) {
    int nb = (k + bs - 1) / bs;
    int half = (k + 1) / 2;
    size_t row_bytes = (size_t)nb * (bs / 2);
    size_t total = (size_t)rows * half;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        size_t r = i / half;
        int b = (int)(i % half), c = 2 * b;
        size_t col = (size_t)first + r;
        u8 byte = packed[col * row_bytes + b];
        size_t at = col * nb + c / bs;
        float s = scales[at], z = zp ? zp[at] : 8.0f;
        dequant_store(out, r * k + c, ((float)(byte & 15u) - z) * s, ty);
        if (c + 1 < k) dequant_store(out, r * k + c + 1, ((float)(byte >> 4) - z) * s, ty);
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
