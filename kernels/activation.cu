// Feed-forward activations, in f32 like the CPU decoder's MLP block.
// gated_f32: h[r, i] = act(g[r, i]) * u[r, i] over gu `[m, 2w]` (gate | up) into h `[m, w]`.
// activate_f32: x = act(x) in place. act: 0 SiLU, 1 GELU (erf), 2 GELU (tanh approximation).

extern "C" __global__ void gated_f32(const float* __restrict__ gu, float* __restrict__ h, int w,
                                     int total, int kind) {
    pdl_enter();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int r = i / w, c = i - r * w;
        const float* row = gu + (size_t)r * 2 * w;
        h[i] = activation(row[c], kind) * row[w + c];
    }
}

extern "C" __global__ void activate_f32(float* __restrict__ x, int total, int kind) {
    pdl_enter();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x)
        x[i] = activation(x[i], kind);
}
