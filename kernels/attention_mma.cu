// Prompt attention on the tensor cores (mma.m16n8k16, sm_80 and later) for a KV cache in the
// activations' half precision (KV 1: f16, 2: bf16; the caller checks that q is rounded to the
// same kind, which the rotary does, so every operand converts exactly). Same contract as
// attention_tiled_f32 in attention.cu: it writes each (token, head)'s partial (max, sum,
// unnormalised values) for the splits holding keys of the token's range into `part`
// `[m, heads, splits, hs + 2]`, here with splits of AM_SPAN positions, and attention_merge_f32
// (span AM_SPAN) merges them.
//
// Grid (ceil(capacity / AM_SPAN), kv_heads, ceil(m * group / AM_ROWS)), AM_WARPS warps, dynamic
// shared memory am_shared_bytes(hs). A block's rows are (token, head of the KV head's group)
// pairs, token-major; each warp takes 16 of them. The block stages its rows' q once, then per
// AM_KEYS keys of its span the keys and the values (transposed) as they are in the cache; each
// warp computes its 16 x AM_KEYS scores with f32 sums (products of two halves are exact), keeps
// a running max and sum per row (online softmax), and adds P.V into f32 accumulators. P (in
// [0, 1], f32) goes to the mma as a sum of half-precision parts (f16: two, 22 bits; bf16:
// three, 24 bits), scaled by AM_P_SCALE first so that the low parts of weights that matter stay
// normal numbers; the accumulators are scaled back when written. So the result is the f32
// kernel's up to summation order and the parts' last bits. Head sizes: multiples of 16 up to
// HS_MAX (the accumulators are sized for HS_MAX).
#define AM_ROWS 64
#define AM_WARPS (AM_ROWS / 16)
#define AM_KEYS 32
#define AM_SPAN 64
#define AM_PAD 8
#define AM_P_SCALE 4096.0f

// Bytes of dynamic shared memory: q of the rows and the keys ([rows][hs + AM_PAD] halves), the
// values transposed ([hs][AM_KEYS + AM_PAD]).
__host__ __device__ __forceinline__ int am_shared_bytes(int hs) {
    return 2 * ((AM_ROWS + AM_KEYS) * (hs + AM_PAD) + hs * (AM_KEYS + AM_PAD));
}

template <int KV>
__device__ __forceinline__ void am_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if __CUDA_ARCH__ >= 800
    if constexpr (KV == 1)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <int KV>
__device__ __forceinline__ u16 am_half(float x) {
    return KV == 1 ? f32_to_f16(x) : f32_to_bf16(x);
}

