// Weight formats for the Metal kernels: block geometry and the decoder of one
// block (core/quant_blocks.h), as a type the GEMV / GEMM / embedding kernel
// templates take. MAX_BE bounds the decoded block held in thread memory;
// be() / bb() take the dtype because MLX groups vary at run time.
#pragma once
#include "akunu_msl.h"

#define AK_FIXED_FORMAT(NAME, BE, BB, DECODE)                                               \
    struct NAME {                                                                          \
        enum { MAX_BE = BE };                                                              \
        static uint be(uint) { return BE; }                                                \
        static uint bb(uint) { return BB; }                                                \
        static void decode(device const uint8_t* b, thread float* y, uint) { DECODE(b, y); } \
    };

AK_FIXED_FORMAT(FmtF32, 1, 4, blocks::dequant_f32)
AK_FIXED_FORMAT(FmtF16, 1, 2, blocks::dequant_f16)
AK_FIXED_FORMAT(FmtBF16, 1, 2, blocks::dequant_bf16)
AK_FIXED_FORMAT(FmtQ8_0, 32, 34, blocks::dequant_q8_0)
AK_FIXED_FORMAT(FmtQ4_0, 32, 18, blocks::dequant_q4_0)
AK_FIXED_FORMAT(FmtQ5_0, 32, 22, blocks::dequant_q5_0)
AK_FIXED_FORMAT(FmtQ4_1, 32, 20, blocks::dequant_q4_1)
AK_FIXED_FORMAT(FmtQ5_1, 32, 24, blocks::dequant_q5_1)
AK_FIXED_FORMAT(FmtIQ4_NL, 32, 18, blocks::dequant_iq4_nl)
AK_FIXED_FORMAT(FmtQ2_K, 256, 84, blocks::dequant_q2_k)
AK_FIXED_FORMAT(FmtQ3_K, 256, 110, blocks::dequant_q3_k)
AK_FIXED_FORMAT(FmtQ4_K, 256, 144, blocks::dequant_q4_k)
AK_FIXED_FORMAT(FmtQ5_K, 256, 176, blocks::dequant_q5_k)
AK_FIXED_FORMAT(FmtQ6_K, 256, 210, blocks::dequant_q6_k)
AK_FIXED_FORMAT(FmtIQ4_XS, 256, 136, blocks::dequant_iq4_xs)
AK_FIXED_FORMAT(FmtMXFP4, 32, 17, blocks::dequant_mxfp4)
#undef AK_FIXED_FORMAT

// MLX affine groups: 32, 64 or 128 values of 2..8 bits after an f32 scale and bias.
struct FmtMLX {
    enum { MAX_BE = 128 };
    static uint be(uint dtype) { return (uint)mlx_group(dtype); }
    static uint bb(uint dtype) { return 8 + (uint)(mlx_group(dtype) * mlx_bits(dtype) / 8); }
    static void decode(device const uint8_t* b, thread float* y, uint dtype) {
        blocks::dequant_mlx(b, y, mlx_bits(dtype), mlx_group(dtype));
    }
};

