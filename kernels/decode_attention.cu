// Decode attention for one new token, with the rotary embedding and the KV-cache append folded
// in (the separate rotary_append launch disappears from the decode step).
//
// attention_decode_f32 (an f32 KV cache), attention_decode_kv_f16, attention_decode_kv_bf16 (a
// cache of that kind): grid (gs, kv_heads * slices), DA_THREADS threads, `ring` * 64 * hs
// cache elements of dynamic shared memory, launched in clusters of DA_GROUP blocks along x when
// `cluster` is 1 (sm_90). `trigger` says when a block lets the kernel after it launch (PDL):
// 0 at its start, 1 once its wait has returned, 2 once its warps are done with their keys (a
// dependent launched early fetches its weights meanwhile, which can queue ahead of this
// kernel's key and value reads; the host's rule: kernels/decode.rs). Block row y serves KV head y / slices and up to da_heads(hs) of its
// query heads (slice y % slices of the GQA group), so its keys and values are read once for
// all of them. The token sits at p = step[0] and attends to n = p + 1 - lo positions,
// lo = max(0, p + 1 - window) with a window, else 0.
//
// Why this shape (the kernel is pure latency: ~0.35 MB of KV at 190 positions, a handful of
// blocks): the old kernel ran, per 32-position chunk, stage / scores / softmax / P.V phases
// split by four block barriers, each phase reading the staged K or V once per query head from
// shared memory (~2,000 shared-memory wavefronts per chunk), then a partial -> ticket ->
// merge round trip whose merge read the partials one dependent L2 load at a time. Here:
// - Layout (da_layout, a function of n only): a block pass covers DA_PASS = 32 positions,
//   DA_KEYS = 4 per warp; a split (one block) takes T passes, T = 1 while 8 splits cover n,
//   2 up to 512 positions, more only past DA_MAX_SPLITS splits. Splits form groups of
//   DA_GROUP = 8 consecutive splits. Up to 512 positions there is one group.
// - Each warp copies its own keys and values (cp.async, 16 bytes a lane) into its own ring
//   slots, the first `ring` passes before griddepcontrol.wait (the cached positions < p were
//   written by earlier steps), so no block barrier guards the stage.
// - Scores, one warp per 4 keys x all the block's query heads, lanes over the head dimension
//   (q in registers, each K row read once from shared memory for every head): the 32 / U
//   (head, key) partial dot products (U = 1, or 2 float4 units per lane past head size 128)
//   are summed across lanes by a reduce-scatter butterfly (31 or 16 shuffles), leaving lane
//   l the score of pair l / U; online softmax over segments of 4 pairs;
//   P.V with lanes over the head dimension (each V row read once, no cross-lane sum).
// - The block merges its 8 warps in shared memory (one barrier), then the splits of a group
//   merge without a global round trip: in a cluster (sm_90) every block reads the group's
//   block partials through distributed shared memory (mapa + ld.shared::cluster) between two
//   cluster barriers, each block merging 1/8 of the (head, value) pairs. Without clusters
//   (older GPUs, GENAI_BRIDGE_DECODE_CLUSTER=0) the splits write partials and the last block
//   (atomic ticket) merges each group, in split order, with the same arithmetic: the results
//   are bitwise equal either way. Past 512 positions (more than one group) the groups' results
//   go through partials and a ticket again (at most 8 of them, loaded in one round).
// - One split (n <= 32) writes the output itself.
// Not taken: one block per KV head for all positions (190 positions x 6 heads x 128 is ~290k
// FMAs, ~1.2 us on one SM against ~0.25 us spread over 6); a warp per query head (each K row
// then read once per head again); 16-block clusters (non-portable, may not fit every GPC).
// Every summation order (lane partial sums, the butterfly, the 4-lane segments, warp order,
// split order within a group, group order) is fixed by (n, hs, heads): never by timing, the
// grid, the ring depth or the cluster switch. Blocks past the needed splits exit at once
// (whole clusters at a time: a cluster with any needed split keeps all 8 blocks for its two
// barriers), so one fixed grid (gs >= the splits of any n <= capacity) serves every position
// of a captured graph.
//
// q and k are rounded to the activation precision, rotated and rounded again exactly like
// rotary_append_f32 (rotary_dim 0: no rotation); the new key and value are written to the
// cache at position p by the block that owns p (slice 0 only) and taken from shared memory,
// not re-read, by every block holding p (one per head slice).
//
// The cache's elements are of the entry's kind KV (prelude: kv_store; f32 or the activations'
// half precision). The ring slots hold the cached rows as they are in the cache (16-byte copies:
// hs a multiple of 4 for f32, of 8 for the half kinds), the token's key and value are kept in
// shared memory in the same kind, and da_warp, compiled per kind, widens each lane's four
// values to f32 as it reads them: a half-precision cache holds the f32 cache's values (every
// one written is rounded to the activations' precision), so the results are the same bits.

