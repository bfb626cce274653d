// Logits processing on the device. Argmax in two launches: argmax_partial_f32 (any grid of
// 256-thread blocks) leaves each block's best (value, index) in `pv`/`pi`; argmax_final_f32
// (one block of 1024 threads) reduces the `parts` partials to out[0]. The largest logit wins,
// the lowest index among equals; NaN and -inf never win (0 when nothing is above -inf), as the
// host's argmax.
//
// Then the sampled choice (logits_process_f32 + sample_f32): the selection defined in
// crates/engine/src/sampling.rs, repeated with the same f32 operations (explicit _rn intrinsics,
// so nothing is contracted differently) and exact integer weight sums, so the device picks the
// token the host would from the same logits and uniform, and the same bits every run.

__device__ __forceinline__ void better(float& bv, int& bi, float v, int i) {
    if (v > bv || (v == bv && v > NEG_INF && i < bi)) {
        bv = v;
        bi = i;
    }
}

// Block-wide best of (bv, bi); thread 0 gets the result.
__device__ __forceinline__ void block_best(float& bv, int& bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1)
        better(bv, bi, __shfl_xor_sync(FULL_MASK, bv, o), __shfl_xor_sync(FULL_MASK, bi, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x >> 5;
        bv = lane < warps ? sv[lane] : NEG_INF;
        bi = lane < warps ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1)
            better(bv, bi, __shfl_xor_sync(FULL_MASK, bv, o), __shfl_xor_sync(FULL_MASK, bi, o));
    }
}

extern "C" __global__ void argmax_partial_f32(const float* __restrict__ logits, int n,
                                              float* __restrict__ pv, int* __restrict__ pi) {
    pdl_enter();
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        better(bv, bi, logits[i], i);
    block_best(bv, bi);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = bv;
        pi[blockIdx.x] = bi;
    }
}

extern "C" __global__ void argmax_final_f32(const float* __restrict__ pv,
                                            const int* __restrict__ pi, int parts,
                                            int* __restrict__ out) {
    pdl_enter();
    float bv = NEG_INF;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) better(bv, bi, pv[i], pi[i]);
    block_best(bv, bi);
    if (threadIdx.x == 0) out[0] = bi == 0x7fffffff ? 0 : bi;
}

typedef unsigned long long u64;

// Step parameters in device memory (ints; floats by their bits), written by the host before the
// launches so that the sequence can be captured: [0] top_k, [1] top_p, [2] temperature,
// [3] uniform, [4] repetition penalty, [5] penalised ids, [6] suppressed ids.
#define SP_TOP_K 0
#define SP_TOP_P 1
#define SP_TEMPERATURE 2
#define SP_UNIFORM 3
#define SP_PENALTY 4
#define SP_N_PENALIZED 5
#define SP_N_SUPPRESSED 6

// The host's processors, in place: `ids` holds the penalised ids (distinct), then the
// suppressed ones. One thread per id; an id in both lists ends at -inf either way.
extern "C" __global__ void logits_process_f32(float* __restrict__ logits, int n,
                                              const int* __restrict__ params,
                                              const int* __restrict__ ids) {
    pdl_enter();
    int np = params[SP_N_PENALIZED], ns = params[SP_N_SUPPRESSED];
    float pen = __int_as_float(params[SP_PENALTY]);
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= np + ns) return;
    int id = ids[t];
    if (id < 0 || id >= n) return;
    bool suppress = t >= np;
    for (int j = 0; j < ns && !suppress; j++) suppress = ids[np + j] == id;
    if (suppress) {
        logits[id] = NEG_INF;
        return;
    }
    if (pen == 1.0f || pen <= 0.0f) return;
    float l = logits[id];
    logits[id] = l < 0.0f ? __fmul_rn(l, pen) : __fdiv_rn(l, pen);
}

#define SAMPLE_THREADS 1024

