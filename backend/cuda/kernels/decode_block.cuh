// Any weight format's block decoded into floats on the GPU (the general,
// slow path: local memory), with the decoders that define the formats.
#pragma once
#include <cstdint>

#include <string>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/quant_blocks.h"

namespace akunu {

constexpr int kMaxBlockElems = 256;

// Decodes one block (block_elems values) of GGML type `dtype` into y (a
// Q6_K_X8 group, 2048 values, goes through decode_unit below).
__device__ inline void decode_block(uint32_t dtype, const uint8_t* b, float* y) {
    switch (dtype) {
        case GGML_F32: blocks::dequant_f32(b, y); break;
        case GGML_F16: blocks::dequant_f16(b, y); break;
        case GGML_BF16: blocks::dequant_bf16(b, y); break;
        case GGML_Q8_0: blocks::dequant_q8_0(b, y); break;
        case GGML_Q4_0: blocks::dequant_q4_0(b, y); break;
        case GGML_Q4_1: blocks::dequant_q4_1(b, y); break;
        case GGML_Q5_0: blocks::dequant_q5_0(b, y); break;
        case GGML_Q5_1: blocks::dequant_q5_1(b, y); break;
        case GGML_Q2_K: blocks::dequant_q2_k(b, y); break;
        case GGML_Q3_K: blocks::dequant_q3_k(b, y); break;
        case GGML_Q4_K: blocks::dequant_q4_k(b, y); break;
        case GGML_Q5_K: blocks::dequant_q5_k(b, y); break;
        case GGML_Q6_K: blocks::dequant_q6_k(b, y); break;
        case GGML_IQ4_NL: blocks::dequant_iq4_nl(b, y); break;
        case GGML_IQ4_XS: blocks::dequant_iq4_xs(b, y); break;
        case GGML_MXFP4: blocks::dequant_mxfp4(b, y); break;
        case AKUNU_Q4_0_X8: blocks::dequant_q4_0_x8(b, y); break;
        case AKUNU_Q8_0_X8: blocks::dequant_q8_0_x8(b, y); break;
        default:
            if (is_mlx_dtype(dtype)) blocks::dequant_mlx(b, y, mlx_bits(dtype), mlx_group(dtype));
            break;
    }
}

// The general paths decode a row a unit at a time, kMaxBlockElems values at
// most: a format's block, or one Q6_K block of a Q6_K_X8 group (2048 values).
struct DecodeUnit {
    int elems, bytes;
};
__host__ __device__ inline DecodeUnit decode_unit_of(uint32_t dtype, int block_elems, int block_bytes) {
    return dtype == AKUNU_Q6_K_X8 ? DecodeUnit{256, 210} : DecodeUnit{block_elems, block_bytes};
}
// The decode unit of a weight type the general paths take (host side): an
// Error naming `op` for a type this build cannot decode.
inline DecodeUnit decode_unit_for(uint32_t dtype, const char* op) {
    const DTypeDescriptor* dt = dtype_lookup(dtype);
    if (!dt || !dt->supported) throw Error(std::string(op) + ": unsupported weight type " + std::to_string(dtype));
    return decode_unit_of(dtype, (int)dt->block_elems, (int)dt->block_bytes);
}
// Unit u of a row (unit_bytes from decode_unit_of) into y.
__device__ inline void decode_unit(uint32_t dtype, const uint8_t* row, int u, int unit_bytes, float* y) {
    if (dtype == AKUNU_Q6_K_X8) {
        blocks::dequant_q6_k_x8_block(row + (size_t)(u / 8) * 1680, u % 8, y);
        return;
    }
    decode_block(dtype, row + (size_t)u * unit_bytes, y);
}

}  // namespace akunu
