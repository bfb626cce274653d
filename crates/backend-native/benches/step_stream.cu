// Timing prototype, appended to step_proto.cu (whose Phase table, phase bodies and helpers it
// uses): the same layer chain as one persistent launch whose weight stream never waits for the
// chain. Each block (one an SM, SS_THREADS threads) owns a contiguous share of every GEMV's
// rows; its producer warp copies that share, phase after phase and layer after layer, into a
// ring of shared-memory slots with bulk copies (cp.async.bulk, completion on an mbarrier), as
// far ahead as the ring allows. Weights are never written, so nothing orders those copies after
// the chain: while the consumers wait for a phase's input (a counter every block bumps when its
// share of a phase is written) or for a tiny phase, the ring keeps filling from DRAM.
//
// The SS_CONSUMERS consumer warps run the chain: per GEMV phase they wait for the counter of
// the phase before; they stage x as halves (the values sp_stage gives; with `fold` the first
// SP_WARPS of them compute the norm of the phase before from its input: sp_norm, whose sums
// keep the one-block norm's order); then all multiply the slots. A warp takes a group of rows
// of its block's share (groups round-robin over the warps) and walks its column chunks in
// order; a lane's 16-byte units of a row are lane, lane + 32, ... as in sp_consume, so every
// output has the one-launch-per-phase kernel's bits. Tiny phases run on block 0. Barrier 1
// (SP_THREADS threads) is the staging warps' own; barrier 2 (SS_CONSUMERS warps) orders the
// phases.

#ifndef SS_CONSUMERS  // consumer warps (GENAI_BRIDGE_NVRTC_DEFINES may set it; >= SP_WARPS)
#define SS_CONSUMERS 16
#endif
#define SS_THREADS (SS_CONSUMERS * 32 + 32)
// Halves of a row's chunk at most (a multiple of 256, so a lane's units keep their order across
// chunks; a chunk is also at most a slot) and rows a slot holds at most. A slot's size is a
// launch parameter (`slot_halves`, a multiple of 256). Round 25 (16 KB slots, 8 warps): 512
// columns (16 rows a slot, 1 KB copies) streamed at half the rate of 2,048 (4 KB copies): the
// bulk copies' size set the pace; 2,048 to 8,192 were within 5% of each other.
#ifndef SS_CMAX  // GENAI_BRIDGE_NVRTC_DEFINES may set it (a multiple of 256; docs/cuda.md round 25)
#define SS_CMAX 2048
#endif
#define SS_RMAX 16
// A block's rows of a GLU phase at most: their sums wait in shared memory (`sums` in
// step_stream) until the block's warps are done, then each pair gives its output (the host
// checks the shapes).
#define SS_YMAX 512

// The block's share of a GEMV phase: rows [r0, r0 + rows) in groups of R rows; a slot holds
// one chunk (C columns, the last one fewer) of a group's rows.
struct SsShare {
    int r0, rows, R, C, chunks, groups;
};

__device__ __forceinline__ SsShare ss_share(const Phase& p, int slot_halves) {
    SsShare s;
    long long g = gridDim.x, b = blockIdx.x, pair = p.glu ? 2 : 1;  // (gate, up) pairs stay whole
    s.r0 = (int)(p.n / pair * b / g * pair);
    s.rows = (int)(p.n / pair * (b + 1) / g * pair) - s.r0;
    int cmax = min(SS_CMAX, slot_halves);
    s.C = p.k < cmax ? (int)p.k : cmax;
    s.chunks = (int)((p.k + s.C - 1) / s.C);
    s.R = slot_halves / s.C;
    s.R = s.R < 1 ? 1 : (s.R > SS_RMAX ? SS_RMAX : s.R);
    s.groups = (s.rows + s.R - 1) / s.R;
    return s;
}

__device__ __forceinline__ void ss_init(unsigned long long* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
                 : "memory");
}

