// Decode and prefill attention over the KV cache with grouped KV heads, split along the
// sequence. Token t (position p = step[0] + t) attends to positions lo..=p, lo = p + 1 - window
// (clamped at 0) with a window, else 0; head h reads KV head h / (heads / kv_heads). The cache
// holds elements of kind `kv` (prelude: kv_load).
//
// attention_f32: grid (splits, heads, m), one split covers ATTN_CHUNK positions, one block of
// ATTN_WARPS warps.
// Scores scale * (q . k), optionally soft-capped c * tanh(s / c); writes the split's max score,
// its sum of exp(s - max) and its unnormalised sum of exp(s - max) * v to `part`
// `[m, heads, splits, hs + 2]`. A split past the token's range writes max = -inf, sum = 0.
// The last split block of a (token, head) merges the splits and rounds to the activation
// precision. The split count is fixed by the cache capacity, so a captured graph serves every
// sequence length.

#define ATTN_CHUNK 32
#define ATTN_WARPS 8
#define ATTN_KEYS (ATTN_CHUNK / ATTN_WARPS)
#define ATTN_DIMS 8  // head_size <= 32 * ATTN_DIMS

// A block's shared arrays (declared once in the kernel, whichever cache kind it reads).
struct AttnShared {
    float s[ATTN_CHUNK];
    float wmax[ATTN_WARPS], wsum[ATTN_WARPS];
    float wacc[ATTN_WARPS][32 * ATTN_DIMS];
};

// Each warp scores its ATTN_KEYS keys (lanes over the head dimension, four keys at a time so
// their loads overlap), then accumulates exp(s - max_w) * v over them with lanes over the head
// dimension; the block merges its warps. No score or value array depends on the sequence
// length, so any position count runs with the same shared memory. KV: the cache's element kind.
template <int KV>
__device__ __forceinline__ void attention_split(AttnShared& sh,
                                                const float* __restrict__ qkv, int ld,
                                                const void* __restrict__ k_cache,
                                                const void* __restrict__ v_cache,
                                                const int* __restrict__ step,
                                                float* __restrict__ part, int heads,
                                                int kv_heads, int hs, int capacity, float scale,
                                                int window, float softcap, int splits) {
    float* s = sh.s;
    float* wmax = sh.wmax;
    float* wsum = sh.wsum;
    float(*wacc)[32 * ATTN_DIMS] = sh.wacc;
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
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int kvh = h / (heads / kv_heads);
    const float* qh = qkv + (size_t)t * ld + (size_t)h * hs;
    float q[ATTN_DIMS];
#pragma unroll
    for (int i = 0; i < ATTN_DIMS; i++) {
        int d = lane + 32 * i;
        q[i] = d < hs ? qh[d] : 0.0f;
    }
    size_t base = (size_t)kvh * capacity * hs;
    int w0 = c0 + warp * ATTN_KEYS, w1 = min(c1, w0 + ATTN_KEYS);
    for (int j = w0; j < w1; j += 4) {
        float dot[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (j + u < w1) {
                size_t k = base + (size_t)(j + u) * hs;
#pragma unroll
                for (int i = 0; i < ATTN_DIMS; i++) {
                    int d = lane + 32 * i;
                    if (d < hs) dot[u] = fmaf(q[i], kv_load(k_cache, k + d, KV), dot[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float v = warp_sum(dot[u]) * scale;
            if (softcap > 0.0f) v = softcap * tanhf(v / softcap);
            if (lane == 0 && j + u < w1) s[j + u - c0] = v;
        }
    }
    __syncwarp();
    float mx = NEG_INF;
    for (int j = w0 + lane; j < w1; j += 32) mx = fmaxf(mx, s[j - c0]);
    mx = warp_max(mx);
    float acc[ATTN_DIMS];
#pragma unroll
    for (int i = 0; i < ATTN_DIMS; i++) acc[i] = 0.0f;
    float sum = 0.0f;
    // Unrolled so that several keys' value loads are in flight at once.
#pragma unroll 8
    for (int j = w0; j < w1; j++) {
        float e = w0 < w1 ? expf(s[j - c0] - mx) : 0.0f;
        sum += e;
        size_t v = base + (size_t)j * hs;
#pragma unroll
        for (int i = 0; i < ATTN_DIMS; i++) {
            int d = lane + 32 * i;
            if (d < hs) acc[i] = fmaf(e, kv_load(v_cache, v + d, KV), acc[i]);
        }
    }
    if (lane == 0) {
        wmax[warp] = mx;
        wsum[warp] = sum;
    }
#pragma unroll
    for (int i = 0; i < ATTN_DIMS; i++) wacc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float m = NEG_INF;
    for (int w = 0; w < ATTN_WARPS; w++) m = fmaxf(m, wmax[w]);
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < ATTN_WARPS; w++)
            if (wmax[w] != NEG_INF) a += wacc[w][d] * expf(wmax[w] - m);
        out[2 + d] = a;
    }
    if (threadIdx.x == 0) {
        float l = 0.0f;
        for (int w = 0; w < ATTN_WARPS; w++)
            if (wmax[w] != NEG_INF) l += wsum[w] * expf(wmax[w] - m);
        out[0] = m;
        out[1] = l;
    }
}

// Merges the splits of one (token, head) into `dst` (all threads of the block, over d).
__device__ __forceinline__ void combine(const volatile float* pp, float* __restrict__ dst, int hs,
                                        int splits, int act) {
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
        dst[d] = round_act(acc * inv, act);
    }
}

// One launch: every split block writes its partial, and the last of a (token, head)'s splits
// to finish (a ticket in `counts`, reset after use) merges them into out `[m, heads * hs]`,
// always in split order, so the result does not depend on which block came last.
extern "C" __global__ void attention_f32(const float* __restrict__ qkv, int ld,
                                         const void* __restrict__ k_cache,
                                         const void* __restrict__ v_cache,
                                         const int* __restrict__ step, float* __restrict__ part,
                                         int heads, int kv_heads, int hs, int capacity,
                                         float scale, int window, float softcap, int splits,
                                         float* __restrict__ out, int* __restrict__ counts,
                                         int act, int kv) {
    pdl_enter();
    __shared__ int last;
    __shared__ AttnShared sh;
    int h = blockIdx.y, t = blockIdx.z;
    if (kv == 0)
        attention_split<0>(sh, qkv, ld, k_cache, v_cache, step, part, heads, kv_heads, hs, capacity,
                           scale, window, softcap, splits);
    else if (kv == 1)
        attention_split<1>(sh, qkv, ld, k_cache, v_cache, step, part, heads, kv_heads, hs, capacity,
                           scale, window, softcap, splits);
    else
        attention_split<2>(sh, qkv, ld, k_cache, v_cache, step, part, heads, kv_heads, hs, capacity,
                           scale, window, softcap, splits);
    __threadfence();
    __syncthreads();
    int* count = counts + (size_t)t * heads + h;
    if (threadIdx.x == 0) last = atomicAdd(count, 1) == splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const float* pp = part + ((size_t)t * heads + h) * splits * (hs + 2);
    combine(pp, out + ((size_t)t * heads + h) * hs, hs, splits, act);
    if (threadIdx.x == 0) *count = 0;
}
