// One-row dense linear layers that apply the RMS norm before them as they read their input,
// so the norm needs no launch of its own (decode steps; `Ops::gemv_one_row_norm`).
//
// The norm kernel (norm.cu) computes s = x + round(delta), r = 1 / sqrt(mean(s^2) + eps) and
// hands on round(s * r * g); the linear after it then sums W_ji * round(s_i r g_i). For an RMS
// norm r is one scalar per row, so sum_i W_ji (s_i g_i r) = r * sum_i W_ji (s_i g_i): these
// entries read x, delta and g as they go, multiply W by s g, add s^2 beside the products and
// apply r to each column's sum last. No pass waits for the statistic. A warp of a column group
// covers its share of the row's units once, so the `split` warps' squares sum to the row's;
// the epilogue adds them beside the products' partials. The first column group of block 0 also
// writes round(s), the residual handed on, to `x_out` (never `x`: other blocks still read it).
//
// Not the two launches' bits: the normed value is no longer rounded to the activation
// precision value by value, and r multiplies the sum instead of each term. The lanes, units,
// loads and product order are those of gemv_decode_* (walk and pipe) and gemv_decode_shared_*
// at the same split. `act` rounds the linear's output (linear_store); `norm_act` is the model's
// activation precision, which rounds delta and the residual as norm.cu does.

// The 8 values of the normed input at column c: s = x + round(delta) (zeros past k), s^2 added
// to ss, s * g into xv, and round(s) stored to x_out when given.
__device__ __forceinline__ void norm_unit(const float* __restrict__ x,
                                          const float* __restrict__ delta,
                                          const float* __restrict__ g, float* __restrict__ x_out,
                                          int c, int k, bool xvec, int norm_act, float& ss,
                                          float* xv) {
    float xs[8], ds[8], gs[8];
    x_unit(nullptr, 0, x, 0, 0, c, k, false, xvec, xs);
    x_unit(nullptr, 0, g, 0, 0, c, k, false, xvec, gs);
    if (delta) x_unit(nullptr, 0, delta, 0, 0, c, k, false, xvec, ds);
#pragma unroll
    for (int e = 0; e < 8; e++) {
        float s = xs[e];
        if (delta) s += round_act(ds[e], norm_act);
        ss = fmaf(s, s, ss);
        xv[e] = s * gs[e];
        if (x_out && c + e < k) x_out[c + e] = round_act(s, norm_act);
    }
}

// What every entry passes about the norm.
struct NormIn {
    const float* x;
    const float* delta;
    const float* g;
    float* x_out;  // null but for the writing warps
    int act;
    bool xvec;
};

// The writing warps' x_out: the first column group of block 0 (warps 0 .. split - 1), whose
// lanes cover every unit of the row once.
__device__ __forceinline__ NormIn norm_in(const float* x, const float* delta, const float* g,
                                          float* x_out, int split, int norm_act) {
    int warp = threadIdx.x >> 5;
    bool writes = x_out && blockIdx.x == 0 && warp < split;
    bool xvec = (((size_t)x | (size_t)g | (size_t)delta) & 15) == 0;
    return NormIn{x, delta, g, writes ? x_out : nullptr, norm_act, xvec};
}

// As decode_reduce_store, with each warp's squares summed beside its partials and each
// column's sum times r = 1 / sqrt(squares / k + eps) before the store.
__device__ __forceinline__ void norm_reduce_store(float (&acc)[DEC_COLS], float ss,
                                                  const bool (&valid)[DEC_COLS], int col0,
                                                  int split, int k, float eps,
                                                  const float* bias, float* y, int glu,
                                                  int act) {
    __shared__ float red[DEC_WARPS][DEC_COLS + 1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) {
        float v = warp_sum(acc[j]);
        if (lane == 0) red[warp][j] = v;
    }
    float squares = warp_sum(ss);
    if (lane == 0) red[warp][DEC_COLS] = squares;
    if (split > 1) __syncthreads();
    if (lane != 0 || warp % split != 0) return;
    float sum[DEC_COLS + 1];
#pragma unroll
    for (int j = 0; j <= DEC_COLS; j++) {
        sum[j] = 0.0f;
        for (int p = 0; p < split; p++) sum[j] += red[warp + p][j];
    }
    float r = 1.0f / sqrtf(sum[DEC_COLS] / (float)k + eps);
    if (glu >= 0) {
        if (!valid[1]) return;
        float gate = sum[0] * r, up = sum[1] * r;
        if (bias) {
            gate += bias[col0];
            up += bias[col0 + 1];
        }
        y[col0 / 2] = activation_outlined(gate, glu) * up;
        return;
    }
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++)
        if (valid[j]) linear_store(sum[j] * r, bias, col0 + j, act, y + col0 + j);
}

