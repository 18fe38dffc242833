// The x86 tile kernels of int8_matmul.h, compiled once per instruction set:
// int8_matmul_avx2.cpp and int8_matmul_vnni.cpp include this file inside an
// anonymous namespace after their `#pragma GCC target`, having defined
//   dot4(acc, a_u8, b_s8): acc + sums of 4 byte products per int32 lane
//                          (vpdpbusd, or vpmaddubsw + vpmaddwd), exact for
//                          a_u8 <= 128 and |b_s8| <= 127;
//   kTokenTile:            tokens held in registers at once;
//   kBiasedActivations:    whether dot4 takes any u8 (vpdpbusd: no 16-bit
//                          step to saturate), so signed weights can be
//                          taken as w + 128 and lose 128 * sum(x) after.
// No includes here: everything is defined in the including file's namespace.
//
// Tiles: 8 weight rows are unpacked and interleaved 4 bytes at a time into an
// L1-sized buffer (a 32-byte vector per 4 columns: row 0's 4 values, row 1's,
// ... row 7's), then every token of the pass multiplies it: one broadcast of
// 4 activation bytes and one dot4 give 8 rows' partial sums, lane = row, so
// per-row block sums come out without horizontal adds and the float step
// runs on 8 rows at once. The interleaving is what llama.cpp calls repacking;
// here it is made per pass from the GGUF layout (the mapped file is all the
// weight memory) and amortized over up to kMaxPassTokens tokens.

inline __m256i load_v(const void* p) { return _mm256_loadu_si256((const __m256i*)p); }
inline __m256i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// In: r[i] = row i's 8 groups of 4 bytes. Out: r[q] = group q of rows 0..7.
inline void transpose8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {  // rows 0-3, rows 4-7
        __m256i* tt = t + 4 * h;
        u[4 * h + 0] = _mm256_unpacklo_epi64(tt[0], tt[2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(tt[0], tt[2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(tt[1], tt[3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(tt[1], tt[3]);
    }
    for (int q = 0; q < 4; q++) {
        r[q] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x20);
        r[q + 4] = _mm256_permute2x128_si256(u[q], u[4 + q], 0x31);
    }
}

// 16 bytes of nibbles -> 32 bytes 0..15: low nibbles first, then high nibbles.
inline __m256i nibbles32(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128((const __m128i*)q);
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// 32 fifth bits (u32 little-endian) -> bytes of 0 or 16.
inline __m256i fifth_bits(const uint8_t* qh4) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                          3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(16));
}

// ---- 32-blocks: Q4_0, Q5_0, Q8_0, Q4_1, Q5_1, IQ4_NL, MXFP4 -----------------
// Q4_0 / Q5_0: a = q (0..15 / 0..31), s_b = dot(q, x) - kOffset * sum(x).
// Q8_0 / IQ4_NL / MXFP4: a = |w|, x takes w's sign (vpsignb), s_b = dot(w, x).
// Q4_1 / Q5_1: a = q, s_b = dot(q, x), and the min m adds
// acc = fma((float)sum(x), m * d_x, acc) after the block's own step.
struct TileQ4_0 {
    static constexpr int BB = 18, kOffset = 8;
    static constexpr bool kSigned = false, kMin = false;
    static __m256i unpack(const uint8_t* b) { return nibbles32(b + 2); }
};
struct TileQ5_0 {
    static constexpr int BB = 22, kOffset = 16;
    static constexpr bool kSigned = false, kMin = false;
    static __m256i unpack(const uint8_t* b) { return _mm256_or_si256(nibbles32(b + 6), fifth_bits(b + 2)); }
};
struct TileQ8_0 {
    static constexpr int BB = 34, kOffset = 0;
    static constexpr bool kSigned = true, kMin = false;
    static __m256i unpack(const uint8_t* b) { return load_v(b + 2); }
};
struct TileIQ4_NL {
    static constexpr int BB = 18, kOffset = 0;
    static constexpr bool kSigned = true, kMin = false;
    static __m256i unpack(const uint8_t* b) {
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)blocks::kIQ4Values));
        return _mm256_shuffle_epi8(table, nibbles32(b + 2));
    }
};
// MXFP4: 17-byte blocks, an E8M0 scale byte, then IQ4_NL's nibble order
// looked up in the doubled E2M1 table (blocks::kMXFP4Values).
struct TileMXFP4 {
    static constexpr int BB = 17, kOffset = 0;
    static constexpr bool kSigned = true, kMin = false;
    static __m256i unpack(const uint8_t* b) {
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)blocks::kMXFP4Values));
        return _mm256_shuffle_epi8(table, nibbles32(b + 1));
    }
    static float scale(const uint8_t* b) { return blocks::e8m0_half(b[0]); }
};
// The block's scale: an F16 d first in every other 32-block format.
template <class F>
inline float block_scale(const uint8_t* b) {
    if constexpr (std::is_same<F, TileMXFP4>::value) return F::scale(b);
    else return blocks::h(b);
}
struct TileQ4_1 {
    static constexpr int BB = 20, kOffset = 0;
    static constexpr bool kSigned = false, kMin = true;
    static __m256i unpack(const uint8_t* b) { return nibbles32(b + 4); }
};
struct TileQ5_1 {
    static constexpr int BB = 24, kOffset = 0;
    static constexpr bool kSigned = false, kMin = true;
    static __m256i unpack(const uint8_t* b) { return _mm256_or_si256(nibbles32(b + 8), fifth_bits(b + 4)); }
};

