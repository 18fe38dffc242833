// Integer matmul of Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K,
// Q4_K, Q5_K and Q6_K weights against 8-bit activations, on tiles of 8 weight rows,
// with the instruction set picked at run time (one build runs on any x86-64
// and elsewhere).
//
// The arithmetic is fixed per (row, token), whatever the instruction set, the
// tile or the number of tokens in the pass:
//   for each weight block b in order:
//     s_b  = the exact int32 dot product of the block's integer weights with
//            the token's int8 activations (K-quants: sub-block scales applied
//            in integers, sum of sc_j * dot_j);
//     acc  = fma((float)s_b, d_w * d_x, acc)
//     (Q4_1 / Q5_1 also: acc = fma((float)xsum_b, m_w * d_x, acc), xsum_b the
//      sum of the token's int8 values in the block;
//      Q2_K / Q4_K / Q5_K: acc = fma((float)m_b, (-dmin_w) * d_x, acc), m_b
//      the integer min term, sum of m_j * (sum of the token's int8 values in
//      sub-block j))
//   y = acc + bias.
// Integer sums are exact in every path, and the float steps are the same
// sequence of correctly rounded operations, so the portable path, AVX2 and
// AVX-512 VNNI give bit-identical results, one-token decode equals the same
// row of a many-token pass (speculative verification relies on it), and a
// later load-time repacking of the tiles changes nothing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace akunu {
namespace int8mm {

enum class Isa : int { kPortable = 0, kAvx2 = 1, kAvx512Vnni = 2 };

// One pass: y[t, n] = W[n, :] . x[t, :] + bias[n] for rows of W in [0, N).
struct Pass {
    const uint8_t* W;  // GGUF layout, rows of K / block_elems blocks
    int K, N, m;       // m tokens (1..kMaxPassTokens)
    const int8_t* xq;  // [m][K] activations rounded to int8
    const float* xd;   // [m][K / 32] (Q8_0 blocks) or [m][K / 256] (Q8_K blocks) scales
    const int16_t* xs; // [m][K / 32] block sums (Q8_0 blocks) or [m][K / 16] (Q8_K)
    float* y;
    size_t y_stride;
    const float* bias;  // or nullptr
};

constexpr int kTileRows = 8;
// Tokens per pass at most (the tiles' accumulators): a prompt pass of the
// CPU device (256 tokens) runs as one pass, so each weight tile is unpacked
// and read from memory once for all its tokens.
constexpr int kMaxPassTokens = 256;

// Rows [8 * g0, min(N, 8 * g1)) of the pass.
using GroupFn = void (*)(const Pass&, int g0, int g1);

// One token's activations rounded to 8 bits, as quantized_dot.h defines it:
// Q8_0 blocks of 32 (scale, and the block's int sum) or Q8_K blocks of 256
// (scale, and the sums of each 16).
using QuantizeFn = void (*)(const float* x, int K, int8_t* q, float* d, int16_t* sums);

struct Kernels {
    GroupFn q8_0, q4_0, q5_0, q4_k, q5_k, q6_k, q2_k, q3_k, q4_1, q5_1, iq4_nl, mxfp4;
    QuantizeFn quantize_q8_0, quantize_q8_k;
};

extern const Kernels kPortableKernels;
#if defined(__x86_64__) || defined(_M_X64)
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512VnniKernels;
#endif

// The best instruction set this CPU (and OS) runs.
Isa best_isa();
// best_isa(), or AKUNU_CPU_ISA (portable | avx2 | avx512vnni, read once) where
// it names one this CPU runs: for tests and comparisons.
Isa selected_isa();
const Kernels& kernels_for(Isa isa);
const char* isa_name(Isa isa);

}  // namespace int8mm
}  // namespace akunu
