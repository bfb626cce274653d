// genai-bridge CUDA kernels: helpers shared by every kernel family. The loader prepends this
// file to each family's source before NVRTC compiles it (no system headers are needed).
//
// Conventions: activations are f32 in device memory; `act` says which precision the graph's
// activations have (0 f32, 1 f16, 2 bf16), and round_act() rounds a value to it at the same
// points as the native CPU decoder. Step scalars live in device memory (`step[0]` = positions
// already in the KV cache), so a captured CUDA graph replays unchanged from step to step.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef signed char i8;

#define FULL_MASK 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }

// Round to nearest even; NaN stays a quiet NaN.
__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
}

// x rounded to nearest even in f16 (bf false) or bf16 (bf true), as its bits.
__device__ __forceinline__ u32 half_bits(float x, bool bf) {
    return bf ? f32_to_bf16(x) : f32_to_f16(x);
}

// The value of f16 (bf false) or bf16 (bf true) bits: half_bits' inverse.
__device__ __forceinline__ float half_value(u16 h, bool bf) {
    return bf ? bf16_to_f32(h) : f16_to_f32(h);
}

__device__ __forceinline__ float round_act(float x, int act) {
    if (act == 1) return f16_to_f32(f32_to_f16(x));
    if (act == 2) return bf16_to_f32(f32_to_bf16(x));
    return x;
}

// d += a · b on the tensor cores (sm_80 and later): one m16n8k16 product of f16 (BF false) or
// bf16 (BF true) operands with f32 accumulation, the fragments in the PTX ISA's layout (lane
// g * 4 + t holds rows g and g + 8 of a and d, k pairs 2t and 2t + 8 of b's column g).
template <bool BF>
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
#if __CUDA_ARCH__ >= 800
    if constexpr (!BF)
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

// ---- KV cache elements ----------------------------------------------------------------------
//
// The KV cache holds keys and values in the activations' precision (`kv`: 0 f32, 1 f16, 2 bf16;
// the codes of `act`): every value written there is already rounded to it, so a half-precision
// cache holds the same numbers as an f32 one in half the bytes. Element i of a cache row base.
__device__ __forceinline__ float kv_load(const void* base, size_t i, int kv) {
    if (kv == 0) return ((const float*)base)[i];
    u16 h = ((const u16*)base)[i];
    return half_value(h, kv != 1);
}

// Stores x (rounded to nearest in a half-precision cache) as element i.
__device__ __forceinline__ void kv_store(void* base, size_t i, float x, int kv) {
    if (kv == 0) ((float*)base)[i] = x;
    else ((u16*)base)[i] = (u16)half_bits(x, kv != 1);
}

// The first position a token at position p attends to (a sliding window of `window` positions,
// 0 for none).
__device__ __forceinline__ int attention_lo(int p, int window) {
    return window > 0 ? max(0, p + 1 - window) : 0;
}

// Positions one tensor-core prompt block covers (attention_mma.cu) and its merge reads: the
// pass's keys (step = [past, new, ..]: past + new) cut into `spans` pieces, rounded up to 64.
// Read from device memory, so a captured pass cuts the keys of the position it replays at.
__device__ __forceinline__ int prompt_span(const int* __restrict__ step, int spans) {
    int keys = step[0] + step[1];
    int span = (keys + spans - 1) / spans;
    return max(64, (span + 63) / 64 * 64);
}

// Bytes of one cache element.
__device__ __forceinline__ int kv_bytes(int kv) { return kv == 0 ? 4 : 2; }

// Elements 4u .. 4u + 3 of a cache row of kind KV (a compile-time code) as a float4; the row is
// 16-byte aligned for f32 and 8-byte aligned for the half kinds.
template <int KV>
__device__ __forceinline__ float4 kv_load4(const void* row, int u) {
    if constexpr (KV == 0) {
        return ((const float4*)row)[u];
    } else {
        uint2 w = ((const uint2*)row)[u];
        u16 a = (u16)(w.x & 0xffffu), b = (u16)(w.x >> 16);
        u16 c = (u16)(w.y & 0xffffu), d = (u16)(w.y >> 16);
        if constexpr (KV == 1)
            return make_float4(f16_to_f32(a), f16_to_f32(b), f16_to_f32(c), f16_to_f32(d));
        else
            return make_float4(bf16_to_f32(a), bf16_to_f32(b), bf16_to_f32(c), bf16_to_f32(d));
    }
}

