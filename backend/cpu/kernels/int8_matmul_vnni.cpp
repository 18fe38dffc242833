// int8_matmul.h's tile kernels for AVX-512 VNNI on 256-bit vectors: dot4 is
// vpdpbusd (4 u8 x s8 products added into each int32 lane in one
// instruction), and AVX-512VL's 32 vector registers hold 8 tokens at once.
// Compiled for these features by the pragma below whatever the build's flags,
// and called only where the CPU has them (int8_matmul_portable.cpp chooses).
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
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif

namespace akunu {
namespace int8mm {
namespace {

constexpr bool kBiasedActivations = true;  // see int8_tiles_x86.h
constexpr int kTokenTile = 8;  // 32 vector registers

inline __m256i dot4(__m256i acc, __m256i a_u8, __m256i b_s8) { return _mm256_dpbusd_epi32(acc, a_u8, b_s8); }

#include "int8_tiles_x86.h"
#include "int8_gemv_zmm.h"

// The tiles, with one-token Q4_0 on 512-bit vectors (int8_gemv_zmm.h).
constexpr Kernels vnni_kernels() {
    Kernels k = kTileKernels;
    k.q4_0 = q4_0_matmul_zmm;
    return k;
}

}  // namespace

const Kernels kAvx512VnniKernels = vnni_kernels();

}  // namespace int8mm
}  // namespace akunu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
