// Embedding lookup: out[t, :] = decode(table row ids[t]) * scale.
#include "core/quant_blocks.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

void embedding(const CpuArgs& a) {
    EmbeddingParams p = a.p<EmbeddingParams>();
    const DTypeDescriptor* dt = dtype_lookup(p.dtype);
    const size_t row_bytes = (size_t)p.dim / dt->block_elems * dt->block_bytes;
    const int32_t* ids = a.b<int32_t>(1);
    float* out = a.b<float>(2);
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        float* o = out + (size_t)t * p.dim;
        blocks::dequantize_row(p.dtype, a.buf[0] + (size_t)ids[t] * row_bytes, o, p.dim);
        if (p.scale != 1.0f)
            for (uint32_t i = 0; i < p.dim; i++) o[i] *= p.scale;
    }
}

}  // namespace

extern const CpuKernelEntry kEmbeddingKernels[] = {
    {"embedding_f32", embedding},  {"embedding_f16", embedding},  {"embedding_bf16", embedding},
    {"embedding_q8_0", embedding}, {"embedding_q4_0", embedding}, {"embedding_q5_0", embedding},
    {"embedding_q4_k", embedding}, {"embedding_q6_k", embedding}, {"embedding_q4_1", embedding},
    {"embedding_q5_1", embedding}, {"embedding_q2_k", embedding}, {"embedding_q3_k", embedding},
    {"embedding_q5_k", embedding}, {"embedding_iq4_nl", embedding}, {"embedding_iq4_xs", embedding},
    {"embedding_mlx", embedding},  {"embedding_q4_0_x8", embedding}, {"embedding_q8_0_x8", embedding},
    {"embedding_q6_k_x8", embedding}, {"embedding_mxfp4", embedding},
    {nullptr, nullptr},
};

}  // namespace akunu
