// Decode and prefill attention over the KV cache with grouped KV heads, split along the
// sequence. Token t (position p = step[0] + t) attends to positions lo..=p, lo = p + 1 - window
// (clamped at 0) with a window, else 0; head h reads KV head h / (heads / kv_heads).
//
// attention_partial_f32: grid (splits, heads, m), one split covers ATTN_CHUNK positions.
// Scores scale * (q . k), optionally soft-capped c * tanh(s / c); writes the split's max score,
// its sum of exp(s - max) and its unnormalised sum of exp(s - max) * v to `part`
// `[m, heads, splits, hs + 2]`. A split past the token's range writes max = -inf, sum = 0.
// attention_combine_f32: grid (heads, m), merges the splits and rounds to the activation
// precision. The split count is fixed by the cache capacity, so a captured graph serves every
// sequence length.

#define ATTN_CHUNK 256

extern "C" __global__ void attention_partial_f32(const float* __restrict__ qkv, int ld,
                                                 const float* __restrict__ k_cache,
                                                 const float* __restrict__ v_cache,
                                                 const int* __restrict__ step,
                                                 float* __restrict__ part, int heads, int kv_heads,
                                                 int hs, int capacity, float scale, int window,
                                                 float softcap, int splits) {
    __shared__ float q[256];
    __shared__ float s[ATTN_CHUNK];
    __shared__ float scratch[32];
    int split = blockIdx.x, h = blockIdx.y, t = blockIdx.z;
    int p = step[0] + t;
    int lo = window > 0 ? max(0, p + 1 - window) : 0;
    int c0 = max(lo, split * ATTN_CHUNK);
    int c1 = min(p + 1, (split + 1) * ATTN_CHUNK);
    float* out = part + (((size_t)t * heads + h) * splits + split) * (hs + 2);
    if (c0 >= c1) {
        for (int d = threadIdx.x; d < hs; d += blockDim.x) out[2 + d] = 0.0f;
        if (threadIdx.x == 0) {
            out[0] = NEG_INF;
            out[1] = 0.0f;
        }
        return;
    }
    int kvh = h / (heads / kv_heads);
    const float* qh = qkv + (size_t)t * ld + (size_t)h * hs;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) q[d] = qh[d];
    __syncthreads();
    const float* kbase = k_cache + (size_t)kvh * capacity * hs;
    const float* vbase = v_cache + (size_t)kvh * capacity * hs;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int j = c0 + warp; j < c1; j += warps) {
        const float* k = kbase + (size_t)j * hs;
        float dot = 0.0f;
        for (int d = lane; d < hs; d += 32) dot = fmaf(q[d], k[d], dot);
        dot = warp_sum(dot) * scale;
        if (softcap > 0.0f) dot = softcap * tanhf(dot / softcap);
        if (lane == 0) s[j - c0] = dot;
    }
    __syncthreads();
    int n = c1 - c0;
    float mx = NEG_INF;
    for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, s[j]);
    mx = block_max(mx, scratch);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float e = expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    sum = block_sum(sum, scratch);
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float acc = 0.0f;
        const float* v = vbase + (size_t)c0 * hs + d;
        for (int j = 0; j < n; j++) acc = fmaf(s[j], v[(size_t)j * hs], acc);
        out[2 + d] = acc;
    }
    if (threadIdx.x == 0) {
        out[0] = mx;
        out[1] = sum;
    }
}

extern "C" __global__ void attention_combine_f32(const float* __restrict__ part,
                                                 float* __restrict__ out, int heads, int hs,
                                                 int splits, int act) {
    int h = blockIdx.x, t = blockIdx.y;
    const float* pp = part + ((size_t)t * heads + h) * splits * (hs + 2);
    float mx = NEG_INF;
    for (int i = 0; i < splits; i++) mx = fmaxf(mx, pp[(size_t)i * (hs + 2)]);
    float total = 0.0f;
    for (int i = 0; i < splits; i++) {
        float m = pp[(size_t)i * (hs + 2)];
        if (m != NEG_INF) total += pp[(size_t)i * (hs + 2) + 1] * expf(m - mx);
    }
    float inv = 1.0f / total;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < splits; i++) {
            float m = pp[(size_t)i * (hs + 2)];
            if (m != NEG_INF) acc += pp[(size_t)i * (hs + 2) + 2 + d] * expf(m - mx);
        }
        out[((size_t)t * heads + h) * hs + d] = round_act(acc * inv, act);
    }
}
