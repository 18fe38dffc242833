// Gated activations, the residual add, learned positions and the 1-D convolution's columns.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../thread_pool.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

// e^x, within about 2 ulp of the exact value for x in [-87, 88] (clamped
// outside): x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' polynomial,
// 2^n written into the exponent bits. No branch and no library call, so the
// loops over a row vectorize (std::exp there costs ~20 ns a value).
inline float exp_approx(float x) {
    x = std::min(std::max(x, -87.0f), 88.0f);
    // Adding 1.5 * 2^23 rounds to an integer n, which the sum's low bits then
    // hold (bits 0x4B400000 + n): no float-to-int conversion, none undefined
    // for a NaN.
    constexpr float kRound = 12582912.0f;
    const float t = x * 1.44269504088896341f + kRound;
    const float n = t - kRound;
    float r = x - n * 0.693359375f;  // ln2 in two parts (Cody-Waite); n * the first is exact
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float er = p * r * r + r + 1.0f;
    uint32_t t_bits;
    std::memcpy(&t_bits, &t, sizeof t_bits);
    const uint32_t bits = (t_bits - 0x4B400000u + 127u) << 23;  // n in [-126, 127]: a normal 2^n
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return er * scale;
}

inline float silu(float x) { return x / (1.0f + exp_approx(-x)); }

// tanh approximation, as ggml_gelu and Gemma's gelu_pytorch_tanh:
// 0.5 x (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3).
inline float gelu(float x) {
    const float k = 2.0f * 0.7978845608028654f;  // 2 sqrt(2/pi)
    return x / (1.0f + exp_approx(-k * x * (1.0f + 0.044715f * x * x)));
}

template <float (*Act)(float)>
void gated_rows(const GatedActParams& p, const float* g, const float* u, float* o, uint32_t t0, uint32_t t1) {
    for (uint32_t t = t0; t < t1; t++) {
        const float* gt = g + (size_t)t * p.gate_stride;
        const float* ut = u + (size_t)t * p.up_stride;
        float* ot = o + (size_t)t * p.out_stride;
        for (uint32_t i = 0; i < p.n; i++) ot[i] = Act(gt[i]) * ut[i];
    }
}

// o = act(g) * u, row by row (every row alike, so a token's output never
// depends on the pass it is in); prompt rows spread over the threads.
template <float (*Act)(float)>
void gated(const CpuArgs& a) {
    GatedActParams p = a.p<GatedActParams>();
    const float* g = a.b<float>(0);
    const float* u = a.b<float>(1);
    float* o = a.b<float>(2);
    if (p.n_tokens < 2 || !a.pool) return gated_rows<Act>(p, g, u, o, 0, p.n_tokens);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) { gated_rows<Act>(p, g, u, o, t0, t1); });
}

// gpt-oss's gated activation (GatedActParams: kSwigluOaiAlpha, kSwigluOaiLimit),
// with exp as silu's.
void swiglu_oai_rows(const GatedActParams& p, const float* g, const float* u, float* o, uint32_t t0, uint32_t t1) {
    for (uint32_t t = t0; t < t1; t++) {
        const float* gt = g + (size_t)t * p.gate_stride;
        const float* ut = u + (size_t)t * p.up_stride;
        float* ot = o + (size_t)t * p.out_stride;
        for (uint32_t i = 0; i < p.n; i++) {
            const float x = std::min(gt[i], kSwigluOaiLimit);
            const float y = std::min(std::max(ut[i], -kSwigluOaiLimit), kSwigluOaiLimit);
            ot[i] = x / (1.0f + exp_approx(-kSwigluOaiAlpha * x)) * (y + 1.0f);
        }
    }
}

void swiglu_oai(const CpuArgs& a) {
    GatedActParams p = a.p<GatedActParams>();
    const float* g = a.b<float>(0);
    const float* u = a.b<float>(1);
    float* o = a.b<float>(2);
    if (p.n_tokens < 2 || !a.pool) return swiglu_oai_rows(p, g, u, o, 0, p.n_tokens);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) { swiglu_oai_rows(p, g, u, o, t0, t1); });
}

