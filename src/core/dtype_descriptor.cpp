#include "core/dtype_descriptor.h"

#include <cstdio>

namespace akunu {

static const DTypeDescriptor kDTypes[] = {
    // dtype     name    elems bytes supported gemv           gemm           embedding
    {GGML_F32,  "F32",   1,   4, true, false,  "gemv_f32",  "gemm_f32",  "embedding_f32"},
    {GGML_F16,  "F16",   1,   2, true, false,  "gemv_f16",  "gemm_f16",  "embedding_f16"},
    {GGML_BF16, "BF16",  1,   2, true, false,  "gemv_bf16", "gemm_bf16", "embedding_bf16"},
    {GGML_Q8_0, "Q8_0",  32,  34, true, false,  "gemv_q8_0", "gemm_q8_0", "embedding_q8_0"},
    {GGML_Q4_0, "Q4_0",  32,  18, true, false,  "gemv_q4_0", "gemm_q4_0", "embedding_q4_0"},
    {GGML_Q5_0, "Q5_0",  32,  22, true, false,  "gemv_q5_0", "gemm_q5_0", "embedding_q5_0"},
    {GGML_Q4_K, "Q4_K",  256, 144, true, false,  "gemv_q4_k", "gemm_q4_k", "embedding_q4_k"},
    {GGML_Q6_K, "Q6_K",  256, 210, true, false,  "gemv_q6_k", "gemm_q6_k", "embedding_q6_k"},
    {GGML_Q4_1, "Q4_1",  32,  20, true, false,  "gemv_q4_1", "gemm_q4_1", "embedding_q4_1"},
    {GGML_Q5_1, "Q5_1",  32,  24, true, false,  "gemv_q5_1", "gemm_q5_1", "embedding_q5_1"},
    {GGML_Q2_K, "Q2_K",  256, 84, true, false,  "gemv_q2_k", "gemm_q2_k", "embedding_q2_k"},
    {GGML_Q3_K, "Q3_K",  256, 110, true, false,  "gemv_q3_k", "gemm_q3_k", "embedding_q3_k"},
    {GGML_Q5_K, "Q5_K",  256, 176, true, false,  "gemv_q5_k", "gemm_q5_k", "embedding_q5_k"},
    {GGML_IQ4_NL, "IQ4_NL", 32, 18, true, false, "gemv_iq4_nl", "gemm_iq4_nl", "embedding_iq4_nl"},
    {GGML_IQ4_XS, "IQ4_XS", 256, 136, true, false, "gemv_iq4_xs", "gemm_iq4_xs", "embedding_iq4_xs"},
    {GGML_MXFP4, "MXFP4", 32, 17, true, false, "gemv_mxfp4", "gemm_mxfp4", "embedding_mxfp4"},
    // Q4_0 / Q8_0 regrouped by 8 blocks at load (the CUDA device's choice)
    {AKUNU_Q4_0_X8, "Q4_0_X8", 256, 144, true, true, "gemv_q4_0_x8", "gemm_q4_0_x8", "embedding_q4_0_x8"},
    {AKUNU_Q8_0_X8, "Q8_0_X8", 256, 272, true, true, "gemv_q8_0_x8", "gemm_q8_0_x8", "embedding_q8_0_x8"},
    {AKUNU_Q6_K_X8, "Q6_K_X8", 2048, 1680, true, true, "gemv_q6_k_x8", "gemm_q6_k_x8", "embedding_q6_k_x8"},
    // MLX groups repacked at load: f32 scale, f32 bias, group * bits / 8 bytes
    {mlx_dtype(2, 32), "MLX_Q2_G32", 32, 16, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(2, 64), "MLX_Q2_G64", 64, 24, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(2, 128), "MLX_Q2_G128", 128, 40, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(3, 32), "MLX_Q3_G32", 32, 20, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(3, 64), "MLX_Q3_G64", 64, 32, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(3, 128), "MLX_Q3_G128", 128, 56, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(4, 32), "MLX_Q4_G32", 32, 24, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(4, 64), "MLX_Q4_G64", 64, 40, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(4, 128), "MLX_Q4_G128", 128, 72, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(5, 32), "MLX_Q5_G32", 32, 28, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(5, 64), "MLX_Q5_G64", 64, 48, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(5, 128), "MLX_Q5_G128", 128, 88, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(6, 32), "MLX_Q6_G32", 32, 32, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(6, 64), "MLX_Q6_G64", 64, 56, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(6, 128), "MLX_Q6_G128", 128, 104, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(8, 32), "MLX_Q8_G32", 32, 40, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(8, 64), "MLX_Q8_G64", 64, 72, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    {mlx_dtype(8, 128), "MLX_Q8_G128", 128, 136, true, true, "gemv_mlx", "gemm_mlx", "embedding_mlx"},
    // Known to the parser (sizes are checked) but without kernels yet.
    {GGML_Q8_1, "Q8_1",  32,  36, false, false, nullptr, nullptr, nullptr},
    {GGML_Q8_K, "Q8_K",  256, 292, false, false, nullptr, nullptr, nullptr},
    {16, "IQ2_XXS", 256, 66, false, false, nullptr, nullptr, nullptr},
    {17, "IQ2_XS",  256, 74, false, false, nullptr, nullptr, nullptr},
    {18, "IQ3_XXS", 256, 98, false, false, nullptr, nullptr, nullptr},
    {19, "IQ1_S",   256, 50, false, false, nullptr, nullptr, nullptr},
    {21, "IQ3_S",   256, 110, false, false, nullptr, nullptr, nullptr},
    {22, "IQ2_S",   256, 82, false, false, nullptr, nullptr, nullptr},
    {24, "I8",  1, 1, false, false, nullptr, nullptr, nullptr},
    {25, "I16", 1, 2, false, false, nullptr, nullptr, nullptr},
    {26, "I32", 1, 4, false, false, nullptr, nullptr, nullptr},
    {27, "I64", 1, 8, false, false, nullptr, nullptr, nullptr},
    {28, "F64", 1, 8, false, false, nullptr, nullptr, nullptr},
    {29, "IQ1_M", 256, 56, false, false, nullptr, nullptr, nullptr},
};

const DTypeDescriptor* dtype_lookup(uint32_t dtype) {
    for (const auto& d : kDTypes)
        if (d.dtype == dtype) return &d;
    return nullptr;
}

const char* dtype_name(uint32_t dtype) {
    const DTypeDescriptor* d = dtype_lookup(dtype);
    if (d) return d->name;
    static thread_local char buf[32];
    std::snprintf(buf, sizeof(buf), "type %u", dtype);
    return buf;
}

}  // namespace akunu