#define DA_THREADS 256
#define DA_WARPS 8
#define DA_HEADS 2          // query heads per block at most (da_heads)
#define DA_KEYS 4           // keys per warp per pass
#define DA_PASS 32          // positions per block pass: DA_WARPS * DA_KEYS
#define DA_GROUP 8          // splits per merge group (the cluster width)
#define DA_MAX_SPLITS 64    // splits per row at most (`gs` on the host is at most this)
#define DA_STAGED 2         // passes per split while the splits number at most DA_MAX_SPLITS
#define DA_MAX_HS 256
#define DA_VALUES 1024      // query heads per block * head size at most
// One thread per query value of a block and per value of the new key (the rotation).
static_assert(DA_HEADS * 128 <= DA_THREADS && DA_MAX_HS <= DA_THREADS, "rotation threads");
// Per warp: the tile's pair weights, then per-head alphas; rows padded to 16 bytes (the
// weights are read as float4).
#define DA_PW ((DA_PASS + DA_HEADS + 3) / 4 * 4)

// Query heads one block serves (mirrored by `decode_heads` in kernels/decode.rs): two float4
// units per lane past head size 128 halve them, keeping q and the accumulators in registers.
__device__ __forceinline__ int da_heads(int hs) { return hs > 128 ? DA_HEADS / 2 : DA_HEADS; }

// Passes per split, splits and groups for n attended positions (mirrored by `decode_layout`).
struct DaLayout {
    int passes, splits, groups;
};

__device__ __forceinline__ DaLayout da_layout(int n) {
    int pt = (n + DA_PASS - 1) / DA_PASS;
    int t = min((pt + DA_GROUP - 1) / DA_GROUP, DA_STAGED);
    t = max(t, (pt + DA_MAX_SPLITS - 1) / DA_MAX_SPLITS);
    // t is 1 or 2 up to DA_MAX_SPLITS * DA_STAGED passes: no division there.
    int s = t == 1 ? pt : t == 2 ? (pt + 1) >> 1 : (pt + t - 1) / t;
    DaLayout l = {t, s, (s + DA_GROUP - 1) / DA_GROUP};
    return l;
}

// What rotating value d of a head takes besides the head's values: the index of its pair
// partner, the cos and sin of the pair (c, s rows at the position) and whether the partner's
// term is subtracted (the pair's first value). Past rotary_dim: no rotation, partner d.
struct DaRot {
    int partner;
    float c, s;
    bool first;
};

__device__ __forceinline__ DaRot da_rot(const float* __restrict__ c,
                                        const float* __restrict__ s, int d, int rotary_dim,
                                        int interleaved) {
    DaRot r = {d, 0.0f, 0.0f, false};
    if (d >= rotary_dim) return r;
    int half = rotary_dim / 2, i;
    if (interleaved) {
        i = d / 2;
        r.first = (d & 1) == 0;
        r.partner = d ^ 1;
    } else {
        r.first = d < half;
        i = r.first ? d : d - half;
        r.partner = r.first ? d + half : i;
    }
    r.c = c[i];
    r.s = s[i];
    return r;
}

// Value d rotated from its value x and its partner's y (both as read, then rounded):
// x c -+ y s as fma(x, c, -+(s y)), the roundings the compiler gives rotary_append_f32, then
// rounded again (the graph's rotation has half-precision outputs).
__device__ __forceinline__ float da_rotate(float x, float y, DaRot r, int d, int rotary_dim,
                                           int act) {
    x = round_act(x, act);
    if (d >= rotary_dim) return x;
    float sy = __fmul_rn(r.s, round_act(y, act));
    return round_act(__fmaf_rn(x, r.c, r.first ? -sy : sy), act);
}

