// Rotary position embedding on q and k inside the fused qkv buffer `[m, ld]` (q heads, then k
// heads, then v heads), and the append of the new keys and values to the KV cache
// `[kv_heads, capacity, head_size]` of element kind `kv` (prelude: kv_store). q and k are
// rounded to the activation precision before and after the rotation (the graph's attention
// takes and rotates half-precision values). Grid
// (m, heads + kv_heads); the token's position is step[0] + blockIdx.x. rotary_dim 0: no
// rotation.

extern "C" __global__ void rotary_append_f32(float* __restrict__ qkv, int ld,
                                             const int* __restrict__ step,
                                             const float* __restrict__ cos_cache,
                                             const float* __restrict__ sin_cache, int heads,
                                             int kv_heads, int hs, int rotary_dim, int interleaved,
                                             void* __restrict__ k_cache,
                                             void* __restrict__ v_cache, int capacity, int act,
                                             int kv) {
    pdl_enter();
    int t = blockIdx.x, hh = blockIdx.y;
    int pos = step[0] + t;
    float* v = qkv + (size_t)t * ld + (size_t)hh * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) v[i] = round_act(v[i], act);
    __syncthreads();
    int half = rotary_dim / 2;
    if (half > 0) {
        const float* c = cos_cache + (size_t)pos * half;
        const float* s = sin_cache + (size_t)pos * half;
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            int a = interleaved ? 2 * i : i;
            int b = interleaved ? 2 * i + 1 : i + half;
            float xa = v[a], xb = v[b];
            v[a] = round_act(xa * c[i] - xb * s[i], act);
            v[b] = round_act(xb * c[i] + xa * s[i], act);
        }
    }
    if (hh < heads) return;
    __syncthreads();
    int kh = hh - heads;
    size_t dst = ((size_t)kh * capacity + pos) * hs;
    const float* vv = qkv + (size_t)t * ld + (size_t)(heads + kv_heads + kh) * hs;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        kv_store(k_cache, dst + i, v[i], kv);
        kv_store(v_cache, dst + i, vv[i], kv);
    }
}
