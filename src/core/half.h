// IEEE half and bfloat16 <-> float conversion, portable (no F16C requirement).
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__F16C__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif

// Functions marked AKUNU_HD compile for the host and, inside CUDA sources, for
// the device too: the CUDA kernels decode weights with the very code that
// defines the formats on the CPU.
#if defined(__CUDACC__)
#define AKUNU_HD __host__ __device__
#else
#define AKUNU_HD
#endif

namespace akunu {

AKUNU_HD inline float f16_to_f32_portable(uint16_t h);

// Hardware conversion where the build targets it (F16C), else bit twiddling.
AKUNU_HD inline float f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
    float f;  // the GPU's conversion instruction (exact, like every IEEE half -> float conversion)
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#elif defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32_portable(h);
#endif
}

AKUNU_HD inline float f16_to_f32_portable(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalize
            int e = -1;
            do { mant <<= 1; e++; } while (!(mant & 0x400));
            mant &= 0x3FF;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// Round-to-nearest-even, like numpy's float16 cast and ggml's reference.
AKUNU_HD inline uint16_t f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
    if (f == f) {  // round to nearest even in hardware; NaN keeps the portable path's encoding
        uint16_t h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
    }
#elif defined(__F16C__)
    return (uint16_t)_cvtss_sh(f, 0);  // IEEE round to nearest even: the same bits as below
#endif
    uint32_t x;
    __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7FFFFFFF;
    if (absx >= 0x7F800000u) return (uint16_t)(sign | 0x7C00 | (absx > 0x7F800000u ? 0x200 : 0));
    if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00);  // overflow -> inf
    if (absx < 0x38800000u) {  // subnormal or zero in half
        if (absx < 0x33000000u) return (uint16_t)sign;
        uint32_t mant = (absx & 0x7FFFFF) | 0x800000;
        int shift = 113 - (int)(absx >> 23) + 13;
        uint32_t half_mant = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half_mant & 1))) half_mant++;
        return (uint16_t)(sign | half_mant);
    }
    uint32_t h = ((absx >> 13) - ((127 - 15) << 10));
    uint32_t rem = absx & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

// n halves to floats (vectorized with F16C).
inline void f16_row_to_f32(const uint16_t* src, float* dst, int n) {
    int i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(src + i))));
#endif
    for (; i < n; i++) dst[i] = f16_to_f32(src[i]);
}

AKUNU_HD inline float bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// The float with these IEEE bits.
AKUNU_HD inline float f32_from_bits(uint32_t bits) {
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

}  // namespace akunu
