// Weight formats as data (book, "The DTypeDescriptor"): block geometry for size
// checks and the kernel names each backend registers for the format. Adding a
// format is one row here plus its kernels.
// The GGML codes and MLX helpers also compile in the Metal kernels (AKUNU_MSL);
// the descriptor table is host-only.
#pragma once
#if !defined(AKUNU_MSL)
#include <cstdint>
#endif

#ifdef __CUDACC__
#define AKUNU_HD_CONSTEXPR __host__ __device__ constexpr
#else
#define AKUNU_HD_CONSTEXPR constexpr
#endif

namespace akunu {

// GGML type codes, as stored in GGUF.
enum GGMLType : uint32_t {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12,
    GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_IQ4_NL = 20, GGML_IQ4_XS = 23, GGML_BF16 = 30,
    GGML_MXFP4 = 39,
};

// MLX affine group quantization (w = scale * q + bias per group of 32, 64 or
// 128 weights, q of 2..8 bits packed little-endian into uint32 words). At load
// each group is repacked into one block: f32 scale, f32 bias, then the group's
// group*bits/8 bytes of the bit stream. These codes are the project's own and
// never valid in a GGUF file.
enum : uint32_t { kMlxBase = 1000 };  // an enumerator: also a constant in MSL
AKUNU_HD_CONSTEXPR uint32_t mlx_dtype(int bits, int group) {
    return kMlxBase + (uint32_t)bits * 10 + (group == 32 ? 0u : group == 64 ? 1u : 2u);
}
AKUNU_HD_CONSTEXPR bool is_mlx_dtype(uint32_t d) { return d >= kMlxBase && d < kMlxBase + 100; }
AKUNU_HD_CONSTEXPR int mlx_bits(uint32_t d) { return (int)((d - kMlxBase) / 10); }
AKUNU_HD_CONSTEXPR int mlx_group(uint32_t d) { return 32 << ((d - kMlxBase) % 10); }

// Q4_0 / Q8_0 / Q6_K regrouped for GPUs that load 16 bytes at a time (the
// CUDA device asks for them at load unless AKUNU_CUDA_TUNING=repack=0, where a row
// holds whole groups): 8 consecutive blocks of a row as one block, each part
// of a block gathered over the 8 (Q4_0 / Q8_0: the 8 F16 scales, then the
// quants, 16 / 32 bytes a block; Q6_K: the 8 ql, the 8 qh, the 8 scale
// arrays, the 8 d). The same bytes per weight as GGUF's, but every block's
// quants 16-byte aligned where the row is. Project codes, never valid in a
// GGUF file.
enum : uint32_t { kX8Base = 1100 };
enum : uint32_t { AKUNU_Q4_0_X8 = kX8Base + 2, AKUNU_Q8_0_X8 = kX8Base + 8, AKUNU_Q6_K_X8 = kX8Base + 14 };  // + the GGML code
AKUNU_HD_CONSTEXPR bool is_x8_dtype(uint32_t d) {
    return d == AKUNU_Q4_0_X8 || d == AKUNU_Q8_0_X8 || d == AKUNU_Q6_K_X8;
}

#if !defined(AKUNU_MSL)
struct DTypeDescriptor {
    uint32_t dtype;
    const char* name;
    uint32_t block_elems;  // elements per block
    uint32_t block_bytes;  // bytes per block
    bool supported;        // kernels exist on every backend built
    bool internal;         // produced by the loader (MLX, x8 repacking), never read from GGUF
    const char* gemv_kernel;
    const char* gemm_kernel;
    const char* embedding_kernel;
};

// Row for a GGML type code, or nullptr when the code is unknown.
const DTypeDescriptor* dtype_lookup(uint32_t dtype);
// Name for messages, also for unknown codes ("type 99").
const char* dtype_name(uint32_t dtype);
#endif

}  // namespace akunu