// Programmatic dependent launch (sm_90 and later). A kernel launched with the programmatic
// stream serialization attribute may start while the kernel before it still runs;
// griddepcontrol.wait then blocks until that kernel has completed and its writes are visible
// (it returns at once for a kernel launched without the attribute). launch_dependents lets the
// next kernel start early. Every kernel calls pdl_enter() before it touches memory that an
// earlier kernel writes or reads; the dense decode GEMV issues its first weight loads (weights
// are never written by a kernel) between the two.
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_enter() {
    pdl_trigger();
    pdl_wait();
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats of shared memory; the call synchronises the block.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : NEG_INF;
    return warp_max(v);
}

// ---- x split into f16 halves for the int4 tensor-core GEMV (int4_mma.cu) -------------------
//
// x * 2^-e = hi + lo (f16 each), e putting max|x| in [2^14, 2^15): the exponent for a row whose
// largest magnitude is m (0 for a zero, infinite or NaN m).
__device__ __forceinline__ int split_exponent(float m) {
    if (m > 0.0f && m <= 3.0e38f)
        return min(max((int)((__float_as_uint(m) >> 23) & 0xff) - 141, -100), 100);
    return 0;
}

// s as hi + lo, each an f16 (hi the nearest f16 of s, lo the nearest of what is left).
__device__ __forceinline__ void split_halves(float s, u16& hi, u16& lo) {
    hi = f32_to_f16(s);
    lo = f32_to_f16(s - f16_to_f32(hi));
}

// Linear layers (gemv.cu, int4.cu): rows of x per warp, warps per block, weight bytes each
// lane loads per iteration (independent 16-byte loads issued before the arithmetic).
#define GEMV_ROWS 4
#define GEMV_WARPS 8
#define GEMV_LOAD_BYTES 64

// The shared-memory address of a generic pointer into shared memory.
__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// 16 bytes global -> shared without a register round trip (sm_80+; a plain copy before).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src)
                 : "memory");
#else
    *(uint4*)dst = *(const uint4*)src;
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until at most N of this thread's committed copy groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Thread block clusters (sm_90): barriers over the cluster's blocks and reads of another
// block's shared memory (distributed shared memory). Every thread of every block of the cluster
// must arrive at each barrier.
#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

// Arrive without ordering memory: for a barrier that only keeps a block's shared memory alive
// while the others read it (those reads have returned: their values are already used).
__device__ __forceinline__ void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The shared-memory address `addr` of this block, in cluster block `rank`.
__device__ __forceinline__ u32 cluster_map(u32 addr, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

__device__ __forceinline__ float cluster_load(u32 addr) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
    return v;
}
#endif

// One-row (decode) linear kernels (gemv.cu, int4.cu): warps per block and adjacent columns
// per warp (a GLU launch's (gate, up) pair lives in one warp).
#define DEC_WARPS 4
#define DEC_COLS 2

// A 16-byte weight load that bypasses L1 (weights are read once per step; L1 is kept for x,
// which every warp of an SM re-reads). Weights are never written by a kernel, so the
// non-coherent path is safe and these loads may run before pdl_wait().
__device__ __forceinline__ uint4 load_stream16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float load_stream_f32(const float* p) {
    float v;
    asm volatile("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ int load_stream_u8(const u8* p) {
    u32 v;
    asm volatile("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=r"(v) : "l"(p));
    return (int)v;
}

// W_EVICT (a define; docs/cuda.md rounds 22-23): a mask of the dense one-row entries whose weight
// streams are L2 evict-first through a cache policy (the `.L2::evict_first` qualifier itself
// takes only 32-byte loads), so the small per-step data (KV cache, activations, norm weights,
// cos/sin rows) outlives them in L2: each weight is read once a step, and a step streams far
// more than the L2 holds. Bits: 1 the walk (gemv_decode_*), 2 the pipelined entry
// (gemv_decode_pipe_*), 4 the shared entry's copies (gemv_shared.cu); all three by default,
// W_EVICT=0 for none. H200, fp16, same binaries alternating, all against none: Qwen2.5-0.5B
// +2.2%, Llama-3.2-1B +7.3%, Llama-3-8B +0.5%, Qwen2.5-1.5B -0.7%. Most of the 3.2-1B gain and
// the 1.5B loss are occupancy, not the policy: the walk takes 64 registers under it (8 blocks an
// SM, 68 and 7 without), and 8 walk blocks an SM without the policy (DEC_MIN_BLOCKS=8) gave the
// same +7.4% / -1.3%. Marking the int4 entries' streams too cost those models 0.7-1.0%: they
// keep load_stream16.
#ifndef W_EVICT
#define W_EVICT 7
#endif
#define W_POLICY(ENTRY) ((W_EVICT & (ENTRY)) && __CUDA_ARCH__ >= 800)
#define W_WALK 1
#define W_PIPE 2
#define W_SHARED 4

#if W_POLICY(W_WALK | W_PIPE | W_SHARED)
// The evict-first policy (not volatile: the compiler may form it once per kernel).
__device__ __forceinline__ unsigned long long stream_policy() {
    unsigned long long pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
#endif

// load_stream16 for a dense weight stream of ENTRY (W_WALK, W_PIPE or W_SHARED).
template <int ENTRY>
__device__ __forceinline__ uint4 load_dense16(const void* p) {
#if W_POLICY(W_WALK | W_PIPE | W_SHARED)
    if constexpr ((W_EVICT & ENTRY) != 0) {
        uint4 v;
        asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p), "l"(stream_policy()));
        return v;
    }
#endif
    return load_stream16(p);
}

