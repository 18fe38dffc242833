// KV-cache write and attention (causal, or bidirectional for encoders) with GQA
// and an optional sliding window.
// The cache holds F16 by default (as llama.cpp's), or BF16 / Q8_0 / Q4_0 rows
// (core/kv_layout.h, K and V apart): K/V are rounded on write by
// core/kv_codec.h, and attention reads rows back through the same file.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../thread_pool.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_codec.h"
#include "core/kv_rows_check.h"
#include "attention_math.h"
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
// tokens; heads_per_item says how many heads). The K and V rows of a block's
// key range are converted from the cache type once per item, a chunk of
// kKeyChunk keys at a time, and reused by every token of the block (encoder
// passes and prefill: a 1500-token Whisper window converted each row 1500
// times before).
// Precision follows llama.cpp's CPU attention against an F16 cache: Q is
// rounded to F16 for the Q.K dots (for every cache type: quantized K rows
// are dequantized exactly, as the GPU kernels do) and the softmax weights are
// rounded to F16 before weighting V (its matmuls convert the float operand to
// the cache type); dots and sums are accumulated in float.
// The softmax is taken chunk by chunk, chunks at fixed multiples of kKeyChunk
// key positions: a row's exponentials in a chunk against the chunk's maximum
// m_c, summed (in double) to S_c; the row's maximum M is the largest m_c and
// its sum that of S_c e^(m_c - M) in chunk order; a key's weight is its
// exponential times e^(m_c - M) / sum, rounded to F16. Each chunk's share of
// the output is summed from zero, and the shares are added in chunk order.
// Fixing the arithmetic to the chunk grid lets a decode step spread one row's
// chunks over the threads (flash-decoding, attention_split) with the bits a
// prompt pass gets walking them in turn: results do not depend on how tokens
// are grouped or batched. Per-thread buffers grow on first use
// (thread_local), not per call.
using attention_math::kKeyChunk;
constexpr uint32_t kTokenBlock = 16;

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
    uint32_t kv_dim;
};

// The query rows of an item: token i of head h0 + k is row i * nh + k.
constexpr uint32_t kMaxRows = kTokenBlock * 8;

// An item's rows ready for its chunks, and where its per-chunk results go.
struct ItemRows {
    uint32_t nq = 0, hd = 0, koff = 0;  // rows, head size, the KV head's first value in a cache row
    uint32_t kmin = UINT32_MAX, kmax = 0;  // keys any row reads
    uint32_t c_first = 0, n_chunks = 0;    // chunks c_first... of kKeyChunk key positions
    float* q = nullptr;                    // nq x hd, rounded to F16
    uint32_t* lo = nullptr;                // per row: first and last key
    uint32_t* last = nullptr;
    float* scores = nullptr;  // nq x stride(): row r's key j at r * stride() + j - c_first * kKeyChunk
    float* cmax = nullptr;    // nq x n_chunks: a chunk's maximum score, then its weight factor
    double* csum = nullptr;   // nq x n_chunks: a chunk's sum of exponentials
    // Attention sinks (AttentionParams::sinks): row r's logit is sink[r % nh]
    // (the item's heads from h0); nullptr: none.
    const float* sink = nullptr;
    uint32_t nh = 1;
    size_t stride() const { return (size_t)n_chunks * kKeyChunk; }
    size_t score_sizes() const { return nq * stride(); }
};

// The rows of item hb into it (q, lo, last: room for hb.nt * hb.nh rows),
// and the chunks their keys span.
template <class QSrc>
void fill_rows(const HeadBlock& hb, uint32_t hd, uint32_t group, QSrc qsrc, ItemRows& it) {
    it.nq = hb.nt * hb.nh;
    it.nh = hb.nh;
    it.hd = hd;
    it.koff = (hb.h0 / group) * hd;
    it.kmin = UINT32_MAX;
    it.kmax = 0;
    for (uint32_t r = 0; r < it.nq; r++) {
        const uint32_t i = r / hb.nh, k = r % hb.nh;
        it.lo[r] = hb.lo[i];
        it.last[r] = hb.last[i];
        it.kmin = std::min(it.kmin, it.lo[r]);
        it.kmax = std::max(it.kmax, it.last[r]);
        const float* q = qsrc(i, k);
        for (uint32_t d = 0; d < hd; d++) it.q[r * hd + d] = f16_to_f32(f32_to_f16(q[d]));
    }
    it.c_first = it.kmin / kKeyChunk;
    it.n_chunks = it.kmax / kKeyChunk - it.c_first + 1;
}