void add_inplace(const CpuArgs& a) {
    AddParams p = a.p<AddParams>();
    float* x = a.b<float>(0);
    const float* y = a.b<float>(1);
    const size_t n = (size_t)p.n * p.n_tokens;
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

// dst[r, :] = src[idx[r], :] (the rows of a ragged pass whose logits are wanted)
void gather_rows(const CpuArgs& a) {
    GatherRowsParams p = a.p<GatherRowsParams>();
    const float* src = a.b<float>(0);
    const int32_t* idx = a.b<int32_t>(1);
    float* dst = a.b<float>(2);
    for (uint32_t r = 0; r < p.n_rows; r++)
        std::copy(src + (size_t)idx[r] * p.src_stride, src + (size_t)idx[r] * p.src_stride + p.dim,
                  dst + (size_t)r * p.dst_stride);
}

// erfc(z) for z >= 0 within 1.2e-7 relative (Numerical Recipes' Chebyshev
// fit: t exp(P(t) - z^2), t = 1 / (1 + z/2)); branch-free like exp_approx,
// so the row loops vectorize (std::erf is a library call per value).
inline float erfc_nonnegative(float z) {
    const float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * exp_approx(p - z * z);
}

// gelu(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, with Phi taken from erfc
// on either side: for negative x that is erfc itself (small and accurate),
// where 1 + erf(x) would cancel. Within 6e-7 relative of the exact value for
// x >= -2, 2e-6 down to -5 (below, the rounding of x / sqrt 2 grows in exp).
inline float gelu_erf_value(float x) {
    const float c = erfc_nonnegative(std::fabs(x) * 0.70710678118654752f);
    return x >= 0.0f ? x * (1.0f - 0.5f * c) : 0.5f * x * c;  // (+inf stays +inf, as torch's)
}

// x = gelu(x), erf form (BERT's "gelu", torch.nn.functional.gelu)
void gelu_erf(const CpuArgs& a) {
    AddParams p = a.p<AddParams>();
    float* x = a.b<float>(0);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) {
        for (size_t i = (size_t)t0 * p.n; i < (size_t)t1 * p.n; i++) x[i] = gelu_erf_value(x[i]);
    });
}

// x = cap * tanh(x / cap) (Gemma 2's final logit soft-capping)
void softcap(const CpuArgs& a) {
    SoftcapParams p = a.p<SoftcapParams>();
    float* x = a.b<float>(0);
    const float inv = 1.0f / p.cap;
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) {
        for (size_t i = (size_t)t0 * p.n; i < (size_t)t1 * p.n; i++) x[i] = p.cap * std::tanh(x[i] * inv);
    });
}

// x[t, :] += table[pos0 + t, :] (learned absolute positions)
void add_rows(const CpuArgs& a) {
    AddRowsParams p = a.p<AddRowsParams>();
    float* x = a.b<float>(0);
    const int32_t* seg = p.segmented ? a.b<int32_t>(2) : nullptr;
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        const size_t row = seg ? (size_t)(p.pos0 + t - (uint32_t)seg[2 * t]) : (size_t)(p.pos0 + t);
        const float* r = a.b<float>(1) + row * p.dim;
        float* xt = x + (size_t)t * p.dim;
        for (uint32_t i = 0; i < p.dim; i++) xt[i] += r[i];
    }
}

void im2col_1d(const CpuArgs& a) {
    Im2ColParams p = a.p<Im2ColParams>();
    const float* x = a.b<float>(0);
    float* col = a.b<float>(1);
    const size_t width = (size_t)p.channels * p.kernel_size;
    a.pool->parallel_for((int)p.n_out, [&](int t0, int t1) {
        for (uint32_t t = (uint32_t)t0; t < (uint32_t)t1; t++) {
            float* row = col + (size_t)t * width;
            for (uint32_t j = 0; j < p.kernel_size; j++) {
                const int64_t src = (int64_t)t * p.stride + j - p.pad;
                const bool inside = src >= 0 && src < (int64_t)p.in_len;
                const float* xr = x + (inside ? (size_t)src * p.channels : 0);
                for (uint32_t c = 0; c < p.channels; c++) row[(size_t)c * p.kernel_size + j] = inside ? xr[c] : 0.0f;
            }
        }
    });
}

}  // namespace

extern const CpuKernelEntry kElementwiseKernels[] = {
    {"silu_gate", gated<silu>},
    {"gelu_gate", gated<gelu>},
    {"swiglu_oai", swiglu_oai},
    {"add_inplace", add_inplace},
    {"gather_rows", gather_rows},
    {"gelu_erf", gelu_erf},
    {"softcap", softcap},
    {"add_rows", add_rows},
    {"im2col_1d", im2col_1d},
    {nullptr, nullptr},
};

}  // namespace akunu