// Element e < DA_HEADS * hs of a block's query heads: its head and value. DA_HEADS is 2, so the
// head is one comparison (a division by the runtime head size takes ~20 instructions on the
// latency-bound path after the wait).
static_assert(DA_HEADS == 2, "da_split assumes at most two query heads a block");
__device__ __forceinline__ void da_split(int e, int hs, int& h, int& d) {
    h = e >= hs ? 1 : 0;
    d = e - h * hs;
}

__device__ __forceinline__ float4 zero4() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

__device__ __forceinline__ float4 fma4(float a, float4 b, float4 acc) {
    acc.x = fmaf(a, b.x, acc.x);
    acc.y = fmaf(a, b.y, acc.y);
    acc.z = fmaf(a, b.z, acc.z);
    acc.w = fmaf(a, b.w, acc.w);
    return acc;
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

__device__ __forceinline__ float lane_of(float4 v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// One halving level of reduce_scatter: C values left, partner at lane offset O.
template <int C, int O, int M>
__device__ __forceinline__ void halve(float (&v)[M], int lane) {
    if constexpr (C > 1) {
        bool up = (lane & O) != 0;
#pragma unroll
        for (int i = 0; i < C / 2; i++) {
            float send = up ? v[i] : v[i + C / 2];
            float keep = up ? v[i + C / 2] : v[i];
            v[i] = keep + __shfl_xor_sync(FULL_MASK, send, O);
        }
        halve<C / 2, O / 2, M>(v, lane);
    }
}

// Sums M values (a power of two <= 32) across the warp: lane l ends with the full sum of value
// l / (32 / M). Halving levels (each lane keeps half, sends its partner the other half), then
// plain butterflies; every level adds two values in the same way on both lanes.
template <int M>
__device__ __forceinline__ float reduce_scatter(float (&v)[M], int lane) {
    halve<M, 16, M>(v, lane);
    float r = v[0];
#pragma unroll
    for (int o = 16 / M; o > 0; o >>= 1) r += __shfl_xor_sync(FULL_MASK, r, o);
    return r;
}

// Merges `count` (<= 8) partials (max m, sum l, value a) in index order. A partial with
// m = -inf (no keys) weighs 0; at least one must have keys.
__device__ __forceinline__ void da_merge(const float (&m)[8], const float (&l)[8],
                                         const float (&a)[8], int count, float& mo, float& lo,
                                         float& ao) {
    float mx = NEG_INF;
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (i < count) mx = fmaxf(mx, m[i]);
    float ls = 0.0f, as = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        if (i < count) {
            float w = expf(m[i] - mx);
            ls = fmaf(w, l[i], ls);
            as = fmaf(w, a[i], as);
        }
    }
    mo = mx;
    lo = ls;
    ao = as;
}

// The output from the groups' partials: one group is normalised, several merged first.
__device__ __forceinline__ float da_finish(const float (&m)[8], const float (&l)[8],
                                           const float (&a)[8], int groups, int act) {
    float mo = m[0], lsum = l[0], acc = a[0];
    if (groups > 1) da_merge(m, l, a, groups, mo, lsum, acc);
    return round_act(acc * (1.0f / lsum), act);
}

// Issues the copies of one warp pass (keys key0 .. key0 + DA_KEYS, those < s1 except p) into a
// ring slot (K rows, then V rows, `row` bytes each, a multiple of 16) and commits them as one
// group.
__device__ __forceinline__ void da_issue(u8* slot, const u8* kb, const u8* vb, int key0, int s1,
                                         int p, int row, int lane) {
    int units = row >> 4;
    // Lane l copies units l, l + 32, ... of the warp's DA_KEYS rows, walked as (key j, unit u)
    // stepped by 32 units: whole rows dj, then du units (no division per copy).
    int j = 0, u = lane, dj = 0, du = 32;
    while (du >= units) {
        du -= units;
        dj++;
    }
    while (u >= units) {
        u -= units;
        j++;
    }
    for (; j < DA_KEYS; j += dj, u += du) {
        if (u >= units) {
            u -= units;
            j++;
            if (j >= DA_KEYS) break;
        }
        int key = key0 + j;
        if (key < s1 && key != p) {
            cp_async16(slot + j * row + 16 * u, kb + (size_t)key * row + 16 * u);
            cp_async16(slot + (DA_KEYS + j) * row + 16 * u, vb + (size_t)key * row + 16 * u);
        }
    }
    cp_async_commit();
}

// What one warp of a split block needs.
struct DaWarp {
    const u8* kb;  // this KV head's keys, values (cache rows of `row` bytes)
    const u8* vb;
    const u8* knew;  // the token's rotated key and value (shared memory, the cache's kind)
    const u8* vnew;
    float* stage;  // the block's dynamic shared memory
    int s0, s1, p, tiles, ring, hs, hg, row;
    float scale, softcap;
};

// One warp's passes with U float4 units per lane (head size <= 128 U) over a cache of kind KV:
// scores, online softmax and P.V over its keys; leaves its running max / sum per head in wm /
// wl and its unnormalised values in the stage, `[warp][head][hs]`. Ends with a block barrier.
template <int U, int KV>
__device__ __forceinline__ void da_warp(const DaWarp& w, const float* __restrict__ qs,
                                        float (*pw)[DA_PW], float (*wm)[DA_HEADS],
                                        float (*wl)[DA_HEADS]) {
    constexpr int HB = DA_HEADS / U;  // query heads of the block at most
    constexpr int M = DA_KEYS * HB;   // (head, key) pairs of a tile
    constexpr int R = 32 / M;         // lanes holding each pair's score
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hs = w.hs, units = hs >> 2;
    float4 q[HB][U], acc[HB][U];
#pragma unroll
    for (int h = 0; h < HB; h++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            int unit = lane + 32 * u;
            q[h][u] = h < w.hg && unit < units ? ((const float4*)(qs + h * hs))[unit] : zero4();
            acc[h][u] = zero4();
        }
    }
    int my_h = lane / (DA_KEYS * R), my_j = (lane / R) % DA_KEYS;
    float m_run = NEG_INF, l_run = 0.0f;
    float* wp = pw[warp];
    size_t slot_bytes = (size_t)2 * DA_KEYS * w.row;
    for (int t = 0; t < w.tiles; t++) {
        if (w.ring > 1) cp_async_wait<1>();
        else cp_async_wait<0>();
        __syncwarp();  // every lane's copies of this pass have landed
        u8* slot = (u8*)w.stage + ((size_t)warp * w.ring + (t & (w.ring - 1))) * slot_bytes;
        int key0 = w.s0 + t * DA_PASS + warp * DA_KEYS;
        float dots[M];
#pragma unroll
        for (int j = 0; j < DA_KEYS; j++) {
            int key = key0 + j;
            const u8* kr = key == w.p ? w.knew : slot + j * w.row;
            float4 k[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int unit = lane + 32 * u;
                k[u] = key < w.s1 && unit < units ? kv_load4<KV>(kr, unit) : zero4();
            }
#pragma unroll
            for (int h = 0; h < HB; h++) {
                float d = 0.0f;
#pragma unroll
                for (int u = 0; u < U; u++) d = dot4(q[h][u], k[u], d);
                dots[h * DA_KEYS + j] = d;
            }
        }
        // Lane l: the score of pair l / R (head my_h, key my_j); online softmax per head over
        // its 4-lane segment (offsets R, 2R), the same values in every lane of the segment.
        float sc = reduce_scatter<M>(dots, lane) * w.scale;
        if (w.softcap > 0.0f) sc = w.softcap * tanhf(sc / w.softcap);
        if (key0 + my_j >= w.s1) sc = NEG_INF;
        float mx = fmaxf(sc, __shfl_xor_sync(FULL_MASK, sc, R));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2 * R));
        float m_new = fmaxf(m_run, mx);  // finite: key0 < s1 for every tile
        float e = expf(sc - m_new);
        float sum = e + __shfl_xor_sync(FULL_MASK, e, R);
        sum += __shfl_xor_sync(FULL_MASK, sum, 2 * R);
        float alpha = m_run == NEG_INF ? 0.0f : expf(m_run - m_new);
        l_run = fmaf(l_run, alpha, sum);
        m_run = m_new;
        if (lane % R == 0) wp[lane / R] = e;
        if (lane % (DA_KEYS * R) == 0) wp[M + my_h] = alpha;
        __syncwarp();
        float4 wj[HB];
