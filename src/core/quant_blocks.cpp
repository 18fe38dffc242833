#include "core/quant_blocks.h"

#include "core/dtype_descriptor.h"

namespace akunu {
namespace blocks {

void dequantize_row(uint32_t dtype, const uint8_t* src, float* dst, int64_t n) {
    switch (dtype) {
        case GGML_F32: std::memcpy(dst, src, (size_t)n * 4); return;
        case GGML_F16: for (int64_t i = 0; i < n; i++) dequant_f16(src + 2 * i, dst + i); return;
        case GGML_BF16: for (int64_t i = 0; i < n; i++) dequant_bf16(src + 2 * i, dst + i); return;
        case GGML_Q8_0: for (int64_t b = 0; b < n / 32; b++) dequant_q8_0(src + b * 34, dst + b * 32); return;
        case GGML_Q4_0: for (int64_t b = 0; b < n / 32; b++) dequant_q4_0(src + b * 18, dst + b * 32); return;
        case GGML_Q5_0: for (int64_t b = 0; b < n / 32; b++) dequant_q5_0(src + b * 22, dst + b * 32); return;
        case GGML_Q4_K: for (int64_t b = 0; b < n / 256; b++) dequant_q4_k(src + b * 144, dst + b * 256); return;
        case GGML_Q6_K: for (int64_t b = 0; b < n / 256; b++) dequant_q6_k(src + b * 210, dst + b * 256); return;
        case GGML_Q4_1: for (int64_t b = 0; b < n / 32; b++) dequant_q4_1(src + b * 20, dst + b * 32); return;
        case GGML_Q5_1: for (int64_t b = 0; b < n / 32; b++) dequant_q5_1(src + b * 24, dst + b * 32); return;
        case GGML_Q2_K: for (int64_t b = 0; b < n / 256; b++) dequant_q2_k(src + b * 84, dst + b * 256); return;
        case GGML_Q3_K: for (int64_t b = 0; b < n / 256; b++) dequant_q3_k(src + b * 110, dst + b * 256); return;
        case GGML_Q5_K: for (int64_t b = 0; b < n / 256; b++) dequant_q5_k(src + b * 176, dst + b * 256); return;
        case GGML_IQ4_NL: for (int64_t b = 0; b < n / 32; b++) dequant_iq4_nl(src + b * 18, dst + b * 32); return;
        case GGML_IQ4_XS: for (int64_t b = 0; b < n / 256; b++) dequant_iq4_xs(src + b * 136, dst + b * 256); return;
        case AKUNU_Q4_0_X8: for (int64_t b = 0; b < n / 256; b++) dequant_q4_0_x8(src + b * 144, dst + b * 256); return;
        case AKUNU_Q8_0_X8: for (int64_t b = 0; b < n / 256; b++) dequant_q8_0_x8(src + b * 272, dst + b * 256); return;
        default:
            if (is_mlx_dtype(dtype)) {
                const int g = mlx_group(dtype), bits = mlx_bits(dtype);
                for (int64_t b = 0; b < n / g; b++) dequant_mlx(src + b * (8 + g * bits / 8), dst + b * g, bits, g);
                return;
            }
            std::memset(dst, 0, (size_t)n * 4); return;  // callers check support first
    }
}

// Each group of 8 blocks: GGUF [d, quants] x 8 <-> x8 [d x 8][quants x 8].
template <bool ToX8>
static void regroup(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
    const int64_t qb = dtype == GGML_Q4_0 ? 16 : 32, block = 2 + qb, groups = rows * (cols / 256);
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t* s = src + g * 8 * block;
        uint8_t* d = dst + g * 8 * block;
        for (int64_t i = 0; i < 8; i++) {
            if (ToX8) {
                std::memcpy(d + 2 * i, s + i * block, 2);
                std::memcpy(d + 16 + qb * i, s + i * block + 2, (size_t)qb);
            } else {
                std::memcpy(d + i * block, s + 2 * i, 2);
                std::memcpy(d + i * block + 2, s + 16 + qb * i, (size_t)qb);
            }
        }
    }
}

void regroup_x8(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
    regroup<true>(dtype, src, dst, rows, cols);
}
void ungroup_x8(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
    regroup<false>(dtype, src, dst, rows, cols);
}

}  // namespace blocks
}  // namespace akunu