// One iteration's loads: L units (stride apart from u0) of each valid column.
template <typename W, int L, int H>
__device__ __forceinline__ void norm_fetch(const W* const (&wr)[DEC_COLS],
                                           const bool (&valid)[DEC_COLS], int u0, int stride,
                                           int units, int k, bool vec,
                                           uint4 (&raw)[DEC_COLS][L][H]) {
#pragma unroll
    for (int l = 0; l < L; l++) {
        int u = u0 + l * stride;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++)
            if (u < units && valid[j]) fetch_unit(wr[j], u * 8, k, vec, raw[j][l]);
    }
}

// gemv_decode_body's walk (PIPE false, UNITS 16-byte loads a column a round) or pipelined
// walk (PIPE true), reading the normed input through norm_unit.
template <typename W, int KIND, int UNITS, bool PIPE>
__device__ __forceinline__ void gemv_norm_body(const W* __restrict__ w, NormIn in, float eps,
                                               const float* __restrict__ bias,
                                               float* __restrict__ y, int n, int k, int split,
                                               int glu, int act) {
    constexpr int H = sizeof(W) / 2;
    constexpr int L = UNITS / H;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    int part = warp % split;
    int units = (k + 7) / 8;
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    const W* wr[DEC_COLS];
    bool valid[DEC_COLS];
    decode_columns(w, n, k, col0, wr, valid);
    float acc[DEC_COLS], ss = 0.0f;
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    const int stride = 32 * split;
    uint4 raw[DEC_COLS][L][H];
    pdl_trigger();
    int u0 = part * 32 + lane;
    norm_fetch<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
    pdl_wait();
    for (; u0 < units; u0 += L * stride) {
        uint4 next[DEC_COLS][L][H];
        if (PIPE)
            norm_fetch<W, L, H>(wr, valid, u0 + L * stride, stride, units, k, vec, next);
        else if (u0 != part * 32 + lane)
            norm_fetch<W, L, H>(wr, valid, u0, stride, units, k, vec, raw);
#pragma unroll
        for (int l = 0; l < L; l++) {
            int u = u0 + l * stride;
            if (u >= units) break;
            float xv[8];
            norm_unit(in.x, in.delta, in.g, in.x_out, u * 8, k, in.xvec, in.act, ss, xv);
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++)
                if (valid[j]) acc[j] = dot_unit<KIND, H>(raw[j][l], xv, acc[j]);
        }
        if (PIPE) {
#pragma unroll
            for (int j = 0; j < DEC_COLS; j++)
#pragma unroll
                for (int l = 0; l < L; l++)
#pragma unroll
                    for (int h = 0; h < H; h++) raw[j][l][h] = next[j][l][h];
        }
    }
    norm_reduce_store(acc, ss, valid, col0, split, k, eps, bias, y, glu, act);
}