// Keys [a, b] of the item's KV head from one cache, as float rows.
template <class KeyRow>
void convert_rows(const uint8_t* cache, uint32_t type, uint32_t kv_dim, const ItemRows& it, uint32_t a, uint32_t b,
                  KeyRow key_row, float* rows) {
    const size_t row_bytes = kv_row_bytes(type, kv_dim);
    for (uint32_t j = a; j <= b; j++)
        kv_load(type, cache + (size_t)key_row(j) * row_bytes, kv_dim, it.koff, it.hd, rows + (size_t)(j - a) * it.hd);
}

// The keys of chunk ci that the item reads: [a, b].
inline void chunk_keys(const ItemRows& it, uint32_t ci, uint32_t& a, uint32_t& b) {
    const uint32_t c0 = (it.c_first + ci) * kKeyChunk;
    a = std::max(c0, it.kmin);
    b = std::min(c0 + kKeyChunk - 1, it.kmax);
}

// Whether the item reads this cache's rows in place (F16 through F16C, heads
// of whole 16-value vectors) rather than converting them to floats first.
inline bool rows_in_place(uint32_t type, uint32_t hd) {
    return attention_math::kHaveHalfRows && type == kKvF16 && hd % 16 == 0;
}

// Chunk keys [a, b] of the item's KV head from one cache, as the dots and
// weighted sums read them: each key's F16 head slice in place (ptrs: kKeyChunk
// pointers), or float rows converted into `rows`; passed on to use(rows).
template <class KeyRow, class Use>
void with_chunk_rows(const uint8_t* cache, uint32_t type, uint32_t kv_dim, const ItemRows& it, uint32_t a, uint32_t b,
                     KeyRow key_row, float* rows, const uint16_t** ptrs, Use use) {
    if constexpr (attention_math::kHaveHalfRows) {
        if (rows_in_place(type, it.hd)) {
            const size_t row_bytes = kv_row_bytes(type, kv_dim);
            for (uint32_t j = a; j <= b; j++)
                ptrs[j - a] = reinterpret_cast<const uint16_t*>(cache + (size_t)key_row(j) * row_bytes) + it.koff;
            use(attention_math::HalfRows{ptrs});
            return;
        }
    }
    convert_rows(cache, type, kv_dim, it, a, b, key_row, rows);
    use(attention_math::FloatRows{rows, it.hd});
}

// Chunk ci's scores of every row (K rows converted once for all, or read in
// place), each row's maximum over its keys in the chunk and the sum of their
// exponentials, the exponentials left in place of the scores. rows:
// kKeyChunk x hd scratch, dots: kKeyChunk x kMaxRows.
template <class KeyRow>
void chunk_scores(const ItemRows& it, uint32_t ci, attention_math::Score score, const CacheRows& cache, KeyRow key_row, float* rows,
                  float* dots) {
    uint32_t a, b;
    chunk_keys(it, ci, a, b);
    const uint16_t* ptrs[kKeyChunk];
    with_chunk_rows(cache.k, cache.k_type, cache.kv_dim, it, a, b, key_row, rows, ptrs,
                    [&](const auto& keys) { attention_math::block_dots(it.q, it.nq, keys, b - a + 1, it.hd, dots); });
    const uint32_t base = it.c_first * kKeyChunk;
    for (uint32_t r = 0; r < it.nq; r++) {
        float* sc = it.scores + r * it.stride();
        const float* dt = dots + (size_t)r * kKeyChunk;
        const uint32_t ra = std::max(a, it.lo[r]), rb = std::min(b, it.last[r]);
        const float m = ra <= rb ? attention_math::scale_and_max(dt + (ra - a), score, rb + 1 - ra, sc + (ra - base))
                                 : -INFINITY;
        const size_t at = (size_t)r * it.n_chunks + ci;
        it.cmax[at] = m;
        it.csum[at] = ra <= rb ? attention_math::exp_and_sum(sc + (ra - base), 0, rb - ra, m) : 0.0;
    }
}