// Exports one kernel template for every format, as NAME_<suffix>.
#define AK_EXPORT_ALL_FORMATS(NAME, KERNEL)                  \
    AK_EXPORT(#NAME "_f32", KERNEL<FmtF32>)                 \
    AK_EXPORT(#NAME "_f16", KERNEL<FmtF16>)                 \
    AK_EXPORT(#NAME "_bf16", KERNEL<FmtBF16>)               \
    AK_EXPORT(#NAME "_q8_0", KERNEL<FmtQ8_0>)               \
    AK_EXPORT(#NAME "_q4_0", KERNEL<FmtQ4_0>)               \
    AK_EXPORT(#NAME "_q5_0", KERNEL<FmtQ5_0>)               \
    AK_EXPORT(#NAME "_q4_1", KERNEL<FmtQ4_1>)               \
    AK_EXPORT(#NAME "_q5_1", KERNEL<FmtQ5_1>)               \
    AK_EXPORT(#NAME "_iq4_nl", KERNEL<FmtIQ4_NL>)           \
    AK_EXPORT(#NAME "_q2_k", KERNEL<FmtQ2_K>)               \
    AK_EXPORT(#NAME "_q3_k", KERNEL<FmtQ3_K>)               \
    AK_EXPORT(#NAME "_q4_k", KERNEL<FmtQ4_K>)               \
    AK_EXPORT(#NAME "_q5_k", KERNEL<FmtQ5_K>)               \
    AK_EXPORT(#NAME "_q6_k", KERNEL<FmtQ6_K>)               \
    AK_EXPORT(#NAME "_iq4_xs", KERNEL<FmtIQ4_XS>)           \
    AK_EXPORT(#NAME "_mxfp4", KERNEL<FmtMXFP4>)             \
    AK_EXPORT(#NAME "_mlx", KERNEL<FmtMLX>)

// A format chosen at run time: the fused GEMV (fused.metal) serves matrices
// of different formats in one launch (Q4_K_M's V is Q6_K beside Q4_K Q and K).
// The switch is uniform across a SIMD group (one matrix a group).
#define AK_FOR_EACH_FIXED_FORMAT(X)                                                                         \
    X(GGML_F32, FmtF32) X(GGML_F16, FmtF16) X(GGML_BF16, FmtBF16) X(GGML_Q8_0, FmtQ8_0) X(GGML_Q4_0, FmtQ4_0) \
    X(GGML_Q5_0, FmtQ5_0) X(GGML_Q4_1, FmtQ4_1) X(GGML_Q5_1, FmtQ5_1) X(GGML_IQ4_NL, FmtIQ4_NL)             \
    X(GGML_Q2_K, FmtQ2_K) X(GGML_Q3_K, FmtQ3_K) X(GGML_Q4_K, FmtQ4_K) X(GGML_Q5_K, FmtQ5_K)                 \
    X(GGML_Q6_K, FmtQ6_K) X(GGML_IQ4_XS, FmtIQ4_XS) X(GGML_MXFP4, FmtMXFP4)

struct FmtAny {
    enum { MAX_BE = 256 };
    // Unknown codes give 0 (the launch rejects them before any kernel runs).
    static uint be(uint dtype) {
        switch (dtype) {
#define AK_CASE(CODE, F) \
    case CODE: return F::be(dtype);
            AK_FOR_EACH_FIXED_FORMAT(AK_CASE)
#undef AK_CASE
            default: return is_mlx_dtype(dtype) ? FmtMLX::be(dtype) : 0u;
        }
    }
    static uint bb(uint dtype) {
        switch (dtype) {
#define AK_CASE(CODE, F) \
    case CODE: return F::bb(dtype);
            AK_FOR_EACH_FIXED_FORMAT(AK_CASE)
#undef AK_CASE
            default: return is_mlx_dtype(dtype) ? FmtMLX::bb(dtype) : 0u;
        }
    }
    static void decode(device const uint8_t* b, thread float* y, uint dtype) {
        switch (dtype) {
#define AK_CASE(CODE, F) \
    case CODE: F::decode(b, y, dtype); return;
            AK_FOR_EACH_FIXED_FORMAT(AK_CASE)
#undef AK_CASE
            default:
                if (is_mlx_dtype(dtype)) FmtMLX::decode(b, y, dtype);
        }
    }
};

// Four consecutive values of a float format in one vector load (half4,
// ushort4, float4: the book's vectorized GEMV loads); ok = 0 for the block
// formats, which never take this path. The caller guarantees 4-value
// alignment (K % 4 == 0, so every row starts on one).
template <typename F>
struct Load4 {
    enum { ok = 0 };
    static void load(device const uint8_t*, thread float*) {}
};
template <>
struct Load4<FmtF16> {
    enum { ok = 1 };
    static void load(device const uint8_t* b, thread float* y) {
        const half4 h = *(device const half4*)b;
        for (uint i = 0; i < 4; i++) y[i] = float(h[i]);
    }
};
template <>
struct Load4<FmtBF16> {
    enum { ok = 1 };
    static void load(device const uint8_t* b, thread float* y) {
        const ushort4 h = *(device const ushort4*)b;
        for (uint i = 0; i < 4; i++) y[i] = bf16_to_f32(h[i]);
    }
};
template <>
struct Load4<FmtF32> {
    enum { ok = 1 };
    static void load(device const uint8_t* b, thread float* y) {
        const float4 v = *(device const float4*)b;
        for (uint i = 0; i < 4; i++) y[i] = v[i];
    }
};

// Load4 for a float format chosen at run time (the fused GEMV).
inline bool any_load4_ok(uint dtype) { return dtype == GGML_F16 || dtype == GGML_BF16 || dtype == GGML_F32; }
inline void any_load4(device const uint8_t* b, thread float* y, uint dtype) {
    if (dtype == GGML_F16) Load4<FmtF16>::load(b, y);
    else if (dtype == GGML_BF16) Load4<FmtBF16>::load(b, y);
    else Load4<FmtF32>::load(b, y);
}
