// KV-cache write and attention (causal, or bidirectional for encoders) with GQA
// and an optional sliding window.
// The cache holds F16 (as llama.cpp's default), so K/V are rounded on write.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../thread_pool.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

void kv_write(const CpuArgs& a) {
    KVWriteParams p = a.p<KVWriteParams>();
    const float* k = a.b<float>(0);
    const float* v = a.b<float>(1);
    uint16_t* kc = a.b<uint16_t>(2);
    uint16_t* vc = a.b<uint16_t>(3);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) {
        for (uint32_t t = (uint32_t)t0; t < (uint32_t)t1; t++) {
            size_t dst = (size_t)(p.pos0 + t) * p.kv_dim;
            for (uint32_t i = 0; i < p.kv_dim; i++) {
                kc[dst + i] = f32_to_f16(k[(size_t)t * p.k_stride + i]);
                vc[dst + i] = f32_to_f16(v[(size_t)t * p.v_stride + i]);
            }
        }
    });
}

// One (token, head) pair per work item. Scores live in a per-thread buffer
// sized once for the largest context (thread_local, allocated on first use).
// Precision follows llama.cpp's CPU attention against an F16 cache: Q is
// rounded to F16 for the Q.K dots and the softmax weights are rounded to F16
// before weighting V (its matmuls convert the float operand to the cache
// type); dots and sums are accumulated in float.
void attention(const CpuArgs& a) {
    AttentionParams p = a.p<AttentionParams>();
    const float* q = a.b<float>(0);
    const uint16_t* kc = a.b<uint16_t>(1);
    const uint16_t* vc = a.b<uint16_t>(2);
    float* out = a.b<float>(3);
    const uint32_t kv_dim = p.n_kv_heads * p.head_dim;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const int items = (int)(p.n_tokens * p.n_heads);
    a.pool->parallel_for(items, [&](int i0, int i1) {
        thread_local std::vector<float> scores, kf, acc, qr;
        if (scores.size() < p.max_ctx) scores.resize(p.max_ctx);
        if (kf.size() < p.head_dim) { kf.resize(p.head_dim); acc.resize(p.head_dim); qr.resize(p.head_dim); }
        for (int it = i0; it < i1; it++) {
            const uint32_t t = (uint32_t)it / p.n_heads, h = (uint32_t)it % p.n_heads;
            const uint32_t pos = p.pos0 + t;
            uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
            uint32_t last = p.causal ? pos : p.pos0 + p.n_tokens - 1;  // last key seen
            if (p.segmented) {  // packed sequences: only the token's own
                lo = (uint32_t)a.b<int32_t>(4)[2 * t];
                last = (uint32_t)a.b<int32_t>(4)[2 * t + 1] - 1;
            }
            if (p.n_keys) {  // cross-attention: the whole (fixed) encoder output
                lo = 0;
                last = p.n_keys - 1;
            }
            const float* qsrc = q + (size_t)t * p.q_stride + (size_t)h * p.head_dim;
            for (uint32_t d = 0; d < p.head_dim; d++) qr[d] = f16_to_f32(f32_to_f16(qsrc[d]));
            const float* qh = qr.data();
            const size_t koff = (size_t)(h / group) * p.head_dim;
            float mx = -INFINITY;
            for (uint32_t j = lo; j <= last; j++) {
                const uint16_t* kr = kc + (size_t)j * kv_dim + koff;
                f16_row_to_f32(kr, kf.data(), (int)p.head_dim);
                float s = dot_f32(qh, kf.data(), (int)p.head_dim) * p.scale;
                scores[j] = s;
                mx = std::max(mx, s);
            }
            double sum = 0;
            for (uint32_t j = lo; j <= last; j++) {
                scores[j] = std::exp(scores[j] - mx);
                sum += scores[j];
            }
            std::fill(acc.begin(), acc.begin() + p.head_dim, 0.0f);
            const float inv_sum = (float)(1.0 / sum);
            for (uint32_t j = lo; j <= last; j++) {
                const uint16_t* vr = vc + (size_t)j * kv_dim + koff;
                const float w = f16_to_f32(f32_to_f16(scores[j] * inv_sum));
                f16_row_to_f32(vr, kf.data(), (int)p.head_dim);
                for (uint32_t d = 0; d < p.head_dim; d++) acc[d] += w * kf[d];
            }
            float* o = out + (size_t)t * p.out_stride + (size_t)h * p.head_dim;
            for (uint32_t d = 0; d < p.head_dim; d++) o[d] = acc[d];
        }
    });
}

}  // namespace

extern const CpuKernelEntry kAttentionKernels[] = {
    {"kv_write", kv_write},
    {"attention", attention},
    {nullptr, nullptr},
};

}  // namespace akunu