// Signed weights (Q8_0, IQ4_NL, MXFP4): with vpdpbusd taken as w + 128 (unsigned)
// and corrected by -128 * sum(x) like an offset; with vpmaddubsw (whose
// 16-bit pair sums would saturate at 255 * 127 * 2) as |w| against x with
// w's sign (vpsignb).
template <class F>
constexpr bool kSignTile = F::kSigned && !kBiasedActivations;
template <class F>
constexpr int kOffset = F::kSigned && kBiasedActivations ? 128 : F::kOffset;
template <class F>
inline __m256i unpack_u8(const uint8_t* b) {
    if constexpr (F::kSigned && kBiasedActivations) return _mm256_xor_si256(F::unpack(b), _mm256_set1_epi8((char)0x80));
    else return F::unpack(b);
}

constexpr int kChunk32 = 32;  // blocks per tile buffer (8 rows x 1024 columns)

// Accumulators of the pass's tokens x 8 rows across K chunks.
struct TileAcc {
    alignas(32) float v[kMaxPassTokens][8];
};

inline void store_rows(const Pass& p, const TileAcc& acc, int n0, int rows) {
    for (int t = 0; t < p.m; t++)
        for (int r = 0; r < rows; r++)
            p.y[(size_t)t * p.y_stride + n0 + r] = acc.v[t][r] + (p.bias ? p.bias[n0 + r] : 0.0f);
}

// Each block read also asks L2 for the bytes kPrefetchAhead or more past it
// (the decode GEMVs below say why). The distance is whole groups of 8 rows:
// the same block of a later group, which is read that many groups' bytes
// later whatever the order inside a group (8 rows in lockstep here, a chunk
// of each row in turn in the GEMVs). A fixed distance landed in a row whose
// chunk comes only a few runs later (2 threads, AMD EPYC VM: Q8_0 16384 x
// 8192 24 -> 30 GB/s, as its 65536 x 2048; Llama-3.2-1B's FFN down
// projection); the tiles, 8 short interleaved streams, asked for nothing
// (Q4_0 65536 x 1024 streamed from DRAM, 4 / 8 tokens: 5.2 -> 2.2, 6.4 ->
// 3.3 ms; Q8_0 5.2 -> 2.5, 6.4 -> 3.9).
constexpr size_t kPrefetchAhead = 24 * 1024;

inline uintptr_t prefetch_distance(size_t row_bytes) {
    const size_t group = 8 * row_bytes;
    return (uintptr_t)(group * ((kPrefetchAhead + group - 1) / group));
}

inline void prefetch_ahead(const uint8_t* p, uintptr_t ahead) {
    _mm_prefetch((const char*)((uintptr_t)p + ahead), _MM_HINT_T1);  // (may pass the matrix's end)
}

// Rows n0.. of the group: pointers clamped to the last real row (a partial
// group computes duplicates and stores only its rows).
inline void row_pointers(const Pass& p, int n0, size_t row_bytes, const uint8_t* rp[8]) {
    for (int r = 0; r < 8; r++) rp[r] = p.W + (size_t)std::min(n0 + r, p.N - 1) * row_bytes;
}

// The pass's tokens in tiles of kTokenTile, the rest in tiles of 4, 2 and 1
// (no register tile filled with copies of a token): f(tile, t0), tile an
// std::integral_constant of the tile's size.
template <class Fn>
inline void for_token_tiles(int m, Fn&& f) {
    int t0 = 0;
    for (; t0 + kTokenTile <= m; t0 += kTokenTile) f(std::integral_constant<int, kTokenTile>(), t0);
    if constexpr (kTokenTile > 4)
        for (; t0 + 4 <= m; t0 += 4) f(std::integral_constant<int, 4>(), t0);
    for (; t0 + 2 <= m; t0 += 2) f(std::integral_constant<int, 2>(), t0);
    for (; t0 < m; t0++) f(std::integral_constant<int, 1>(), t0);
}

// Tokens [t0, t0 + T) of a tile from block c0 (blocks of E activations and
// S sums each): their activations' pointers and their float accumulators
// (zero at the first chunk, else carried in acc).
template <int T>
struct TokenTile {
    const int8_t* xq[T];
    const float* xd[T];
    const int16_t* xs[T];
    __m256 fa[T];
    TokenTile(const Pass& p, int E, int S, int c0, int t0, const TileAcc& acc) {
        const int nb = p.K / E;
        for (int i = 0; i < T; i++) {
            const int t = t0 + i;
            xq[i] = p.xq + (size_t)t * p.K + (size_t)c0 * E;
            xd[i] = p.xd + (size_t)t * nb + c0;
            xs[i] = p.xs + ((size_t)t * nb + c0) * S;
            fa[i] = c0 ? _mm256_load_ps(acc.v[t]) : _mm256_setzero_ps();
        }
    }
    void store(TileAcc& acc, int t0) const {
        for (int i = 0; i < T; i++) _mm256_store_ps(acc.v[t0 + i], fa[i]);
    }
};