#pragma unroll
        for (int h = 0; h < HB; h++) {
            wj[h] = ((const float4*)wp)[h];
            float a = wp[M + h];
#pragma unroll
            for (int u = 0; u < U; u++)
                acc[h][u] = make_float4(acc[h][u].x * a, acc[h][u].y * a, acc[h][u].z * a,
                                        acc[h][u].w * a);
        }
#pragma unroll
        for (int j = 0; j < DA_KEYS; j++) {
            int key = key0 + j;
            if (key >= w.s1) break;  // the same for the whole warp
            const u8* vr = key == w.p ? w.vnew : slot + (DA_KEYS + j) * w.row;
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int unit = lane + 32 * u;
                v[u] = unit < units ? kv_load4<KV>(vr, unit) : zero4();
            }
#pragma unroll
            for (int h = 0; h < HB; h++) {
                float pj = lane_of(wj[h], j);
#pragma unroll
                for (int u = 0; u < U; u++) acc[h][u] = fma4(pj, v[u], acc[h][u]);
            }
        }
        __syncwarp();  // the slot and the weights are read: refill them
        if (t + w.ring < w.tiles)
            da_issue(slot, w.kb, w.vb, key0 + w.ring * DA_PASS, w.s1, w.p, w.row, lane);
        else
            cp_async_commit();  // an empty group keeps `ring` groups ahead
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stage: it now takes the warps' values
    if (lane % (DA_KEYS * R) == 0) {
        wm[warp][my_h] = m_run;
        wl[warp][my_h] = l_run;
    }
    float* wacc = w.stage + (size_t)warp * HB * hs;
