#include "core/quant_blocks.h"

#include "core/dtype_descriptor.h"

#include <cstring>
#include <stdexcept>
#include <string>

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
        case GGML_MXFP4: for (int64_t b = 0; b < n / 32; b++) dequant_mxfp4(src + b * 17, dst + b * 32); return;
        case AKUNU_Q4_0_X8: for (int64_t b = 0; b < n / 256; b++) dequant_q4_0_x8(src + b * 144, dst + b * 256); return;
        case AKUNU_Q8_0_X8: for (int64_t b = 0; b < n / 256; b++) dequant_q8_0_x8(src + b * 272, dst + b * 256); return;
        case AKUNU_Q6_K_X8:
            for (int64_t b = 0; b < n / 256; b++) dequant_q6_k_x8_block(src + b / 8 * 1680, (int)(b % 8), dst + b * 256);
            return;
        default:
            if (is_mlx_dtype(dtype)) {
                const int g = mlx_group(dtype), bits = mlx_bits(dtype);
                for (int64_t b = 0; b < n / g; b++) dequant_mlx(src + b * (8 + g * bits / 8), dst + b * g, bits, g);
                return;
            }
            std::memset(dst, 0, (size_t)n * 4); return;  // callers check support first
    }
}

// A GGUF block as parts (offset, bytes): the x8 layout puts part p of block
// i at (sum of the earlier parts' bytes) * 8 + i * bytes of p, in this order.
struct BlockPart {
    int at, bytes;
};
struct X8Parts {
    int block_elems, block_bytes, n;
    BlockPart part[4];
};
static X8Parts x8_parts(uint32_t dtype) {
    switch (dtype) {
        case GGML_Q4_0: return {32, 18, 2, {{0, 2}, {2, 16}}};
        case GGML_Q8_0: return {32, 34, 2, {{0, 2}, {2, 32}}};
        case GGML_Q6_K: return {256, 210, 4, {{0, 128}, {128, 64}, {192, 16}, {208, 2}}};  // ql, qh, scales, d
        default: throw std::invalid_argument("no x8 layout for weight type " + std::to_string(dtype));
    }
}

// Each group of 8 blocks: GGUF's blocks <-> the x8 layout's gathered parts.
template <bool ToX8>
static void regroup(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
    const X8Parts x = x8_parts(dtype);
    const int64_t groups = rows * (cols / (8 * x.block_elems));
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t* s = src + g * 8 * x.block_bytes;
        uint8_t* d = dst + g * 8 * x.block_bytes;
        int64_t base = 0;  // where this part's 8 copies start in the group
        for (int p = 0; p < x.n; p++) {
            const BlockPart& bp = x.part[p];
            for (int64_t i = 0; i < 8; i++) {
                const int64_t gguf_at = i * x.block_bytes + bp.at, x8_at = base + i * bp.bytes;
                if (ToX8) std::memcpy(d + x8_at, s + gguf_at, (size_t)bp.bytes);
                else std::memcpy(d + gguf_at, s + x8_at, (size_t)bp.bytes);
            }
            base += 8 * bp.bytes;
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
