// RMSNorm (also per-head QK norm) and rotary position embedding.
#include <cmath>

#include "../thread_pool.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

void rmsnorm(const CpuArgs& a) {
    NormParams p = a.p<NormParams>();
    const float* x = a.b<float>(0) + (size_t)p.row0 * p.x_stride;
    const float* w = a.b<float>(1);
    float* y = a.b<float>(2);
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        for (uint32_t r = 0; r < p.rows_per_token; r++) {
            const float* xr = x + (size_t)t * p.x_stride + (size_t)r * p.dim;
            float* yr = y + (size_t)t * p.y_stride + (size_t)r * p.dim;
            double ss = 0;  // double: matches ggml's ggml_float accumulation
            for (uint32_t i = 0; i < p.dim; i++) ss += (double)xr[i] * xr[i];
            float scale = 1.0f / std::sqrt((float)(ss / p.dim) + p.eps);
            for (uint32_t i = 0; i < p.dim; i++) yr[i] = xr[i] * scale * (w[i] + p.weight_offset);
        }
    }
}

// LayerNorm with bias (BERT): y = (x - mean) / sqrt(var + eps) * w + b, with
// the statistics accumulated in double (buffer 3: bias). In place is allowed.
// Sum in double of f(x[i]) over i < n: eight partial sums (element i in sum
// i % 8, which the compiler keeps in vector registers), added in a fixed tree.
template <class F>
double sum8(const float* x, uint32_t n, F f) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += f((double)x[i + l]);
    for (int l = 0; i < n; i++, l++) s[l] += f((double)x[i]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Mean and variance in double, each row on its own (rows spread over the threads).
void layernorm(const CpuArgs& a) {
    NormParams p = a.p<NormParams>();
    const float* x = a.b<float>(0) + (size_t)p.row0 * p.x_stride;
    const float* w = a.b<float>(1);
    float* y = a.b<float>(2);
    const float* bias = a.b<float>(3);
    auto rows = [&](int t0, int t1) {
        for (uint32_t t = (uint32_t)t0; t < (uint32_t)t1; t++) {
            const uint32_t tok = t / p.rows_per_token, r = t % p.rows_per_token;
            const float* xr = x + (size_t)tok * p.x_stride + (size_t)r * p.dim;
            float* yr = y + (size_t)tok * p.y_stride + (size_t)r * p.dim;
            const double mean = sum8(xr, p.dim, [](double v) { return v; }) / p.dim;
            const double var = sum8(xr, p.dim, [mean](double v) { return (v - mean) * (v - mean); });
            const float scale = (float)(1.0 / std::sqrt(var / p.dim + (double)p.eps));
            const float m = (float)mean;
            for (uint32_t i = 0; i < p.dim; i++) yr[i] = (xr[i] - m) * scale * w[i] + bias[i];
        }
    };
    const int n = (int)(p.n_tokens * p.rows_per_token);
    if (n < 2 || !a.pool) return rows(0, n);
    a.pool->parallel_for(n, rows);
}

// Rotates pairs of each head of one token row in place: (2i, 2i+1) for the
// original Llama layout, (i, i + d/2) for NeoX.
// theta_i = pos * scale * base^(-2i/d) / factor_i; cos and sin scaled by
// attn_factor (YaRN's magnitude correction; 1 otherwise).
void rope_row(const RopeParams& p, const float* factors, float* row, uint32_t position) {
    const uint32_t half = p.head_dim / 2;
    const float pos = (float)position;
    for (uint32_t i = 0; i < half; i++) {
        float theta = p.freq_scale * pos * std::pow(p.freq_base, -2.0f * (float)i / (float)p.head_dim);
        if (factors) theta /= factors[i];
        const float c = std::cos(theta) * p.attn_factor, s = std::sin(theta) * p.attn_factor;
        for (uint32_t h = 0; h < p.n_heads; h++) {
            float* v = row + (size_t)h * p.head_dim;
            uint32_t i0 = p.neox ? i : 2 * i;
            uint32_t i1 = p.neox ? i + half : 2 * i + 1;
            float x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * c - x1 * s;
            v[i1] = x0 * s + x1 * c;
        }
    }
}

// fn(t) for each token row t < n: prompt rows spread over the threads (a
// row's rotation is its own, so the split never changes a result; its cos
// and sin are the cost).
template <class Fn>
void for_each_row(const CpuArgs& a, uint32_t n, Fn&& fn) {
    if (n < 2 || !a.pool) {
        for (uint32_t t = 0; t < n; t++) fn(t);
        return;
    }
    a.pool->parallel_for((int)n, [&](int t0, int t1) {
        for (int t = t0; t < t1; t++) fn((uint32_t)t);
    });
}

void rope(const CpuArgs& a) {
    RopeParams p = a.p<RopeParams>();
    float* x = a.b<float>(0);
    const float* factors = p.has_freq_factors ? a.b<float>(1) : nullptr;
    for_each_row(a, p.n_tokens, [&](uint32_t t) { rope_row(p, factors, x + (size_t)t * p.row_stride, p.pos0 + t); });
}

// Each row at its own position (buffer 2: (sequence, position) per row).
void rope_rows(const CpuArgs& a) {
    RopeParams p = a.p<RopeParams>();
    float* x = a.b<float>(0);
    const float* factors = p.has_freq_factors ? a.b<float>(1) : nullptr;
    const int32_t* rows = a.b<int32_t>(2);
    for_each_row(a, p.n_tokens,
                 [&](uint32_t t) { rope_row(p, factors, x + (size_t)t * p.row_stride, (uint32_t)rows[2 * t + 1]); });
}

}  // namespace

extern const CpuKernelEntry kNormRopeKernels[] = {
    {"rmsnorm", rmsnorm},
    {"rope", rope},
    {"rope_rows", rope_rows},
    {"layernorm", layernorm},
    {nullptr, nullptr},
};

}  // namespace akunu
