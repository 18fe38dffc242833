// Metal Shading Language scalar and vector types for clang++ on the CPU
// (shared by the emulation header and the fiber runner). Vectors are clang's
// ext_vector_type, which gives MSL's component access and swizzles
// (v.x, v.xy, v.zyx) and element-wise arithmetic.
#pragma once
#include <cstdint>

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

// half: IEEE binary16 storage with float arithmetic, converted in software
// (round to nearest even, as the GPU; no compiler runtime needed). MSL
// computes half expressions in half precision, so an expression of several
// half operations could round differently here; akunu's kernels keep
// arithmetic in float and use half only for storage (the KV cache), where the
// two agree bit for bit. Of the half vectors only half4, for loads.
struct half {
    uint16_t bits;
    half() = default;
    half(float f) : bits(from_float(f)) {}
    operator float() const { return to_float(bits); }

    static uint16_t from_float(float f) {
        const uint32_t x = __builtin_bit_cast(uint32_t, f);
        const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
        if (ax >= 0x7F800000u) return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u));
        if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // rounds to infinity
        if (ax < 0x38800000u) {  // half subnormal: m * 2^-24, m rounded half to even
            const float v = __builtin_bit_cast(float, ax) * 16777216.0f;  // exact (power of two)
            uint32_t m = (uint32_t)v;
            const float rest = v - (float)m;
            if (rest > 0.5f || (rest == 0.5f && (m & 1u))) m++;
            return (uint16_t)(sign | m);
        }
        // rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even
        return (uint16_t)(sign | ((ax + 0xC8000FFFu + ((ax >> 13) & 1u)) >> 13));
    }
    static float to_float(uint16_t h) {
        const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
        if (e == 0) return (s ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;  // m * 2^-24
        const uint32_t bits = e == 31 ? (s | 0x7F800000u | (m << 13)) : (s | ((e + 112) << 23) | (m << 13));
        return __builtin_bit_cast(float, bits);
    }
};

// half4 as storage only (kernels load four halves at once, then convert each
// to float): a vector load of 8 aligned bytes, indexed as MSL's.
struct alignas(8) half4 {
    half v[4];
    half operator[](unsigned i) const { return v[i]; }
};

#define AKUNU_MSL_VECTORS(T)                                      \
    typedef T T##2 __attribute__((ext_vector_type(2)));          \
    typedef T T##3 __attribute__((ext_vector_type(3)));          \
    typedef T T##4 __attribute__((ext_vector_type(4)))
AKUNU_MSL_VECTORS(float);
AKUNU_MSL_VECTORS(int);
AKUNU_MSL_VECTORS(uint);
AKUNU_MSL_VECTORS(short);
AKUNU_MSL_VECTORS(ushort);
AKUNU_MSL_VECTORS(char);
AKUNU_MSL_VECTORS(uchar);
#undef AKUNU_MSL_VECTORS
typedef ulong ulong2 __attribute__((ext_vector_type(2)));

}  // namespace metal
