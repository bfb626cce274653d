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
