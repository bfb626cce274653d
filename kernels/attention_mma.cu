// Prompt attention on the tensor cores (mma.m16n8k16, sm_80 and later) for a KV cache in the
// activations' half precision (KV 1: f16, 2: bf16; the caller checks that q is rounded to the
// same kind, which the rotary does, so every operand converts exactly). Same contract as
// attention_tiled_f32 in attention.cu: it writes each (token, head)'s partial (max, sum,
// unnormalised values) for the splits holding keys of the token's range into `part`
// `[m, heads, splits, hs + 2]`, here `splits` spans of the pass's keys (prompt_span in the
// prelude, read from the step scalars), and attention_merge_f32 (span 0: the same spans) merges
// them.
//
// Grid (splits, kv_heads, ceil(m * group / AM_ROWS)), AM_WARPS warps, dynamic
// shared memory am_shared_bytes(hs). A block's rows are (token, head of the KV head's group)
// pairs, token-major; each warp takes 16 of them. The block stages its rows' q once, then walks
// its span AM_KEYS keys at a time: the next stage's keys and values are copied (cp.async, rows
// as they are in the cache) while the warps work on this one. Each warp computes its
// 16 x AM_KEYS scores with f32 sums (products of two halves are exact; fragments through
// ldmatrix, the values' transposed), keeps a running max and sum per row (online softmax), and
// adds P.V into f32 accumulators. P (in [0, 1], f32) goes to the mma as a sum of half-precision
// parts (f16: two, 22 bits; bf16: three, 24 bits), scaled by AM_P_SCALE first so that the low
// parts of weights that matter stay normal numbers; the accumulators are scaled back when
// written. So the result is the f32 kernel's up to summation order and the parts' last bits.
// Head sizes: multiples of 16 up to HS_MAX (the accumulators are sized for HS_MAX).
#define AM_ROWS 64
#define AM_WARPS (AM_ROWS / 16)
#define AM_KEYS 32
#define AM_TILES (AM_KEYS / 8)  // score tiles of 8 keys a stage
#define AM_PAD 8
#define AM_P_SCALE 4096.0f

// Bytes of dynamic shared memory: q of the rows, then two stages of AM_KEYS keys and their
// values, every row hs + AM_PAD halves (the padding keeps ldmatrix's eight rows on distinct
// banks).
__host__ __device__ __forceinline__ int am_shared_bytes(int hs) {
    return 2 * (AM_ROWS + 4 * AM_KEYS) * (hs + AM_PAD);
}

// Four 8x8 matrices of halves from shared memory, lane l naming row l % 8 of matrix l / 8
// (`trans`: each transposed).
template <bool TRANS>
__device__ __forceinline__ void am_ldsm4(u32 (&r)[4], const u16* row) {
#if __CUDA_ARCH__ >= 800
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_u32(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_u32(row)));
#endif
}

// 16 bytes global -> shared, or 16 zero bytes when `valid` is false (nothing is read then).
__device__ __forceinline__ void am_copy16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
#endif
}

// Copies the keys and values kc .. kc + AM_KEYS - 1 of a KV head into stage `st` ([keys][qs]
// then [values][qs]), zeros past k_end, as one cp.async group.
__device__ __forceinline__ void am_stage(u16* st, const u16* __restrict__ k_head,
                                         const u16* __restrict__ v_head, int kc, int k_end,
                                         int hs, int qs) {
    int per_row = hs / 8;  // 16-byte words of a row
    for (int i = threadIdx.x; i < AM_KEYS * per_row; i += blockDim.x) {
        int j = i / per_row, u = i - j * per_row, key = kc + j;
        bool valid = key < k_end;
        size_t at = (size_t)(valid ? key : kc) * hs + u * 8;
        am_copy16(st + j * qs + u * 8, k_head + at, valid);
        am_copy16(st + (AM_KEYS + j) * qs + u * 8, v_head + at, valid);
    }
    cp_async_commit();
}

template <int KV>
__device__ __forceinline__ void am_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_16816<KV != 1>(d, a, b0, b1);
}

template <int KV>
__device__ __forceinline__ u16 am_half(float x) {
    return (u16)half_bits(x, KV != 1);
}

template <int KV>
__device__ __forceinline__ float am_float(u16 h) {
    return half_value(h, KV != 1);
}