// cp_async16 for a dense weight stream (the shared entries' copies).
__device__ __forceinline__ void cp_async16_dense(void* dst, const void* src) {
#if W_POLICY(W_SHARED)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)),
                 "l"(src), "l"(stream_policy())
                 : "memory");
#else
    cp_async16(dst, src);
#endif
}

// Bytes of dynamic shared memory this launch has.
__device__ __forceinline__ u32 dynamic_smem_bytes() {
    u32 v;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(v));
    return v;
}

__device__ __forceinline__ void load8(const float* w, float* out) {
    float4 a = *(const float4*)w, b = *(const float4*)(w + 4);
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
}

// The 8 activations of row r at column c: from the stage (`xs`, rows kp apart) or from
// global memory (values past k read as 0).
__device__ __forceinline__ void x_unit(const float* xs, int kp, const float* xg, int ldx, int r,
                                       int c, int k, bool staged, bool xvec, float* out) {
    if (staged) {
        load8(xs + (size_t)r * kp + c, out);
    } else if (xvec && c + 8 <= k) {
        load8(xg + (size_t)r * ldx + c, out);
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) out[e] = c + e < k ? xg[(size_t)r * ldx + c + e] : 0.0f;
    }
}

// Stages R rows of x (the first `rows` real, k values each, `ldx` apart) into `xs` as f32 rows
// `kp` apart (kp a multiple of 8), zero past k and past `rows`, when the launch's dynamic
// shared memory holds R * kp floats; returns whether it did. Every thread of the block must
// call it (it synchronises). The staged values equal the global ones: staging never changes
// a result, only where the inner loop reads from.
__device__ __forceinline__ bool stage_rows(float* xs, int kp, const float* x, int ldx, int k,
                                           int rows, int R, bool xvec) {
    if ((size_t)R * kp * sizeof(float) > dynamic_smem_bytes()) return false;
    int total = R * kp;
    if (xvec && (k % 4) == 0) {
        // kp and k are multiples of 4: a float4 never straddles a row or the end of one.
        for (int i = threadIdx.x; i < total / 4; i += blockDim.x) {
            int r = (4 * i) / kp, c = (4 * i) % kp;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < rows && c < k) v = *(const float4*)(x + (size_t)r * ldx + c);
            ((float4*)xs)[i] = v;
        }
    } else {
        for (int i = threadIdx.x; i < total; i += blockDim.x) {
            int r = i / kp, c = i % kp;
            xs[i] = r < rows && c < k ? x[(size_t)r * ldx + c] : 0.0f;
        }
    }
    __syncthreads();
    return true;
}

// The linear epilogue, as the CPU decoder: act 0 gives y = acc + b; otherwise
// y = round(acc), then y = round(y + b).
__device__ __forceinline__ void linear_store(float acc, const float* bias, int col, int act,
                                           float* y) {
    if (act == 0) {
        *y = bias ? acc + bias[col] : acc;
    } else {
        float v = round_act(acc, act);
        if (bias) v = round_act(v + bias[col], act);
        *y = v;
    }
}