__device__ __forceinline__ void ss_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void ss_expect(unsigned long long* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

// A prototype must not hang its machine: a wait still spinning 2 s after it began traps (the
// launch then fails with an error the host reports).
// Called on every failed poll; reads the clock only every 256th.
__device__ __forceinline__ void ss_deadline(unsigned long long& until, u32& polls) {
    if ((polls++ & 255) != 0) return;
    unsigned long long now = sp_now_ns();
    if (until == 0)
        until = now + 2000000000ull;
    else if (now > until)
        __trap();
}

// Waits until the barrier's phase of this parity has completed. A parity names a phase only
// while the barrier is at most one phase behind the waiter: the callers make sure of that.
__device__ __forceinline__ void ss_wait(unsigned long long* bar, u32 parity) {
    u32 done, polls = 0;
    unsigned long long until = 0;
    for (;;) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
            "selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity)
            : "memory");
        if (done) return;
        ss_deadline(until, polls);
    }
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared, counted on `bar`.
__device__ __forceinline__ void ss_bulk(void* dst, const void* src, u32 bytes,
                                        unsigned long long* bar, bool evict) {
#if __CUDA_ARCH__ >= 900
    if (evict) {
        unsigned long long pol;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
            "[%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
            "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
            : "memory");
    } else {
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];" ::"r"(smem_u32(dst)),
            "l"(src), "r"(bytes), "r"(smem_u32(bar))
            : "memory");
    }
#else
    __trap();  // the host runs this kernel on sm_90 and later only
#endif
}

__device__ __forceinline__ u32 ss_acquire(const unsigned* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The trace (a launch parameter; null: none): per phase and block, SS_EVENTS words of the SM's
// clock (cycles: %globaltimer ticks too coarsely to time a phase), written by consumer thread 0
// (the phase's READY after its input's wait, STAGED after x, CONSUMED when the block's last
// warp is done, PUBLISHED after its counter's release), by the producer (FIRST and LAST: its
// phase's first and last slot issued; PRODUCER_WAIT: cycles it waited for empty slots in the
// phase) and by consumer warp 0 (FULL_WAIT: cycles it waited for full slots in the phase); and
// GLOBAL, %globaltimer's ns beside READY, which places each SM's clock on one time line.
// src/cuda/step_timing/trace.rs reads it.
#define SS_EVENTS 9
enum SsEvent {
    SS_READY,
    SS_STAGED,
    SS_CONSUMED,
    SS_PUBLISHED,
    SS_FIRST,
    SS_LAST,
    SS_PRODUCER_WAIT,
    SS_FULL_WAIT,
    SS_GLOBAL
};

__device__ __forceinline__ unsigned long long ss_clock() { return (unsigned long long)clock64(); }

__device__ __forceinline__ void ss_note(unsigned long long* trace, int phase, int event,
                                        unsigned long long v) {
    if (trace != nullptr)
        trace[((size_t)phase * gridDim.x + blockIdx.x) * SS_EVENTS + event] = v;
}

__device__ __forceinline__ void ss_stamp(unsigned long long* trace, int phase, int event) {
    if (trace != nullptr) ss_note(trace, phase, event, ss_clock());
}

// Consumer thread 0 notes that phase `phase` may start (on both clocks).
__device__ __forceinline__ void ss_ready(unsigned long long* trace, int phase) {
    if (trace == nullptr || threadIdx.x != 0) return;
    ss_note(trace, phase, SS_READY, ss_clock());
    ss_note(trace, phase, SS_GLOBAL, sp_now_ns());
}

// Every consumer warp's barrier (barrier 2).
__device__ __forceinline__ void ss_sync() {
    asm volatile("bar.sync 2, %0;" ::"n"(SS_CONSUMERS * 32) : "memory");
}

// Consumer thread 0 waits until `count` blocks have finished phase `dep`, then the consumers
// pass a barrier (so every consumer's reads of its output come after the acquire).
__device__ __forceinline__ void ss_await(const unsigned* counters, int dep, u32 count) {
    unsigned long long until = 0;
    u32 polls = 0;
    if (dep >= 0 && threadIdx.x == 0)
        while (ss_acquire(counters + dep) < count) ss_deadline(until, polls);
    ss_sync();
}

// Publishes the consumers' writes of phase i: after a barrier of all of them, one release a
// block; or (`per_warp`) one release a warp after its own writes (a __syncwarp orders its
// lanes' writes before lane 0's release), so no warp waits for the block's last one and the
// releases' latency overlaps (the block's barrier before the next staging keeps x and the
// sums safe). Thread 0 stamps the trace (with `per_warp`, warp 0's release).
__device__ __forceinline__ void ss_publish(unsigned* counters, int i, bool per_warp,
                                           unsigned long long* trace) {
    if (per_warp)
        __syncwarp();
    else
        ss_sync();
    if ((threadIdx.x & 31) == 0 && (per_warp || threadIdx.x == 0)) {
        if (threadIdx.x == 0) ss_stamp(trace, i, SS_CONSUMED);
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counters + i) : "memory");
        if (threadIdx.x == 0) ss_stamp(trace, i, SS_PUBLISHED);
    }
}