// Tokens [t0, t0 + T) against the chunk's tile (blocks [c0, c0 + cb)).
template <class F, int T>
void q32_token_tile(const Pass& p, const uint8_t (*wa)[8][32], const int8_t (*ws)[8][32], const float (*dw)[8],
                    const float (*mw)[8], int c0, int cb, int t0, TileAcc& acc) {
    TokenTile<T> tt(p, 32, 1, c0, t0, acc);
    for (int b = 0; b < cb; b++) {
        __m256i ia[T];
        for (int i = 0; i < T; i++) ia[i] = _mm256_setzero_si256();
        for (int q = 0; q < 8; q++) {
            const __m256i a = _mm256_load_si256((const __m256i*)wa[b][q]);
            if constexpr (kSignTile<F>) {
                const __m256i s = _mm256_load_si256((const __m256i*)ws[b][q]);
                for (int i = 0; i < T; i++)
                    ia[i] = dot4(ia[i], a, _mm256_sign_epi8(broadcast4(tt.xq[i] + 32 * b + 4 * q), s));
            } else {
                for (int i = 0; i < T; i++)
                    ia[i] = dot4(ia[i], a, broadcast4(tt.xq[i] + 32 * b + 4 * q));
            }
        }
        const __m256 d = _mm256_load_ps(dw[b]);
        for (int i = 0; i < T; i++) {
            __m256i s = ia[i];
            if constexpr (kOffset<F> != 0) s = _mm256_sub_epi32(s, _mm256_set1_epi32(kOffset<F> * (int)tt.xs[i][b]));
            const __m256 dx = _mm256_set1_ps(tt.xd[i][b]);
            tt.fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, dx), tt.fa[i]);
            if constexpr (F::kMin)
                tt.fa[i] = _mm256_fmadd_ps(_mm256_set1_ps((float)tt.xs[i][b]), _mm256_mul_ps(_mm256_load_ps(mw[b]), dx), tt.fa[i]);
        }
    }
    tt.store(acc, t0);
}

template <class F>
void q32_groups(const Pass& p, int g0, int g1) {
    const int nb = p.K / 32;
    alignas(32) uint8_t wa[kChunk32][8][32];
    alignas(32) int8_t ws[kSignTile<F> ? kChunk32 : 1][8][32];
    alignas(32) float dw[kChunk32][8];
    alignas(32) float mw[F::kMin ? kChunk32 : 1][8];
    TileAcc acc;
    const uintptr_t ahead = prefetch_distance((size_t)nb * F::BB);
    for (int g = g0; g < g1; g++) {
        const int n0 = g * 8, rows = std::min(8, p.N - n0);
        const uint8_t* rp[8];
        row_pointers(p, n0, (size_t)nb * F::BB, rp);
        for (int c0 = 0; c0 < nb; c0 += kChunk32) {
            const int cb = std::min(kChunk32, nb - c0);
            for (int b = 0; b < cb; b++) {
                __m256i v[8];
                for (int r = 0; r < 8; r++) {
                    const uint8_t* blk = rp[r] + (size_t)(c0 + b) * F::BB;
                    prefetch_ahead(blk, ahead);
                    v[r] = unpack_u8<F>(blk);
                    dw[b][r] = block_scale<F>(blk);
                    if constexpr (F::kMin) mw[b][r] = blocks::h(blk + 2);
                }
                if constexpr (kSignTile<F>) {
                    __m256i s[8];
                    for (int r = 0; r < 8; r++) { s[r] = v[r]; v[r] = _mm256_abs_epi8(v[r]); }
                    transpose8x8(s);
                    for (int q = 0; q < 8; q++) _mm256_store_si256((__m256i*)ws[b][q], s[q]);
                }
                transpose8x8(v);
                for (int q = 0; q < 8; q++) _mm256_store_si256((__m256i*)wa[b][q], v[q]);
            }
            for_token_tiles(p.m, [&](auto tile, int t0) {
                q32_token_tile<F, decltype(tile)::value>(p, wa, ws, dw, mw, c0, cb, t0, acc);
            });
        }
        store_rows(p, acc, n0, rows);
    }
}

// ---- 256-super-blocks: Q4_K and Q6_K --------------------------------------
// Per super-block and 8 rows: 64 interleaved groups of 4 unsigned values,
// an int32 scale per sub-block and row, and int16 pairs per row for the one
// vpmaddwd term against the activations' sums of 16 (Q4_K: the mins; Q6_K:
// the scales times the -32 offset of its values).
constexpr int kChunkK = 4;  // super-blocks per tile buffer (8 rows x 1024 columns)

struct KTile {
    alignas(32) uint8_t wa[kChunkK][64][32];
    alignas(32) int32_t sc[kChunkK][16][8];
    alignas(32) int32_t pairs[kChunkK][8][8];
    alignas(32) float d[kChunkK][8];
    alignas(32) float dm[kChunkK][8];  // -dmin (Q4_K)
};

inline int32_t pack_pair(int a, int b) { return (int32_t)(((uint32_t)(uint16_t)(int16_t)b << 16) | (uint16_t)(int16_t)a); }

