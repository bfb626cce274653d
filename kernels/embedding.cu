// Embedding gather: x[t] = table[ids[t]] * scale (+ positions[past + t]), rounded to the
// activation precision. One block per token.

extern "C" __global__ void embedding_f32(const float* __restrict__ table,
                                         const float* __restrict__ positions,  // null: none
                                         const int* __restrict__ ids, const int* __restrict__ step,
                                         float* __restrict__ x, int hidden, int vocab,
                                         int has_scale, float scale, int act) {
    pdl_enter();
    int t = blockIdx.x;
    int id = ids[t];
    int pos = step[0] + t;
    float* row = x + (size_t)t * hidden;
    bool valid = id >= 0 && id < vocab;
    const float* src = table + (size_t)(valid ? id : 0) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = valid ? src[i] : 0.0f;
        if (has_scale) v *= scale;
        if (positions) v += positions[(size_t)pos * hidden + i];
        row[i] = round_act(v, act);
    }
}
