// KV-cache write and attention (causal, or bidirectional for encoders) with GQA
// and an optional sliding window.
// The cache holds F16 by default (as llama.cpp's), or BF16 / Q8_0 / Q4_0 rows
// (core/kv_layout.h, K and V apart): K/V are rounded on write by
// core/kv_codec.h, and attention reads rows back through the same file.
#include <algorithm>
#include <cmath>
#include <vector>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "../thread_pool.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_codec.h"
#include "core/kv_rows_check.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

void kv_write(const CpuArgs& a) {
    KVWriteParams p = a.p<KVWriteParams>();
    const float* k = a.b<float>(0);
    const float* v = a.b<float>(1);
    uint8_t* kc = a.b<uint8_t>(2);
    uint8_t* vc = a.b<uint8_t>(3);
    const size_t krow = kv_row_bytes(p.k_type, p.kv_dim), vrow = kv_row_bytes(p.v_type, p.kv_dim);
    if (const char* why = kv_write_rows_problem(p.max_ctx, p.n_tokens)) throw Error(std::string("kv_write: ") + why);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) {
        for (uint32_t t = (uint32_t)t0; t < (uint32_t)t1; t++) {
            const size_t pos = kv_ring_row(p.pos0 + t, p.max_ctx);
            kv_store_row(p.k_type, k + (size_t)t * p.k_stride, p.kv_dim, kc + pos * krow);
            kv_store_row(p.v_type, v + (size_t)t * p.v_stride, p.kv_dim, vc + pos * vrow);
        }
    });
}

// Work items are (query heads of one KV group, block of up to kTokenBlock
// tokens; heads_per_item says how many heads). The K and V rows
// of a block's key range are converted from the cache type once per item, kKeyChunk keys
// at a time, and reused by every token of the block (encoder passes and
// prefill: a 1500-token Whisper window converted each row 1500 times before).
// Per token the arithmetic is the one-token path's (same dots, same key
// order), so results do not depend on how tokens are grouped.
// Precision follows llama.cpp's CPU attention against an F16 cache: Q is
// rounded to F16 for the Q.K dots (for every cache type: quantized K rows
// are dequantized exactly, as the GPU kernels do) and the softmax weights are rounded to F16
// before weighting V (its matmuls convert the float operand to the cache
// type); dots and sums are accumulated in float. Per-thread buffers grow on
// first use (thread_local), not per call.
constexpr uint32_t kTokenBlock = 16;
constexpr uint32_t kKeyChunk = 256;

#if defined(__AVX2__) && defined(__FMA__)
// dot_f32's reduction of its 8 lane sums, on a register.
inline float reduce_like_dot_f32(__m256 v) {
    alignas(32) float s[8];
    _mm256_store_ps(s, v);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// reduce_like_dot_f32 of a[0..7] at once, lane i of the result a[i]'s: the
// eight accumulators transposed (vector l holds lane l of each), then added
// in reduce_like_dot_f32's tree, so every sum is the same bits.
inline __m256 reduce8_like_dot_f32(const __m256 a[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]);
    const __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
    const __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]);
    const __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]);
    // u_l: lanes l and l + 4 of a[0..3] (low half) and a[4..7] (high half), by 128-bit half
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    const __m256 l0 = _mm256_permute2f128_ps(u0, u4, 0x20), l4 = _mm256_permute2f128_ps(u0, u4, 0x31);
    const __m256 l1 = _mm256_permute2f128_ps(u1, u5, 0x20), l5 = _mm256_permute2f128_ps(u1, u5, 0x31);
    const __m256 l2 = _mm256_permute2f128_ps(u2, u6, 0x20), l6 = _mm256_permute2f128_ps(u2, u6, 0x31);
    const __m256 l3 = _mm256_permute2f128_ps(u3, u7, 0x20), l7 = _mm256_permute2f128_ps(u3, u7, 0x31);
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(l0, l1), _mm256_add_ps(l2, l3)),
                         _mm256_add_ps(_mm256_add_ps(l4, l5), _mm256_add_ps(l6, l7)));
}