// A block's slots, in the order the producer fills them: every GEMV phase's share, slot after
// slot. Groups go to the warps round-robin, so a phase's slots come in waves of SS_CONSUMERS
// groups, chunk-major inside a wave: consecutive slots feed different warps. `diag` bits:
// SS_NO_COPY, the producer arrives on each slot without copying (the consumers multiply
// whatever the slot holds), so a run times the chain and the products alone; SS_NO_COMPUTE and
// SS_NO_WAIT, see ss_consume and step_stream.
#define SS_NO_COMPUTE 1
#define SS_NO_COPY 2
#define SS_NO_WAIT 4

// Where slot j of a phase's share comes from: its wave (SS_CONSUMERS groups, the last one
// fewer), then its chunk c and group g inside the wave (chunk-major); `rows` rows of columns
// [c * C, c * C + cs), the first at the returned address.
__device__ __forceinline__ const u16* ss_source(const Phase& p, const SsShare& s, int j, int& rows,
                                                int& cs) {
    int wave = j / (SS_CONSUMERS * s.chunks), w0 = wave * SS_CONSUMERS;
    int t = j - w0 * s.chunks, wg = min(SS_CONSUMERS, s.groups - w0);
    int c = t / wg, g = w0 + t - c * wg;
    rows = min(s.R, s.rows - g * s.R);
    cs = min(s.C, (int)p.k - c * s.C);
    return p.w + (size_t)(s.r0 + g * s.R) * p.k + c * s.C;
}

// The producer: lanes 0 to planes - 1 of the last warp (planes <= slots). A lane is one issuer:
// its instruction latency per slot (the empty wait, the barrier's expect, the copy and the
// bookkeeping: ~0.2 us, docs/cuda.md round 26) bounded round 25's streamed step, so the lanes
// take a batch of `planes` consecutive slots of a phase at a time, each waiting for its own
// slot's release and filling it. A batch never spans two phases.
__device__ void ss_produce(const Phase* phases, int count, char* ring, int slots,
                           int slot_halves, unsigned long long* full, unsigned long long* empty,
                           bool evict, int diag, int planes, unsigned long long* trace) {
    int lane = threadIdx.x & 31;
    int first = 0;  // the batch's first slot,
    u32 use = 0;    // and its use
    for (int i = 0; i < count; i++) {
        Phase p = phases[i];
        if (p.kind != 0) continue;
        SsShare s = ss_share(p, slot_halves);
        int total = s.groups * s.chunks;
        unsigned long long waited = 0;
        for (int j0 = 0; j0 < total; j0 += planes) {
            int j = j0 + lane, slot = first + lane;
            u32 mine = use;
            if (slot >= slots) {
                slot -= slots;
                mine++;
            }
            if (j < total) {
                if (mine > 0) {
                    unsigned long long t0 = trace != nullptr ? ss_clock() : 0;
                    ss_wait(empty + slot, (mine - 1) & 1);
                    if (trace != nullptr) waited += ss_clock() - t0;
                }
                int rows, cs;
                const u16* src = ss_source(p, s, j, rows, cs);
                if (diag & SS_NO_COPY) {
                    ss_arrive(full + slot);
                } else {
                    ss_expect(full + slot, (u32)(rows * cs * 2));
                    char* dst = ring + (size_t)slot * slot_halves * 2;
                    if (cs == p.k)  // whole rows: adjacent in memory, one copy
                        ss_bulk(dst, src, (u32)(rows * cs * 2), full + slot, evict);
                    else
                        for (int r = 0; r < rows; r++)
                            ss_bulk(dst + r * cs * 2, src + (size_t)r * p.k, (u32)(cs * 2),
                                    full + slot, evict);
                }
            }
            // The batch ends together: a lane that ran ahead into its next batch could wait on
            // an empty barrier two uses behind (consecutive uses of a slot belong to different
            // lanes unless slots is a multiple of planes), where the parity names the wrong use
            // (round 26, calls 3-4: launches failed with 16 or 32 KiB slots and 4 lanes; 16 lanes
            // failed with this barrier too, for a reason not found).
            __syncwarp(planes == 32 ? 0xffffffffu : (1u << planes) - 1);
            if (j0 == 0 && lane == 0) ss_stamp(trace, i, SS_FIRST);
            first += min(planes, total - j0);
            if (first >= slots) {
                first -= slots;
                use++;
            }
        }
        if (lane == 0) {
            ss_stamp(trace, i, SS_LAST);
            ss_note(trace, i, SS_PRODUCER_WAIT, waited);
        }
    }
}