#pragma unroll
    for (int h = 0; h < HB; h++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            int unit = lane + 32 * u;
            if (h < w.hg && unit < units) ((float4*)(wacc + h * hs))[unit] = acc[h][u];
        }
    }
    __syncthreads();
}

// A device-scope acquire-release fence (sm_70+; the sequentially consistent __threadfence()
// before, which is stronger than the tickets need).
__device__ __forceinline__ void da_fence() {
#if __CUDA_ARCH__ >= 700
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __threadfence();
#endif
}

// The block's ticket on `count` once every thread has written its share of the block's partial:
// true in every thread of the block that takes the last of `total` tickets. The writes are
// released with the ticket and the last block acquires the other blocks' (`last`: the block's
// shared flag). Thread 0 alone fences, after the block barrier that orders the other threads'
// writes before its release: the pattern of a grid barrier. (Until round 22 every thread ran a
// sequentially consistent fence before the barrier and after the ticket.)
__device__ __forceinline__ bool da_ticket(int* count, int total, int* last) {
    __syncthreads();
    if (threadIdx.x == 0) {
        da_fence();
        *last = atomicAdd(count, 1) == total - 1;
        if (*last) da_fence();
    }
    __syncthreads();
    return *last;
}

__device__ __forceinline__ float* da_part(float* part, int slots, int hs, int head, int slot) {
    return part + ((size_t)head * slots + slot) * (hs + 2);
}

// The kernel's parameters, and their names: one body, one entry per cache kind (below).
#define DA_PARAMS                                                                               \
    const float *__restrict__ qkv, const int *__restrict__ step,                                \
        const float *__restrict__ cos_cache, const float *__restrict__ sin_cache, int rotary_dim, \
        int interleaved, void *k_cache, void *v_cache, int capacity, float *__restrict__ part,   \
        int slots, int *__restrict__ counts, float *__restrict__ out, int heads, int kv_heads,   \
        int hs, float scale, int window, float softcap, int act, int ring, int cluster,          \
        int trigger
#define DA_ARGS                                                                               \
    qkv, step, cos_cache, sin_cache, rotary_dim, interleaved, k_cache, v_cache, capacity, part, \
        slots, counts, out, heads, kv_heads, hs, scale, window, softcap, act, ring, cluster,    \
        trigger