// Row r's weight factor of each chunk, e^(m_c - M) / sum, in place of m_c.
// A sink's logit joins the maximum and the sum (its value vector is zeros).
void row_factors(const ItemRows& it, uint32_t r) {
    float* m = it.cmax + (size_t)r * it.n_chunks;
    const double* s = it.csum + (size_t)r * it.n_chunks;
    float mx = -INFINITY;
    for (uint32_t c = 0; c < it.n_chunks; c++) mx = std::max(mx, m[c]);
    if (it.sink) mx = std::max(mx, it.sink[r % it.nh]);
    double sum = it.sink ? std::exp((double)it.sink[r % it.nh] - mx) : 0.0;
    for (uint32_t c = 0; c < it.n_chunks; c++)
        if (m[c] != -INFINITY) sum += s[c] * std::exp((double)m[c] - mx);
    for (uint32_t c = 0; c < it.n_chunks; c++)
        m[c] = m[c] == -INFINITY ? 0.0f : (float)(std::exp((double)m[c] - mx) / sum);
}

// Rows r0... (nr of them) of a chunk's share: row i's weights w[i] over its
// keys [j0[i], j1[i]) relative to the chunk's first key, into out[i]. The keys
// all of them share [cj0, cj1) run together (one V load for every row), a
// row's own keys before and after them alone, so each row still adds its
// keys in ascending order.
template <class Rows>
void weigh_rows(const Rows& vals, uint32_t nr, const float* const w[4], const uint32_t j0[4], const uint32_t j1[4],
                uint32_t cj0, uint32_t cj1, uint32_t hd, float* const out[4]) {
    using attention_math::weighted_rows;
    const uint32_t together = !attention_math::kHaveRowsN || cj0 >= cj1 || hd % 16 ? 0 : nr >= 4 ? 4 : nr >= 2 ? 2 : 0;
    for (uint32_t i = 0; i < together; i++) weighted_rows(w[i], vals, j0[i], cj0, hd, out[i]);
    if (together == 4) attention_math::weighted_rows_n<4>(w, vals, cj0, cj1, hd, out);
    if (together == 2) attention_math::weighted_rows_n<2>(w, vals, cj0, cj1, hd, out);
    for (uint32_t i = 0; i < together; i++) weighted_rows(w[i], vals, cj1, j1[i], hd, out[i]);
    for (uint32_t i = together; i < nr; i++) weighted_rows(w[i], vals, j0[i], j1[i], hd, out[i]);
}