// Q4_K: 8 sub-blocks of 32 unsigned nibbles; y = d * sum sc_j dot_j - dmin * sum m_j sum_j(x).
struct TileQ4_K {
    static constexpr int BB = 144, kSub = 8, kGroupsPerSub = 8;
    static constexpr bool kMins = true;
    static void unpack(const uint8_t* blk, __m256i w[8]) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int j = 0; j < 4; j++) {
            const __m256i q = load_v(blk + 16 + 32 * j);
            w[2 * j] = _mm256_and_si256(q, m4);
            w[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
    }
    static constexpr int kDOffset = 0, kDminOffset = 2;
    // Per run of 32 (one sub-block): its scale in every lane; and an int16
    // per sum of 16 for the pair term: the min of its sub-block.
    // (in vector registers: one scale at a time through general registers and
    // the stack made this the most of a decode GEMV's work per block)
    static void row_scales(const uint8_t* blk, __m256i sc[8], __m256i& pair_weights) {
        uint64_t s, mn;
        scales_mins(blk + 4, s, mn);
        const __m256i s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)s));
        for (int j = 0; j < 8; j++) sc[j] = _mm256_permutevar8x32_epi32(s32, _mm256_set1_epi32(j));
        const __m256i m32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn));
        pair_weights = _mm256_or_si256(m32, _mm256_slli_epi32(m32, 16));  // m_j as the int16 pair (m_j, m_j)
    }
    // The 12 bytes of 6-bit scales and mins (blocks::q4k_scale_min's layout) as
    // 8 scale bytes and 8 min bytes: sub-blocks 0-3 keep 6 bits of bytes 0-3
    // (4-7 for mins); 4-7 take 4 bits of bytes 8-11 (the high nibbles for mins)
    // and 2 from the top of bytes 0-3 (4-7 for mins).
    static void scales_mins(const uint8_t* q, uint64_t& s, uint64_t& mn) {
        uint32_t u[3];
        std::memcpy(u, q, 12);
        constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
        s = (uint64_t)(u[0] & low6) | (uint64_t)((u[2] & low4) | (((u[0] >> 6) & top2) << 4)) << 32;
        mn = (uint64_t)(u[1] & low6) | (uint64_t)(((u[2] >> 4) & low4) | (((u[1] >> 6) & top2) << 4)) << 32;
    }
    static void meta(const uint8_t* blk, KTile& k, int s, int r) {
        k.d[s][r] = blocks::h(blk);
        k.dm[s][r] = -blocks::h(blk + 2);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            blocks::q4k_scale_min(j, blk + 4, &sc, &mn);
            k.sc[s][j][r] = sc;
            k.pairs[s][j][r] = pack_pair(mn, mn);  // m_j * (sum of x over its two 16s)
        }
    }
};

// Q5_K: Q4_K with a fifth bit per value (q 0..31); the same scales and mins.
struct TileQ5_K : TileQ4_K {
    static constexpr int BB = 176;
    static void unpack(const uint8_t* blk, __m256i w[8]) {
        const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        const __m256i qh = load_v(blk + 16);
        for (int g = 0; g < 4; g++) {
            const __m256i q = load_v(blk + 48 + 32 * g);
            for (int s = 0; s < 2; s++) {
                const int j = 2 * g + s;
                const __m256i lo = s ? _mm256_and_si256(_mm256_srli_epi16(q, 4), m4) : _mm256_and_si256(q, m4);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, j), one);
                w[j] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
            }
        }
    }
};

// Q6_K: 16 sub-blocks of 16 six-bit unsigned q (weight q - 32); y = d * sum sc_j (dot_j(q) - 32 sum_j(x)).
struct TileQ6_K {
    static constexpr int BB = 210, kSub = 16, kGroupsPerSub = 4;
    static constexpr bool kMins = false;
    static void unpack(const uint8_t* blk, __m256i w[8]) {
        const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
        for (int half = 0; half < 2; half++) {
            const __m256i q1 = load_v(blk + 64 * half), q2 = load_v(blk + 64 * half + 32);
            const __m256i h = load_v(blk + 128 + 32 * half);
            w[4 * half + 0] = _mm256_or_si256(_mm256_and_si256(q1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            w[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(q2, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            w[4 * half + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), m4), _mm256_and_si256(h, m30));
            w[4 * half + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 4), m4),
                                              _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
        }
    }
    static constexpr int kDOffset = 208, kPairShift = 5;  // -32 = -(1 << 5)
    // Per run of 32 (two sub-blocks of 16): lanes 0-3 the first's scale, 4-7
    // the second's; and an int16 per sum of 16 for the pair term: its
    // sub-block's scale (times -32 after the reduction).
    static void row_scales(const uint8_t* blk, __m256i sc[8], __m256i& pair_weights) {
        const __m256i first = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk + 192)));
        const __m256i second = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(blk + 200)));
        for (int j = 0; j < 8; j++) {
            const int a = 2 * (j % 4), b = a + 1;
            sc[j] = _mm256_permutevar8x32_epi32(j < 4 ? first : second, _mm256_setr_epi32(a, a, a, a, b, b, b, b));
        }
        pair_weights = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + 192)));
    }
    static void meta(const uint8_t* blk, KTile& k, int s, int r) {
        const int8_t* scl = (const int8_t*)(blk + 192);
        k.d[s][r] = blocks::h(blk + 208);
        for (int j = 0; j < 16; j++) k.sc[s][j][r] = scl[j];
        for (int j = 0; j < 8; j++) k.pairs[s][j][r] = pack_pair(scl[2 * j], scl[2 * j + 1]);
    }
};

// Q2_K / Q3_K: run j (32 values) holds bits 2 (j % 4) of q[32 (j / 4) ..].
inline __m256i two_bits(const uint8_t* q, int j) {
    return _mm256_and_si256(_mm256_srli_epi16(load_v(q + 32 * (j / 4)), 2 * (j % 4)), _mm256_set1_epi8(3));
}

// Per run of 32 (two sub-blocks of 16): lanes 0-3 a's scale, 4-7 b's.
inline __m256i scale_pair(int a, int b) { return _mm256_setr_epi32(a, a, a, a, b, b, b, b); }

