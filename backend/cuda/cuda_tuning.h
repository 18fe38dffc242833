// The CUDA backend's tuning: every choice its launchers make that is not
// fixed by the op itself, decided once when the CudaDevice is made from the
// GPU's properties, and overridable for experiments in one place: the
// environment variable AKUNU_CUDA_TUNING="key=value,key=value" (keys as the
// fields below; see backend/cuda/README.md). Plain C++: no CUDA headers.
#pragma once
#include <cstdint>
#include <string>

namespace akunu {

// What the tuning is decided from (CudaDevice fills it from cudaDeviceProp).
struct GpuProperties {
    int sm_count = 0;                // multiprocessors
    int cc_major = 0, cc_minor = 0;  // compute capability
    uint64_t memory_mib = 0;         // device memory (0: unknown)
};

// Decode vectors a kernel prepares for the next command as it writes them
// (Q8Link, kernels/cuda_kernel.h): a bit each.
enum Q8LinkKind : uint32_t {
    kQ8LinkAttention = 1,  // decode attention -> output projection (rounded per head)
    kQ8LinkGate = 2,       // gate + up + activation -> down projection (32-row blocks)
    kQ8LinkResidual = 4,   // projection + residual -> the next normed projection (32-row blocks)
    kQ8LinkAll = 7,
};

// The kernel of batch tables' generated (decode) rows (CudaTuning::batch_decode).
enum class BatchDecode {
    kAuto,  // kRows for engines of up to kBatchRowsMax sequences (Q4_K / Q6_K_X8 there: the integer
            // row-side GEMM, gemm_rows_q8.cuh), else kTc (CudaDevice::set_batch_rows)
    kRows,  // the row-side tensor-core GEMM (gemm_rows.cuh): rows on the 8-wide side, weights streamed
    kTc,    // the split-K prompt GEMM (gemm_tc.cuh, launch_split): rows padded to 64-row tiles
    kGemv,  // the decode GEMV, 8 rows a weight read
};
// Engines of at most this many sequences take kRows under kAuto: faster at
// 1-16 rows, slower than kTc's single 64-row tile from about 32 rows on.
constexpr int kBatchRowsMax = 16;

// Where prefill GEMMs run (kernels/gemm_blas.cuh, kernels/gemm_tc.cuh).
enum class PrefillGemm {
    kAuto,  // cuBLAS where it loads and the pass is large enough, else the tensor-core kernels
    kBlas,  // cuBLAS for every pass it can take; a missing cuBLAS is an error
    kTc,    // the tensor-core kernels alone
};

struct CudaTuning {
    // Multiprocessors: the launchers size grids by it (split attention's
    // split count, the lean GEMV rule, the prefill GEMM tile).
    int sm_count = 132;
    // Programmatic dependent launch (Hopper, compute capability 9.0 and up):
    // a decode kernel's launch overlaps the tail of the kernel before it.
    bool pdl = true;
    // Decode steps one CUDA graph holds (a chunk's remainder takes a one-step graph).
    int graph_steps = 8;
    // Bytes of each weight row a decode GEMV warp asks into L2 before waiting
    // for the kernel ahead (0: none); integer rows, float rows (F16 / BF16 / F32).
    uint32_t prefetch_bytes = 2048;
    uint32_t float_prefetch_bytes = 2048;
    // One-token integer GEMVs with at least 3 blocks an SM and this many
    // weight bytes take the lean kernel (and every one with rows and K both
    // 2048 and up).
    uint32_t lean_min_bytes = 8u << 20;
    // Q8Link kinds on (Q8LinkKind bits).
    uint32_t q8_link = kQ8LinkAll;
    PrefillGemm prefill_gemm = PrefillGemm::kAuto;
    // Generated rows of batched passes (MatmulParams::invariant) (BatchDecode).
    // Fixed for an engine's life, so a row's kernel never depends on its
    // company in the batch.
    BatchDecode batch_decode = BatchDecode::kAuto;
    // batch_decode as an engine runs it (never kAuto): set_batch_rows resolves kAuto.
    BatchDecode batch_decode_now = BatchDecode::kRows;
    // Decode attention serves a KV group's query heads from one block
    // (attention_decode_gqa.cuh) for caches of at least this many positions.
    uint32_t gqa_min_span = 16384;
    // Batch tables with the fused batch kernels (Device::fused_batch).
    bool fused_batch = true;
    // Prefill attention over an F16 cache copies its K / V tiles by cp.async,
    // the next tile's loads in flight during this one's arithmetic (false:
    // through registers, one tile at a time, as other cache types).
    bool prefill_async = true;
    // Key splits of the contiguous cache's prefill attention (0: chosen per
    // pass to fill the GPU's waves, attention_prefill::key_splits; N: N).
    uint32_t prefill_splits = 0;
    // Key tiles a split of the paged decode attention takes at least
    // (attention_paged_split.cuh): a row's keys go to at most n / (this many
    // tiles) splits. From the row's own span alone, so batch invariance holds.
    uint32_t paged_split_tiles = 8;
    // Prompt rows of paged passes (continuous batching) over F16 pools on the
    // tensor-core prefill tiles (false, and quantized pools: the per-row
    // kernel, one block a row and head).
    bool paged_prefill_tc = true;
    // Decode rows of F16 / BF16 weights under batch_decode=rows on the GEMM
    // that loads its tensor-core fragments straight from global memory
    // (gemm_rows_half.cuh); false: the shared-memory tiles of gemm_rows.cuh.
    bool rows_half = true;
    // Decode rows of Q4_K / Q6_K_X8 weights on the GEMM that decodes them to
    // F16 in registers (gemm_rows_kq.cuh), under batch_decode=auto: 0 never
    // (engines over kBatchRowsMax sequences: the split-K 64-row tiles), 1 in
    // engines over kBatchRowsMax sequences, 2 in every engine (instead of
    // gemm_rows_q8.cuh's integer products too).
    uint32_t rows_kq = 1;
    // MiB of F16 weight rows a quantized matrix is decoded into per cuBLAS
    // call of a prefill (or prompt-row) GEMM. Larger chunks mean fewer,
    // larger GEMMs: a prompt-row call of 256 rows covers the GPU only with
    // thousands of weight rows (H200, Llama-3.1-8B Q4_K_M, a 512-row prompt
    // pass: 16 MiB 45.2 ms, 64 MiB 33.2 ms, 256 MiB 32.0 ms). By default
    // 1/64 of the GPU's memory within [16, 256] MiB: a small card keeps its
    // memory for the KV cache.
    uint32_t blas_chunk_mb = 256;
    // Q4_0 / Q8_0 / Q6_K weights regrouped at load into their x8 layouts
    // (CudaDevice::weight_layout); false keeps GGUF's layout.
    bool repack = true;
    // Expert matmuls of prefill passes (16 tokens and more outside batch
    // tables) on the tensor cores (moe_gemm_tc.cuh); false: the float kernels.
    bool moe_tensor_cores = true;
    // Routed rows a tile of those (64 or 32). H200, a 512-token pass at
    // Qwen3-30B-A3B's shape (128 experts, 8 a token: 32 rows an expert on
    // average): 64 rows 4.55 ms for 4 layers, 32 rows 4.71.
    uint32_t moe_tile_rows = 64;
    // A decode token's expert matmuls (outside batch tables) on its
    // activations rounded to 8 bits (moe_gemv_q8.cuh); false: the float kernels.
    bool moe_int8_decode = true;
    // On that path, the gate and up matmuls in one kernel, with the gated
    // activation after them where the table puts it next, its output rounded
    // for the down projection as it is written (kernels/moe_glu.h); false: a
    // kernel each and a rounding kernel before each matmul.
    bool moe_fuse_decode = true;

    // The tuning for a GPU with these properties.
    static CudaTuning for_gpu(const GpuProperties& gpu);
    // Applies "key=value,key=value" on top (throws Error for an unknown key
    // or a bad value).
    void apply(const std::string& overrides);
    // for_gpu, then AKUNU_CUDA_TUNING when it is set.
    static CudaTuning from_environment(const GpuProperties& gpu);
};

}  // namespace akunu
