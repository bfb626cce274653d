// Timing prototype (benches/cuda_step.rs, src/cuda/step_timing.rs), not a product kernel: a
// decode layer's seven dependent phases (norm, qkv, an attention stand-in, o, norm, gate/up,
// down) over fp16 weights, run either as one launch per phase (programmatic dependent launches
// in a CUDA graph, the decode step's present shape) or as one persistent launch whose blocks
// pass a grid-wide barrier between phases. Both run the same phase bodies, so each column is
// summed by one warp in the same order either way and the two give the same bits.
//
// A GEMV phase: warps take items of SP_COLS adjacent columns; per round each lane loads SP_U
// 16-byte units (8 halves) of each column's row, then multiplies them by x staged in shared
// memory, with the next round's loads already issued. The first round of a warp's first item is loaded before the wait (the PDL wait, or
// the grid barrier in the persistent kernel with `early`): weights are never written.
// A tiny phase (the norms, and the stand-in for the attention, which is latency bound): block
// 0 alone scales its row by the inverse RMS.

#define SP_THREADS 256
#define SP_WARPS 8
#ifndef SP_COLS  // columns per warp item (GENAI_BRIDGE_NVRTC_DEFINES may set it; even)
#define SP_COLS 4
#endif
#if SP_COLS % 2 != 0
#error "SP_COLS must be even: a (gate, up) pair's two rows share an item"
#endif
#ifndef SP_U  // 16-byte units per lane, column and round
#define SP_U 2
#endif

// One phase (all 64-bit fields: the host writes them as u64 words). kind 0: GEMV y[n] = W x
// with W [n, k]; glu: W's rows are (gate, up) pairs, as the decoder orders them, and y has n / 2
// values silu(gate . x) * (up . x). kind 1: y = x / rms(x), n values (a norm); kind 2: the same
// as a stand-in for the attention (see SP_ATTN_NS).
struct Phase {
    long long kind, n, k, glu;
    const u16* w;
    const float* x;
    float* y;
};

struct Loads {
    uint4 v[SP_COLS][SP_U];
};

__device__ __forceinline__ void sp_issue(Loads& l, const Phase& p, int item, int round,
                                         int lane) {
    int c0 = item * SP_COLS;
#pragma unroll
    for (int c = 0; c < SP_COLS; c++) {
#pragma unroll
        for (int u = 0; u < SP_U; u++) {
            int chunk = (round * SP_U + u) * 32 + lane;
            bool in = c0 + c < p.n && chunk * 8 < p.k;
            l.v[c][u] = in ? load_stream16(p.w + (size_t)(c0 + c) * p.k + chunk * 8)
                           : make_uint4(0, 0, 0, 0);
        }
    }
}

__device__ __forceinline__ void sp_consume(const Loads& l, float* acc, const float* xs, int k,
                                           int round, int lane) {
#pragma unroll
    for (int u = 0; u < SP_U; u++) {
        int chunk = (round * SP_U + u) * 32 + lane;
        if (chunk * 8 >= k) continue;
        const float* xv = xs + chunk * 8;
#pragma unroll
        for (int c = 0; c < SP_COLS; c++) {
            const u32 h[4] = {l.v[c][u].x, l.v[c][u].y, l.v[c][u].z, l.v[c][u].w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                acc[c] += f16_to_f32((u16)(h[e] & 0xffff)) * xv[2 * e];
                acc[c] += f16_to_f32((u16)(h[e] >> 16)) * xv[2 * e + 1];
            }
        }
    }
}

