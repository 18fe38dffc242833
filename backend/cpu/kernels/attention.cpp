// KV-cache write and attention (causal, or bidirectional for encoders) with GQA
// and an optional sliding window.
// The cache holds F16 (as llama.cpp's default), so K/V are rounded on write.
#include <algorithm>
#include <cmath>
#include <vector>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

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

// Work items are (head, block of up to kTokenBlock tokens). The K and V rows
// of a block's key range are converted from F16 once per item, kKeyChunk keys
// at a time, and reused by every token of the block (encoder passes and
// prefill: a 1500-token Whisper window converted each row 1500 times before).
// Per token the arithmetic is the one-token path's (same dots, same key
// order), so results do not depend on how tokens are grouped.
// Precision follows llama.cpp's CPU attention against an F16 cache: Q is
// rounded to F16 for the Q.K dots and the softmax weights are rounded to F16
// before weighting V (its matmuls convert the float operand to the cache
// type); dots and sums are accumulated in float. Per-thread buffers grow on
// first use (thread_local), not per call.
constexpr uint32_t kTokenBlock = 16;
constexpr uint32_t kKeyChunk = 256;

// dots[i][j] = q_i . row_j for nq queries and n key rows (converted to float),
// each equal to dot_f32(q_i, row_j): with AVX2, 4 queries x 2 keys of 8-lane
// FMA accumulators in registers, reduced in dot_f32's order.
void block_dots(const float* q, uint32_t nq, const float* rows, uint32_t n, uint32_t hd, float* dots) {
#if defined(__AVX2__) && defined(__FMA__)
    if (hd % 8 == 0) {
        auto reduce = [](__m256 v) {
            alignas(32) float s[8];
            _mm256_store_ps(s, v);
            return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        };
        for (uint32_t i = 0; i < nq; i += 4) {
            const float* qs[4];
            for (uint32_t r = 0; r < 4; r++) qs[r] = q + (size_t)std::min(i + r, nq - 1) * hd;  // pad with the last
            for (uint32_t j = 0; j < n; j += 2) {
                const float* k0 = rows + (size_t)j * hd;
                const float* k1 = rows + (size_t)std::min(j + 1, n - 1) * hd;
                __m256 a[4][2];
                for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
                for (uint32_t d = 0; d < hd; d += 8) {
                    const __m256 v0 = _mm256_loadu_ps(k0 + d), v1 = _mm256_loadu_ps(k1 + d);
                    for (int r = 0; r < 4; r++) {
                        const __m256 qv = _mm256_loadu_ps(qs[r] + d);
                        a[r][0] = _mm256_fmadd_ps(qv, v0, a[r][0]);
                        a[r][1] = _mm256_fmadd_ps(qv, v1, a[r][1]);
                    }
                }
                for (uint32_t r = 0; r < 4 && i + r < nq; r++) {
                    dots[(size_t)(i + r) * kKeyChunk + j] = reduce(a[r][0]);
                    if (j + 1 < n) dots[(size_t)(i + r) * kKeyChunk + j + 1] = reduce(a[r][1]);
                }
            }
        }
        return;
    }
#endif
    for (uint32_t i = 0; i < nq; i++)
        for (uint32_t j = 0; j < n; j++)
            dots[(size_t)i * kKeyChunk + j] = dot_f32(q + (size_t)i * hd, rows + (size_t)j * hd, (int)hd);
}

// acc[d] += w_j * rows[j][d] over keys j in [j0, j1) in order (weights[j]
// already rounded): with AVX2 the accumulators stay in registers, 64 lanes at a time.
void weighted_rows(const float* weights, const float* rows, uint32_t j0, uint32_t j1, uint32_t hd, float* acc) {
#if defined(__AVX2__) && defined(__FMA__)
    if (hd % 8 == 0) {
        for (uint32_t d0 = 0; d0 < hd; d0 += 64) {
            const uint32_t nb = std::min<uint32_t>(8, (hd - d0) / 8);
            __m256 a[8];
            for (uint32_t b = 0; b < nb; b++) a[b] = _mm256_loadu_ps(acc + d0 + 8 * b);
            for (uint32_t j = j0; j < j1; j++) {
                const __m256 w = _mm256_set1_ps(weights[j]);
                const float* v = rows + (size_t)j * hd + d0;
                for (uint32_t b = 0; b < nb; b++) a[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * b), a[b]);
            }
            for (uint32_t b = 0; b < nb; b++) _mm256_storeu_ps(acc + d0 + 8 * b, a[b]);
        }
        return;
    }
#endif
    for (uint32_t j = j0; j < j1; j++)
        for (uint32_t d = 0; d < hd; d++) acc[d] += weights[j] * rows[(size_t)j * hd + d];
}