// The ring: `slots` slots, their full and empty barriers, and per slot the uses consumed so far.
// Warps take groups round-robin, so a warp may reach a slot's next use before another warp has
// consumed its present one; it first waits for that (`consumed`), so the full barrier is never
// two phases behind it (where its parity would name the wrong phase).
struct SsRing {
    const char* slots_at;
    int slots, slot_halves;
    unsigned long long *full, *empty;
    volatile u32* consumed;
};

// One consumer warp's groups of a GEMV phase whose x is staged in xh (halves); `stage` is the
// block's first slot number of this phase; a GLU phase's sums go to `sums` (the block's rows),
// the others' to y. Returns the cycles its lane 0 waited for full slots when `timed` (else 0).
// SS_NO_COMPUTE (a `diag` bit): the slots are waited for and released without their products.
__device__ unsigned long long ss_consume(const Phase& p, const SsShare& s, const u16* xh,
                                         float* sums, const SsRing& q, int stage, int warp,
                                         int lane, int diag, bool timed) {
    unsigned long long waited = 0;
    for (int g = warp; g < s.groups; g += SS_CONSUMERS) {
        int rows = min(s.R, s.rows - g * s.R);
        float acc[SS_RMAX];
#pragma unroll
        for (int r = 0; r < SS_RMAX; r++) acc[r] = 0.0f;
        for (int c = 0; c < s.chunks; c++) {
            int w0 = g - warp, wg = min(SS_CONSUMERS, s.groups - w0);
            int at = stage + w0 * s.chunks + c * wg + warp;
            int slot = at % q.slots;
            u32 use = (u32)(at / q.slots);
            unsigned long long t0 = timed ? ss_clock() : 0;
            if (lane == 0) {
                unsigned long long until = 0;
                u32 polls = 0;
                while (q.consumed[slot] < use) ss_deadline(until, polls);
            }
            __syncwarp();
            ss_wait(q.full + slot, use & 1);
            if (timed) waited += ss_clock() - t0;
            int c0 = c * s.C, units = (min(s.C, (int)p.k - c0)) / 8;
            const uint4* tile = (const uint4*)(q.slots_at + (size_t)slot * q.slot_halves * 2);
            for (int u = (diag & SS_NO_COMPUTE) ? units : lane; u < units; u += 32) {
                uint4 xr = *(const uint4*)(xh + c0 + u * 8);
                const u32 xw[4] = {xr.x, xr.y, xr.z, xr.w};
                float xv[8];
#pragma unroll
                for (int e = 0; e < 8; e++)
                    xv[e] = f16_to_f32((u16)(e & 1 ? xw[e / 2] >> 16 : xw[e / 2] & 0xffffu));
#pragma unroll
                for (int r = 0; r < SS_RMAX; r++) {
                    if (r >= rows) break;
                    const uint4 raw[1] = {tile[r * units + u]};
                    acc[r] = dot_unit<1, 1>(raw, xv, acc[r]);  // the order of sp_consume's sums
                }
            }
            __syncwarp();
            if (lane == 0) {
                q.consumed[slot] = use + 1;
                ss_arrive(q.empty + slot);
            }
        }
#pragma unroll
        for (int r = 0; r < SS_RMAX; r++) {
            if (r >= rows) break;
            float sum = warp_sum(acc[r]);
            int row = g * s.R + r;
            if (lane == 0 && p.glu) sums[row] = sum;
            else if (lane == 0) p.y[s.r0 + row] = sum;
        }
    }
    return waited;
}

// How many times phase `dep`'s counter is bumped when it is done: once by each block (a GEMV)
// or by block 0 (a tiny phase); with `per_warp`, once by each of their consumer warps.
__device__ __forceinline__ u32 ss_finishers(const Phase* phases, int dep, bool per_warp) {
    u32 blocks = dep >= 0 && phases[dep].kind != 0 ? 1u : gridDim.x;
    return per_warp ? blocks * SS_CONSUMERS : blocks;
}

