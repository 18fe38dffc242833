// GEMV (decode, one token) and GEMM (prefill, up to 64 tokens) for every
// weight format: y[t, n] = W[n, :] . x[t, :] (+ bias[n]). Rows of W are split
// across threads; each weight block is decoded once into a small stack buffer
// and used against every token, so no row is ever dequantized whole.
#include <algorithm>

#include "core/quant_blocks.h"
#include "../thread_pool.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

constexpr int kMaxTokens = 64;

struct Q8_0 { static constexpr int BE = 32, BB = 34; static void dec(const uint8_t* b, float* y) { blocks::dequant_q8_0(b, y); } };
struct Q4_0 { static constexpr int BE = 32, BB = 18; static void dec(const uint8_t* b, float* y) { blocks::dequant_q4_0(b, y); } };
struct Q5_0 { static constexpr int BE = 32, BB = 22; static void dec(const uint8_t* b, float* y) { blocks::dequant_q5_0(b, y); } };
struct Q4_K { static constexpr int BE = 256, BB = 144; static void dec(const uint8_t* b, float* y) { blocks::dequant_q4_k(b, y); } };
struct Q6_K { static constexpr int BE = 256, BB = 210; static void dec(const uint8_t* b, float* y) { blocks::dequant_q6_k(b, y); } };

// Float formats: "blocks" of 32 elements with a scalar tail, since K need not
// be a multiple of anything.
struct F32 { static void dec(const uint8_t* b, float* y, int n) { std::memcpy(y, b, (size_t)n * 4); } static constexpr int ES = 4; };
struct F16 { static void dec(const uint8_t* b, float* y, int n) { for (int i = 0; i < n; i++) y[i] = blocks::h(b + 2 * i); } static constexpr int ES = 2; };
struct BF16 { static void dec(const uint8_t* b, float* y, int n) { for (int i = 0; i < n; i++) blocks::dequant_bf16(b + 2 * i, y + i); } static constexpr int ES = 2; };

template <class B>
void quant_rows(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, int n0, int n1) {
    const int nb = (int)p.K / B::BE;
    const size_t row_bytes = (size_t)nb * B::BB;
    const int m = (int)p.n_tokens;
    alignas(64) float tmp[B::BE];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * row_bytes;
        float acc[kMaxTokens] = {};
        for (int b = 0; b < nb; b++) {
            B::dec(row + (size_t)b * B::BB, tmp);
            const float* xb = x + (size_t)b * B::BE;
            for (int t = 0; t < m; t++) acc[t] += dot_f32(tmp, xb + (size_t)t * p.x_stride, B::BE);
        }
        float bn = bias ? bias[n] : 0.0f;
        for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = acc[t] + bn;
    }
}

template <class F>
void float_rows(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, int n0, int n1) {
    const int K = (int)p.K;
    const int m = (int)p.n_tokens;
    alignas(64) float tmp[64];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * K * F::ES;
        float acc[kMaxTokens] = {};
        for (int k = 0; k < K; k += 64) {
            int len = std::min(64, K - k);
            F::dec(row + (size_t)k * F::ES, tmp, len);
            for (int t = 0; t < m; t++) acc[t] += dot_f32(tmp, x + (size_t)t * p.x_stride + k, len);
        }
        float bn = bias ? bias[n] : 0.0f;
        for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = acc[t] + bn;
    }
}

using RowFn = void (*)(const MatmulParams&, const uint8_t*, const float*, float*, const float*, int, int);

void run_matmul(const CpuArgs& a, RowFn rows) {
    MatmulParams p = a.p<MatmulParams>();
    const uint8_t* W = a.buf[0];
    const float* x = a.b<float>(1) + (size_t)p.row0 * p.x_stride;
    float* y = a.b<float>(2);
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    // Split rows into chunks of 16 so threads balance on small matrices too.
    const int chunk = 16;
    int n_chunks = ((int)p.N + chunk - 1) / chunk;
    a.pool->parallel_for(n_chunks, [&](int c0, int c1) {
        rows(p, W, x, y, bias, c0 * chunk, std::min((int)p.N, c1 * chunk));
    });
}

#define AKUNU_MATMUL(fmt, rowfn)                                   \
    void gemv_##fmt(const CpuArgs& a) { run_matmul(a, rowfn); }    \
    void gemm_##fmt(const CpuArgs& a) { run_matmul(a, rowfn); }

AKUNU_MATMUL(f32, float_rows<F32>)
AKUNU_MATMUL(f16, float_rows<F16>)
AKUNU_MATMUL(bf16, float_rows<BF16>)
AKUNU_MATMUL(q8_0, quant_rows<Q8_0>)
AKUNU_MATMUL(q4_0, quant_rows<Q4_0>)
AKUNU_MATMUL(q5_0, quant_rows<Q5_0>)
AKUNU_MATMUL(q4_k, quant_rows<Q4_K>)
AKUNU_MATMUL(q6_k, quant_rows<Q6_K>)

}  // namespace

extern const CpuKernelEntry kMatmulKernels[] = {
    {"gemv_f32", gemv_f32},   {"gemm_f32", gemm_f32},   {"gemv_f16", gemv_f16},   {"gemm_f16", gemm_f16},
    {"gemv_bf16", gemv_bf16}, {"gemm_bf16", gemm_bf16}, {"gemv_q8_0", gemv_q8_0}, {"gemm_q8_0", gemm_q8_0},
    {"gemv_q4_0", gemv_q4_0}, {"gemm_q4_0", gemm_q4_0}, {"gemv_q5_0", gemv_q5_0}, {"gemm_q5_0", gemm_q5_0},
    {"gemv_q4_k", gemv_q4_k}, {"gemm_q4_k", gemm_q4_k}, {"gemv_q6_k", gemv_q6_k}, {"gemm_q6_k", gemm_q6_k},
    {nullptr, nullptr},
};

}  // namespace akunu
