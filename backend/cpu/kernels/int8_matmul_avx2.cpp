// int8_matmul.h's tile kernels for AVX2 + FMA: dot4 is vpmaddubsw (u8 x s8
// pairs into int16, exact since a <= 128 and |b| <= 127) then vpmaddwd by 1.
// Compiled for AVX2 by the pragma below whatever the build's flags, and
// called only where the CPU has AVX2 (int8_matmul_portable.cpp chooses).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "int8_matmul.h"

// After every include: only this file's own functions take the target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace akunu {
namespace int8mm {
namespace {

constexpr bool kBiasedActivations = false;  // see int8_tiles_x86.h
constexpr int kTokenTile = 4;  // 16 vector registers

inline __m256i dot4(__m256i acc, __m256i a_u8, __m256i b_s8) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a_u8, b_s8), _mm256_set1_epi16(1)));
}

#include "int8_tiles_x86.h"

}  // namespace

const Kernels kAvx2Kernels = kTileKernels;

}  // namespace int8mm
}  // namespace akunu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