// sampling.rs order_key: larger logits get larger keys, NaN 0.
__device__ __forceinline__ u32 order_key(float v) {
    u32 b = __float_as_uint(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float key_value(u32 k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// sampling.rs exp_weight, operation for operation.
__device__ __forceinline__ float exp_weight(float x) {
    if (!(x >= -30.0f)) return 0.0f;
    float n = rintf(__fmul_rn(x, __int_as_float(0x3fb8aa3b)));
    float r = __fmaf_rn(-n, __int_as_float(0x3f317200), x);
    r = __fmaf_rn(-n, __int_as_float(0x35bfbe8e), r);
    float p = __int_as_float(0x39500d01);
    p = __fmaf_rn(p, r, __int_as_float(0x3ab60b61));
    p = __fmaf_rn(p, r, __int_as_float(0x3c088889));
    p = __fmaf_rn(p, r, __int_as_float(0x3d2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3e2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3f000000));
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    return __fmul_rn(p, __int_as_float(((int)n + 127) << 23));
}

// sampling.rs weight: trunc(exp_weight((l - m) / t) * 2^40).
__device__ __forceinline__ u64 weight_q(float l, float m, float t) {
    float w = exp_weight(__fdiv_rn(__fsub_rn(l, m), t));
    return __float2ull_rz(__fmul_rn(w, 1099511627776.0f));
}

// Kept: key above ck, or equal to it at an index up to ci.
__device__ __forceinline__ bool kept(u32 k, int i, u32 ck, int ci) {
    return k > ck || (k == ck && i <= ci);
}

__device__ __forceinline__ u64 shfl_up_u64(u64 v, int o) {
    u32 lo = __shfl_up_sync(FULL_MASK, (u32)v, o);
    u32 hi = __shfl_up_sync(FULL_MASK, (u32)(v >> 32), o);
    return ((u64)hi << 32) | lo;
}

__device__ __forceinline__ u64 warp_incl_scan(u64 v) {
    int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        u64 y = shfl_up_u64(v, o);
        if (lane >= o) v += y;
    }
    return v;
}

// Exclusive block scan of v (SAMPLE_THREADS threads); *total gets the sum on every thread.
__device__ u64 block_scan(u64 v, u64* total) {
    __shared__ u64 warps[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 incl = warp_incl_scan(v);
    if (lane == 31) warps[warp] = incl;
    __syncthreads();
    if (warp == 0) warps[lane] = warp_incl_scan(warps[lane]);
    __syncthreads();
    u64 before = warp > 0 ? warps[warp - 1] : 0;
    *total = warps[31];
    __syncthreads();
    return before + incl - v;
}

__device__ u32 block_max_u32(u32 v) {
    __shared__ u32 warps[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        u32 w = __shfl_xor_sync(FULL_MASK, v, o);
        v = w > v ? w : v;
    }
    if (lane == 0) warps[warp] = v;
    __syncthreads();
    v = warps[lane];
    for (int o = 16; o > 0; o >>= 1) {
        u32 w = __shfl_xor_sync(FULL_MASK, v, o);
        v = w > v ? w : v;
    }
    __syncthreads();
    return v;
}

// This thread's contiguous range of indices, for walks in index order.
__device__ __forceinline__ void chunk_of(int n, int& lo, int& hi) {
    int chunk = (n + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    lo = (int)threadIdx.x * chunk;
    lo = lo < n ? lo : n;
    hi = lo + chunk < n ? lo + chunk : n;
}

// The j-th (from 1) lowest index whose key is kc (n - 1 if there are fewer).
__device__ int nth_index(const float* __restrict__ logits, int n, u32 kc, u64 j) {
    __shared__ int found;
    if (threadIdx.x == 0) found = n - 1;
    int lo, hi;
    chunk_of(n, lo, hi);
    u64 c = 0;
    for (int i = lo; i < hi; i++) c += order_key(logits[i]) == kc;
    u64 total;
    u64 seen = block_scan(c, &total);
    if (seen < j && j <= seen + c) {
        for (int i = lo; i < hi; i++) {
            if (order_key(logits[i]) == kc && ++seen == j) {
                found = i;
                break;
            }
        }
    }
    __syncthreads();
    int r = found;
    __syncthreads();
    return r;
}

__shared__ u64 hist_n[256];
__shared__ u64 hist_w[256];

// Histograms of the next 8 key bits (at `shift`) over the kept tokens whose key matches `prefix`
// under `mask`: counts, and weights when `weigh`. Integer sums: the result does not depend on
// the order of the atomics. A thread adds a run of equal buckets at once.
__device__ void radix_hist(const float* __restrict__ logits, int n, u32 prefix, u32 mask,
                           int shift, u32 ck, int ci, bool weigh, float m, float t) {
    for (int b = threadIdx.x; b < 256; b += SAMPLE_THREADS) {
        hist_n[b] = 0;
        hist_w[b] = 0;
    }
    __syncthreads();
    int cur = -1;
    u64 cn = 0, cw = 0;
    for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) {
        float l = logits[i];
        u32 k = order_key(l);
        if ((k & mask) != prefix || !kept(k, i, ck, ci)) continue;
        int b = (k >> shift) & 255;
        if (b != cur) {
            if (cur >= 0) {
                atomicAdd(&hist_n[cur], cn);
                if (weigh) atomicAdd(&hist_w[cur], cw);
            }
            cur = b;
            cn = 0;
            cw = 0;
        }
        cn += 1;
        if (weigh) cw += weight_q(l, m, t);
    }
    if (cur >= 0) {
        atomicAdd(&hist_n[cur], cn);
        if (weigh) atomicAdd(&hist_w[cur], cw);
    }
    __syncthreads();
}

// The key at which the running total over the kept tokens, in key order from the top, first
// reaches `need` (counts, or weights when `weigh`); *above: the total of larger keys, *ties:
// the kept tokens with that key.
__device__ u32 radix_select(const float* __restrict__ logits, int n, u32 ck, int ci, bool weigh,
                            float m, float t, u64 need, u64* above, u64* ties) {
    __shared__ int s_bucket;
    __shared__ u64 s_above;
    u32 prefix = 0, mask = 0;
    u64 ab = 0, tn = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        radix_hist(logits, n, prefix, mask, shift, ck, ci, weigh, m, t);
        const u64* h = weigh ? hist_w : hist_n;
        if (threadIdx.x < 32) {
            int lane = threadIdx.x;
            u64 s = 0;
            for (int j = 0; j < 8; j++) s += h[255 - 8 * lane - j];
            u64 incl = warp_incl_scan(s);
            u64 excl = incl - s;
            unsigned hit = __ballot_sync(FULL_MASK, ab + excl < need && ab + incl >= need);
            int src = hit ? __ffs(hit) - 1 : 31;
            if (lane == src) {
                u64 run = ab + excl;
                int b = 255 - 8 * lane - 7;
                for (int j = 0; j < 8; j++) {
                    int bb = 255 - 8 * lane - j;
                    if (run + h[bb] >= need) {
                        b = bb;
                        break;
                    }
                    run += h[bb];
                }
                if (run + h[b] < need) run -= h[b];  // no crossing (cannot happen): lowest bucket
                s_bucket = b;
                s_above = run;
            }
        }
        __syncthreads();
        int b = s_bucket;
        ab = s_above;
        tn = hist_n[b];
        prefix |= (u32)b << shift;
        mask |= 0xffu << shift;
        __syncthreads();
    }
    *above = ab;
    *ties = tn;
    return prefix;
}

// Sum of the kept weights (every thread), and this thread's share and the sum before it in
// index order.
__device__ u64 kept_weight(const float* __restrict__ logits, int n, u32 ck, int ci, float m,
                           float t, u64* mine, u64* before) {
    int lo, hi;
    chunk_of(n, lo, hi);
    u64 s = 0;
    for (int i = lo; i < hi; i++) {
        float l = logits[i];
        if (kept(order_key(l), i, ck, ci)) s += weight_q(l, m, t);
    }
    u64 total;
    *before = block_scan(s, &total);
    *mine = s;
    return total;
}

// One block of SAMPLE_THREADS threads: out[0] = the sampled token of `n` processed logits, with
// top_k, top_p, temperature and the uniform read from `params`.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_f32(const float* __restrict__ logits, int n, const int* __restrict__ params,
               int* __restrict__ out) {
    pdl_enter();
    int top_k = params[SP_TOP_K];
    float top_p = __int_as_float(params[SP_TOP_P]);
    float temperature = __int_as_float(params[SP_TEMPERATURE]);
    float u = __int_as_float(params[SP_UNIFORM]);
    float t = temperature > 0.0f ? temperature : 1.0f;
    // -1 unless a token is chosen (ordered before the choice by the syncs in between).
    if (threadIdx.x == 0) out[0] = -1;

    u32 km = 0;
    for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) { u32 k = order_key(logits[i]); km = k > km ? k : km; }
    km = block_max_u32(km);
    float m = key_value(km);
    if ((__float_as_uint(m) & 0x7f800000u) == 0x7f800000u) {
        // +inf, -inf or NaN at the top: the first token in key order.
        int first = nth_index(logits, n, km, 1);
        if (threadIdx.x == 0) out[0] = first;
        return;
    }
    u32 ck = 0;  // everything
    int ci = n - 1;
    if (top_k > 0 && top_k < n) {
        u64 above, ties;
        u32 kk = radix_select(logits, n, ck, ci, false, m, t, (u64)top_k, &above, &ties);
        u64 r = (u64)top_k - above;
        ci = r >= ties ? n - 1 : nth_index(logits, n, kk, r);
        ck = kk;
    }
    if (top_p > 0.0f && top_p < 1.0f) {
        u64 mine, before;
        u64 w = kept_weight(logits, n, ck, ci, m, t, &mine, &before);
        u64 need = __double2ull_rz(ceil(__dmul_rn((double)top_p, __ull2double_rn(w))));
        need = need < 1 ? 1 : (need > w ? w : need);
        u64 above, ties;
        u32 kc = radix_select(logits, n, ck, ci, true, m, t, need, &above, &ties);
        u64 qc = weight_q(key_value(kc), m, t);
        u64 j = qc > 0 ? (need - above + qc - 1) / qc : ties;
        int idx = j >= ties ? (kc == ck ? ci : n - 1) : nth_index(logits, n, kc, j);
        ck = kc;
        ci = idx;
    }
    u64 mine, before;
    u64 w = kept_weight(logits, n, ck, ci, m, t, &mine, &before);
    u64 target = __double2ull_rz(floor(__dmul_rn((double)u, __ull2double_rn(w))));
    if (target > w - 1) target = w - 1;
    if (before <= target && target < before + mine) {
        int lo, hi;
        chunk_of(n, lo, hi);
        u64 run = before;
        for (int i = lo; i < hi; i++) {
            float l = logits[i];
            if (!kept(order_key(l), i, ck, ci)) continue;
            run += weight_q(l, m, t);
            if (run > target) {
                out[0] = i;
                break;
            }
        }
    }
}