// R queries x C keys (from key j) of 8-lane FMA accumulators in registers;
// keys past n repeat the last one and are not stored.
template <int R, int C>
inline void dot_tile(const float* const* qs, const float* rows, uint32_t j, uint32_t n, uint32_t hd, float* const* out) {
    const float* ks[C];
    for (int c = 0; c < C; c++) ks[c] = rows + (size_t)std::min<uint32_t>(j + c, n - 1) * hd;
    __m256 a[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) a[r][c] = _mm256_setzero_ps();
    for (uint32_t d = 0; d < hd; d += 8) {
        __m256 kv[C];
        for (int c = 0; c < C; c++) kv[c] = _mm256_loadu_ps(ks[c] + d);
        for (int r = 0; r < R; r++) {
            const __m256 qv = _mm256_loadu_ps(qs[r] + d);
            for (int c = 0; c < C; c++) a[r][c] = _mm256_fmadd_ps(qv, kv[c], a[r][c]);
        }
    }
    if constexpr (R * C == 8) {  // one transposed reduction for the whole tile
        alignas(32) float sums[8];
        _mm256_store_ps(sums, reduce8_like_dot_f32(&a[0][0]));
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C && j + c < n; c++) out[r][j + c] = sums[r * C + c];
    } else {
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C && j + c < n; c++) out[r][j + c] = reduce_like_dot_f32(a[r][c]);
    }
}

// exp(x) for 8 floats: 2^n * p(r), r = x - n ln2 (Cody-Waite split), p a degree-6
// polynomial; within 2 ulp of expf on the softmax's range (x <= 0), 0 below -87.
inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

// v[j] = exp(v[j] - mx) for j in [lo, hi]; returns their sum (accumulated in
// double). Same lanes and order for a token whatever block it is in.
double exp_and_sum(float* v, uint32_t lo, uint32_t hi, float mx) {
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 m = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    uint32_t j = lo;
    for (; j + 8 <= hi + 1; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(v + j), m));
        _mm256_storeu_ps(v + j, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    alignas(32) double t[8];
    _mm256_store_pd(t, s0);
    _mm256_store_pd(t + 4, s1);
    double sum = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    if (j <= hi) {  // the tail through the same vector exp
        alignas(32) float tail[8] = {};
        const uint32_t n = hi + 1 - j;
        for (uint32_t k = 0; k < n; k++) tail[k] = v[j + k];
        _mm256_store_ps(tail, exp8(_mm256_sub_ps(_mm256_load_ps(tail), m)));
        for (uint32_t k = 0; k < n; k++) {
            v[j + k] = tail[k];
            sum += tail[k];
        }
    }
    return sum;
#else
    double sum = 0;
    for (uint32_t j = lo; j <= hi; j++) {
        v[j] = std::exp(v[j] - mx);
        sum += v[j];
    }
    return sum;
#endif
}