// Half-precision parts of the weights P: f16 two (11 + 11 bits), bf16 three (8 + 8 + 8).
template <int KV>
struct AmParts {
    static constexpr int n = KV == 1 ? 2 : 3;
};

// The pair (x, y) as am_parts words, each the pair's next part (x low): the remainders are exact
// in f32, so the parts sum to the pair up to the last part's rounding.
template <int KV>
__device__ __forceinline__ void am_split(u32 (&w)[AmParts<KV>::n][4], int slot, float x, float y) {
#pragma unroll
    for (int i = 0; i < AmParts<KV>::n; i++) {
        u16 hx = am_half<KV>(x), hy = am_half<KV>(y);
        w[i][slot] = (u32)hx | ((u32)hy << 16);
        x -= am_float<KV>(hx);
        y -= am_float<KV>(hy);
    }
}

// Stages the rows r0 .. r0 + AM_ROWS - 1 of q (row r: token r / group, head h0 + r % group;
// zeros from r_end) as halves, [AM_ROWS][qs]. Four values a load, AM_Q_LOADS loads in flight a
// thread before their stores (one load at a time left each block waiting a memory latency per
// value it staged).
#define AM_Q_LOADS 4
template <int KV>
__device__ __forceinline__ void am_stage_q(u16* q_st, const float* __restrict__ qkv, int ld, int r0,
                                           int r_end, int group, int h0, int hs, int qs) {
    int quads = hs / 4, total = AM_ROWS * quads;
    for (int base = threadIdx.x; base < total; base += AM_Q_LOADS * blockDim.x) {
        float4 v[AM_Q_LOADS];
#pragma unroll
        for (int u = 0; u < AM_Q_LOADS; u++) {
            int i = base + u * blockDim.x, rr = i / quads, r = r0 + rr;
            v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i < total && r < r_end)
                v[u] = *(const float4*)(qkv + (size_t)(r / group) * ld +
                                        (size_t)(h0 + r % group) * hs + (i - rr * quads) * 4);
        }
#pragma unroll
        for (int u = 0; u < AM_Q_LOADS; u++) {
            int i = base + u * blockDim.x, rr = i / quads;
            if (i >= total) break;
            uint2 w = make_uint2((u32)am_half<KV>(v[u].x) | ((u32)am_half<KV>(v[u].y) << 16),
                                 (u32)am_half<KV>(v[u].z) | ((u32)am_half<KV>(v[u].w) << 16));
            *(uint2*)(q_st + rr * qs + (i - rr * quads) * 4) = w;
        }
    }
}

// One warp's rows against one stage: scores of its 16 rows and AM_KEYS keys kc.. (q at qa,
// the lane's ldmatrix row of the warp's q; keys and values at k_st and v_st), masked to each
// row's range [lo_key, hi_key] (the lane's rows gq and gq + 8), folded into the running max and
// sum and the accumulators o.
template <int KV, int HS_MAX>
__device__ __forceinline__ void am_warp_stage(float (&o)[HS_MAX / 8][4], float (&row_max)[2],
                                              float (&row_sum)[2], const u16* qa,
                                              const u16* k_st, const u16* v_st, int kc,
                                              const int (&lo_key)[2], const int (&hi_key)[2],
                                              int hs, int qs, float scale, float softcap) {
    int lane = threadIdx.x & 31, cq = lane & 3;
    // ldmatrix rows: keys (lane % 8, + 8 for lanes 16..31) at dims + 8 for lanes 8..15, 24..31;
    // values (lane % 8, + 8 for lanes 8..15, 24..31) at dims + 8 for lanes 16..31.
    const u16* kb = k_st + ((lane & 7) + ((lane >> 4) & 1) * 8) * qs + ((lane >> 3) & 1) * 8;
    const u16* vb = v_st + ((lane & 7) + ((lane >> 3) & 1) * 8) * qs + ((lane >> 4) & 1) * 8;
    float sc[AM_TILES][4];
#pragma unroll
    for (int n = 0; n < AM_TILES; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < HS_MAX / 16; k++) {
        if (k * 16 >= hs) break;
        u32 a[4];
        am_ldsm4<false>(a, qa + k * 16);
#pragma unroll
        for (int np = 0; np < AM_TILES / 2; np++) {
            u32 b[4];
            am_ldsm4<false>(b, kb + np * 16 * qs + k * 16);
            am_mma<KV>(sc[2 * np], a, b[0], b[1]);
            am_mma<KV>(sc[2 * np + 1], a, b[2], b[3]);
        }
    }
    // Scores, masked to each row's range; the rows' maxima over the stage (a quad holds a row).
    float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int n = 0; n < AM_TILES; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int j = e >> 1, key = kc + n * 8 + 2 * cq + (e & 1);
            float v = sc[n][e] * scale;
            if (softcap > 0.0f) v = softcap * tanhf(v / softcap);
            v = key >= lo_key[j] && key <= hi_key[j] ? v : NEG_INF;
            sc[n][e] = v;
            mx[j] = fmaxf(mx[j], v);
        }
    }
    float alpha[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        mx[j] = fmaxf(mx[j], __shfl_xor_sync(FULL_MASK, mx[j], 1));
        mx[j] = fmaxf(mx[j], __shfl_xor_sync(FULL_MASK, mx[j], 2));
        float next = fmaxf(row_max[j], mx[j]);
        alpha[j] = next == NEG_INF ? 1.0f : expf(row_max[j] - next);
        row_max[j] = next;
        row_sum[j] *= alpha[j];
    }
