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
    int lo = attention_lo(p, window);
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

// Merges the splits of one (token, head) into `dst`, values first, first + stride, ... of the
// head taken by this thread (the block's threads, or a warp's lanes), PER of them at a time so
// that their loads of a split go out together; where `half` is not null the same values rounded
// to f16 (half_bf 0) or bf16 (1) go there too. Each value sums its splits in split order. P is
// `const volatile float*` where other blocks of the same launch wrote the partials.
template <int PER, typename P>
__device__ __forceinline__ void combine(P pp, float* __restrict__ dst, int hs, int splits,
                                        int act, u16* __restrict__ half, int half_bf, int first,
                                        int stride) {
    float mx = NEG_INF;
    for (int i = 0; i < splits; i++) mx = fmaxf(mx, pp[(size_t)i * (hs + 2)]);
    float total = 0.0f;
    for (int i = 0; i < splits; i++) {
        float m = pp[(size_t)i * (hs + 2)];
        if (m != NEG_INF) total += pp[(size_t)i * (hs + 2) + 1] * expf(m - mx);
    }
    float inv = 1.0f / total;
    for (int d0 = first; d0 < hs; d0 += PER * stride) {
        float acc[PER];
#pragma unroll
        for (int j = 0; j < PER; j++) acc[j] = 0.0f;
        for (int i = 0; i < splits; i++) {
            float m = pp[(size_t)i * (hs + 2)];
            if (m == NEG_INF) continue;
            float e = expf(m - mx);
#pragma unroll
            for (int j = 0; j < PER; j++) {
                int d = d0 + j * stride;
                if (d < hs) acc[j] += pp[(size_t)i * (hs + 2) + 2 + d] * e;
            }
        }
#pragma unroll
        for (int j = 0; j < PER; j++) {
            int d = d0 + j * stride;
            if (d >= hs) break;
            float y = round_act(acc[j] * inv, act);
            dst[d] = y;
            if (half) half[d] = (u16)half_bits(y, half_bf);
        }
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
    const volatile float* pp = part + ((size_t)t * heads + h) * splits * (hs + 2);
    combine<1>(pp, out + ((size_t)t * heads + h) * hs, hs, splits, act, nullptr, 0, threadIdx.x,
               blockDim.x);
    if (threadIdx.x == 0) *count = 0;
}

// ---- Prompt attention tiled over queries ----------------------------------------------------
//
// attention_tiled_f32: grid (splits, kv_heads, ceil(m / AT_TOKENS)), AT_WARPS warps, dynamic
// shared memory at_shared_floats(hs) floats. A block takes the ATTN_CHUNK positions of split s
// of one KV head and stages their keys and values once (as f32) for every query of AT_TOKENS
// tokens and every query head of the KV head's group: the split kernel above read them once per
// query head and token. Each warp takes (token, head) pairs in turn: lane j scores key j (its K
// row padded to hs + 1 floats, so the lanes' reads fall in distinct banks), the warp's softmax
// over the split, then P.V with lanes over the head dimension. It writes the pair's partial (max,
// sum, unnormalised values) at [t, h, s] in `part` ([m, heads, splits, hs + 2], the split
// kernel's layout), only for the splits that hold keys of the token's range; attention_merge_f32
// merges those in split order. No tickets: the merge is its own launch.
#define AT_TOKENS 16
#define AT_WARPS 8

// Floats of dynamic shared memory: K rows (hs + 1 each), V rows, each warp's q row and weights.
__device__ __forceinline__ int at_shared_floats(int hs) {
    return ATTN_CHUNK * (2 * hs + 1) + AT_WARPS * (hs + ATTN_CHUNK);
}

extern "C" __global__ void __launch_bounds__(AT_WARPS * 32)
    attention_tiled_f32(const float* __restrict__ qkv, int ld, const void* __restrict__ k_cache,
                        const void* __restrict__ v_cache, const int* __restrict__ step,
                        float* __restrict__ part, int heads, int kv_heads, int hs, int capacity,
                        float scale, int window, float softcap, int splits, int m, int kv) {
    extern __shared__ __align__(16) float at_stage[];
    pdl_enter();
    int s = blockIdx.x, g = blockIdx.y;
    int group = heads / kv_heads;
    int t0 = blockIdx.z * AT_TOKENS, t1 = min(m, t0 + AT_TOKENS);
    int p0 = step[0];
    int c0 = s * ATTN_CHUNK, c1 = min(capacity, c0 + ATTN_CHUNK);
    int p_last = p0 + t1 - 1;
    // No token of the tile attends to a key of this split.
    if (t0 >= t1 || c0 > p_last || c1 - 1 < attention_lo(p0 + t0, window)) return;
    int rows = min(c1, p_last + 1) - c0;
    float* ks = at_stage;                            // [ATTN_CHUNK][hs + 1]
    float* vs = ks + ATTN_CHUNK * (hs + 1);          // [ATTN_CHUNK][hs]
    float* qw = vs + ATTN_CHUNK * hs;                // [AT_WARPS][hs]
    float* ew = qw + AT_WARPS * hs;                  // [AT_WARPS][ATTN_CHUNK]
    size_t base = ((size_t)g * capacity + c0) * hs;
    for (int i = threadIdx.x; i < rows * hs; i += blockDim.x) {
        int j = i / hs, d = i - j * hs;
        ks[j * (hs + 1) + d] = kv_load(k_cache, base + i, kv);
        vs[i] = kv_load(v_cache, base + i, kv);
    }
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* q = qw + warp * hs;
    float* e_w = ew + warp * ATTN_CHUNK;
    int pairs = (t1 - t0) * group;
    for (int i = warp; i < pairs; i += AT_WARPS) {
        int t = t0 + i / group, h = g * group + i % group;
        int p = p0 + t;
        int k0 = max(c0, attention_lo(p, window)), k1 = min(c1, p + 1);
        if (k0 >= k1) continue;  // the warp skips the pair as a whole
        const float* qh = qkv + (size_t)t * ld + (size_t)h * hs;
        for (int d = lane; d < hs; d += 32) q[d] = qh[d];
        __syncwarp();
        int key = c0 + lane;
        bool valid = key >= k0 && key < k1;
        float sc = NEG_INF;
        if (valid) {
            const float* kr = ks + lane * (hs + 1);
            float dot = 0.0f;
            for (int d = 0; d < hs; d++) dot = fmaf(q[d], kr[d], dot);
            sc = dot * scale;
            if (softcap > 0.0f) sc = softcap * tanhf(sc / softcap);
        }
        float mx = warp_max(sc);
        float e = valid ? expf(sc - mx) : 0.0f;
        float l = warp_sum(e);
        e_w[lane] = e;
        __syncwarp();
        float* out = part + (((size_t)t * heads + h) * splits + s) * (hs + 2);
        for (int d = lane; d < hs; d += 32) {
            float acc = 0.0f;
            for (int j = k0 - c0; j < k1 - c0; j++) acc = fmaf(e_w[j], vs[j * hs + d], acc);
            out[2 + d] = acc;
        }
        if (lane == 0) {
            out[0] = mx;
            out[1] = l;
        }
        __syncwarp();  // q and the weights are read: the next pair may overwrite them
    }
}

// Merges, for each (token t, head h) row of the pass (a warp a row, MERGE_WARPS rows a block:
// grid ceil(m * heads / MERGE_WARPS)), the partials of the splits (of `span` positions each; 0:
// prompt_span's, of `splits` spans) that hold keys of the token's range, in split order, into
// out `[m, heads * hs]` rounded to the activations' precision; where `half` is not null, also
// into it rounded to f16 (half_bf 0) or bf16 (1), for the GEMM after it.
#define MERGE_WARPS 4
extern "C" __global__ void __launch_bounds__(MERGE_WARPS * 32)
    attention_merge_f32(const int* __restrict__ step, const float* __restrict__ part,
                        float* __restrict__ out, int heads, int hs, int splits, int span,
                        int window, int act, u16* __restrict__ half, int half_bf, int m) {
    pdl_enter();
    int row = blockIdx.x * MERGE_WARPS + (threadIdx.x >> 5);
    if (row >= m * heads) return;
    int t = row / heads;
    int p = step[0] + t;
    if (span == 0) span = prompt_span(step, splits);
    int s0 = attention_lo(p, window) / span, s1 = p / span;
    // Every split s0 .. s1 holds a key of the token's range, so none has a max of NEG_INF.
    const float* pp = part + ((size_t)row * splits + s0) * (hs + 2);
    size_t at = (size_t)row * hs;
    combine<4>(pp, out + at, hs, s1 - s0 + 1, act, half ? half + at : nullptr, half_bf,
               threadIdx.x & 31, 32);
}
