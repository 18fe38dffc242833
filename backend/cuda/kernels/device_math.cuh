// Device helpers several CUDA kernels share, so fused kernels compute exactly
// what the kernels they replace compute (same formulas, same reduction order).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/kernel_params.h"

namespace akunu {

// Sum over the block, returned to every thread: each warp's sum, then the
// warps' sums added in a fixed order (deterministic). `partial` is 32 doubles
// of shared memory, free again on return.
__device__ inline double block_sum(double v, double* partial) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    double s = 0;
    for (unsigned i = 0; i < blockDim.x / 32; i++) s += partial[i];
    __syncthreads();
    return s;
}

// RMSNorm's scale of row x (K values), 1 / sqrt(mean(x^2) + eps), the sum of
// squares in double as the rmsnorm kernel; every thread of the block calls it.
__device__ inline float rms_scale(const float* x, uint32_t K, float eps) {
    __shared__ double partial[32];
    double ss = 0;
    // Unrolled, a thread's loads go out together instead of one round trip
    // each (a decode row of 2048-2880 values is 8-12 of them a thread); the
    // sums keep their order.
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < K; i += blockDim.x) ss += (double)x[i] * x[i];
    ss = block_sum(ss, partial);
    return 1.0f / sqrtf((float)(ss / K) + eps);
}

// rms_scale for x 16-byte aligned and K % 4 == 0: a float4 a thread at a
// time (a quarter of the loads), the partials summed by one warp's shuffles
// where block_sum has every thread add them all in turn.
__device__ inline float rms_scale4(const float* x, uint32_t K, float eps) {
    __shared__ double partial[32];
    double ss = 0;
    for (uint32_t i = 4 * threadIdx.x; i < K; i += 4 * blockDim.x) {
        const float4 v = *reinterpret_cast<const float4*>(x + i);
        ss += (double)v.x * v.x;
        ss += (double)v.y * v.y;
        ss += (double)v.z * v.z;
        ss += (double)v.w * v.w;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
    __syncthreads();
    __shared__ float scale;
    if (threadIdx.x < 32) {
        double s = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) scale = 1.0f / sqrtf((float)(s / K) + eps);
    }
    __syncthreads();
    return scale;
}

__device__ inline float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ inline float gelu(float x) {  // tanh form
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
}
// gpt-oss's gated activation (swiglu_oai, GatedActParams): the gate clamped
// above, the up value on both sides, at kSwigluOaiLimit (as the CPU's
// std::min / std::max: a NaN stays NaN); the gate's sigmoid at
// kSwigluOaiAlpha times it, with expf as silu's.
__device__ inline float swiglu_oai(float gv, float uv) {
    const float L = kSwigluOaiLimit;
    const float x = L < gv ? L : gv;
    const float lo = uv < -L ? -L : uv;
    const float y = L < lo ? L : lo;
    return x / (1.0f + expf(-kSwigluOaiAlpha * x)) * (y + 1.0f);
}

// RoPE pair i of a head: its elements (i, i + d/2 for NeoX, 2i, 2i + 1
// otherwise) and its angle's sine and cosine at position pos, theta_i = pos *
// scale * base^(-2i/d) / factor_i (position and weights only: a kernel may
// take them before its programmatic wait).
struct RopePair {
    uint32_t i0, i1;
    float s, c;
};
__device__ inline RopePair rope_pair_at(uint32_t i, uint32_t head_dim, bool neox, float pos, float freq_scale,
                                        float freq_base, const float* factors) {
    RopePair r;
    float theta = freq_scale * pos * powf(freq_base, -2.0f * (float)i / (float)head_dim);
    if (factors) theta /= factors[i];
    sincosf(theta, &r.s, &r.c);
    r.i0 = neox ? i : 2 * i;
    r.i1 = neox ? i + head_dim / 2 : 2 * i + 1;
    return r;
}
// The pair (x0, x1) rotated, in place.
__device__ inline void rope_rotate(const RopePair& r, float& x0, float& x1) {
    const float o0 = x0 * r.c - x1 * r.s, o1 = x0 * r.s + x1 * r.c;
    x0 = o0;
    x1 = o1;
}

// Rotates pair i of a head at position pos (rope_pair_at): reads from `in`,
// writes the rotated pair to `out` and returns it in o0 / o1.
__device__ inline void rope_pair(uint32_t i, uint32_t head_dim, bool neox, float pos, float freq_scale,
                                 float freq_base, const float* factors, const float* in, float* out, uint32_t& i0,
                                 uint32_t& i1, float& o0, float& o1) {
    const RopePair r = rope_pair_at(i, head_dim, neox, pos, freq_scale, freq_base, factors);
    i0 = r.i0;
    i1 = r.i1;
    o0 = in[i0];
    o1 = in[i1];
    rope_rotate(r, o0, o1);
    out[i0] = o0;
    out[i1] = o1;
}

// A key's score from its dot product with the query (AttentionParams::scale
// and softcap), in the base of a kernel's exponentials (1, or log2 e where it
// takes exp2). A kernel applies cap(), then multiplies by mul where it always
// did:
//   uncapped: cap(dot) = dot, mul = scale * base (the multiplication as before)
//   capped (Gemma 2): cap(dot) = cap * base * tanh(dot * scale / cap), mul = 1
struct ScoreMap {
    float mul, in, out;
    __device__ __forceinline__ float cap(float dot) const { return out != 0.0f ? out * tanhf(dot * in) : dot; }
};
__host__ __device__ inline ScoreMap score_map(float scale, float softcap, float base) {
    return softcap > 0.0f ? ScoreMap{1.0f, scale / softcap, softcap * base} : ScoreMap{scale * base, 0.0f, 0.0f};
}

// Attention sinks (AttentionParams::sinks, gpt-oss): one more logit in a
// query head's softmax, taken as it is (neither scaled nor capped), whose
// value vector is zeros: out = sum_j e^(s_j) v_j / (sum_j e^(s_j) + e^sink).
// A kernel joins it exactly once a (row, head), where that row's softmax is
// final: in the block that saw all its keys, or in the combine of its key
// splits (never in a split's partial, which would count it once a split).
// The state is the running max m, the sum l of e^(s - m) and the weighted
// values against m; with m' = max(m, sink) this returns c = e^(m - m') and
// sets l to l * c + e^(sink - m'), so the output acc / l becomes
// acc * c / l. Base2: the kernel's exponentials are base 2 (its scores
// carry log2 e, ScoreMap's base), and the logit is taken to that base too.
// A state without keys (l = 0, m = -inf or -FLT_MAX) keeps its zero output.
template <bool Base2>
__device__ __forceinline__ float join_sink(float m, float& l, float sink) {
    if (Base2) sink *= 1.4426950408889634f;
    const float mx = fmaxf(m, sink);
    if (mx == -INFINITY) return 1.0f;  // (no key and a sink of -inf: nothing to join)
    const float c = Base2 ? exp2f(m - mx) : expf(m - mx);
    l = l * c + (Base2 ? exp2f(sink - mx) : expf(sink - mx));
    return c;
}
// The output's factor with head h's sink joined (sinks: the n_heads logits,
// nullptr: none, then l is left as it is and the factor is 1).
template <bool Base2>
__device__ __forceinline__ float sink_factor(const float* sinks, uint32_t h, float m, float& l) {
    return sinks ? join_sink<Base2>(m, l, sinks[h]) : 1.0f;
}

}  // namespace akunu