#pragma unroll
    for (int n = 0; n < AM_TILES; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int j = e >> 1;
            float w = sc[n][e] == NEG_INF ? 0.0f : expf(sc[n][e] - row_max[j]);
            row_sum[j] += w;
            sc[n][e] = w * AM_P_SCALE;
        }
    }
#pragma unroll
    for (int n = 0; n < HS_MAX / 8; n++) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
    }
    // P.V: the score tiles 2kk and 2kk + 1 are the A operand of keys 16kk .. 16kk + 15.
#pragma unroll
    for (int kk = 0; kk < AM_TILES / 2; kk++) {
        u32 a[AmParts<KV>::n][4];
        am_split<KV>(a, 0, sc[2 * kk][0], sc[2 * kk][1]);
        am_split<KV>(a, 1, sc[2 * kk][2], sc[2 * kk][3]);
        am_split<KV>(a, 2, sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        am_split<KV>(a, 3, sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
        for (int np = 0; np < HS_MAX / 16; np++) {
            if (np * 16 >= hs) break;
            u32 b[4];
            am_ldsm4<true>(b, vb + kk * 16 * qs + np * 16);
#pragma unroll
            for (int i = 0; i < AmParts<KV>::n; i++) {
                am_mma<KV>(o[2 * np], a[i], b[0], b[1]);
                am_mma<KV>(o[2 * np + 1], a[i], b[2], b[3]);
            }
        }
    }
}

template <int KV, int HS_MAX>
__device__ __forceinline__ void attention_mma_body(
    const float* __restrict__ qkv, int ld, const u16* __restrict__ k_cache,
    const u16* __restrict__ v_cache, const int* __restrict__ step, float* __restrict__ part,
    int heads, int kv_heads, int hs, int capacity, float scale, int window, float softcap,
    int splits, int m) {
    extern __shared__ __align__(16) u16 am_shared[];
    pdl_enter();
    int s = blockIdx.x, g = blockIdx.y;
    int group = heads / kv_heads;
    int r0 = blockIdx.z * AM_ROWS, r_end = min(m * group, r0 + AM_ROWS);
    if (r0 >= r_end) return;
    int p0 = step[0], span = prompt_span(step, splits);
    int p_last = p0 + (r_end - 1) / group;
    int c0 = s * span, c1 = min(capacity, c0 + span);
    // The block's first row has the lowest first key.
    int lo_first = attention_lo(p0 + r0 / group, window);
    // No row of the block attends to a key of this span.
    if (c0 > p_last || c1 - 1 < lo_first) return;
    int k_begin = c0 + (max(lo_first, c0) - c0) / AM_KEYS * AM_KEYS;
    int k_end = min(c1, p_last + 1);
    int qs = hs + AM_PAD;
    u16* q_st = am_shared;                // [AM_ROWS][qs]
    u16* stages = q_st + AM_ROWS * qs;  // 2 x ([AM_KEYS][qs] keys, [AM_KEYS][qs] values)
    const int stage_halves = 2 * AM_KEYS * qs;
    const u16* k_head = k_cache + (size_t)g * capacity * hs;
    const u16* v_head = v_cache + (size_t)g * capacity * hs;
    am_stage(stages, k_head, v_head, k_begin, k_end, hs, qs);
    am_stage_q<KV>(q_st, qkv, ld, r0, r_end, group, g * group, hs, qs);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int gq = lane >> 2, cq = lane & 3;
    int wr = r0 + warp * 16;
    // The lane's two rows (gq and gq + 8 of the warp's): last and first key each attends to.
    int hi_key[2], lo_key[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int r = wr + gq + 8 * j;
        int p = p0 + r / group;
        hi_key[j] = r < r_end ? p : -1;
        lo_key[j] = r < r_end ? attention_lo(p, window) : 0x7fffffff;
    }
    // The keys any of the warp's rows attends to.
    int w_last = min(r_end, wr + 16) - 1;
    int w_lo = wr < r_end ? attention_lo(p0 + wr / group, window) : 0x7fffffff;
    int w_hi = wr < r_end ? p0 + w_last / group : -1;
    // The lane's ldmatrix row of the warp's q: rows + 8 for lanes 8..15, 24..31, dims + 8 for
    // lanes 16..31.
    const u16* qa = q_st + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * qs + (lane >> 4) * 8;
    float o[HS_MAX / 8][4];
#pragma unroll
    for (int n = 0; n < HS_MAX / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float row_max[2] = {NEG_INF, NEG_INF}, row_sum[2] = {0.0f, 0.0f};
    int buf = 0;
    for (int kc = k_begin; kc < k_end; kc += AM_KEYS, buf ^= 1) {
        // The next stage's copies go out before this one is waited for; the last stage commits
        // an empty group so that one wait rule serves every stage.
        if (kc + AM_KEYS < k_end)
            am_stage(stages + (buf ^ 1) * stage_halves, k_head, v_head, kc + AM_KEYS, k_end, hs, qs);
        else
            cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();  // this stage (and q) copied by every thread
        const u16* k_st = stages + buf * stage_halves;
        if (kc <= w_hi && kc + AM_KEYS - 1 >= w_lo)  // the warp as a whole
            am_warp_stage<KV, HS_MAX>(o, row_max, row_sum, qa, k_st, k_st + AM_KEYS * qs, kc,
                                      lo_key, hi_key, hs, qs, scale, softcap);
        __syncthreads();  // read before the next iteration's copies overwrite it
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        row_sum[j] += __shfl_xor_sync(FULL_MASK, row_sum[j], 1);
        row_sum[j] += __shfl_xor_sync(FULL_MASK, row_sum[j], 2);
        int r = wr + gq + 8 * j;
        // Rows with a key in this span: the merge reads exactly these partials.
        if (r >= r_end || hi_key[j] < c0 || lo_key[j] > c1 - 1) continue;
        int t = r / group, h = g * group + r % group;
        float* out = part + (((size_t)t * heads + h) * splits + s) * (hs + 2);
        if (cq == 0) {
            out[0] = row_max[j];
            out[1] = row_sum[j];
        }
#pragma unroll
        for (int n = 0; n < HS_MAX / 8; n++) {
            if (n * 8 >= hs) break;
            out[2 + n * 8 + 2 * cq] = o[n][2 * j] * (1.0f / AM_P_SCALE);
            out[2 + n * 8 + 2 * cq + 1] = o[n][2 * j + 1] * (1.0f / AM_P_SCALE);
        }
    }
}

// The entries: one per cache kind and accumulator size (head sizes up to 64, 128, 256; the
// smaller accumulators leave registers for more resident blocks).
#define AM_PARAMS                                                                               \
    const float *__restrict__ qkv, int ld, const u16 *__restrict__ k_cache,                     \
        const u16 *__restrict__ v_cache, const int *__restrict__ step, float *__restrict__ part, \
        int heads, int kv_heads, int hs, int capacity, float scale, int window, float softcap,  \
        int splits, int m
#define AM_ARGS                                                                                  \
    qkv, ld, k_cache, v_cache, step, part, heads, kv_heads, hs, capacity, scale, window, softcap, \
        splits, m

extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_f16_64(AM_PARAMS) {
    attention_mma_body<1, 64>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_f16_128(AM_PARAMS) {
    attention_mma_body<1, 128>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_f16_256(AM_PARAMS) {
    attention_mma_body<1, 256>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_bf16_64(AM_PARAMS) {
    attention_mma_body<2, 64>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_bf16_128(AM_PARAMS) {
    attention_mma_body<2, 128>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_bf16_256(AM_PARAMS) {
    attention_mma_body<2, 256>(AM_ARGS);
}
