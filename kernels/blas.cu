// Prompt linear layers through cuBLAS (src/cuda/blas.rs): the cast of the activations to the
// weight type that a half-precision GEMM reads, and the epilogue of a GEMM written to a scratch
// buffer, the same as the GEMV kernels' (linear_store and split_reduce_store in prelude.cuh).

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