// Q2_K: 16 sub-blocks of 16, q 0..3, 4-bit scales and mins;
// y = d * sum sc_j dot_j - dmin * sum m_j sum_j(x).
struct TileQ2_K {
    static constexpr int BB = 84, kSub = 16, kGroupsPerSub = 4, kDOffset = 80, kDminOffset = 82;
    static constexpr bool kMins = true;
    static void unpack(const uint8_t* blk, __m256i w[8]) {
        for (int j = 0; j < 8; j++) w[j] = two_bits(blk + 16, j);
    }
    static void row_scales(const uint8_t* blk, __m256i sc[8], __m256i& pair_weights) {
        alignas(32) int16_t m[16];
        for (int j = 0; j < 8; j++) sc[j] = scale_pair(blk[2 * j] & 0xF, blk[2 * j + 1] & 0xF);
        for (int i = 0; i < 16; i++) m[i] = blk[i] >> 4;
        pair_weights = _mm256_load_si256((const __m256i*)m);
    }
    static void meta(const uint8_t* blk, KTile& k, int s, int r) {
        k.d[s][r] = blocks::h(blk + 80);
        k.dm[s][r] = -blocks::h(blk + 82);
        for (int j = 0; j < 16; j++) k.sc[s][j][r] = blk[j] & 0xF;
        for (int j = 0; j < 8; j++) k.pairs[s][j][r] = pack_pair(blk[2 * j] >> 4, blk[2 * j + 1] >> 4);
    }
};

// Q3_K: 16 sub-blocks of 16, q = low 2 bits | high bit << 2 (0..7, weight
// q - 4), signed 6-bit scales; y = d * sum sc_j (dot_j(q) - 4 sum_j(x)).
struct TileQ3_K {
    static constexpr int BB = 110, kSub = 16, kGroupsPerSub = 4, kDOffset = 108, kPairShift = 2;  // -4 = -(1 << 2)
    static constexpr bool kMins = false;
    static void unpack(const uint8_t* blk, __m256i w[8]) {
        const __m256i hm = load_v(blk), one = _mm256_set1_epi8(1);
        for (int j = 0; j < 8; j++) {
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, j), one);
            w[j] = _mm256_or_si256(two_bits(blk + 32, j), _mm256_slli_epi16(hb, 2));
        }
    }
    static void scales16(const uint8_t* blk, int out[16]) {
        const uint8_t* sc = blk + 96;
        for (int i = 0; i < 16; i++) {
            const int lo = i < 8 ? (sc[i] & 0xF) : (sc[i - 8] >> 4);
            const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
            out[i] = (lo | (hi << 4)) - 32;
        }
    }
    static void row_scales(const uint8_t* blk, __m256i sc[8], __m256i& pair_weights) {
        int s[16];
        scales16(blk, s);
        alignas(32) int16_t w16[16];
        for (int j = 0; j < 8; j++) sc[j] = scale_pair(s[2 * j], s[2 * j + 1]);
        for (int i = 0; i < 16; i++) w16[i] = (int16_t)s[i];
        pair_weights = _mm256_load_si256((const __m256i*)w16);
    }
    static void meta(const uint8_t* blk, KTile& k, int s, int r) {
        int sc[16];
        scales16(blk, sc);
        k.d[s][r] = blocks::h(blk + 108);
        for (int j = 0; j < 16; j++) k.sc[s][j][r] = sc[j];
        for (int j = 0; j < 8; j++) k.pairs[s][j][r] = pack_pair(sc[2 * j], sc[2 * j + 1]);
    }
};

// Tokens [t0, t0 + T) against the chunk's tile (super-blocks [c0, c0 + cs)).
template <class F, int T>
void k_token_tile(const Pass& p, const KTile& k, int c0, int cs, int t0, TileAcc& acc) {
    TokenTile<T> tt(p, 256, 16, c0, t0, acc);
    for (int s = 0; s < cs; s++) {
        __m256i is[T];
        for (int i = 0; i < T; i++) is[i] = _mm256_setzero_si256();
        for (int j = 0; j < F::kSub; j++) {
            __m256i da[T];
            for (int i = 0; i < T; i++) da[i] = _mm256_setzero_si256();
            for (int q = 0; q < F::kGroupsPerSub; q++) {
                const int grp = j * F::kGroupsPerSub + q;
                const __m256i a = _mm256_load_si256((const __m256i*)k.wa[s][grp]);
                for (int i = 0; i < T; i++)
                    da[i] = dot4(da[i], a, broadcast4(tt.xq[i] + 256 * s + 4 * grp));
            }
            const __m256i sc = _mm256_load_si256((const __m256i*)k.sc[s][j]);
            for (int i = 0; i < T; i++) is[i] = _mm256_add_epi32(is[i], _mm256_mullo_epi32(da[i], sc));
        }
        const __m256 d = _mm256_load_ps(k.d[s]);
        for (int i = 0; i < T; i++) {
            const int16_t* bs = tt.xs[i] + 16 * s;
            __m256i ps = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                int32_t pair;
                std::memcpy(&pair, bs + 2 * j, 4);
                ps = _mm256_add_epi32(
                    ps, _mm256_madd_epi16(_mm256_load_si256((const __m256i*)k.pairs[s][j]), _mm256_set1_epi32(pair)));
            }
            const __m256 dx = _mm256_set1_ps(tt.xd[i][s]);
            if constexpr (F::kMins) {
                tt.fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[i]), _mm256_mul_ps(d, dx), tt.fa[i]);
                tt.fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ps), _mm256_mul_ps(_mm256_load_ps(k.dm[s]), dx), tt.fa[i]);
            } else {
                const __m256i v = _mm256_sub_epi32(is[i], _mm256_slli_epi32(ps, F::kPairShift));
                tt.fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, dx), tt.fa[i]);
            }
        }
    }
    tt.store(acc, t0);
}