// dots[i][j] = q_i . row_j for nq queries and n key rows (converted to float),
// each equal to dot_f32(q_i, row_j): with AVX2, register tiles of 4 queries x
// 2 keys (1 x 4 for the last queries, decode's single one included).
void block_dots(const float* q, uint32_t nq, const float* rows, uint32_t n, uint32_t hd, float* dots) {
#if defined(__AVX2__) && defined(__FMA__)
    if (hd % 8 == 0) {
        uint32_t i = 0;
        for (; i + 4 <= nq; i += 4) {
            const float* qs[4];
            float* out[4];
            for (int r = 0; r < 4; r++) {
                qs[r] = q + (size_t)(i + r) * hd;
                out[r] = dots + (size_t)(i + r) * kKeyChunk;
            }
            for (uint32_t j = 0; j < n; j += 2) dot_tile<4, 2>(qs, rows, j, n, hd, out);
        }
        for (; i < nq; i++) {
            const float* qs[1] = {q + (size_t)i * hd};
            float* out[1] = {dots + (size_t)i * kKeyChunk};
            for (uint32_t j = 0; j < n; j += 4) dot_tile<1, 4>(qs, rows, j, n, hd, out);
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

#if defined(__AVX2__) && defined(__FMA__)
constexpr bool kHaveRows4 = true;
// weighted_rows for four rows over the same keys [j0, j1), hd in 16s: each V
// load serves the four, and every (row, lane) sum takes the same FMAs in the
// same key order as weighted_rows gives it.
void weighted_rows4(const float* const w[4], const float* rows, uint32_t j0, uint32_t j1, uint32_t hd,
                    float* const acc[4]) {
    for (uint32_t d0 = 0; d0 < hd; d0 += 16) {
        __m256 a[4][2];
        for (int r = 0; r < 4; r++)
            for (int b = 0; b < 2; b++) a[r][b] = _mm256_loadu_ps(acc[r] + d0 + 8 * b);
        for (uint32_t j = j0; j < j1; j++) {
            const float* v = rows + (size_t)j * hd + d0;
            const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
            for (int r = 0; r < 4; r++) {
                const __m256 wr = _mm256_set1_ps(w[r][j]);
                a[r][0] = _mm256_fmadd_ps(wr, v0, a[r][0]);
                a[r][1] = _mm256_fmadd_ps(wr, v1, a[r][1]);
            }
        }
        for (int r = 0; r < 4; r++)
            for (int b = 0; b < 2; b++) _mm256_storeu_ps(acc[r] + d0 + 8 * b, a[r][b]);
    }
}
#else
constexpr bool kHaveRows4 = false;
inline void weighted_rows4(const float* const*, const float*, uint32_t, uint32_t, uint32_t, float* const*) {}
#endif

// One work item: nh consecutive query heads from h0 (one KV group's, sharing
// its K / V rows) of nt tokens whose key ranges are [lo[i], last[i]] and
// whose queries are qsrc(i, k) (token i, head h0 + k); key position j is row
// key_row(j) of the caches. Writes each row's output through dst(i, k).
struct HeadBlock {
    uint32_t h0, nh, nt;
    const uint32_t* lo;
    const uint32_t* last;
};

// The K and V caches of a layer and their element types.
struct CacheRows {
    const uint8_t* k;
    const uint8_t* v;
    uint32_t k_type, v_type;
};

// The query rows of an item: token i of head h0 + k is row i * nh + k.
constexpr uint32_t kMaxRows = kTokenBlock * 8;

template <class QSrc, class KeyRow, class Dst>
void attend(const HeadBlock& hb, uint32_t hd, uint32_t kv_dim, uint32_t group, float scale, const CacheRows& cache,
            QSrc qsrc, KeyRow key_row, Dst dst) {
    thread_local std::vector<float> scores, rows, dots, acc, qr;
    const uint32_t nh = hb.nh, nq = hb.nt * nh;
    float mx[kMaxRows], inv_sum[kMaxRows];
    uint32_t lo[kMaxRows], last[kMaxRows];
    if (rows.size() < (size_t)kKeyChunk * hd) rows.resize((size_t)kKeyChunk * hd);
    if (dots.size() < (size_t)kKeyChunk * kMaxRows) dots.resize((size_t)kKeyChunk * kMaxRows);
    if (qr.size() < (size_t)kMaxRows * hd) { qr.resize((size_t)kMaxRows * hd); acc.resize(qr.size()); }
    uint32_t kmin = UINT32_MAX, kmax = 0;
    for (uint32_t r = 0; r < nq; r++) {
        const uint32_t i = r / nh, k = r % nh;
        lo[r] = hb.lo[i];
        last[r] = hb.last[i];
        kmin = std::min(kmin, lo[r]);
        kmax = std::max(kmax, last[r]);
        const float* q = qsrc(i, k);
        for (uint32_t d = 0; d < hd; d++) qr[r * hd + d] = f16_to_f32(f32_to_f16(q[d]));
        mx[r] = -INFINITY;
    }
    const size_t span = (size_t)kmax - kmin + 1;
    if (scores.size() < nq * span) scores.resize(nq * span);
    const uint32_t koff = (hb.h0 / group) * hd;
    auto convert = [&](const uint8_t* rows_of, uint32_t type, uint32_t c0, uint32_t c1) {
        const size_t row_bytes = kv_row_bytes(type, kv_dim);
        for (uint32_t j = c0; j <= c1; j++)
            kv_load(type, rows_of + (size_t)key_row(j) * row_bytes, kv_dim, koff, hd,
                    rows.data() + (size_t)(j - c0) * hd);
    };
    for (uint32_t c0 = kmin; c0 <= kmax; c0 += kKeyChunk) {  // scores
        const uint32_t c1 = std::min(kmax, c0 + kKeyChunk - 1);
        convert(cache.k, cache.k_type, c0, c1);
        block_dots(qr.data(), nq, rows.data(), c1 - c0 + 1, hd, dots.data());
        for (uint32_t r = 0; r < nq; r++) {  // each row's own key range
            float* sc = scores.data() + r * span - kmin;
            const float* dt = dots.data() + (size_t)r * kKeyChunk - c0;
            for (uint32_t j = std::max(c0, lo[r]); j <= std::min(c1, last[r]); j++) {
                sc[j] = dt[j] * scale;
                mx[r] = std::max(mx[r], sc[j]);
            }
        }
    }
    for (uint32_t r = 0; r < nq; r++) {  // softmax
        float* sc = scores.data() + r * span - kmin;
        inv_sum[r] = (float)(1.0 / exp_and_sum(sc, lo[r], last[r], mx[r]));
    }
    std::fill(acc.begin(), acc.begin() + (size_t)nq * hd, 0.0f);
    for (uint32_t c0 = kmin; c0 <= kmax; c0 += kKeyChunk) {  // weighted V
        const uint32_t c1 = std::min(kmax, c0 + kKeyChunk - 1);
        convert(cache.v, cache.v_type, c0, c1);
        // Rows in fours: each row's weights (F16-rounded) in its own slice of
        // dots; keys the four share run together, a row's own keys before and
        // after them alone, so each row still adds its keys in ascending order.
        for (uint32_t r0 = 0; r0 < nq; r0 += 4) {
            const uint32_t nr = std::min<uint32_t>(4, nq - r0);
            uint32_t j0[4], j1[4], cj0 = 0, cj1 = UINT32_MAX;  // [j0, j1) chunk-relative; common [cj0, cj1)
            const float* w[4];
            float* out[4];
            for (uint32_t i = 0; i < nr; i++) {
                const uint32_t r = r0 + i;
                const float* sc = scores.data() + r * span - kmin;
                const uint32_t a = std::max(c0, lo[r]), b = std::min(c1, last[r]);
                float* wr = dots.data() + (size_t)i * kKeyChunk - c0;
                for (uint32_t j = a; j <= b; j++) wr[j] = f16_to_f32(f32_to_f16(sc[j] * inv_sum[r]));
                j0[i] = a - c0;
                j1[i] = a > b ? a - c0 : b - c0 + 1;
                w[i] = dots.data() + (size_t)i * kKeyChunk;
                out[i] = acc.data() + r * hd;
                cj0 = std::max(cj0, j0[i]);
                cj1 = std::min(cj1, j1[i]);
            }
            if (kHaveRows4 && nr == 4 && cj0 < cj1 && hd % 16 == 0) {
                for (uint32_t i = 0; i < 4; i++) weighted_rows(w[i], rows.data(), j0[i], cj0, hd, out[i]);
                weighted_rows4(w, rows.data(), cj0, cj1, hd, out);
                for (uint32_t i = 0; i < 4; i++) weighted_rows(w[i], rows.data(), cj1, j1[i], hd, out[i]);
                continue;
            }
            for (uint32_t i = 0; i < nr; i++) weighted_rows(w[i], rows.data(), j0[i], j1[i], hd, out[i]);
        }
    }
    for (uint32_t r = 0; r < nq; r++)
        std::copy(acc.begin() + r * hd, acc.begin() + (r + 1) * hd, dst(r / nh, r % nh));
}

// Query heads an item serves: the whole KV group (its K / V rows converted
// once for all of them: decode converted them once per query head) where
// that still leaves two items a thread, else fewer (down to one: a single
// KV head's decode keeps its query heads on separate threads). At most 8
// (kMaxRows). The arithmetic of a row is the same whatever the grouping.
uint32_t heads_per_item(uint32_t group, uint32_t n_kv_heads, uint32_t n_blocks, int n_threads) {
    uint32_t nh = std::min<uint32_t>(group, 8);
    while (nh > 1 && (group % nh || (size_t)n_blocks * n_kv_heads * (group / nh) < 2u * (uint32_t)n_threads)) nh--;
    return nh;
}

void attention(const CpuArgs& a) {
    AttentionParams p = a.p<AttentionParams>();
    const float* q = a.b<float>(0);
    const CacheRows cache{a.b<uint8_t>(1), a.b<uint8_t>(2), p.k_type, p.v_type};
    float* out = a.b<float>(3);
    const int32_t* seg = p.segmented ? a.b<int32_t>(4) : nullptr;
    if (const char* why = kv_rows_problem(p)) throw Error(std::string("attention: ") + why);
    const uint32_t hd = p.head_dim, kv_dim = p.n_kv_heads * hd;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const uint32_t n_blocks = (p.n_tokens + kTokenBlock - 1) / kTokenBlock;
    const uint32_t nh = heads_per_item(group, p.n_kv_heads, n_blocks, a.pool->size());
    const uint32_t items_a_block = p.n_heads / nh;
    a.pool->parallel_for((int)(n_blocks * items_a_block), [&](int i0, int i1) {
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        for (int it = i0; it < i1; it++) {
            const uint32_t h0 = ((uint32_t)it % items_a_block) * nh, t0 = ((uint32_t)it / items_a_block) * kTokenBlock;
            const uint32_t nt = std::min(kTokenBlock, p.n_tokens - t0);
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
            }
            attend(HeadBlock{h0, nh, nt, lo, last}, hd, kv_dim, group, p.scale, cache,
                   [&](uint32_t i, uint32_t k) { return q + (size_t)(t0 + i) * p.q_stride + (size_t)(h0 + k) * hd; },
                   [&](uint32_t j) { return kv_ring_row(j, p.max_ctx); },
                   [&](uint32_t i, uint32_t k) { return out + (size_t)(t0 + i) * p.out_stride + (size_t)(h0 + k) * hd; });
        }
    });
}

// Pool row of position `pos` of sequence `seq` (PagedKVWriteParams).
inline size_t paged_row(const int32_t* tables, uint32_t max_blocks, uint32_t block_size, uint32_t seq, uint32_t pos) {
    return (size_t)tables[(size_t)seq * max_blocks + pos / block_size] * block_size + pos % block_size;
}

void kv_write_paged(const CpuArgs& a) {
    PagedKVWriteParams p = a.p<PagedKVWriteParams>();
    const float* k = a.b<float>(0);
    const float* v = a.b<float>(1);
    uint8_t* kc = a.b<uint8_t>(2);
    uint8_t* vc = a.b<uint8_t>(3);
    const int32_t* rows = a.b<int32_t>(4);
    const int32_t* tables = a.b<int32_t>(5);
    const size_t krow = kv_row_bytes(p.k_type, p.kv_dim), vrow = kv_row_bytes(p.v_type, p.kv_dim);
    a.pool->parallel_for((int)p.n_tokens, [&](int t0, int t1) {
        for (uint32_t t = (uint32_t)t0; t < (uint32_t)t1; t++) {
            const size_t dst = paged_row(tables, p.max_blocks, p.block_size, (uint32_t)rows[2 * t],
                                         (uint32_t)rows[2 * t + 1]);
            kv_store_row(p.k_type, k + (size_t)t * p.k_stride, p.kv_dim, kc + dst * krow);
            kv_store_row(p.v_type, v + (size_t)t * p.v_stride, p.kv_dim, vc + dst * vrow);
        }
    });
}

// Work items are (head, block of up to kTokenBlock rows); the rows of a block
// are taken in runs of one sequence, each run through the same arithmetic as
// the contiguous kernel (a token's result equals attention's over the same keys).
void attention_paged(const CpuArgs& a) {
    PagedAttentionParams p = a.p<PagedAttentionParams>();
    const float* q = a.b<float>(0);
    const CacheRows cache{a.b<uint8_t>(1), a.b<uint8_t>(2), p.k_type, p.v_type};
    float* out = a.b<float>(3);
    const int32_t* rows = a.b<int32_t>(4);
    const int32_t* tables = a.b<int32_t>(5);
    const uint32_t hd = p.head_dim, kv_dim = p.n_kv_heads * hd;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const uint32_t n_blocks = (p.n_tokens + kTokenBlock - 1) / kTokenBlock;
    const uint32_t nh = heads_per_item(group, p.n_kv_heads, n_blocks, a.pool->size());
    const uint32_t items_a_block = p.n_heads / nh;
    a.pool->parallel_for((int)(n_blocks * items_a_block), [&](int i0, int i1) {
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        for (int it = i0; it < i1; it++) {
            const uint32_t h0 = ((uint32_t)it % items_a_block) * nh, b0 = ((uint32_t)it / items_a_block) * kTokenBlock;
            const uint32_t b1 = std::min(b0 + kTokenBlock, p.n_tokens);
            for (uint32_t t0 = b0; t0 < b1;) {
                const uint32_t seq = (uint32_t)rows[2 * t0];
                uint32_t nt = 0;
                while (t0 + nt < b1 && (uint32_t)rows[2 * (t0 + nt)] == seq) {
                    const uint32_t pos = (uint32_t)rows[2 * (t0 + nt) + 1];
                    lo[nt] = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
                    last[nt] = pos;
                    nt++;
                }
                attend(HeadBlock{h0, nh, nt, lo, last}, hd, kv_dim, group, p.scale, cache,
                       [&](uint32_t i, uint32_t k) { return q + (size_t)(t0 + i) * p.q_stride + (size_t)(h0 + k) * hd; },
                       [&](uint32_t j) { return paged_row(tables, p.max_blocks, p.block_size, seq, j); },
                       [&](uint32_t i, uint32_t k) { return out + (size_t)(t0 + i) * p.out_stride + (size_t)(h0 + k) * hd; });
                t0 += nt;
            }
        }
    });
}

}  // namespace

extern const CpuKernelEntry kAttentionKernels[] = {
    {"kv_write", kv_write},
    {"attention", attention},
    {"kv_write_paged", kv_write_paged},
    {"attention_paged", attention_paged},
    {nullptr, nullptr},
};

}  // namespace akunu
