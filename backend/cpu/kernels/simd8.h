// 8-lane float pieces shared by the CPU kernels built with AVX2 + FMA
// (matmul.cpp's float tiles, attention_math.h's dots and V rows).
#pragma once
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace akunu {
namespace simd8 {

// A loaded vector that several FMAs use stays in a register: without this the
// compiler folds its load into each FMA (a load per use), and loads, not
// FMAs, bound the loop.
inline void in_register(__m256& v) { asm("" : "+x"(v)); }
#if defined(__AVX512F__)
inline void in_register(__m512& v) { asm("" : "+v"(v)); }
#endif

// l[k] = lane k of a[0..7] (l[k][i] = a[i][k]): the transpose that lets eight
// horizontal sums run as vector adds, each in the tree of its caller.
inline void transpose(const __m256 a[8], __m256 l[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {  // a[0..3], a[4..7]: u[4h + k] holds lanes k and k + 4
        u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        l[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
        l[k + 4] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
    }
}

}  // namespace simd8
}  // namespace akunu
#endif