// Activations written by another block of the same persistent launch: read from the L2 (never
// a stale L1 line of an earlier layer's value at the same address).
__device__ __forceinline__ float sp_load(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ float sp_silu(float v) { return v / (1.0f + __expf(-v)); }

// A barrier among the block's threads: all of them (the one-launch-per-phase and persistent
// kernels), or with NAMED only the first SP_THREADS (step_stream.cu's staging warps).
template <bool NAMED>
__device__ __forceinline__ void sp_sync() {
    if (NAMED)
        asm volatile("bar.sync 1, %0;" ::"n"(SP_THREADS) : "memory");
    else
        __syncthreads();
}

// Loads batches of BATCH of a thread's values at once (x is read from the L2 with latency that
// a loop of one load at a time would pay per value), then `use`s them in order: use(i, x[i]).
// THREADS threads from thread 0 take part.
#define SP_BATCH 8
template <int THREADS = SP_THREADS, int BATCH = SP_BATCH, typename Use>
__device__ __forceinline__ void sp_batched(const float* x, int n, Use use) {
    for (int base = threadIdx.x; base < n; base += BATCH * THREADS) {
        float v[BATCH];
#pragma unroll
        for (int j = 0; j < BATCH; j++) {
            int i = base + j * THREADS;
            v[j] = i < n ? sp_load(x + i) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < BATCH; j++) {
            int i = base + j * THREADS;
            if (i < n) use(i, v[j]);
        }
    }
}

// A GEMV phase's x values as it reads them, each to out(i, h), rounded to f16 (the decoder's
// activations are f16; step_stream.cu keeps x as halves).
template <int THREADS = SP_THREADS, int BATCH = SP_BATCH, typename Out>
__device__ __forceinline__ void sp_x_values(const Phase& p, Out out) {
    sp_batched<THREADS, BATCH>(p.x, (int)p.k, [&](int i, float a) { out(i, f32_to_f16(a)); });
}

// A GEMV's output row `col` (of n) is `sum`: stored as y[col], or with glu (pairs) y[col / 2] =
// silu(gate) * up once the pair's up row (odd col) is known, its gate's sum in `gate`.
__device__ __forceinline__ void sp_output(const Phase& p, long long col, float gate, float sum) {
    if (!p.glu)
        p.y[col] = sum;
    else if (col & 1)
        p.y[col / 2] = sp_silu(gate) * sum;
}

// Stages the phase's x (k values) into shared memory; every thread of the block calls it.
__device__ __forceinline__ void sp_stage(float* xs, const Phase& p) {
    sp_x_values(p, [&](int i, u16 h) { xs[i] = f16_to_f32(h); });
    __syncthreads();
}

// The GEMV items of warp `gw` of `warps`, the first item's first round already in `first`:
// the warp's (item, round) steps in order, each step's loads issued before the step before it
// is multiplied (two steps of loads in flight).
__device__ __forceinline__ void sp_gemv(const Phase& p, const float* xs, const Loads& first,
                                        int gw, int warps, int lane) {
    int items = (int)((p.n + SP_COLS - 1) / SP_COLS);
    int rounds = (int)((p.k + SP_U * 256 - 1) / (SP_U * 256));
    if (gw >= items) return;
    int steps = (items - gw + warps - 1) / warps * rounds;
    Loads cur = first, next;
    float acc[SP_COLS];
#pragma unroll
    for (int c = 0; c < SP_COLS; c++) acc[c] = 0.0f;
    for (int s = 0; s < steps; s++) {
        int item = gw + s / rounds * warps, r = s % rounds;
        if (s + 1 < steps) sp_issue(next, p, gw + (s + 1) / rounds * warps, (s + 1) % rounds, lane);
        sp_consume(cur, acc, xs, (int)p.k, r, lane);
        if (r == rounds - 1) {
            float gate = 0.0f;  // an item holds whole pairs (SP_COLS is even)
#pragma unroll
            for (int c = 0; c < SP_COLS; c++) {
                float sum = warp_sum(acc[c]);
                if (lane == 0 && item * SP_COLS + c < p.n)
                    sp_output(p, item * SP_COLS + c, gate, sum);
                gate = sum;
                acc[c] = 0.0f;
            }
        }
        cur = next;
    }
}

// SP_ATTN_NS: nanoseconds the attention stand-in (a tiny phase of kind 2) spends after its
// work, so a run can give it the latency of a real decode attention (0: none).
#ifndef SP_ATTN_NS
#define SP_ATTN_NS 0
#endif

__device__ __forceinline__ unsigned long long sp_now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// x / rms(x) (n values) by the calling block's (consumer) threads, each value to out(i, v). A
// stand-in for the attention (`attention`) then waits SP_ATTN_NS. Rows of up to SP_NORM_HELD
// values a thread are read once (held in registers between the sum and the scaling), longer
// ones twice; the sums are the same either way.
#define SP_NORM_HELD 16
template <bool NAMED, typename Out>
__device__ __forceinline__ void sp_norm(const float* x, int n, bool attention, Out out) {
    __shared__ float part[SP_WARPS];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    bool held = n <= SP_NORM_HELD * SP_THREADS;
    float v[SP_NORM_HELD];
    float s = 0.0f;
    if (held) {
#pragma unroll
        for (int j = 0; j < SP_NORM_HELD; j++) {
            int i = threadIdx.x + j * SP_THREADS;
            v[j] = i < n ? sp_load(x + i) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < SP_NORM_HELD; j++)
            if (threadIdx.x + j * SP_THREADS < n) s += v[j] * v[j];
    } else {
        sp_batched(x, n, [&](int, float a) { s += a * a; });
    }
    s = warp_sum(s);
    if (lane == 0) part[warp] = s;
    sp_sync<NAMED>();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < SP_WARPS; w++) total += part[w];
    float scale = rsqrtf(total / (float)n + 1e-6f);
    if (held) {
#pragma unroll
        for (int j = 0; j < SP_NORM_HELD; j++) {
            int i = threadIdx.x + j * SP_THREADS;
            if (i < n) out(i, v[j] * scale);
        }
    } else {
        sp_batched(x, n, [&](int i, float a) { out(i, a * scale); });
    }
    if (SP_ATTN_NS > 0 && attention && threadIdx.x == 0) {
        unsigned long long until = sp_now_ns() + SP_ATTN_NS;
        while (sp_now_ns() < until) {
        }
    }
    sp_sync<NAMED>();
}