// The body for a cache of kind KV (0 f32, 1 f16, 2 bf16).
template <int KV>
__device__ __forceinline__ void attention_decode_body(DA_PARAMS) {
    extern __shared__ __align__(16) float stage[];  // [warp][ring][K, V rows]; then values
    __shared__ __align__(16) float qs[DA_VALUES];
    __shared__ __align__(16) float knew[DA_MAX_HS];
    __shared__ __align__(16) float vnew[DA_MAX_HS];
    __shared__ __align__(16) float pw[DA_WARPS][DA_PW];
    __shared__ float wm[DA_WARPS][DA_HEADS], wl[DA_WARPS][DA_HEADS];
    // The block's partial: max, sum per head, then the unnormalised values `[head][hs]`.
    __shared__ __align__(16) float bpart[2 * DA_HEADS + DA_VALUES];
    __shared__ int last;

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int split = blockIdx.x, row = blockIdx.y;
    int hb = da_heads(hs);
    int g = heads / kv_heads, slices = (g + hb - 1) / hb;
    int kvh = row / slices, slice = row % slices;
    int h0 = kvh * g + slice * hb;
    int hg = min(hb, g - slice * hb);
#if __CUDA_ARCH__ < 900
    cluster = 0;
#endif
    // The step scalars are copied in before the pass and no kernel writes them.
    if (trigger == 0) pdl_trigger();
    int p = step[0];
    if (p < 0 || p >= capacity) {
        pdl_wait();
        return;
    }
    int lo = attention_lo(p, window);
    DaLayout lay = da_layout(p + 1 - lo);
    int group = split / DA_GROUP;
    bool in_cluster = cluster && lay.splits > 1;
    bool active = split < lay.splits;
    // A cluster keeps all its blocks while any of them has a split (the barriers count them).
    if (!active && !(in_cluster && group < lay.groups)) {
        pdl_wait();
        return;
    }
    if (active) {
        int s0 = lo + split * lay.passes * DA_PASS;
        int s1 = min(p + 1, s0 + lay.passes * DA_PASS);
        int first = s1 - s0 - warp * DA_KEYS;  // this warp's keys in pass 0 start here
        int row = hs * kv_bytes(KV);
        DaWarp w;
        w.kb = (const u8*)k_cache + (size_t)kvh * capacity * row;
        w.vb = (const u8*)v_cache + (size_t)kvh * capacity * row;
        w.knew = (const u8*)knew;
        w.vnew = (const u8*)vnew;
        w.stage = stage;
        w.s0 = s0;
        w.s1 = s1;
        w.p = p;
        w.tiles = first > 0 ? (first + DA_PASS - 1) / DA_PASS : 0;
        w.ring = ring;
        w.hs = hs;
        w.hg = hg;
        w.row = row;
        w.scale = scale;
        w.softcap = softcap;
        // The first `ring` passes' cached positions (all before p) were written by earlier
        // steps, never by the kernel before this one: copy them before waiting for it.
        size_t slot_bytes = (size_t)2 * DA_KEYS * row;
        for (int t = 0; t < ring; t++) {
            u8* slot = (u8*)stage + ((size_t)warp * ring + t) * slot_bytes;
            if (t < w.tiles)
                da_issue(slot, w.kb, w.vb, s0 + t * DA_PASS + warp * DA_KEYS, s1, p, row, lane);
            else
                cp_async_commit();
        }
        // Thread tid rotates query value tid of the slice (hg * hs <= DA_THREADS) and, in the
        // split holding p, value tid of the new key (hs <= DA_THREADS). The cos and sin rows at
        // p (new every step, so a DRAM read; no kernel writes them) are read now, under the
        // kernel before; after the wait every value the rotations take is read at once, so
        // the block waits for the L2 once (not once per dependent load: the rounding between
        // a value and its partner, then the sin, had made it 3 round trips for q, 4 for k, v).
        const float* c = cos_cache + (size_t)p * (rotary_dim / 2);
        const float* s = sin_cache + (size_t)p * (rotary_dim / 2);
        int qh, qd;  // meaningful where has_q (tid < hg * hs)
        da_split(tid, hs, qh, qd);
        bool has_q = tid < hg * hs, has_k = split == lay.splits - 1 && tid < hs;
        DaRot rq = {qd, 0.0f, 0.0f, false}, rk = {tid, 0.0f, 0.0f, false};
        if (has_q) rq = da_rot(c, s, qd, rotary_dim, interleaved);
        if (has_k) rk = da_rot(c, s, tid, rotary_dim, interleaved);
        // The addresses of what the rotations read, before the wait: after it, only the loads.
        const float* qh_src = qkv + (size_t)(h0 + qh) * hs;
        const float* kh_src = qkv + (size_t)(heads + kvh) * hs;
        const float* vh_src = qkv + (size_t)(heads + kv_heads + kvh) * hs;
        const float *qx_at = qh_src + qd, *qy_at = qh_src + rq.partner;
        const float *kx_at = kh_src + tid, *ky_at = kh_src + rk.partner, *v_at = vh_src + tid;
        pdl_wait();
        if (trigger == 1) pdl_trigger();

        float qx = has_q ? *qx_at : 0.0f, qy = has_q ? *qy_at : 0.0f;
        float kx = has_k ? *kx_at : 0.0f, ky = has_k ? *ky_at : 0.0f;
        float vd = has_k ? *v_at : 0.0f;
        if (has_q) qs[tid] = da_rotate(qx, qy, rq, qd, rotary_dim, act);
        if (has_k) {
            float kd = da_rotate(kx, ky, rk, tid, rotary_dim, act);
            // Kept as the cache keeps them: the token's own key and value are then the bits a
            // later step reads back.
            kv_store(knew, tid, kd, KV);
            kv_store(vnew, tid, vd, KV);
            if (slice == 0) {
                size_t dst = ((size_t)kvh * capacity + p) * hs;
                kv_store(k_cache, dst + tid, kd, KV);
                kv_store(v_cache, dst + tid, vd, KV);
            }
        }
        __syncthreads();
        if (hs > 128) da_warp<2, KV>(w, qs, pw, wm, wl);
        else da_warp<1, KV>(w, qs, pw, wm, wl);
        if (trigger == 2) pdl_trigger();

        // Merge the warps in warp order: the block's partial, or with one split the output.
        const float* wacc = stage;
        for (int e = tid; e < hg * hs; e += DA_THREADS) {
            int h, d;
            da_split(e, hs, h, d);
            float m[8], l[8], a[8];
#pragma unroll
            for (int i = 0; i < DA_WARPS; i++) {
                m[i] = wm[i][h];
                l[i] = wl[i][h];
                a[i] = wacc[((size_t)i * hb + h) * hs + d];
            }
            float mo, ls, ao;
            da_merge(m, l, a, DA_WARPS, mo, ls, ao);
            if (lay.splits == 1) {
                out[(size_t)(h0 + h) * hs + d] = round_act(ao * (1.0f / ls), act);
            } else {
                bpart[2 * DA_HEADS + e] = ao;
                if (d == 0) {
                    bpart[h] = mo;
                    bpart[DA_HEADS + h] = ls;
                }
            }
        }
        if (lay.splits == 1) return;
        __syncthreads();
    } else {
        pdl_wait();  // an idle block of a working cluster writes partials and tickets below
        if (trigger != 0) pdl_trigger();
    }

    if (in_cluster) {
#if __CUDA_ARCH__ >= 900
        // Every block's partial is in its shared memory: block `rank` merges pairs
        // rank * DA_THREADS + tid of the group, reading the group's splits in order.
        cluster_arrive();
        cluster_wait();
        int rank = (int)cluster_rank(), first = group * DA_GROUP;
        int count = min(DA_GROUP, lay.splits - first);
        int e = rank * DA_THREADS + tid;
        if (e < hg * hs) {
            int h, d;
            da_split(e, hs, h, d);
            u32 base = smem_u32(bpart);
            float m[8], l[8], a[8];
#pragma unroll
            for (int i = 0; i < DA_GROUP; i++) {
                m[i] = NEG_INF;
                l[i] = 0.0f;
                a[i] = 0.0f;
                if (i < count) {
                    u32 r = cluster_map(base, (u32)i);
                    m[i] = cluster_load(r + 4u * h);
                    l[i] = cluster_load(r + 4u * (DA_HEADS + h));
                    a[i] = cluster_load(r + 4u * (2 * DA_HEADS + e));
                }
            }
            float mo, ls, ao;
            da_merge(m, l, a, count, mo, ls, ao);
            if (lay.groups == 1) {
                out[(size_t)(h0 + h) * hs + d] = round_act(ao * (1.0f / ls), act);
            } else {
                float* pp = da_part(part, slots, hs, h0 + h, group);
                pp[2 + d] = ao;
                if (d == 0) {
                    pp[0] = mo;
                    pp[1] = ls;
                }
            }
        }
        cluster_arrive_relaxed();  // done reading the others' shared memory
        if (lay.groups > 1) {
            if (da_ticket(counts + row, lay.groups * DA_GROUP, &last)) {
                for (int e2 = tid; e2 < hg * hs; e2 += DA_THREADS) {
                    int h, d;
                    da_split(e2, hs, h, d);
                    float m[8], l[8], a[8];
#pragma unroll
                    for (int c = 0; c < 8; c++) {
                        m[c] = NEG_INF;
                        l[c] = 0.0f;
                        a[c] = 0.0f;
                        if (c < lay.groups) {
                            const float* pp = da_part(part, slots, hs, h0 + h, c);
                            m[c] = __ldcg(pp);
                            l[c] = __ldcg(pp + 1);
                            a[c] = __ldcg(pp + 2 + d);
                        }
                    }
                    out[(size_t)(h0 + h) * hs + d] = da_finish(m, l, a, lay.groups, act);
                }
                if (tid == 0) counts[row] = 0;
            }
        }
        cluster_wait();  // no block leaves while another may still read its shared memory
#endif
        return;
    }

    // No cluster: every split's partial goes to `part`; the last block of the row merges each
    // group in split order, then the groups, exactly as the cluster path does.
    for (int e = tid; e < hg * hs; e += DA_THREADS) {
        int h, d;
        da_split(e, hs, h, d);
        float* pp = da_part(part, slots, hs, h0 + h, split);
        pp[2 + d] = bpart[2 * DA_HEADS + e];
        if (d == 0) {
            pp[0] = bpart[h];
            pp[1] = bpart[DA_HEADS + h];
        }
    }
    if (!da_ticket(counts + row, lay.splits, &last)) return;
    for (int e = tid; e < hg * hs; e += DA_THREADS) {
        int h, d;
        da_split(e, hs, h, d);
        float gm[8], gl[8], ga[8];
#pragma unroll
        for (int c = 0; c < 8; c++) {
            gm[c] = NEG_INF;
            gl[c] = 0.0f;
            ga[c] = 0.0f;
            if (c < lay.groups) {
                int first = c * DA_GROUP, count = min(DA_GROUP, lay.splits - first);
                float m[8], l[8], a[8];
#pragma unroll
                for (int i = 0; i < DA_GROUP; i++) {
                    m[i] = NEG_INF;
                    l[i] = 0.0f;
                    a[i] = 0.0f;
                    if (i < count) {
                        const float* pp = da_part(part, slots, hs, h0 + h, first + i);
                        m[i] = __ldcg(pp);
                        l[i] = __ldcg(pp + 1);
                        a[i] = __ldcg(pp + 2 + d);
                    }
                }
                da_merge(m, l, a, count, gm[c], gl[c], ga[c]);
            }
        }
        out[(size_t)(h0 + h) * hs + d] = da_finish(gm, gl, ga, lay.groups, act);
    }
    if (tid == 0) counts[row] = 0;
}

// One entry per cache kind, each holding only its kind's code (the kind chosen at run time in
// one entry held all three bodies of da_warp: ~9,100 instructions against ~5,600).
extern "C" __global__ void __launch_bounds__(DA_THREADS) attention_decode_f32(DA_PARAMS) {
    attention_decode_body<0>(DA_ARGS);
}

extern "C" __global__ void __launch_bounds__(DA_THREADS) attention_decode_kv_f16(DA_PARAMS) {
    attention_decode_body<1>(DA_ARGS);
}

extern "C" __global__ void __launch_bounds__(DA_THREADS) attention_decode_kv_bf16(DA_PARAMS) {
    attention_decode_body<2>(DA_ARGS);
}