// The chain of `count` phases in one cooperative launch of one block an SM. Dynamic shared
// memory: `slots` slots of `slot_halves` halves, then x (xmax halves, rounded up to 4), then
// 2 * slots mbarriers, then a u32 per slot (SsRing::consumed). counters[i] (zeroed before the
// launch) counts the blocks (with `warp_releases`, the consumer warps) done with phase i.
// fold: the norms (kind 1) are computed by every block into its x instead of by block 0.
// diag: 0, or SS_NO_* bits that leave one part out to time the others (the bits then differ;
// SS_NO_WAIT: no GEMV waits for its input, so the chain's order is lost).
// planes: the producer's lanes (1 to min(32, slots)). warp_releases: each consumer warp
// publishes its own writes (ss_publish's per_warp).
// counters[i] then counts consumer warps.
// trace: null, or count * gridDim.x * SS_EVENTS words (see SsEvent).
extern "C" __global__ void __launch_bounds__(SS_THREADS, 1)
    step_stream(const Phase* __restrict__ phases, int count, unsigned* counters, int slots,
                int slot_halves, int xmax, int fold, int evict, int diag, int planes,
                int warp_releases,
                unsigned long long* trace) {
    extern __shared__ __align__(128) char ring[];
    __shared__ float sums[SS_YMAX];
    u16* xh = (u16*)(ring + (size_t)slots * slot_halves * 2);
    unsigned long long* full = (unsigned long long*)(xh + ((xmax + 3) & ~3));
    unsigned long long* empty = full + slots;
    SsRing q = {ring, slots, slot_halves, full, empty, (volatile u32*)(empty + slots)};
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0)
        for (int i = 0; i < slots; i++) {
            ss_init(full + i, 1);
            ss_init(empty + i, 1);
            q.consumed[i] = 0;
        }
    __syncthreads();
    if (warp == SS_CONSUMERS) {
        if (lane < planes)
            ss_produce(phases, count, ring, slots, slot_halves, full, empty, evict != 0, diag,
                       planes, trace);
        return;
    }
    int stage = 0;  // the block's slots so far (fewer than 2^31: a step streams < 2^31 * 8 KB)
    bool stager = warp < SP_WARPS, per_warp = warp_releases != 0;
    for (int i = 0; i < count; i++) {
        Phase p = phases[i];
        if (p.kind == 0) {
            bool folded = fold && i > 0 && phases[i - 1].kind == 1;
            int dep = folded ? i - 2 : i - 1;
            SsShare s = ss_share(p, slot_halves);
            ss_await(counters, (diag & SS_NO_WAIT) ? -1 : dep, ss_finishers(phases, dep, per_warp));
            ss_ready(trace, i);
            if (stager && folded) {
                sp_norm<true>(phases[i - 1].x, (int)phases[i - 1].n, false,
                              [&](int j, float v) { xh[j] = f32_to_f16(v); });
            } else if (!folded) {  // every consumer warp, 16 loads in flight a thread
                sp_x_values<SS_CONSUMERS * 32, 16>(p, [&](int j, u16 h) { xh[j] = h; });
            }
            ss_sync();
            if (threadIdx.x == 0) ss_stamp(trace, i, SS_STAGED);
            unsigned long long waited = ss_consume(p, s, xh, sums, q, stage, warp, lane, diag,
                                                   trace != nullptr && warp == 0);
            if (p.glu) {  // the pairs' outputs, once every warp's sums are in
                ss_sync();
                for (int j = threadIdx.x; 2 * j < s.rows; j += SS_CONSUMERS * 32)
                    sp_output(p, s.r0 + 2 * j + 1, sums[2 * j], sums[2 * j + 1]);
            }
            if (threadIdx.x == 0) ss_note(trace, i, SS_FULL_WAIT, waited);
            stage += s.groups * s.chunks;
            ss_publish(counters, i, per_warp, trace);
        } else if (!(fold && p.kind == 1) && blockIdx.x == 0) {
            ss_await(counters, i - 1, ss_finishers(phases, i - 1, per_warp));
            ss_ready(trace, i);
            if (stager)
                sp_norm<true>(p.x, (int)p.n, p.kind == 2, [&](int j, float v) { p.y[j] = v; });
            ss_publish(counters, i, per_warp, trace);
        }
    }
}