template <class F>
void k_groups(const Pass& p, int g0, int g1) {
    const int nb = p.K / 256;
    KTile k;
    TileAcc acc;
    const uintptr_t ahead = prefetch_distance((size_t)nb * F::BB);
    for (int g = g0; g < g1; g++) {
        const int n0 = g * 8, rows = std::min(8, p.N - n0);
        const uint8_t* rp[8];
        row_pointers(p, n0, (size_t)nb * F::BB, rp);
        for (int c0 = 0; c0 < nb; c0 += kChunkK) {
            const int cs = std::min(kChunkK, nb - c0);
            for (int s = 0; s < cs; s++) {
                __m256i w[8][8];  // [row][run of 32]
                for (int r = 0; r < 8; r++) {
                    const uint8_t* blk = rp[r] + (size_t)(c0 + s) * F::BB;
                    for (int l = 0; l < F::BB; l += 64) prefetch_ahead(blk + l, ahead);
                    F::unpack(blk, w[r]);
                    F::meta(blk, k, s, r);
                }
                for (int j = 0; j < 8; j++) {
                    __m256i v[8];
                    for (int r = 0; r < 8; r++) v[r] = w[r][j];
                    transpose8x8(v);
                    for (int q = 0; q < 8; q++) _mm256_store_si256((__m256i*)k.wa[s][8 * j + q], v[q]);
                }
            }
            for_token_tiles(p.m, [&](auto tile, int t0) {
                k_token_tile<F, decltype(tile)::value>(p, k, c0, cs, t0, acc);
            });
        }
        store_rows(p, acc, n0, rows);
    }
}

// ---- One token (decode) and a few: straight from the GGUF layout ----------
// A tile pays for its interleaving over the tokens that share it; one token
// cannot, so decode takes each row's block sums with a horizontal reduction
// instead. The integers are the same, and the float step is the tiles' own
// (8 rows per vector, one fma per block), so the results are the same bits.

// Lane r of the result = the sum of v[r]'s 8 int32 lanes.
inline __m256i reduce8(const __m256i v[8]) {
    const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i a = _mm256_hadd_epi32(h01, h23), b = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// The f16 at byte `off` of each row's block, as 8 floats (exact, as blocks::h).
inline __m256 halves8(const uint8_t* const rp[8], size_t off) {
    auto h = [&](int r) { uint16_t v; std::memcpy(&v, rp[r] + off, 2); return (short)v; };
    // built in registers: 8 two-byte stores read back as one vector would stall store forwarding
    return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
}

// Each row's block scale as 8 floats: the F16 d at byte 0, or MXFP4's E8M0 byte.
template <class F>
inline __m256 scales8(const uint8_t* const rp[8]) {
    if constexpr (std::is_same<F, TileMXFP4>::value) {
        auto d = [&](int r) { return F::scale(rp[r]); };
        return _mm256_setr_ps(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7));
    } else {
        return halves8(rp, 0);
    }
}

inline void store_row_group(const Pass& p, __m256 acc, int n0, int rows, int t = 0) {
    alignas(32) float v[8];
    _mm256_store_ps(v, acc);
    float* y = p.y + (size_t)t * p.y_stride;
    for (int r = 0; r < rows; r++) y[n0 + r] = v[r] + (p.bias ? p.bias[n0 + r] : 0.0f);
}

// Rows are read one after another, a chunk of blocks at a time (each row's
// chunk one sequential run: the hardware prefetcher streams it, where 8 rows
// read in lockstep would be 8 short interleaved streams), their 8-lane dot
// vectors kept in L1 until the chunk's reduction and float step.
// A thread's rows are one contiguous range read forward, so each block's
// read also asks for the bytes kPrefetchAhead past it into L2: a miss to DRAM
// is then in flight long before its run starts, whatever the row length (the
// hardware prefetchers start a stream only a few lines into each run, and
// these kernels do too much work a byte to keep enough misses in flight
// alone). A 2-core AMD EPYC VM (Zen 4), 2 threads, matrices streamed from
// DRAM, against the next run's address asked into L1 (the previous scheme):
// Q8_0 151936 x 1024 20 -> 33-36 GB/s, 16384 x 3072 22 -> 36; Q6_K 16384 x
// 3072 25 -> 42; Q4_K 16 -> 26; 12-16 KB ahead gained less, 48 KB no more.
// Qwen3-0.6B shape decode, tg64: Q8_0 27 -> 40-47 tok/s, Q4_K_M 65 -> 76.
// The bytes ahead: prefetch_distance (with the tiles, above).
constexpr int kGemvChunk32 = 64, kGemvChunkK = 8;

// A few tokens (T, up to kGemvTokens32 / kGemvTokensK: batched decode, short verification
// passes) take the same path: each row's weights unpacked once and dotted
// with every token's activations, the dot vectors of a chunk kept per token
// (the chunk shrinks with T to keep them in L1). Gemma 3 270M Q4_K_M,
// batched decode steps on 2 threads (AMD EPYC VM, AVX-512 VNNI): 2 rows
// 33-42 -> 16-18 ms, 4 rows 36-43 -> 26-33 ms against the tiles. Up to 8
// tokens the K-quant GEMV still beats the tiles, whose interleaving costs
// more a super-block (same VM, 2 threads, 4 tokens: Q6_K 65536 x 1024 2.7
// vs 3.5 ms, Q4_K even). The Q4_0 / Q8_0 tiles, which unpack less a byte,
// win from 2 tokens on since they prefetch like the GEMVs (65536 x 1024
// from DRAM, 2 / 4 tokens: Q4_0 1.8 / 2.2 ms against the GEMV's 2.5 / 3.4,
// Q8_0 2.1 / 2.5 against 2.5 / 3.6; in cache 25-45% faster).
constexpr int kGemvTokens32 = 1, kGemvTokensK = 8;