// Chunk ci's share of every row's output, summed from zero into part (nq x
// hd): weights rounded to F16, V rows converted once for all (or read in
// place). wts: 4 x kKeyChunk scratch.
template <class KeyRow>
void chunk_values(const ItemRows& it, uint32_t ci, const CacheRows& cache, KeyRow key_row, float* rows, float* wts,
                  float* part) {
    uint32_t a, b;
    chunk_keys(it, ci, a, b);
    std::fill(part, part + (size_t)it.nq * it.hd, 0.0f);
    const uint32_t base = it.c_first * kKeyChunk, hd = it.hd;
    const uint16_t* ptrs[kKeyChunk];
    with_chunk_rows(cache.v, cache.v_type, cache.kv_dim, it, a, b, key_row, rows, ptrs, [&](const auto& vals) {
        for (uint32_t r0 = 0; r0 < it.nq; r0 += 4) {  // rows in fours, each row's weights in its own slice of wts
            const uint32_t nr = std::min<uint32_t>(4, it.nq - r0);
            uint32_t j0[4], j1[4], cj0 = 0, cj1 = UINT32_MAX;  // [j0, j1) relative to a; common [cj0, cj1)
            const float* w[4];
            float* out[4];
            for (uint32_t i = 0; i < nr; i++) {
                const uint32_t r = r0 + i;
                const float* sc = it.scores + r * it.stride();
                const float f = it.cmax[(size_t)r * it.n_chunks + ci];
                const uint32_t ra = std::max(a, it.lo[r]), rb = std::min(b, it.last[r]);
                float* wr = wts + (size_t)i * kKeyChunk;
                if (ra <= rb) attention_math::f16_weights(sc + (ra - base), f, rb + 1 - ra, wr + (ra - a));
                j0[i] = ra - a;
                j1[i] = ra > rb ? ra - a : rb - a + 1;
                w[i] = wr;
                out[i] = part + (size_t)r * hd;
                cj0 = std::max(cj0, j0[i]);
                cj1 = std::min(cj1, j1[i]);
            }
            weigh_rows(vals, nr, w, j0, j1, cj0, cj1, hd, out);
        }
    });
}