__device__ __forceinline__ void sp_tiny(const Phase& p) {
    sp_norm<false>(p.x, (int)p.n, p.kind == 2, [&](int i, float v) { p.y[i] = v; });
}

// One phase as its own launch (grid: one item per warp for a GEMV, one block for a tiny one).
extern "C" __global__ void __launch_bounds__(SP_THREADS)
    step_phase(const Phase* __restrict__ phases, int index) {
    extern __shared__ __align__(16) float xs[];
    Phase p = phases[index];  // the table is written before the graph runs
    pdl_trigger();
    int lane = threadIdx.x & 31, gw = blockIdx.x * SP_WARPS + (threadIdx.x >> 5);
    if (p.kind == 0) {
        Loads first;
        sp_issue(first, p, gw, 0, lane);
        pdl_wait();
        sp_stage(xs, p);
        sp_gemv(p, xs, first, gw, gridDim.x * SP_WARPS, lane);
    } else {
        pdl_wait();
        sp_tiny(p);
    }
}

// Arrives at grid barrier number `index` (1, 2, ...) and waits for every block to arrive.
// `count` starts at 0 for the launch; it is only ever incremented, so no reset races. The
// block's writes are ordered before its arrival by the block barrier and the release (which is
// cumulative), and the acquire orders the next phase's reads after every block's arrival.
// SP_FENCED=1: full fences around a returning atomic instead (the textbook form).
__device__ __forceinline__ void sp_grid_barrier(unsigned* count, unsigned index) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned target = index * gridDim.x, seen;
#if defined(SP_FENCED) && SP_FENCED
        __threadfence();
        atomicAdd(count, 1u);
#else
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
#endif
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(count) : "memory");
        } while (seen < target);
#if defined(SP_FENCED) && SP_FENCED
        __threadfence();
#endif
    }
    __syncthreads();
}

// Every phase in one launch: all blocks resident (a cooperative launch), a grid barrier
// between phases; with `early` each block loads its first weights of a GEMV phase before the
// barrier that ends the phase before it.
extern "C" __global__ void __launch_bounds__(SP_THREADS, 2)
    step_persistent(const Phase* __restrict__ phases, int count, unsigned* barrier, int early) {
    extern __shared__ __align__(16) float xs[];
    int lane = threadIdx.x & 31, gw = blockIdx.x * SP_WARPS + (threadIdx.x >> 5);
    int warps = gridDim.x * SP_WARPS;
    for (int i = 0; i < count; i++) {
        Phase p = phases[i];
        Loads first;
        if (p.kind == 0 && early) sp_issue(first, p, gw, 0, lane);
        if (i > 0) sp_grid_barrier(barrier, (unsigned)i);
        if (p.kind == 0) {
            if (!early) sp_issue(first, p, gw, 0, lane);
            sp_stage(xs, p);
            sp_gemv(p, xs, first, gw, warps, lane);
            __syncthreads();  // xs is restaged by the next GEMV phase
        } else if (blockIdx.x == 0) {
            sp_tiny(p);
        }
    }
}

// Fills n halves with values in [-1/64, 1/64) from a hash of the index and `seed`.
extern "C" __global__ void fill_f16(u16* w, unsigned long long n, unsigned seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        w[i] = f32_to_f16(((float)(h & 1023) - 512.0f) / 32768.0f);
    }
}