template <class F, int T>
void q32_gemv(const Pass& p, int g0, int g1) {
    constexpr int kChunk = kGemvChunk32 / T;
    const int nb = p.K / 32;
    alignas(32) __m256i dots[T][kChunk][8];
    const uintptr_t ahead = prefetch_distance((size_t)nb * F::BB);
    for (int g = g0; g < g1; g++) {
        const int n0 = g * 8, rows = std::min(8, p.N - n0);
        const uint8_t* rp[8];
        row_pointers(p, n0, (size_t)nb * F::BB, rp);
        __m256 fa[T];
        for (int i = 0; i < T; i++) fa[i] = _mm256_setzero_ps();
        for (int c0 = 0; c0 < nb; c0 += kChunk) {
            const int cb = std::min(kChunk, nb - c0);
            for (int r = 0; r < 8; r++) {
                const uint8_t* blk = rp[r] + (size_t)c0 * F::BB;
                for (int b = 0; b < cb; b++, blk += F::BB) {
                    prefetch_ahead(blk, ahead);
                    const __m256i w = unpack_u8<F>(blk);
                    const int8_t* x = p.xq + 32 * (size_t)(c0 + b);
                    if constexpr (kSignTile<F>) {
                        const __m256i aw = _mm256_abs_epi8(w);
                        for (int i = 0; i < T; i++)
                            dots[i][b][r] = dot4(_mm256_setzero_si256(), aw, _mm256_sign_epi8(load_v(x + (size_t)i * p.K), w));
                    } else {
                        for (int i = 0; i < T; i++) dots[i][b][r] = dot4(_mm256_setzero_si256(), w, load_v(x + (size_t)i * p.K));
                    }
                }
            }
            for (int b = 0; b < cb; b++) {
                const uint8_t* bp[8];
                for (int r = 0; r < 8; r++) bp[r] = rp[r] + (size_t)(c0 + b) * F::BB;
                const __m256 dw = scales8<F>(bp);
                __m256 mw;
                if constexpr (F::kMin) mw = halves8(bp, 2);
                for (int i = 0; i < T; i++) {
                    const size_t xb = (size_t)i * nb + c0 + b;
                    __m256i s = reduce8(dots[i][b]);
                    if constexpr (kOffset<F> != 0) s = _mm256_sub_epi32(s, _mm256_set1_epi32(kOffset<F> * (int)p.xs[xb]));
                    const __m256 dx = _mm256_set1_ps(p.xd[xb]);
                    fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dx), fa[i]);
                    if constexpr (F::kMin)
                        fa[i] = _mm256_fmadd_ps(_mm256_set1_ps((float)p.xs[xb]), _mm256_mul_ps(mw, dx), fa[i]);
                }
            }
        }
        for (int i = 0; i < T; i++) store_row_group(p, fa[i], n0, rows, i);
    }
}

template <class F, int T>
void k_gemv(const Pass& p, int g0, int g1) {
    constexpr int kChunk = kGemvChunkK / T > 0 ? kGemvChunkK / T : 1;
    const int nb = p.K / 256;
    alignas(32) __m256i iv[T][kChunk][8], pv[T][kChunk][8];
    const uintptr_t ahead = prefetch_distance((size_t)nb * F::BB);
    for (int g = g0; g < g1; g++) {
        const int n0 = g * 8, rows = std::min(8, p.N - n0);
        const uint8_t* rp[8];
        row_pointers(p, n0, (size_t)nb * F::BB, rp);
        __m256 fa[T];
        for (int i = 0; i < T; i++) fa[i] = _mm256_setzero_ps();
        for (int c0 = 0; c0 < nb; c0 += kChunk) {
            const int cb = std::min(kChunk, nb - c0);
            for (int r = 0; r < 8; r++) {
                const uint8_t* blk = rp[r] + (size_t)c0 * F::BB;
                for (int b = 0; b < cb; b++, blk += F::BB) {
                    for (int l = 0; l < F::BB; l += 64) prefetch_ahead(blk + l, ahead);
                    __m256i w[8], sc[8], pw;
                    F::unpack(blk, w);
                    F::row_scales(blk, sc, pw);
                    for (int i = 0; i < T; i++) {
                        const int8_t* x = p.xq + (size_t)i * p.K + 256 * (size_t)(c0 + b);
                        __m256i acc = _mm256_setzero_si256();
                        for (int j = 0; j < 8; j++)
                            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(dot4(_mm256_setzero_si256(), w[j], load_v(x + 32 * j)), sc[j]));
                        iv[i][b][r] = acc;
                        pv[i][b][r] = _mm256_madd_epi16(load_v(p.xs + 16 * ((size_t)i * nb + c0 + b)), pw);
                    }
                }
            }
            for (int b = 0; b < cb; b++) {
                const uint8_t* bp[8];
                for (int r = 0; r < 8; r++) bp[r] = rp[r] + (size_t)(c0 + b) * F::BB;
                const __m256 dw = halves8(bp, F::kDOffset);
                __m256 neg_dmin;
                if constexpr (F::kMins) neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), halves8(bp, F::kDminOffset));
                for (int i = 0; i < T; i++) {
                    const __m256i is = reduce8(iv[i][b]), ps = reduce8(pv[i][b]);
                    const __m256 dx = _mm256_set1_ps(p.xd[(size_t)i * nb + c0 + b]);
                    if constexpr (F::kMins) {
                        fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, dx), fa[i]);
                        fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ps), _mm256_mul_ps(neg_dmin, dx), fa[i]);
                    } else {
                        const __m256i v = _mm256_sub_epi32(is, _mm256_slli_epi32(ps, F::kPairShift));
                        fa[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(dw, dx), fa[i]);
                    }
                }
            }
        }
        for (int i = 0; i < T; i++) store_row_group(p, fa[i], n0, rows, i);
    }
}

