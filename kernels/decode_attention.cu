// Decode attention for one new token, with the rotary embedding and the KV-cache append folded
// in (the separate rotary_append launch disappears from the decode step).
//
// attention_decode_f32: grid (gs, kv_heads * slices), DA_THREADS threads. Block row y serves KV
// head y / slices and up to DA_HEADS of its query heads (slice y % slices of the GQA group), so
// its keys and values are read once for all of them. The token sits at p = step[0] and attends
// to n = p + 1 - lo positions, lo = max(0, p + 1 - window) with a window, else 0.
//
// Split layout, a function of n and head_size only (never of the grid or of timing): positions
// go in chunks of C = da_chunk(hs); `per` consecutive chunks form a split, per chosen so that
// at most DA_MAX_SPLITS splits exist. Blocks with split >= splits exit at once, so one fixed
// grid (gs >= the splits of any n <= capacity) serves every position of a captured graph.
//
// Per chunk, the block stages K and V in shared memory (16-byte loads), scores every (head,
// key) pair, and updates a running max / sum / accumulator per head (online softmax in chunk
// order). With one split the block writes the output; otherwise it writes its partial
// (max, sum, unnormalised values) to `part` and the last block of the row to finish (a ticket
// in counts[y], reset after use) merges the partials in split order.
//
// q and k are rounded to the activation precision and then rotated exactly like
// rotary_append_f32 (rotary_dim 0: no rotation); the new key and value are written to the
// cache at position p by the block that owns p (slice 0 only) and taken from shared memory,
// not re-read, by that block.

#define DA_THREADS 256
#define DA_HEADS 8          // query heads per block (== warps per block)
#define DA_STAGE 4352       // floats of K (and of V) staged per chunk: C * (hs + 4) <= DA_STAGE
#define DA_MAX_C 64         // positions per chunk at most
#define DA_MAX_SPLITS 64    // splits per row at most (`gs` on the host is at most this)
#define DA_MAX_HS 256

// Positions per chunk for a head size (mirrored by `decode_chunk` in kernels.rs).
__device__ __forceinline__ int da_chunk(int hs) { return min(DA_MAX_C, DA_STAGE / (hs + 4)); }

// Value d of a head (hs values at src), rounded, then rotated with the pair partner.
__device__ __forceinline__ float rotated(const float* __restrict__ src, int d,
                                         const float* __restrict__ c,
                                         const float* __restrict__ s, int rotary_dim,
                                         int interleaved, int act) {
    float x = round_act(src[d], act);
    if (d >= rotary_dim) return x;
    int half = rotary_dim / 2;
    if (interleaved) {
        int i = d / 2;
        if ((d & 1) == 0) return x * c[i] - round_act(src[d + 1], act) * s[i];
        return x * c[i] + round_act(src[d - 1], act) * s[i];
    }
    if (d < half) return x * c[d] - round_act(src[d + half], act) * s[d];
    int i = d - half;
    return x * c[i] + round_act(src[i], act) * s[i];
}

__device__ __forceinline__ float4 fma4(float a, float4 b, float4 acc) {
    acc.x = fmaf(a, b.x, acc.x);
    acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z);
    acc.w = fmaf(a, b.w, acc.w);
    return acc;
}

// Stages keys and values of positions c0 .. c0 + cl (except p) as rows `stride` apart.
__device__ __forceinline__ void stage_chunk(float* ks, float* vs, const float* kbase,
                                            const float* vbase, int c0, int cl, int p,
                                            int units, int stride, int hs) {
#pragma unroll 4
    for (int i = threadIdx.x; i < cl * units; i += DA_THREADS) {
        int j = i / units, u = i - j * units, pos = c0 + j;
        if (pos == p) continue;
        *(float4*)(ks + j * stride + 4 * u) = *(const float4*)(kbase + (size_t)pos * hs + 4 * u);
        *(float4*)(vs + j * stride + 4 * u) = *(const float4*)(vbase + (size_t)pos * hs + 4 * u);
    }
}

