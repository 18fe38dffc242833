// Embedding lookup (embedding_<format>) for every weight format, with the CPU
// kernel's meaning (backend/cpu/kernels/embedding.cpp): rows decoded with the
// functions that define the formats (core/quant_blocks.h, decode_block.cuh).
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "decode_block.cuh"

namespace akunu {
namespace {

// out[t, :] = decode(table row ids[t]) * scale; one thread block per token.
// A thread decodes a unit (up to 256 values: 4 threads a 1024-wide K-quant
// row) into shared memory, then the block writes the row out in float4
// stores (a thread's own values stored one by one serialize on their
// loads). Float rows skip the shared memory (float_row_in_vectors).
constexpr int kEmbedThreads = 128;
constexpr size_t kEmbedMaxShared = 200 * 1024;

// Whether a float row (F16 / BF16 / F32: a decode unit is one value) goes
// out in 16-byte loads, 8 values a thread a step, instead of value by value
// through decode_unit (each thread's loads then wait one after another).
__device__ __forceinline__ bool float_row_in_vectors(const EmbeddingParams& p, const uint8_t* row, const float* o) {
    const bool half = p.dtype == GGML_F16 || p.dtype == GGML_BF16;
    return (half || p.dtype == GGML_F32) && p.dim % 8 == 0 &&
           ((reinterpret_cast<uintptr_t>(row) | reinterpret_cast<uintptr_t>(o)) & 15) == 0;
}

// o = row * scale, 8 values a thread a step (see float_row_in_vectors).
__device__ __forceinline__ void embed_float_row(const EmbeddingParams& p, const uint8_t* row, float* o) {
    for (uint32_t i = 8 * threadIdx.x; i < p.dim; i += 8 * blockDim.x) {
        float v[8];
        if (p.dtype == GGML_F32) {
            const float4 a = *reinterpret_cast<const float4*>(row + 4 * (size_t)i);
            const float4 b = *reinterpret_cast<const float4*>(row + 4 * (size_t)i + 16);
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        } else {
            const uint4 w = *reinterpret_cast<const uint4*>(row + 2 * (size_t)i);
            const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = p.dtype == GGML_BF16 ? bf16_to_f32(h[k]) : f16_to_f32(h[k]);
        }
        *reinterpret_cast<float4*>(o + i) = make_float4(v[0] * p.scale, v[1] * p.scale, v[2] * p.scale, v[3] * p.scale);
        *reinterpret_cast<float4*>(o + i + 4) =
            make_float4(v[4] * p.scale, v[5] * p.scale, v[6] * p.scale, v[7] * p.scale);
    }
}

__global__ void __launch_bounds__(kEmbedThreads)
    embedding_kernel(EmbeddingParams p, DecodeUnit g, const uint8_t* table, const int32_t* ids, float* out,
                     const uint32_t* replay_token) {
    extern __shared__ float row_values[];
    pdl_wait();
    pdl_launch_dependents();
    const int t = blockIdx.x;
    const int nb = (int)p.dim / g.elems;
    const uint8_t* row = table + (size_t)replay_slot(ids, replay_token)[t] * nb * g.bytes;
    float* o = out + (size_t)t * p.dim;
    if (float_row_in_vectors(p, row, o)) {
        embed_float_row(p, row, o);
        return;
    }
    for (int b = threadIdx.x; b < nb; b += blockDim.x) decode_unit(p.dtype, row, b, g.bytes, row_values + (size_t)b * g.elems);
    __syncthreads();
    if (p.dim % 4 == 0 && (reinterpret_cast<uintptr_t>(o) & 15) == 0) {
        for (uint32_t i = 4 * threadIdx.x; i < p.dim; i += 4 * blockDim.x) {
            const float4 v = *reinterpret_cast<const float4*>(row_values + i);
            *reinterpret_cast<float4*>(o + i) = make_float4(v.x * p.scale, v.y * p.scale, v.z * p.scale, v.w * p.scale);
        }
    } else {
        for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) o[i] = row_values[i] * p.scale;
    }
}

void launch_embedding(const CudaArgs& a) {
    EmbeddingParams p = a.p<EmbeddingParams>();
    const size_t shared = (size_t)p.dim * sizeof(float);
    if (shared > kEmbedMaxShared) throw Error("embedding: dim " + std::to_string(p.dim) + " too large");
    allow_dynamic_shared((const void*)embedding_kernel, (int)kEmbedMaxShared);
    launch_pdl(embedding_kernel, p.n_tokens, kEmbedThreads, shared, a, p, decode_unit_for(p.dtype, "CUDA embedding"), a.b<uint8_t>(0),
               a.b<int32_t>(1), a.b<float>(2), a.replay_token);
}

}  // namespace

extern const CudaKernelEntry kCudaEmbeddingKernels[] = {
#define AKUNU_FORMAT(fmt) {"embedding_" #fmt, launch_embedding, true},
    AKUNU_FORMAT(f32) AKUNU_FORMAT(f16) AKUNU_FORMAT(bf16) AKUNU_FORMAT(q8_0) AKUNU_FORMAT(q4_0)
    AKUNU_FORMAT(q4_1) AKUNU_FORMAT(q5_0) AKUNU_FORMAT(q5_1) AKUNU_FORMAT(q2_k) AKUNU_FORMAT(q3_k)
    AKUNU_FORMAT(q4_k) AKUNU_FORMAT(q5_k) AKUNU_FORMAT(q6_k) AKUNU_FORMAT(iq4_nl) AKUNU_FORMAT(iq4_xs)
    AKUNU_FORMAT(mlx) AKUNU_FORMAT(q4_0_x8) AKUNU_FORMAT(q8_0_x8) AKUNU_FORMAT(q6_k_x8)
    AKUNU_FORMAT(mxfp4)
#undef AKUNU_FORMAT
    {nullptr, nullptr},
};

}  // namespace akunu
