// Token selection on the device: argmax (greedy) and the exact sampler.
// This file defines what the sampling knobs mean for every backend.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../thread_pool.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

// The first index of the largest value (NaNs never win; a NaN first value
// wins, as nothing compares greater than it).
uint32_t argmax_scalar(const float* l, uint32_t i0, uint32_t n) {
    uint32_t best = i0;
    for (uint32_t i = i0 + 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

// argmax_scalar over [i0, n), 8 lanes at a time: each lane keeps its first
// strictly greater value, then the lanes' best, lowest index on a tie.
uint32_t argmax_range(const float* l, uint32_t i0, uint32_t n) {
#if defined(__AVX2__)
    if (n - i0 >= 64 && l[i0] == l[i0]) {  // (a NaN at i0 wins: argmax_scalar's answer)
        __m256 best = _mm256_set1_ps(-INFINITY);
        __m256i idx = _mm256_set1_epi32((int)i0), cur = _mm256_add_epi32(_mm256_set1_epi32((int)i0),
                                                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256i step = _mm256_set1_epi32(8);
        uint32_t i = i0;
        for (; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(l + i);
            const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
            best = _mm256_blendv_ps(best, v, gt);
            idx = _mm256_blendv_epi8(idx, cur, _mm256_castps_si256(gt));
            cur = _mm256_add_epi32(cur, step);
        }
        alignas(32) float bv[8];
        alignas(32) int32_t bi[8];
        _mm256_store_ps(bv, best);
        _mm256_store_si256((__m256i*)bi, idx);
        uint32_t b = (uint32_t)bi[0];
        float m = bv[0];
        for (int k = 1; k < 8; k++)
            if (bv[k] > m || (bv[k] == m && (uint32_t)bi[k] < b)) { m = bv[k]; b = (uint32_t)bi[k]; }
        for (; i < n; i++)
            if (l[i] > l[b]) b = i;
        return b;
    }
#endif
    return argmax_scalar(l, i0, n);
}

// A row's argmax (argmax_scalar's answer); large rows (vocabularies) split
// across the pool, the parts' winners compared in order so the first index
// still wins a tie.
uint32_t argmax_row(const float* l, uint32_t n, ThreadPool* pool = nullptr) {
    constexpr uint32_t kPerThread = 32768;
    const int parts = pool ? (int)std::min<uint32_t>((uint32_t)pool->size(), n / kPerThread) : 1;
    if (parts <= 1) return argmax_range(l, 0, n);
    uint32_t win[64];
    const int np = std::min(parts, 64);
    pool->parallel_for(np, [&](int p0, int p1) {
        for (int p = p0; p < p1; p++) {
            const uint32_t i0 = (uint32_t)((uint64_t)n * p / np), i1 = (uint32_t)((uint64_t)n * (p + 1) / np);
            uint32_t s = i0;  // past the first part, leading NaNs are skipped, not winners
            while (p > 0 && s < i1 && l[s] != l[s]) s++;
            win[p] = s < i1 ? argmax_range(l, s, i1) : i0;
        }
    });
    uint32_t best = win[0];
    for (int p = 1; p < np; p++)
        if (l[win[p]] > l[best]) best = win[p];
    return best;
}

void argmax(const CpuArgs& a) {
    ArgmaxParams p = a.p<ArgmaxParams>();
    const float* l = a.b<float>(0);
    int32_t* out = a.b<int32_t>(1);
    for (uint32_t r = 0; r < p.n_rows; r++)
        out[r] = (int32_t)argmax_row(l + (size_t)(p.row + r) * p.vocab, p.vocab, a.pool);
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [0, 1) from (seed, position): no state, so chained and
// step-by-step decoding draw the same numbers.
double uniform_at(uint64_t seed, uint32_t pos) {
    uint64_t x = splitmix64(seed ^ splitmix64(0xA0761D6478BD642Full + pos));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

// llama.cpp's penalties over the last `window` context tokens: a logit of a
// token seen c > 0 times is divided by repeat_penalty when positive
// (multiplied when not), then lowered by c * frequency + presence.
void apply_penalties(const SampleParams& p, const int32_t* history, float* z, int32_t* counts) {
    if (p.penalty_window == 0 ||
        (p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f))
        return;
    uint32_t n = std::min(p.penalty_window, p.pos0 + 1);
    const int32_t* h = history + (p.pos0 + 1 - n);
    for (uint32_t i = 0; i < n; i++)
        if ((uint32_t)h[i] < p.vocab) counts[h[i]] = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((uint32_t)h[i] < p.vocab) counts[h[i]]++;
    for (uint32_t i = 0; i < n; i++) {
        int32_t t = h[i];
        if ((uint32_t)t >= p.vocab || counts[t] == 0) continue;  // out of range, or already applied
        float c = (float)counts[t];
        float& v = z[t];
        v = v <= 0.0f ? v * p.repeat_penalty : v / p.repeat_penalty;
        v -= c * p.frequency_penalty + p.presence_penalty;
        counts[t] = 0;
    }
}

// Work buffer <- logits + bias, penalties, mask (-inf where disallowed).
void process_logits(const CpuArgs& a, const SampleParams& p, float* z, int32_t* scratch) {
    const float* logits = a.b<float>(0);
    std::copy(logits, logits + p.vocab, z);
    const int32_t* bias = a.b<int32_t>(3);
    for (uint32_t i = 0; i < p.n_bias; i++) {
        int32_t id = bias[2 * i];
        float v;
        std::memcpy(&v, &bias[2 * i + 1], 4);
        if ((uint32_t)id < p.vocab) z[id] += v;
    }
    apply_penalties(p, a.b<int32_t>(2), z, scratch);
    if (p.use_mask) {
        const uint32_t* mask = a.b<uint32_t>(4);
        for (uint32_t i = 0; i < p.vocab; i++)
            if (!((mask[i >> 5] >> (i & 31)) & 1u)) z[i] = -std::numeric_limits<float>::infinity();
    }
}

// The k best finite entries by (z descending, id ascending), in that order,
// kept sorted in idx[0..k) while scanning once; returns how many there are.
uint32_t top_k_scan(const float* z, uint32_t vocab, uint32_t k, int32_t* idx) {
    const float ninf = -std::numeric_limits<float>::infinity();
    uint32_t n = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        const float v = z[i];
        if (!(v > ninf)) continue;
        if (n == k && !(v > z[idx[k - 1]])) continue;  // ties keep the smaller id, already in
        uint32_t j = n < k ? n++ : k - 1;
        while (j > 0 && v > z[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = (int32_t)i;
    }
    return n;
}

// Draws from softmax(z / T) restricted by top_k, then top_p, then min_p.
// Candidates are ordered by (z descending, id ascending) where an order matters.
uint32_t draw(const SampleParams& p, const float* z, int32_t* idx, double u) {
    const float ninf = -std::numeric_limits<float>::infinity();
    auto before = [z](int32_t x, int32_t y) { return z[x] > z[y] || (z[x] == z[y] && x < y); };
    uint32_t n = 0;
    if (p.top_k > 0 && p.top_k <= 256 && (size_t)p.top_k * 64 < p.vocab) {
        n = top_k_scan(z, p.vocab, p.top_k, idx);  // small k: one pass, no full candidate list
    } else {
        for (uint32_t i = 0; i < p.vocab; i++)
            if (z[i] > ninf) idx[n++] = (int32_t)i;
        if (p.top_k > 0 && p.top_k < n) {
            std::nth_element(idx, idx + p.top_k, idx + n, before);
            n = p.top_k;
        }
    }
    if (n == 0) return argmax_row(z, p.vocab);  // everything masked: nothing valid to draw
    float zmax = z[idx[0]];
    for (uint32_t i = 1; i < n; i++) zmax = std::max(zmax, z[idx[i]]);
    const double inv_t = 1.0 / (double)p.temperature;
    auto weight = [&](int32_t i) { return std::exp(((double)z[i] - zmax) * inv_t); };
    double total = 0;
    for (uint32_t i = 0; i < n; i++) total += weight(idx[i]);
    if (p.top_p < 1.0f) {
        // The nucleus is usually small: sort a prefix first, everything only if needed.
        const double target = (double)p.top_p * total;
        uint32_t sorted = std::min<uint32_t>(n, 1024);
        for (;;) {
            if (sorted < n) std::partial_sort(idx, idx + sorted, idx + n, before);
            else std::sort(idx, idx + n, before);
            double cum = 0;
            uint32_t keep = 0;
            while (keep < sorted && cum < target) cum += weight(idx[keep++]);
            if (cum >= target || sorted == n) {
                n = keep;
                break;
            }
            sorted = n;
        }
    }
    if (p.min_p > 0.0f) {  // weights are relative to the best candidate, whose weight is 1
        uint32_t kept = 0;
        for (uint32_t i = 0; i < n; i++)
            if (weight(idx[i]) >= (double)p.min_p) idx[kept++] = idx[i];
        n = kept;
    }
    total = 0;
    for (uint32_t i = 0; i < n; i++) total += weight(idx[i]);
    double r = u * total, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += weight(idx[i]);
        if (r < acc) return (uint32_t)idx[i];
    }
    return (uint32_t)idx[n - 1];
}

void sample(const CpuArgs& a) {
    SampleParams p = a.p<SampleParams>();
    float* z = a.b<float>(5);
    int32_t* ints = reinterpret_cast<int32_t*>(z + p.vocab);
    process_logits(a, p, z, ints);
    uint32_t tok;
    if (p.temperature <= 0.0f) {
        tok = argmax_row(z, p.vocab);
    } else {
        uint64_t seed = ((uint64_t)p.seed_hi << 32) | p.seed_lo;
        tok = draw(p, z, ints, uniform_at(seed, p.pos0));
    }
    *a.b<int32_t>(1) = (int32_t)tok;
    a.b<int32_t>(2)[p.pos0 + 1] = (int32_t)tok;  // the chosen token is fed next
}

}  // namespace

extern const CpuKernelEntry kSamplingKernels[] = {
    {"argmax", argmax},
    {"sample", sample},
    {nullptr, nullptr},
};

}  // namespace akunu
