// One token over Q4_0 rows on 512-bit vectors, for int8_matmul_vnni.cpp
// (included after int8_tiles_x86.h, inside its namespace and target). Two
// blocks' nibbles are unpacked and dotted at once, into the layout
// q32_gemv keeps (a vector of 8 int32 partial sums a row and block), and
// the reduction and float steps are q32_gemv's: the same bits. A Q4_0 GEMV
// on 256-bit vectors is bound by its unpacking (24 GB/s from cache or DRAM
// alike on a Zen 4 VM), which this halves a block.

// Rows [8 * g0, 8 * g1) for one token.
inline void q4_0_gemv_zmm(const Pass& p, int g0, int g1) {
    using F = TileQ4_0;
    constexpr int kChunk = kGemvChunk32;
    const int nb = p.K / 32;
    alignas(64) __m256i dots[8][kChunk];  // [row][block]: two blocks a 512-bit store
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m512i halves = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);  // lo's and hi's 16-byte halves, alternating
    const uintptr_t ahead = prefetch_distance((size_t)nb * F::BB);
    for (int g = g0; g < g1; g++) {
        const int n0 = g * 8, rows = std::min(8, p.N - n0);
        const uint8_t* rp[8];
        row_pointers(p, n0, (size_t)nb * F::BB, rp);
        __m256 fa = _mm256_setzero_ps();
        for (int c0 = 0; c0 < nb; c0 += kChunk) {
            const int cb = std::min(kChunk, nb - c0);
            const int8_t* xc = p.xq + 32 * (size_t)c0;
            for (int r = 0; r < 8; r++) {
                const uint8_t* blk = rp[r] + (size_t)c0 * F::BB;
                int b = 0;
                for (; b + 2 <= cb; b += 2, blk += 2 * F::BB) {
                    prefetch_ahead(blk, ahead);
                    const __m256i q = _mm256_loadu2_m128i((const __m128i*)(blk + F::BB + 2), (const __m128i*)(blk + 2));
                    const __m256i lo = _mm256_and_si256(q, nibble);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
                    // lo0 hi0 lo1 hi1: each block's low nibbles, then its high ones (the
                    // casts' undefined upper halves are never picked)
                    const __m512i w = _mm512_permutex2var_epi64(_mm512_castsi256_si512(lo), halves,
                                                                _mm512_castsi256_si512(hi));
                    const __m512i x = _mm512_loadu_si512((const void*)(xc + 32 * b));
                    _mm512_store_si512((void*)&dots[r][b], _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x));
                }
                for (; b < cb; b++, blk += F::BB) {
                    prefetch_ahead(blk, ahead);
                    dots[r][b] = dot4(_mm256_setzero_si256(), F::unpack(blk), load_v(xc + 32 * b));
                }
            }
            for (int b = 0; b < cb; b++) {
                const uint8_t* bp[8];
                __m256i v[8];
                for (int r = 0; r < 8; r++) {
                    bp[r] = rp[r] + (size_t)(c0 + b) * F::BB;
                    v[r] = dots[r][b];
                }
                const size_t xb = (size_t)c0 + b;
                const __m256i s = _mm256_sub_epi32(reduce8(v), _mm256_set1_epi32(F::kOffset * (int)p.xs[xb]));
                fa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(scales8<F>(bp), _mm256_set1_ps(p.xd[xb])),
                                     fa);
            }
        }
        store_row_group(p, fa, n0, rows);
    }
}

inline void q4_0_matmul_zmm(const Pass& p, int g0, int g1) {
    if (p.m == 1) return q4_0_gemv_zmm(p, g0, g1);
    q32_matmul<TileQ4_0>(p, g0, g1);
}