template <class T>
T* grown(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// One item on one thread: its chunks' scores, the factors, then the chunks'
// shares added in order.
template <class QSrc, class KeyRow, class Dst>
void attend(const HeadBlock& hb, uint32_t hd, uint32_t group, attention_math::Score score, const CacheRows& cache,
            const float* sinks, QSrc qsrc, KeyRow key_row, Dst dst) {
    thread_local std::vector<float> q, scores, cmax, rows, dots, wts, acc, part;
    thread_local std::vector<double> csum;
    uint32_t lo[kMaxRows], last[kMaxRows];
    ItemRows it;
    it.q = grown(q, (size_t)kMaxRows * hd);
    it.lo = lo;
    it.last = last;
    fill_rows(hb, hd, group, qsrc, it);
    it.sink = sinks ? sinks + hb.h0 : nullptr;
    it.scores = grown(scores, it.score_sizes());
    it.cmax = grown(cmax, (size_t)it.nq * it.n_chunks);
    it.csum = grown(csum, (size_t)it.nq * it.n_chunks);
    float* rw = grown(rows, (size_t)kKeyChunk * hd);
    float* dt = grown(dots, (size_t)kKeyChunk * kMaxRows);
    float* ws = grown(wts, (size_t)4 * kKeyChunk);
    float* ac = grown(acc, (size_t)it.nq * hd);
    float* pt = grown(part, (size_t)it.nq * hd);
    for (uint32_t ci = 0; ci < it.n_chunks; ci++) chunk_scores(it, ci, score, cache, key_row, rw, dt);
    for (uint32_t r = 0; r < it.nq; r++) row_factors(it, r);
    std::fill(ac, ac + (size_t)it.nq * hd, 0.0f);
    for (uint32_t ci = 0; ci < it.n_chunks; ci++) {
        chunk_values(it, ci, cache, key_row, rw, ws, pt);
        for (size_t e = 0; e < (size_t)it.nq * hd; e++) ac[e] += pt[e];
    }
    for (uint32_t r = 0; r < it.nq; r++) std::copy(ac + r * hd, ac + (r + 1) * hd, dst(r / hb.nh, r % hb.nh));
}

// Query heads an item serves: the whole KV group (its K / V rows converted
// once for all of them) where that still leaves two items a thread, else
// fewer. At most 8 (kMaxRows). The arithmetic of a row is the same whatever
// the grouping.
uint32_t heads_per_item(uint32_t group, uint32_t n_kv_heads, uint32_t n_blocks, int n_threads, bool whole = false) {
    uint32_t nh = std::min<uint32_t>(group, 8);
    while (nh > 1 && (group % nh || (!whole && (size_t)n_blocks * n_kv_heads * (group / nh) < 2u * (uint32_t)n_threads)))
        nh--;
    return nh;
}

// Each token's keys [lo, last] (AttentionParams' causal, window, packed
// sequences, cross-attention) for tokens t0... of a block.
void token_ranges(const AttentionParams& p, const int32_t* seg, uint32_t t0, uint32_t nt, uint32_t* lo,
                  uint32_t* last) {
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
}

// The most memory attention_split keeps for chunk shares (it stays allocated
// for the next step): one token over 131072 positions of 32 heads of 128
// takes 8 MiB; a 16-token block there takes the unsplit path.
constexpr size_t kMaxShareBytes = 32u << 20;

// A single block of tokens whose whole-group items are fewer than two a
// thread (decode with few KV heads): every item's chunks spread over the
// threads (flash-decoding), then each row's factors, each chunk's share, and
// the shares added in chunk order: the bits attend gives.
void attention_split(const AttentionParams& p, const float* q, const CacheRows& cache, float* out, const int32_t* seg,
                     const float* sinks, uint32_t nh, ThreadPool* pool) {
    thread_local std::vector<float> qs, scores, cmax, parts;
    thread_local std::vector<double> csum;
    thread_local std::vector<uint32_t> bounds;
    thread_local std::vector<ItemRows> items;
    const uint32_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads, n_items = p.n_heads / nh;
    const uint32_t nt = p.n_tokens, nq = nt * nh;
    uint32_t lo[kTokenBlock], last[kTokenBlock];
    token_ranges(p, seg, 0, nt, lo, last);
    items.resize(n_items);  // grows once
    float* qbuf = grown(qs, (size_t)n_items * nq * hd);
    uint32_t* bbuf = grown(bounds, (size_t)n_items * nq * 2);
    for (uint32_t i = 0; i < n_items; i++) {
        ItemRows& it = items[i];
        it.q = qbuf + (size_t)i * nq * hd;
        it.lo = bbuf + (size_t)i * nq * 2;
        it.last = it.lo + nq;
        const uint32_t h0 = i * nh;
        fill_rows(HeadBlock{h0, nh, nt, lo, last}, hd, group,
                  [&](uint32_t t, uint32_t k) { return q + (size_t)t * p.q_stride + (size_t)(h0 + k) * hd; }, it);
        it.sink = sinks ? sinks + h0 : nullptr;
    }
    ItemRows* its = items.data();  // (a thread_local named in the lambdas below would be each worker's own)
    const uint32_t nc = its[0].n_chunks;  // every item reads the same keys
    const size_t per_item = its[0].score_sizes(), part_size = (size_t)nq * hd;
    float* sbuf = grown(scores, per_item * n_items);
    float* mbuf = grown(cmax, (size_t)n_items * nq * nc);
    double* ubuf = grown(csum, (size_t)n_items * nq * nc);
    float* pbuf = grown(parts, part_size * nc * n_items);
    for (uint32_t i = 0; i < n_items; i++) {
        its[i].scores = sbuf + per_item * i;
        its[i].cmax = mbuf + (size_t)i * nq * nc;
        its[i].csum = ubuf + (size_t)i * nq * nc;
    }
    auto key_row = [&](uint32_t j) { return kv_ring_row(j, p.max_ctx); };
    const int n_tasks = (int)(n_items * nc);
    pool->parallel_for(n_tasks, [&](int t0, int t1) {
        thread_local std::vector<float> rows, dots;
        float* rw = grown(rows, (size_t)kKeyChunk * hd);
        float* dt = grown(dots, (size_t)kKeyChunk * kMaxRows);
        for (int t = t0; t < t1; t++) chunk_scores(its[t / nc], t % nc, {p.scale, p.softcap}, cache, key_row, rw, dt);
    });
    pool->parallel_for((int)(n_items * nq), [&](int r0, int r1) {
        for (int r = r0; r < r1; r++) row_factors(its[r / nq], r % nq);
    });
    pool->parallel_for(n_tasks, [&](int t0, int t1) {
        thread_local std::vector<float> rows, wts;
        float* rw = grown(rows, (size_t)kKeyChunk * hd);
        float* ws = grown(wts, (size_t)4 * kKeyChunk);
        for (int t = t0; t < t1; t++) chunk_values(its[t / nc], t % nc, cache, key_row, rw, ws, pbuf + part_size * t);
    });
    pool->parallel_for((int)(n_items * nq), [&](int r0, int r1) {
        for (int rr = r0; rr < r1; rr++) {
            const uint32_t i = rr / nq, r = rr % nq;
            float* o = out + (size_t)(r / nh) * p.out_stride + (size_t)(i * nh + r % nh) * hd;
            std::fill(o, o + hd, 0.0f);
            for (uint32_t ci = 0; ci < nc; ci++) {
                const float* s = pbuf + part_size * (i * nc + ci) + (size_t)r * hd;
                for (uint32_t d = 0; d < hd; d++) o[d] += s[d];
            }
        }
    });
}

void attention_rows(const AttentionParams& p, const float* q, const CacheRows& cache, float* out, const int32_t* seg,
                    const float* sinks, ThreadPool* pool) {
    const uint32_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
    const uint32_t n_blocks = (p.n_tokens + kTokenBlock - 1) / kTokenBlock;
    const int n_threads = pool->size();
    if (n_blocks == 1 && n_threads > 1) {
        const uint32_t whole = heads_per_item(group, p.n_kv_heads, 1, n_threads, true);
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        token_ranges(p, seg, 0, p.n_tokens, lo, last);
        const uint32_t kmin = *std::min_element(lo, lo + p.n_tokens), kmax = *std::max_element(last, last + p.n_tokens);
        const size_t n_chunks = kmax / kKeyChunk - kmin / kKeyChunk + 1;
        const size_t share_bytes = n_chunks * p.n_tokens * p.n_heads * hd * sizeof(float);  // every chunk's shares
        if (p.n_heads / whole < 2u * (uint32_t)n_threads && n_chunks > 1 && share_bytes <= kMaxShareBytes)
            return attention_split(p, q, cache, out, seg, sinks, whole, pool);
    }
    const uint32_t nh = heads_per_item(group, p.n_kv_heads, n_blocks, n_threads);
    const uint32_t items_a_block = p.n_heads / nh;
    pool->parallel_for((int)(n_blocks * items_a_block), [&](int i0, int i1) {
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        for (int it = i0; it < i1; it++) {
            const uint32_t h0 = ((uint32_t)it % items_a_block) * nh, t0 = ((uint32_t)it / items_a_block) * kTokenBlock;
            const uint32_t nt = std::min(kTokenBlock, p.n_tokens - t0);
            token_ranges(p, seg, t0, nt, lo, last);
            attend(HeadBlock{h0, nh, nt, lo, last}, hd, group, {p.scale, p.softcap}, cache, sinks,
                   [&](uint32_t i, uint32_t k) { return q + (size_t)(t0 + i) * p.q_stride + (size_t)(h0 + k) * hd; },
                   [&](uint32_t j) { return kv_ring_row(j, p.max_ctx); },
                   [&](uint32_t i, uint32_t k) { return out + (size_t)(t0 + i) * p.out_stride + (size_t)(h0 + k) * hd; });
        }
    });
}

void attention(const CpuArgs& a) {
    AttentionParams p = a.p<AttentionParams>();
    if (const char* why = kv_rows_problem(p)) throw Error(std::string("attention: ") + why);
    const CacheRows cache{a.b<uint8_t>(1), a.b<uint8_t>(2), p.k_type, p.v_type, p.n_kv_heads * p.head_dim};
    attention_rows(p, a.b<float>(0), cache, a.b<float>(3), p.segmented ? a.b<int32_t>(4) : nullptr,
                   p.sinks ? a.b<float>(7) : nullptr, a.pool);
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

// Work items are (query heads of a KV group, block of up to kTokenBlock rows
// of one sequence): a batch's decode rows (one row a sequence) are blocks of
// one row, so an item converts a row's keys once for the whole group
// (heads_per_item), where blocks of 16 rows of 16 sequences left the items
// one head each, every row's keys converted once a head (2 threads, Gemma 3
// 270M's 4 heads of one group, 4 rows at 256 keys: 152 us a layer). Each
// block goes through the same arithmetic as the contiguous kernel (a row's
// result equals attention's over the same keys, whatever the blocks).
void attention_paged(const CpuArgs& a) {
    PagedAttentionParams p = a.p<PagedAttentionParams>();
    if (const char* why = kv_head_problem(p.k_type, p.v_type, p.head_dim))
        throw Error(std::string("attention_paged: ") + why);
    const float* q = a.b<float>(0);
    const uint32_t hd = p.head_dim, kv_dim = p.n_kv_heads * hd;
    const CacheRows cache{a.b<uint8_t>(1), a.b<uint8_t>(2), p.k_type, p.v_type, kv_dim};
    float* out = a.b<float>(3);
    const int32_t* rows = a.b<int32_t>(4);
    const int32_t* tables = a.b<int32_t>(5);
    const uint32_t group = p.n_heads / p.n_kv_heads;
    // The blocks' first rows, then n_tokens (the calling thread's buffer,
    // grown on first use).
    static thread_local std::vector<uint32_t> starts;
    starts.clear();
    for (uint32_t t = 0; t < p.n_tokens;) {
        starts.push_back(t);
        const int32_t seq = rows[2 * t];
        const uint32_t t1 = t;
        while (++t < p.n_tokens && t - t1 < kTokenBlock && rows[2 * t] == seq) {}
    }
    starts.push_back(p.n_tokens);
    const uint32_t n_blocks = (uint32_t)starts.size() - 1;
    const uint32_t nh = heads_per_item(group, p.n_kv_heads, n_blocks, a.pool->size());
    // A key's pool row is looked up for every key of every item: with blocks
    // of a power of two (the default pool's) by shift and mask, not
    // a division (2 threads, Qwen3-0.6B's heads, 8 sequences at 1024 keys:
    // 2.8 -> 2.5-2.65 ms).
    const bool pow2 = p.block_size && (p.block_size & (p.block_size - 1)) == 0;
    uint32_t shift = 0;
    while (pow2 && (1u << shift) < p.block_size) shift++;
    const uint32_t items_a_block = p.n_heads / nh;
    const uint32_t* first = starts.data();
    a.pool->parallel_for((int)(n_blocks * items_a_block), [&](int i0, int i1) {
        uint32_t lo[kTokenBlock], last[kTokenBlock];
        for (int it = i0; it < i1; it++) {
            const uint32_t h0 = ((uint32_t)it % items_a_block) * nh, blk = (uint32_t)it / items_a_block;
            const uint32_t t0 = first[blk], nt = first[blk + 1] - t0;
            const uint32_t seq = (uint32_t)rows[2 * t0];
            for (uint32_t i = 0; i < nt; i++) {
                const uint32_t pos = (uint32_t)rows[2 * (t0 + i) + 1];
                lo[i] = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
                last[i] = pos;
            }
            attend(HeadBlock{h0, nh, nt, lo, last}, hd, group, {p.scale, p.softcap}, cache,
                   p.sinks ? a.b<float>(6) : nullptr, [&](uint32_t i, uint32_t k) { return q + (size_t)(t0 + i) * p.q_stride + (size_t)(h0 + k) * hd; },
                   [&](uint32_t j) {
                       const int32_t* table = tables + (size_t)seq * p.max_blocks;
                       return pow2 ? ((size_t)table[j >> shift] << shift) + (j & (p.block_size - 1))
                                   : paged_row(tables, p.max_blocks, p.block_size, seq, j);
                   },
                   [&](uint32_t i, uint32_t k) { return out + (size_t)(t0 + i) * p.out_stride + (size_t)(h0 + k) * hd; });
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