// Feed-forward activations: 0 SiLU, 1 GELU (erf), 2 GELU (tanh approximation).
__device__ __forceinline__ float activation(float x, int kind) {
    if (kind == 0) return x / (1.0f + expf(-x));
    if (kind == 1) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

// activation() as a call: the linear epilogues use it once per output, and inlining its three
// branches into every linear kernel variant multiplies their code size.
__device__ __noinline__ float activation_outlined(float x, int kind) { return activation(x, kind); }

// Sums each column's per-warp partials (`split` warps per column) in warp order, so the
// result does not depend on timing, and stores the rows through linear_store. With glu >= 0
// the columns are (gate, up) pairs, both in this block (GEMV_WARPS / split even): the pair's
// leader stores activation(gate, glu) * up at column col / 2 (no rounding: the MLP runs in f32).
template <int R>
__device__ __forceinline__ void split_reduce_store(float (&acc)[R], int rows, int split,
                                                  bool valid, const float* bias, int col,
                                                  int act, float* y, int ldy, int r0,
                                                  int glu) {
    __shared__ float red[GEMV_WARPS][R];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < R; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0) red[warp][r] = v;
    }
    __syncthreads();
    if (!valid || lane != 0 || warp % split != 0) return;
    if (glu >= 0 && (col & 1)) return;
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (r >= rows) break;
        float v = 0.0f;
        for (int w = warp; w < warp + split; w++) v += red[w][r];
        if (glu >= 0) {
            float u = 0.0f;
            for (int w = warp + split; w < warp + 2 * split; w++) u += red[w][r];
            if (bias) {
                v += bias[col];
                u += bias[col + 1];
            }
            y[(size_t)(r0 + r) * ldy + col / 2] = activation_outlined(v, glu) * u;
        } else {
            linear_store(v, bias, col, act, y + (size_t)(r0 + r) * ldy + col);
        }
    }
}

// ---- One-row helpers of gemv.cu and gemv_shared.cu -----------------------------------------

// The raw bytes of the 8-value unit at column c of a weight row (zero past k).
// ENTRY: the launching entry's bit of the W_EVICT mask.
template <typename W, int ENTRY>
__device__ __forceinline__ void fetch_unit(const W* wr, int c, int k, bool vec,
                                           uint4 (&raw)[sizeof(W) / 2]) {
    if (vec) {
#pragma unroll
        for (int h = 0; h < (int)sizeof(W) / 2; h++) raw[h] = load_dense16<ENTRY>(wr + c + h * (16 / sizeof(W)));
    } else {
        W tmp[8];
#pragma unroll
        for (int e = 0; e < 8; e++) tmp[e] = c + e < k ? wr[c + e] : (W)0;
#pragma unroll
        for (int h = 0; h < (int)sizeof(W) / 2; h++) raw[h] = ((const uint4*)tmp)[h];
    }
}

// acc + the unit's 8 products, in order. kind: 0 f32, 1 f16, 2 bf16 weights.
template <int KIND, int H>
__device__ __forceinline__ float dot_unit(const uint4 (&raw)[H], const float* xv, float acc) {
    u32 words[4 * H];
#pragma unroll
    for (int h = 0; h < H; h++) {
        words[4 * h] = raw[h].x;
        words[4 * h + 1] = raw[h].y;
        words[4 * h + 2] = raw[h].z;
        words[4 * h + 3] = raw[h].w;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float wv;
        if (KIND == 0) {
            wv = __uint_as_float(words[e]);
        } else {
            u16 bits = (u16)(e & 1 ? words[e / 2] >> 16 : words[e / 2] & 0xffffu);
            wv = half_value(bits, KIND != 1);
        }
        acc = fmaf(wv, xv[e], acc);
    }
    return acc;
}

// The rows of a warp's DEC_COLS columns from col0 (columns past n: row 0, never used).
template <typename W>
__device__ __forceinline__ void decode_columns(const W* w, int n, int k, int col0,
                                               const W* (&wr)[DEC_COLS], bool (&valid)[DEC_COLS]) {
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        valid[j] = col0 + j < n;
        wr[j] = w + (size_t)(valid[j] ? col0 + j : 0) * k;
    }
}

// The one-row kernels' epilogue: each warp's DEC_COLS partials are summed by butterfly, the
// `split` warps sharing a column pair (adjacent in the block) are summed in warp order, so the
// result does not depend on timing, and the pair is stored through linear_store, or with
// glu >= 0 as activation(gate, glu) * up at column col0 / 2 (no rounding: the MLP runs in
// f32). Every thread of the block must call it (it synchronises when split > 1).
__device__ __forceinline__ void decode_reduce_store(float (&acc)[DEC_COLS],
                                                    const bool (&valid)[DEC_COLS], int col0,
                                                    int split, const float* bias, float* y,
                                                    int glu, int act) {
    __shared__ float red[DEC_WARPS][DEC_COLS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0) red[warp][j] = v;
    }
    if (split > 1) __syncthreads();
    if (lane != 0 || warp % split != 0) return;
    float sum[DEC_COLS];
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        sum[j] = 0.0f;
        for (int p = 0; p < split; p++) sum[j] += red[warp + p][j];
    }
    if (glu >= 0) {
        if (!valid[1]) return;
        float g = sum[0], u = sum[1];
        if (bias) {
            g += bias[col0];
            u += bias[col0 + 1];
        }
        y[col0 / 2] = activation_outlined(g, glu) * u;
        return;
    }
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++)
        if (valid[j]) linear_store(sum[j], bias, col0 + j, act, y + col0 + j);
}
