// The portable integer matmul (int8_matmul.h): plain C++, one (row, token) at
// a time, written to read as the definition the SIMD paths must match bit for
// bit. Also the run-time choice of instruction set.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/quant_blocks.h"
#include "int8_matmul.h"
#include "quantized_dot.h"

namespace akunu {
namespace int8mm {
namespace {

// A row's block unpacked to integers in GGUF value order, with what the float
// step needs.
struct Block32 {
    int8_t v[32];
    float d;
    float m = 0;  // Q4_1 / Q5_1: the block's min
};

inline void unpack_q8_0(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    std::memcpy(o.v, b + 2, 32);
}

inline void unpack_q4_0(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    for (int j = 0; j < 16; j++) {
        o.v[j] = (int8_t)((b[2 + j] & 0xF) - 8);
        o.v[j + 16] = (int8_t)((b[2 + j] >> 4) - 8);
    }
}

inline void unpack_q5_0(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    uint32_t qh;
    std::memcpy(&qh, b + 2, 4);
    for (int j = 0; j < 16; j++) {
        o.v[j] = (int8_t)(((b[6 + j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
        o.v[j + 16] = (int8_t)(((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
}

inline void unpack_q4_1(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    o.m = blocks::h(b + 2);
    for (int j = 0; j < 16; j++) {
        o.v[j] = (int8_t)(b[4 + j] & 0xF);
        o.v[j + 16] = (int8_t)(b[4 + j] >> 4);
    }
}

inline void unpack_q5_1(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    o.m = blocks::h(b + 2);
    uint32_t qh;
    std::memcpy(&qh, b + 4, 4);
    for (int j = 0; j < 16; j++) {
        o.v[j] = (int8_t)((b[8 + j] & 0xF) | (((qh >> j) & 1) << 4));
        o.v[j + 16] = (int8_t)((b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

inline void unpack_iq4_nl(const uint8_t* b, Block32& o) {
    o.d = blocks::h(b);
    for (int j = 0; j < 16; j++) {
        o.v[j] = blocks::kIQ4Values[b[2 + j] & 0xF];
        o.v[j + 16] = blocks::kIQ4Values[b[2 + j] >> 4];
    }
}

// MXFP4: the doubled E2M1 codes as int8, against half the E8M0 scale (exact:
// a power of two), so d_w * d_x rounds like any other format's product.
inline void unpack_mxfp4(const uint8_t* b, Block32& o) {
    o.d = blocks::e8m0_half(b[0]);
    for (int j = 0; j < 16; j++) {
        o.v[j] = blocks::kMXFP4Values[b[1 + j] & 0xF];
        o.v[j + 16] = blocks::kMXFP4Values[b[1 + j] >> 4];
    }
}

// HasMin: Q4_1 / Q5_1, whose block adds its min times the token's block sum.
template <void (*Unpack)(const uint8_t*, Block32&), int BB, bool HasMin = false>
void q32_rows(const Pass& p, int g0, int g1) {
    const int nb = p.K / 32;
    const int n1 = g1 * kTileRows < p.N ? g1 * kTileRows : p.N;
    Block32 blk;
    for (int n = g0 * kTileRows; n < n1; n++) {
        const uint8_t* row = p.W + (size_t)n * nb * BB;
        for (int t = 0; t < p.m; t++) {
            const int8_t* x = p.xq + (size_t)t * p.K;
            const float* xd = p.xd + (size_t)t * nb;
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                Unpack(row + (size_t)b * BB, blk);
                int32_t s = 0;
                for (int k = 0; k < 32; k++) s += (int32_t)blk.v[k] * x[b * 32 + k];
                const float scale = blk.d * xd[b];
                acc = std::fma((float)s, scale, acc);
                if (HasMin) {
                    const float mscale = blk.m * xd[b];
                    acc = std::fma((float)p.xs[(size_t)t * nb + b], mscale, acc);
                }
            }
            p.y[(size_t)t * p.y_stride + n] = acc + (p.bias ? p.bias[n] : 0.0f);
        }
    }
}

// Q4_K and Q5_K (Bits = 5: a fifth bit per value from the 32 bytes at 16).
template <int Bits>
void q45_k_rows(const Pass& p, int g0, int g1) {
    constexpr int BB = Bits == 4 ? 144 : 176, kQs = Bits == 4 ? 16 : 48;
    const int nb = p.K / 256;
    const int n1 = g1 * kTileRows < p.N ? g1 * kTileRows : p.N;
    for (int n = g0 * kTileRows; n < n1; n++) {
        const uint8_t* row = p.W + (size_t)n * nb * BB;
        for (int t = 0; t < p.m; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t* blk = row + (size_t)b * BB;
                const int8_t* x = p.xq + (size_t)t * p.K + b * 256;
                const int16_t* bs = p.xs + ((size_t)t * nb + b) * 16;
                int32_t isum = 0, msum = 0;
                for (int j = 0; j < 8; j++) {  // sub-blocks of 32: low nibbles, then high, per 32 bytes
                    uint8_t sc, mn;
                    blocks::q4k_scale_min(j, blk + 4, &sc, &mn);
                    const uint8_t* q = blk + kQs + 32 * (j / 2);
                    const int shift = 4 * (j % 2);
                    int32_t dot = 0;
                    for (int k = 0; k < 32; k++) {
                        int v = (q[k] >> shift) & 0xF;
                        if (Bits == 5) v |= ((blk[16 + k] >> j) & 1) << 4;
                        dot += v * x[32 * j + k];
                    }
                    isum += (int32_t)sc * dot;
                    msum += (int32_t)mn * (bs[2 * j] + bs[2 * j + 1]);
                }
                const float dx = p.xd[(size_t)t * nb + b];
                const float scale = blocks::h(blk) * dx;
                const float mscale = -blocks::h(blk + 2) * dx;
                acc = std::fma((float)isum, scale, acc);
                acc = std::fma((float)msum, mscale, acc);
            }
            p.y[(size_t)t * p.y_stride + n] = acc + (p.bias ? p.bias[n] : 0.0f);
        }
    }
}

// Q6_K value i of a block (0..255), as the 6-bit unsigned q; the weight is q - 32.
inline int q6_k_value(const uint8_t* blk, int i) {
    const int half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
    const uint8_t* ql = blk + 64 * half;
    const uint8_t* qh = blk + 128 + 32 * half;
    const int low = quarter == 0 ? (ql[l] & 0xF)
                  : quarter == 1 ? (ql[l + 32] & 0xF)
                  : quarter == 2 ? (ql[l] >> 4)
                                 : (ql[l + 32] >> 4);
    return low | (((qh[l] >> (2 * quarter)) & 3) << 4);
}

void q6_k_rows(const Pass& p, int g0, int g1) {
    const int nb = p.K / 256;
    const int n1 = g1 * kTileRows < p.N ? g1 * kTileRows : p.N;
    for (int n = g0 * kTileRows; n < n1; n++) {
        const uint8_t* row = p.W + (size_t)n * nb * 210;
        for (int t = 0; t < p.m; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t* blk = row + (size_t)b * 210;
                const int8_t* sc = (const int8_t*)(blk + 192);
                const int8_t* x = p.xq + (size_t)t * p.K + b * 256;
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    int32_t dot = 0;
                    for (int k = 0; k < 16; k++) dot += (q6_k_value(blk, 16 * j + k) - 32) * x[16 * j + k];
                    isum += (int32_t)sc[j] * dot;
                }
                const float scale = blocks::h(blk + 208) * p.xd[(size_t)t * nb + b];
                acc = std::fma((float)isum, scale, acc);
            }
            p.y[(size_t)t * p.y_stride + n] = acc + (p.bias ? p.bias[n] : 0.0f);
        }
    }
}

// Q2_K / Q3_K value i's two low bits: bits 2 (j % 4) of q[32 (j / 4) + k], j = i / 32, k = i % 32.
inline int low2(const uint8_t* q, int i) { return (q[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

void q2_k_rows(const Pass& p, int g0, int g1) {
    const int nb = p.K / 256;
    const int n1 = g1 * kTileRows < p.N ? g1 * kTileRows : p.N;
    for (int n = g0 * kTileRows; n < n1; n++) {
        const uint8_t* row = p.W + (size_t)n * nb * 84;
        for (int t = 0; t < p.m; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t* blk = row + (size_t)b * 84;
                const int8_t* x = p.xq + (size_t)t * p.K + b * 256;
                const int16_t* bs = p.xs + ((size_t)t * nb + b) * 16;
                int32_t isum = 0, msum = 0;
                for (int j = 0; j < 16; j++) {  // sub-blocks of 16: scale low nibble, min high nibble
                    int32_t dot = 0;
                    for (int k = 0; k < 16; k++) dot += low2(blk + 16, 16 * j + k) * x[16 * j + k];
                    isum += (blk[j] & 0xF) * dot;
                    msum += (blk[j] >> 4) * bs[j];
                }
                const float dx = p.xd[(size_t)t * nb + b];
                const float scale = blocks::h(blk + 80) * dx;
                const float mscale = -blocks::h(blk + 82) * dx;
                acc = std::fma((float)isum, scale, acc);
                acc = std::fma((float)msum, mscale, acc);
            }
            p.y[(size_t)t * p.y_stride + n] = acc + (p.bias ? p.bias[n] : 0.0f);
        }
    }
}

void q3_k_rows(const Pass& p, int g0, int g1) {
    const int nb = p.K / 256;
    const int n1 = g1 * kTileRows < p.N ? g1 * kTileRows : p.N;
    for (int n = g0 * kTileRows; n < n1; n++) {
        const uint8_t* row = p.W + (size_t)n * nb * 110;
        for (int t = 0; t < p.m; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t* blk = row + (size_t)b * 110;
                const uint8_t* sc = blk + 96;
                const int8_t* x = p.xq + (size_t)t * p.K + b * 256;
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    const int lo = j < 8 ? (sc[j] & 0xF) : (sc[j - 8] >> 4);
                    const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
                    int32_t dot = 0;
                    for (int k = 0; k < 16; k++) {
                        const int i = 16 * j + k;
                        const int hbit = (blk[i % 32] >> (i / 32)) & 1;  // hmask: bit i / 32 of byte i % 32
                        dot += (low2(blk + 32, i) + 4 * hbit - 4) * x[i];
                    }
                    isum += ((lo | (hi << 4)) - 32) * dot;
                }
                const float scale = blocks::h(blk + 108) * p.xd[(size_t)t * nb + b];
                acc = std::fma((float)isum, scale, acc);
            }
            p.y[(size_t)t * p.y_stride + n] = acc + (p.bias ? p.bias[n] : 0.0f);
        }
    }
}

void quantize_q8_0_sums(const float* x, int K, int8_t* q, float* d, int16_t* sums) {
    qdot::quantize_q8_0(x, K, q, d);
    for (int b = 0; b < K / 32; b++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += q[32 * b + j];
        sums[b] = (int16_t)s;
    }
}

Isa read_isa_override(Isa best) {
    const char* e = std::getenv("AKUNU_CPU_ISA");
    if (!e || !*e) return best;
    Isa want = best;
    if (!std::strcmp(e, "portable")) want = Isa::kPortable;
    else if (!std::strcmp(e, "avx2")) want = Isa::kAvx2;
    else if (!std::strcmp(e, "avx512vnni")) want = Isa::kAvx512Vnni;
    return (int)want <= (int)best ? want : best;  // never one this CPU cannot run
}

}  // namespace

const Kernels kPortableKernels = {q32_rows<unpack_q8_0, 34>, q32_rows<unpack_q4_0, 18>, q32_rows<unpack_q5_0, 22>,
                                  q45_k_rows<4>, q45_k_rows<5>, q6_k_rows, q2_k_rows, q3_k_rows,
                                  q32_rows<unpack_q4_1, 20, true>, q32_rows<unpack_q5_1, 24, true>,
                                  q32_rows<unpack_iq4_nl, 18>, q32_rows<unpack_mxfp4, 17>, quantize_q8_0_sums,
                                  qdot::quantize_q8_k};

Isa best_isa() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return Isa::kAvx512Vnni;
    if (avx2) return Isa::kAvx2;
#endif
    return Isa::kPortable;
}

Isa selected_isa() {
    static const Isa isa = read_isa_override(best_isa());
    return isa;
}

const Kernels& kernels_for(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
    if (isa == Isa::kAvx512Vnni) return kAvx512VnniKernels;
    if (isa == Isa::kAvx2) return kAvx2Kernels;
#endif
    (void)isa;
    return kPortableKernels;
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::kAvx512Vnni: return "avx512vnni";
        case Isa::kAvx2: return "avx2";
        default: return "portable";
    }
}

}  // namespace int8mm
}  // namespace akunu