// Passes of T..kMaxT tokens: the GEMV for their count.
template <template <class, int> class Gemv, class F, int T, int kMaxT>
void few_tokens(const Pass& p, int g0, int g1) {
    if constexpr (T < kMaxT) {
        if (p.m > T) return few_tokens<Gemv, F, T + 1, kMaxT>(p, g0, g1);
    }
    Gemv<F, T>::run(p, g0, g1);
}
template <class F, int T> struct Q32Gemv { static void run(const Pass& p, int g0, int g1) { q32_gemv<F, T>(p, g0, g1); } };
template <class F, int T> struct KGemv { static void run(const Pass& p, int g0, int g1) { k_gemv<F, T>(p, g0, g1); } };

template <class F>
void q32_matmul(const Pass& p, int g0, int g1) {
    if (p.m <= kGemvTokens32) few_tokens<Q32Gemv, F, 1, kGemvTokens32>(p, g0, g1);
    else q32_groups<F>(p, g0, g1);
}

template <class F>
void k_matmul(const Pass& p, int g0, int g1) {
    if (p.m <= kGemvTokensK) few_tokens<KGemv, F, 1, kGemvTokensK>(p, g0, g1);
    else k_groups<F>(p, g0, g1);
}

// ---- Activations rounded to 8 bits ------------------------------------------
// The same numbers as qdot::quantize_q8_0 / quantize_q8_k (quantized_dot.h):
// max |x| is exact in any order, x * (1/d) is one rounding either way, and
// vroundps rounds half to even as nearbyint does.
inline __m256i round_to_i32(__m256 v) {
    return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 4 x 8 int32 (each within int8) -> 32 int8 in order.
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i abcd = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline int hsum8_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }

void quantize_q8_0_x86(const float* x, int K, int8_t* q, float* d, int16_t* sums) {
    for (int b = 0; b < K / 32; b++) {
        const float* xb = x + 32 * b;
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            mx = _mm256_max_ps(mx, abs_ps(v[i]));
        }
        const float db = hmax8(mx) / 127.0f;
        const __m256 id = _mm256_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
        __m256i r[4];
        for (int i = 0; i < 4; i++) r[i] = round_to_i32(_mm256_mul_ps(v[i], id));
        _mm256_storeu_si256((__m256i*)(q + 32 * b), pack_i8(r[0], r[1], r[2], r[3]));
        sums[b] = (int16_t)hsum8_i32(_mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3])));
        d[b] = f16_to_f32(f32_to_f16(db));
    }
}

void quantize_q8_k_x86(const float* x, int K, int8_t* q, float* d, int16_t* bsums) {
    for (int b = 0; b < K / 256; b++) {
        const float* xb = x + 256 * b;
        int8_t* qb = q + 256 * b;
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < 32; i++) mx = _mm256_max_ps(mx, abs_ps(_mm256_loadu_ps(xb + 8 * i)));
        const float amax = hmax8(mx);
        if (amax == 0.0f) {
            d[b] = 0;
            std::memset(qb, 0, 256);
            std::memset(bsums + 16 * b, 0, 32);
            continue;
        }
        float maxv = amax;  // the first value of largest magnitude, with its sign
        const __m256 am = _mm256_set1_ps(amax);
        for (int i = 0; i < 32; i++) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(xb + 8 * i)), am, _CMP_EQ_OQ));
            if (hit) { maxv = xb[8 * i + __builtin_ctz((unsigned)hit)]; break; }
        }
        const float iscale = -127.0f / maxv;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        for (int g = 0; g < 8; g++) {  // 32 values, two sums of 16
            __m256i r[4];
            for (int i = 0; i < 4; i++)
                r[i] = _mm256_min_epi32(round_to_i32(_mm256_mul_ps(_mm256_loadu_ps(xb + 32 * g + 8 * i), is)), top);
            _mm256_storeu_si256((__m256i*)(qb + 32 * g), pack_i8(r[0], r[1], r[2], r[3]));
            bsums[16 * b + 2 * g] = (int16_t)hsum8_i32(_mm256_add_epi32(r[0], r[1]));
            bsums[16 * b + 2 * g + 1] = (int16_t)hsum8_i32(_mm256_add_epi32(r[2], r[3]));
        }
        d[b] = 1.0f / iscale;
    }
}

constexpr Kernels kTileKernels = {q32_matmul<TileQ8_0>, q32_matmul<TileQ4_0>, q32_matmul<TileQ5_0>, k_matmul<TileQ4_K>,
                                  k_matmul<TileQ5_K>, k_matmul<TileQ6_K>, k_matmul<TileQ2_K>, k_matmul<TileQ3_K>,
                                  q32_matmul<TileQ4_1>, q32_matmul<TileQ5_1>, q32_matmul<TileIQ4_NL>, q32_matmul<TileMXFP4>,
                                  quantize_q8_0_x86, quantize_q8_k_x86};