void attention(const CpuArgs& a) {
    AttentionParams p = a.p<AttentionParams>();
    const float* q = a.b<float>(0);
    const uint16_t* kc = a.b<uint16_t>(1);
    const uint16_t* vc = a.b<uint16_t>(2);
    float* out = a.b<float>(3);
    const int32_t* seg = p.segmented ? a.b<int32_t>(4) : nullptr;
    const uint32_t hd = p.head_dim, kv_dim = p.n_kv_heads * hd;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const uint32_t n_blocks = (p.n_tokens + kTokenBlock - 1) / kTokenBlock;
    a.pool->parallel_for((int)(n_blocks * p.n_heads), [&](int i0, int i1) {
        thread_local std::vector<float> scores, rows, dots, acc, qr;
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        float mx[kTokenBlock], inv_sum[kTokenBlock];
        if (rows.size() < (size_t)kKeyChunk * hd) rows.resize((size_t)kKeyChunk * hd);
        if (dots.size() < (size_t)kKeyChunk * kTokenBlock) dots.resize((size_t)kKeyChunk * kTokenBlock);
        if (qr.size() < (size_t)kTokenBlock * hd) { qr.resize((size_t)kTokenBlock * hd); acc.resize(qr.size()); }
        for (int it = i0; it < i1; it++) {
            const uint32_t h = (uint32_t)it % p.n_heads, t0 = ((uint32_t)it / p.n_heads) * kTokenBlock;
            const uint32_t nt = std::min(kTokenBlock, p.n_tokens - t0);
            uint32_t kmin = UINT32_MAX, kmax = 0;
            for (uint32_t i = 0; i < nt; i++) {
                const uint32_t t = t0 + i, pos = p.pos0 + t;
                lo[i] = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
                last[i] = p.causal ? pos : p.pos0 + p.n_tokens - 1;  // last key seen
                if (seg) {  // packed sequences: only the token's own
                    lo[i] = (uint32_t)seg[2 * t];
                    last[i] = (uint32_t)seg[2 * t + 1] - 1;
                }
                if (p.n_keys) {  // cross-attention: the whole (fixed) encoder output
                    lo[i] = 0;
                    last[i] = p.n_keys - 1;
                }
                kmin = std::min(kmin, lo[i]);
                kmax = std::max(kmax, last[i]);
                const float* qsrc = q + (size_t)t * p.q_stride + (size_t)h * hd;
                for (uint32_t d = 0; d < hd; d++) qr[i * hd + d] = f16_to_f32(f32_to_f16(qsrc[d]));
                mx[i] = -INFINITY;
            }
            const size_t span = (size_t)kmax - kmin + 1;
            if (scores.size() < nt * span) scores.resize(nt * span);
            const size_t koff = (size_t)(h / group) * hd;
            auto convert = [&](const uint16_t* cache, uint32_t c0, uint32_t c1) {
                for (uint32_t j = c0; j <= c1; j++) f16_row_to_f32(cache + (size_t)j * kv_dim + koff,
                                                                   rows.data() + (size_t)(j - c0) * hd, (int)hd);
            };
            for (uint32_t c0 = kmin; c0 <= kmax; c0 += kKeyChunk) {  // scores
                const uint32_t c1 = std::min(kmax, c0 + kKeyChunk - 1);
                convert(kc, c0, c1);
                block_dots(qr.data(), nt, rows.data(), c1 - c0 + 1, hd, dots.data());
                for (uint32_t i = 0; i < nt; i++) {  // each token's own key range
                    float* sc = scores.data() + i * span - kmin;
                    const float* dt = dots.data() + (size_t)i * kKeyChunk - c0;
                    for (uint32_t j = std::max(c0, lo[i]); j <= std::min(c1, last[i]); j++) {
                        sc[j] = dt[j] * p.scale;
                        mx[i] = std::max(mx[i], sc[j]);
                    }
                }
            }
            for (uint32_t i = 0; i < nt; i++) {  // softmax
                float* sc = scores.data() + i * span - kmin;
                double sum = 0;
                for (uint32_t j = lo[i]; j <= last[i]; j++) {
                    sc[j] = std::exp(sc[j] - mx[i]);
                    sum += sc[j];
                }
                inv_sum[i] = (float)(1.0 / sum);
            }
            std::fill(acc.begin(), acc.begin() + (size_t)nt * hd, 0.0f);
            for (uint32_t c0 = kmin; c0 <= kmax; c0 += kKeyChunk) {  // weighted V
                const uint32_t c1 = std::min(kmax, c0 + kKeyChunk - 1);
                convert(vc, c0, c1);
                for (uint32_t i = 0; i < nt; i++) {
                    const float* sc = scores.data() + i * span - kmin;
                    const uint32_t j0 = std::max(c0, lo[i]), j1 = std::min(c1, last[i]);
                    if (j0 > j1) continue;
                    for (uint32_t j = j0; j <= j1; j++)
                        dots[j - c0] = f16_to_f32(f32_to_f16(sc[j] * inv_sum[i]));  // weights, F16-rounded
                    weighted_rows(dots.data(), rows.data(), j0 - c0, j1 - c0 + 1, hd, acc.data() + i * hd);
                }
            }
            for (uint32_t i = 0; i < nt; i++) {
                float* o = out + (size_t)(t0 + i) * p.out_stride + (size_t)h * hd;
                std::copy(acc.begin() + i * hd, acc.begin() + (i + 1) * hd, o);
            }
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
