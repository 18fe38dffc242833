// How each akunu kernel runs on Metal: which MSL function, how many
// threadgroups of how many threads, and how much threadgroup memory, computed
// from the command's parameter bytes at dispatch time. Shared by MetalDevice
// (macOS) and the emulated device (Linux tests), so both launch the .metal
// kernels identically. Plain C++: no Metal headers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chip_config.h"
#include "core/device.h"

namespace akunu {

struct MetalLaunch {
    int variant = 0;       // which of the spec's MSL functions
    Dim3 grid;             // threadgroups
    uint32_t threads = 0;  // threads per threadgroup (1-D)
    uint32_t tg_memory = 0;  // bytes at [[threadgroup(0)]]
};

// Parameters are bound at this buffer index (kernels/akunu_msl.h: AK_PARAMS).
constexpr int kMetalParamsIndex = 8;
// The Metal index of a command's buffer i: past the parameters' slot for the
// kernels of more than 8 buffers (their MSL declares them at 9 and 10).
constexpr int metal_buffer_index(int i) { return i < kMetalParamsIndex ? i : i + 1; }

// Everything is decided from static data and the parameter bytes: launching
// allocates nothing (the decode hot path), and the device can build every
// pipeline a spec may use when the dispatch table is built.
constexpr int kMetalMaxVariants = 4;  // matmul: gemv, gemm, gemv_wide, gemv_large
struct MetalKernelSpec {
    const char* name;  // akunu kernel name (the CPU registry's)
    int n_buffers;     // buffer arguments of the MSL function(s)
    // MSL functions (host_name) the launch chooses among; nullptr past the last
    const char* functions[kMetalMaxVariants];
    MetalLaunch (*launch)(const uint8_t* params, const ChipConfig& chip);
};

// The book's GEMV variant choice (one to eight tokens), a function of the
// matrix's shape and format and the chip alone: so the choice a dispatch
// table's command gets is fixed when the table is built. Variant numbers are
// the matmul specs' function indices.
enum MetalGemvVariant : int { kGemvStandard = 0, kGemvWide = 2, kGemvLarge = 3 };
struct MetalGemvChoice {
    int variant;
    uint32_t threads;               // per threadgroup
    uint32_t rows_per_threadgroup;  // output rows
};
// N > wide_gemv_threshold: gemv_wide (the logits head); else K >=
// q4_small_k_threshold with 32-value blocks: gemv_large; else gemv, in
// threadgroups of 256 threads where gemv_wide_standard (Pro and larger), 128
// otherwise.
MetalGemvChoice metal_gemv_choice(uint32_t N, uint32_t K, uint32_t dtype, const ChipConfig& chip);

// Whether Metal decode tables use the fused kernels (kernels/fused.metal):
// on unless $AKUNU_METAL_FUSED_DECODE is "0" (the plain tables, to compare
// results and dispatch counts). Read once, when a device is made.
bool metal_fused_decode_from_env();
// Batch tables with the fused batch kernels (qk_norm_rope_kv_paged,
// add_rmsnorm, matmul_multi) unless AKUNU_METAL_FUSED_BATCH=0.
bool metal_fused_batch_from_env();

// The spec of an akunu kernel, or nullptr when Metal has none.
const MetalKernelSpec* metal_kernel_spec(const std::string& name);
// Every akunu kernel Metal implements.
std::vector<std::string> metal_kernel_names();
// Every MSL function the specs may launch (for building pipelines up front).
std::vector<std::string> metal_function_names();

}  // namespace akunu