extern "C" __global__ void __launch_bounds__(DA_THREADS)
    attention_decode_f32(const float* __restrict__ qkv, const int* __restrict__ step,
                         const float* __restrict__ cos_cache, const float* __restrict__ sin_cache,
                         int rotary_dim, int interleaved, float* k_cache, float* v_cache,
                         int capacity, float* __restrict__ part, int* __restrict__ counts,
                         float* __restrict__ out, int heads, int kv_heads, int hs, float scale,
                         int window, float softcap, int act) {
    __shared__ __align__(16) float ks[DA_STAGE];
    __shared__ __align__(16) float vs[DA_STAGE];
    __shared__ __align__(16) float qs[DA_HEADS * DA_MAX_HS];
    __shared__ __align__(16) float knew[DA_MAX_HS];
    __shared__ __align__(16) float vnew[DA_MAX_HS];
    __shared__ float ss[DA_HEADS * DA_MAX_C];  // scores, then weights; merge: split weights
    __shared__ float mrun[DA_HEADS], lrun[DA_HEADS], alpha[DA_HEADS];
    __shared__ int last;

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int split = blockIdx.x, row = blockIdx.y;
    int g = heads / kv_heads, slices = (g + DA_HEADS - 1) / DA_HEADS;
    int kvh = row / slices, slice = row % slices;
    int h0 = kvh * g + slice * DA_HEADS;
    int hg = min(DA_HEADS, g - slice * DA_HEADS);
    // The step scalars are copied in before the pass and no kernel writes them.
    pdl_trigger();
    int p = step[0];
    if (p < 0 || p >= capacity) {
        pdl_wait();
        return;
    }
    int lo = window > 0 ? max(0, p + 1 - window) : 0;
    int n = p + 1 - lo;
    int C = da_chunk(hs);
    int chunks = (n + C - 1) / C;
    int per = (chunks + DA_MAX_SPLITS - 1) / DA_MAX_SPLITS;
    int splits = (chunks + per - 1) / per;
    if (split >= splits) {
        pdl_wait();
        return;
    }
    int s0 = lo + split * per * C, s1 = min(p + 1, s0 + per * C);
    int units = hs / 4, stride = hs + 4;
    bool owner = split == splits - 1;  // the split holding position p
    const float* kbase = k_cache + (size_t)kvh * capacity * hs;
    const float* vbase = v_cache + (size_t)kvh * capacity * hs;
    // The first chunk's cached positions (all before p) were written by earlier steps, never
    // by the kernel before this one: stage them before waiting for it (position p, written
    // below, is staged after).
    stage_chunk(ks, vs, kbase, vbase, s0, min(C, s1 - s0), p, units, stride, hs);
    pdl_wait();

    // Rotated queries of the slice's heads; the new key and value when this split holds p.
    const float* c = cos_cache + (size_t)p * (rotary_dim / 2);
    const float* s = sin_cache + (size_t)p * (rotary_dim / 2);
    for (int i = tid; i < hg * hs; i += DA_THREADS) {
        int hl = i / hs, d = i - hl * hs;
        qs[hl * hs + d] = rotated(qkv + (size_t)(h0 + hl) * hs, d, c, s, rotary_dim,
                                  interleaved, act);
    }
    if (owner) {
        const float* kh = qkv + (size_t)(heads + kvh) * hs;
        const float* vh = qkv + (size_t)(heads + kv_heads + kvh) * hs;
        size_t dst = ((size_t)kvh * capacity + p) * hs;
        for (int d = tid; d < hs; d += DA_THREADS) {
            float kd = rotated(kh, d, c, s, rotary_dim, interleaved, act), vd = vh[d];
            knew[d] = kd;
            vnew[d] = vd;
            if (slice == 0) {
                k_cache[dst + d] = kd;
                v_cache[dst + d] = vd;
            }
        }
    }
    if (tid < DA_HEADS) {
        mrun[tid] = NEG_INF;
        lrun[tid] = 0.0f;
    }
    // Up to two float4 outputs (head, unit) per thread: hg * units <= 8 * 64 = 2 * DA_THREADS.
    float4 acc[2];
    acc[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    acc[1] = acc[0];

    for (int c0 = s0; c0 < s1; c0 += C) {
        int cl = min(C, s1 - c0);
        __syncthreads();  // the previous chunk's readers are done (and q, knew are written)
        if (c0 != s0) stage_chunk(ks, vs, kbase, vbase, c0, cl, p, units, stride, hs);
        if (p >= c0 && p < c0 + cl) {
            for (int u = tid; u < units; u += DA_THREADS) {
                *(float4*)(ks + (p - c0) * stride + 4 * u) = ((const float4*)knew)[u];
                *(float4*)(vs + (p - c0) * stride + 4 * u) = ((const float4*)vnew)[u];
            }
        }
        __syncthreads();
        // Scores: one (head, key) pair per thread; rows padded by 4 floats (no bank conflicts).
        for (int i = tid; i < hg * cl; i += DA_THREADS) {
            int hl = i / cl, j = i - hl * cl;
            const float4* qr = (const float4*)(qs + hl * hs);
            const float4* kr = (const float4*)(ks + j * stride);
            // Four independent sums (one per lane of the float4), added in a fixed order.
            float4 dot = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
            for (int u = 0; u < units; u++) {
                float4 q = qr[u], k = kr[u];
                dot.x = fmaf(q.x, k.x, dot.x);
                dot.y = fmaf(q.y, k.y, dot.y);
                dot.z = fmaf(q.z, k.z, dot.z);
                dot.w = fmaf(q.w, k.w, dot.w);
            }
            float sc = ((dot.x + dot.y) + (dot.z + dot.w)) * scale;
            if (softcap > 0.0f) sc = softcap * tanhf(sc / softcap);
            ss[hl * DA_MAX_C + j] = sc;
        }
        __syncthreads();
        // Online softmax, one warp per head.
        if (warp < hg) {
            float* sh = ss + warp * DA_MAX_C;
            float mx = NEG_INF;
            for (int j = lane; j < cl; j += 32) mx = fmaxf(mx, sh[j]);
            mx = warp_max(mx);
            float mnew = fmaxf(mrun[warp], mx);
            float sum = 0.0f;
            for (int j = lane; j < cl; j += 32) {
                float e = expf(sh[j] - mnew);
                sh[j] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            __syncwarp();
            if (lane == 0) {
                float a = mrun[warp] == NEG_INF ? 0.0f : expf(mrun[warp] - mnew);
                alpha[warp] = a;
                lrun[warp] = lrun[warp] * a + sum;
                mrun[warp] = mnew;
            }
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int o = tid + r * DA_THREADS;
            if (o >= hg * units) break;
            int hl = o / units, u = o - hl * units;
            float a = alpha[hl];
            float4 x = make_float4(acc[r].x * a, acc[r].y * a, acc[r].z * a, acc[r].w * a);
            const float* sh = ss + hl * DA_MAX_C;
#pragma unroll 4
            for (int j = 0; j < cl; j++)
                x = fma4(sh[j], *(const float4*)(vs + j * stride + 4 * u), x);
            acc[r] = x;
        }
    }
    __syncthreads();

    if (splits == 1) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int o = tid + r * DA_THREADS;
            if (o >= hg * units) break;
            int hl = o / units, u = o - hl * units;
            float inv = 1.0f / lrun[hl];
            float* dst = out + (size_t)(h0 + hl) * hs + 4 * u;
            dst[0] = round_act(acc[r].x * inv, act);
            dst[1] = round_act(acc[r].y * inv, act);
            dst[2] = round_act(acc[r].z * inv, act);
            dst[3] = round_act(acc[r].w * inv, act);
        }
        return;
    }

    // Partial `[heads, gs, hs + 2]`: max, sum, unnormalised values.
    size_t pstride = (size_t)gridDim.x * (hs + 2);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int o = tid + r * DA_THREADS;
        if (o >= hg * units) break;
        int hl = o / units, u = o - hl * units;
        float* pp = part + (size_t)(h0 + hl) * pstride + (size_t)split * (hs + 2) + 2 + 4 * u;
        pp[0] = acc[r].x;
        pp[1] = acc[r].y;
        pp[2] = acc[r].z;
        pp[3] = acc[r].w;
    }
    if (tid < hg) {
        float* pp = part + (size_t)(h0 + tid) * pstride + (size_t)split * (hs + 2);
        pp[0] = mrun[tid];
        pp[1] = lrun[tid];
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(counts + row, 1) == splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Merge in split order: per head the weights exp(m_s - M) and 1 / sum_s l_s exp(m_s - M).
    if (warp < hg) {
        const float* ph = part + (size_t)(h0 + warp) * pstride;
        float m = NEG_INF;
        for (int i = lane; i < splits; i += 32)
            m = fmaxf(m, __ldcg(ph + (size_t)i * (hs + 2)));
        m = warp_max(m);
        float l = 0.0f;
        for (int i = lane; i < splits; i += 32) {
            float w = expf(__ldcg(ph + (size_t)i * (hs + 2)) - m);
            ss[warp * DA_MAX_C + i] = w;
            l += __ldcg(ph + (size_t)i * (hs + 2) + 1) * w;
        }
        l = warp_sum(l);
        if (lane == 0) alpha[warp] = 1.0f / l;
    }
    __syncthreads();
    for (int i = tid; i < hg * hs; i += DA_THREADS) {
        int hl = i / hs, d = i - hl * hs;
        const float* ph = part + (size_t)(h0 + hl) * pstride + 2 + d;
        const float* w = ss + hl * DA_MAX_C;
        float a = 0.0f;
        for (int sp = 0; sp < splits; sp++)
            a = fmaf(__ldcg(ph + (size_t)sp * (hs + 2)), w[sp], a);
        out[(size_t)(h0 + hl) * hs + d] = round_act(a * alpha[hl], act);
    }
    if (tid == 0) counts[row] = 0;
}