template <int KV>
__device__ __forceinline__ float am_float(u16 h) {
    return KV == 1 ? f16_to_f32(h) : bf16_to_f32(h);
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

template <int KV, int HS_MAX>
__device__ __forceinline__ void attention_mma_body(
    const float* __restrict__ qkv, int ld, const u16* __restrict__ k_cache,
    const u16* __restrict__ v_cache, const int* __restrict__ step, float* __restrict__ part,
    int heads, int kv_heads, int hs, int capacity, float scale, int window, float softcap,
    int splits, int m) {
    extern __shared__ __align__(16) u16 am_stage[];
    pdl_enter();
    int s = blockIdx.x, g = blockIdx.y;
    int group = heads / kv_heads;
    int r0 = blockIdx.z * AM_ROWS, r_end = min(m * group, r0 + AM_ROWS);
    if (r0 >= r_end) return;
    int p0 = step[0];
    int p_last = p0 + (r_end - 1) / group;
    int c0 = s * AM_SPAN, c1 = min(capacity, c0 + AM_SPAN);
    // No row of the block attends to a key of this span.
    if (c0 > p_last || c1 - 1 < attention_lo(p0 + r0 / group, window)) return;
    int k_end = min(c1, p_last + 1);
    int qs = hs + AM_PAD, vs = AM_KEYS + AM_PAD;
    u16* q_st = am_stage;              // [AM_ROWS][qs]
    u16* k_st = q_st + AM_ROWS * qs;   // [AM_KEYS][qs]
    u16* v_st = k_st + AM_KEYS * qs;   // [hs][vs]: values transposed
    for (int i = threadIdx.x; i < AM_ROWS * hs; i += blockDim.x) {
        int rr = i / hs, d = i - rr * hs, r = r0 + rr;
        float x = 0.0f;
        if (r < r_end) x = qkv[(size_t)(r / group) * ld + (size_t)(g * group + r % group) * hs + d];
        q_st[rr * qs + d] = am_half<KV>(x);
    }
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
    constexpr int NT = HS_MAX / 8, KS = HS_MAX / 16;
    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float row_max[2] = {NEG_INF, NEG_INF}, row_sum[2] = {0.0f, 0.0f};
    int per_row = hs / 8;  // 16-byte words of a key or value row
    for (int kc = c0; kc < k_end; kc += AM_KEYS) {
        __syncthreads();  // q staged; the previous keys and values read
        for (int i = threadIdx.x; i < AM_KEYS * per_row; i += blockDim.x) {
            int j = i % AM_KEYS, u = i / AM_KEYS, key = kc + j;
            uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
            if (key < k_end) {
                size_t at = ((size_t)g * capacity + key) * hs + u * 8;
                kw = *(const uint4*)(k_cache + at);
                vw = *(const uint4*)(v_cache + at);
            }
            *(uint4*)(k_st + j * qs + u * 8) = kw;
            u32 vv[4] = {vw.x, vw.y, vw.z, vw.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                v_st[(u * 8 + 2 * e) * vs + j] = (u16)(vv[e] & 0xffffu);
                v_st[(u * 8 + 2 * e + 1) * vs + j] = (u16)(vv[e] >> 16);
            }
        }
        __syncthreads();
        if (kc > w_hi || kc + AM_KEYS - 1 < w_lo) continue;  // the warp as a whole
        float sc[4][4];
#pragma unroll
        for (int n = 0; n < 4; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
        const u16* qw = q_st + (warp * 16 + gq) * qs + 2 * cq;
#pragma unroll
        for (int k = 0; k < KS; k++) {
            if (k * 16 >= hs) break;
            const u16* qa = qw + k * 16;
            u32 a[4] = {*(const u32*)qa, *(const u32*)(qa + 8 * qs), *(const u32*)(qa + 8),
                        *(const u32*)(qa + 8 * qs + 8)};
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const u16* kb = k_st + (n * 8 + gq) * qs + k * 16 + 2 * cq;
                am_mma<KV>(sc[n], a, *(const u32*)kb, *(const u32*)(kb + 8));
            }
        }
        // Scores, masked to each row's range; the rows' maxima over the stage (a quad holds a row).
        float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
        for (int n = 0; n < 4; n++) {
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
        for (int n = 0; n < 4; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int j = e >> 1;
                float w = sc[n][e] == NEG_INF ? 0.0f : expf(sc[n][e] - row_max[j]);
                row_sum[j] += w;
                sc[n][e] = w * AM_P_SCALE;
            }
        }
#pragma unroll
        for (int n = 0; n < NT; n++) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        // P.V: the score tiles 2kk and 2kk + 1 are the A operand of keys 16kk .. 16kk + 15.
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            u32 a[AmParts<KV>::n][4];
            am_split<KV>(a, 0, sc[2 * kk][0], sc[2 * kk][1]);
            am_split<KV>(a, 1, sc[2 * kk][2], sc[2 * kk][3]);
            am_split<KV>(a, 2, sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            am_split<KV>(a, 3, sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int n = 0; n < NT; n++) {
                if (n * 8 >= hs) break;
                const u16* vb = v_st + (n * 8 + gq) * vs + kk * 16 + 2 * cq;
                u32 b0 = *(const u32*)vb, b1 = *(const u32*)(vb + 8);
#pragma unroll
                for (int i = 0; i < AmParts<KV>::n; i++) am_mma<KV>(o[n], a[i], b0, b1);
            }
        }
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
        for (int n = 0; n < NT; n++) {
            if (n * 8 >= hs) break;
            out[2 + n * 8 + 2 * cq] = o[n][2 * j] * (1.0f / AM_P_SCALE);
            out[2 + n * 8 + 2 * cq + 1] = o[n][2 * j + 1] * (1.0f / AM_P_SCALE);
        }
    }
}

// The entries: one per cache kind and accumulator size (head sizes up to 128, up to 256).
#define AM_PARAMS                                                                               \
    const float *__restrict__ qkv, int ld, const u16 *__restrict__ k_cache,                     \
        const u16 *__restrict__ v_cache, const int *__restrict__ step, float *__restrict__ part, \
        int heads, int kv_heads, int hs, int capacity, float scale, int window, float softcap,  \
        int splits, int m
#define AM_ARGS \
    qkv, ld, k_cache, v_cache, step, part, heads, kv_heads, hs, capacity, scale, window, softcap, splits, m

extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_f16_128(AM_PARAMS) {
    attention_mma_body<1, 128>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_f16_256(AM_PARAMS) {
    attention_mma_body<1, 256>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_bf16_128(AM_PARAMS) {
    attention_mma_body<2, 128>(AM_ARGS);
}
extern "C" __global__ void __launch_bounds__(AM_WARPS * 32) attention_mma_bf16_256(AM_PARAMS) {
    attention_mma_body<2, 256>(AM_ARGS);
}