// gemv_decode_shared_body (gemv_shared.cu: every weight of the launch copied into shared memory
// before the wait, slots laid out the same), reading the normed input through norm_unit.
template <typename W, int KIND>
__device__ __forceinline__ void gemv_norm_shared_body(const W* __restrict__ w, NormIn in,
                                                      float eps, const float* __restrict__ bias,
                                                      float* __restrict__ y, int n, int k,
                                                      int split, int glu, int act) {
    constexpr int H = sizeof(W) / 2;
    extern __shared__ uint4 norm_slots[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col0 = (blockIdx.x * (DEC_WARPS / split) + warp / split) * DEC_COLS;
    int part = warp % split;
    int units = (k + 7) / 8;
    int stride = 32 * split;
    int slots = (units + stride - 1) / stride;
    bool vec = (k % 8) == 0 && (((size_t)w & 15) == 0);
    const W* wr[DEC_COLS];
    bool valid[DEC_COLS];
    decode_columns(w, n, k, col0, wr, valid);
    uint4* mine = norm_slots + (size_t)warp * DEC_COLS * slots * H * 32 + lane;
    int u0 = part * 32 + lane;
    pdl_trigger();
    for (int i = 0; i < slots; i++) {
        int u = u0 + i * stride;
        if (u >= units) break;
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!valid[j]) continue;
            uint4* slot = mine + (size_t)(j * slots + i) * H * 32;
            if (vec) {
#pragma unroll
                for (int h = 0; h < H; h++)
                    cp_async16(slot + h * 32, wr[j] + u * 8 + h * (16 / sizeof(W)));
            } else {
                uint4 raw[H];
                fetch_unit(wr[j], u * 8, k, false, raw);
#pragma unroll
                for (int h = 0; h < H; h++) slot[h * 32] = raw[h];
            }
        }
    }
    cp_async_commit();
    pdl_wait();
    cp_async_wait<0>();
    float acc[DEC_COLS], ss = 0.0f;
#pragma unroll
    for (int j = 0; j < DEC_COLS; j++) acc[j] = 0.0f;
    for (int i = 0; i < slots; i++) {
        int u = u0 + i * stride;
        if (u >= units) break;
        float xv[8];
        norm_unit(in.x, in.delta, in.g, in.x_out, u * 8, k, in.xvec, in.act, ss, xv);
#pragma unroll
        for (int j = 0; j < DEC_COLS; j++) {
            if (!valid[j]) continue;
            const uint4* slot = mine + (size_t)(j * slots + i) * H * 32;
            uint4 raw[H];
#pragma unroll
            for (int h = 0; h < H; h++) raw[h] = slot[h * 32];
            acc[j] = dot_unit<KIND, H>(raw, xv, acc[j]);
        }
    }
    norm_reduce_store(acc, ss, valid, col0, split, k, eps, bias, y, glu, act);
}

// Blocks an SM holds of each entry, bounded to the plain entry's count on sm_90 (7 walk, 8 pipe,
// 12 shared), so the rules' resident counts, taken from the plain entries, hold for these.
#define NORM_WALK_BOUNDS __launch_bounds__(128, 7)
#define NORM_PIPE_BOUNDS __launch_bounds__(128, 8)
#define NORM_SHARED_BOUNDS __launch_bounds__(128, 12)

// Every entry: (w, x, delta, g, x_out, eps, norm_act, bias, y, n, k, split, glu, act).

extern "C" __global__ void NORM_WALK_BOUNDS
    gemv_decode_norm_f32(const float* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<float, 0, 4, false>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_WALK_BOUNDS
    gemv_decode_norm_f16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<u16, 1, 4, false>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_WALK_BOUNDS
    gemv_decode_norm_bf16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<u16, 2, 4, false>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_PIPE_BOUNDS
    gemv_decode_norm_pipe_f32(const float* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<float, 0, 2, true>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_PIPE_BOUNDS
    gemv_decode_norm_pipe_f16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<u16, 1, 2, true>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_PIPE_BOUNDS
    gemv_decode_norm_pipe_bf16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_body<u16, 2, 2, true>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_SHARED_BOUNDS
    gemv_decode_norm_shared_f32(const float* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_shared_body<float, 0>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_SHARED_BOUNDS
    gemv_decode_norm_shared_f16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_shared_body<u16, 1>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}

extern "C" __global__ void NORM_SHARED_BOUNDS
    gemv_decode_norm_shared_bf16(const u16* w, const float* x, const float* delta, const float* g, float* x_out,
        float eps, int norm_act, const float* bias, float* y, int n, int k, int split, int glu,
        int act) {
    gemv_norm_shared_body<u16, 2>(w, norm_in(x, delta, g, x_out, split, norm_act), eps, bias, y, n, k, split, glu,
        act);
}
