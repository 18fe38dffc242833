#include "metal_launch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "core/kv_layout.h"
#include "core/kv_rows_check.h"

namespace akunu {
namespace {

template <typename P>
P read(const uint8_t* bytes) {
    P p;
    std::memcpy(&p, bytes, sizeof(P));
    return p;
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
uint32_t ceil32(uint32_t n) { return std::max(32u, ceil_div(n, 32) * 32); }

constexpr uint32_t kElementThreads = 256;
// Must match kernels/matmul.metal, attention.metal, sampling.metal.
constexpr uint32_t kGemvMaxTokens = 8;
constexpr uint32_t kGemvRowsPerThreadgroup = 4;  // SIMD groups of the standard gemv (128 threads)
constexpr uint32_t kGemvWideSimdGroups = 8;      // gemv_wide, and gemv on gemv_wide_standard chips
constexpr uint32_t kGemvWideRows = 2;            // kWideRows
constexpr uint32_t kGemvLargeSplit = 2;          // kLargeSplit
constexpr uint32_t kGemmTile = 32;
constexpr uint32_t kAttnThreads = 128, kAttnMaxHeadDim = 256;
constexpr uint32_t kSamplerThreads = 256;

// Formats whose blocks hold 32 values: their rows have many blocks, so a
// long row's reduction is split among SIMD groups (gemv_large) past the
// chip's K threshold.
bool has_large_k_gemv(uint32_t dtype) {
    switch (dtype) {
        case GGML_Q8_0: case GGML_Q4_0: case GGML_Q5_0: case GGML_Q4_1: case GGML_Q5_1: case GGML_IQ4_NL:
        case GGML_MXFP4:
            return true;
        default:
            return false;
    }
}

}  // namespace

MetalGemvChoice metal_gemv_choice(uint32_t N, uint32_t K, uint32_t dtype, const ChipConfig& chip) {
    if (N > (uint32_t)chip.wide_gemv_threshold) return {kGemvWide, 32 * kGemvWideSimdGroups, kGemvWideSimdGroups * kGemvWideRows};
    if (has_large_k_gemv(dtype) && K >= (uint32_t)chip.q4_small_k_threshold)
        return {kGemvLarge, 32 * kGemvRowsPerThreadgroup, kGemvRowsPerThreadgroup / kGemvLargeSplit};
    const uint32_t groups = chip.gemv_wide_standard ? kGemvWideSimdGroups : kGemvRowsPerThreadgroup;
    return {kGemvStandard, 32 * groups, groups};
}

namespace {

// variant 0: gemv_<format>, 1: gemm_<format>, 2: gemv_wide_<format>, 3: gemv_large_<format>
MetalLaunch matmul(const uint8_t* b, const ChipConfig& chip) {
    auto p = read<MatmulParams>(b);
    // batch tables (invariant): the tile kernel at every count, so a row's sums
    // never depend on how many rows share the pass
    if (p.n_tokens <= kGemvMaxTokens && !p.invariant) {
        const MetalGemvChoice c = metal_gemv_choice(p.N, p.K, p.dtype, chip);
        const uint32_t tg_memory = c.variant == kGemvLarge ? c.threads / 32 * kGemvMaxTokens * 4 : 0;
        return {c.variant, Dim3(ceil_div(p.N, c.rows_per_threadgroup)), c.threads, tg_memory};
    }
    return {1, Dim3(ceil_div(p.N, kGemmTile), ceil_div(p.n_tokens, kGemmTile)), 128, 3 * kGemmTile * kGemmTile * 4};
}

MetalLaunch embedding(const uint8_t* b, const ChipConfig&) {
    auto p = read<EmbeddingParams>(b);
    return {0, Dim3(p.n_tokens), 128, 0};
}

// A norm's row in one threadgroup: up to norm_tg_size threads (the book's
// 1024), never more than the device allows.
uint32_t norm_threads(uint32_t dim, const ChipConfig& chip) {
    return std::min<uint32_t>({ceil32(dim), (uint32_t)chip.norm_tg_size, (uint32_t)chip.max_threads_per_tg});
}

MetalLaunch norm(const uint8_t* b, const ChipConfig& chip) {
    auto p = read<NormParams>(b);
    return {0, Dim3(p.n_tokens * p.rows_per_token), norm_threads(p.dim, chip), 32 * 4};
}

MetalLaunch rope(const uint8_t* b, const ChipConfig&) {
    auto p = read<RopeParams>(b);
    return {0, Dim3(p.n_tokens), std::min<uint32_t>(ceil32(p.n_heads * p.head_dim / 2), kElementThreads), 0};
}

// The single-stream cache's writers put position p at ring row p % max_ctx
// (core/kv_layout.h, core/kv_rows_check.h).
void check_ring_write(const char* what, uint32_t max_ctx, uint32_t n_tokens) {
    if (const char* problem = kv_write_rows_problem(max_ctx, n_tokens)) throw Error(std::string(what) + ": " + problem);
}

MetalLaunch kv_write(const uint8_t* b, const ChipConfig&) {
    auto p = read<KVWriteParams>(b);
    check_ring_write("kv_write", p.max_ctx, p.n_tokens);
    return {0, Dim3(ceil_div(p.kv_dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch kv_write_paged(const uint8_t* b, const ChipConfig&) {
    auto p = read<PagedKVWriteParams>(b);
    return {0, Dim3(ceil_div(p.kv_dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

// One threadgroup per (head, token); threadgroup memory: q, a chunk's weights
// and cache rows, reduction scratch.
MetalLaunch attention_grid(uint32_t head_dim, uint32_t n_heads, uint32_t n_tokens) {
    if (head_dim > kAttnMaxHeadDim)  // the kernel keeps q in threadgroup memory
        throw Error("Metal attention supports head_dim up to " + std::to_string(kAttnMaxHeadDim) + ", the model has " +
                    std::to_string(head_dim));
    return {0, Dim3(n_heads, n_tokens), kAttnThreads, (kAttnMaxHeadDim + 2 * kAttnThreads + 32) * 4};
}

MetalLaunch attention(const uint8_t* b, const ChipConfig&) {
    auto p = read<AttentionParams>(b);
    // keys at their ring rows: the rows must still hold every key of the pass
    if (const char* problem = kv_rows_problem(p)) throw Error(std::string("attention: ") + problem);
    return attention_grid(p.head_dim, p.n_heads, p.n_tokens);
}

MetalLaunch attention_paged(const uint8_t* b, const ChipConfig&) {
    auto p = read<PagedAttentionParams>(b);
    if (const char* problem = kv_head_problem(p.k_type, p.v_type, p.head_dim))
        throw Error(std::string("attention_paged: ") + problem);
    return attention_grid(p.head_dim, p.n_heads, p.n_tokens);
}

MetalLaunch gated(const uint8_t* b, const ChipConfig&) {
    auto p = read<GatedActParams>(b);
    return {0, Dim3(ceil_div(p.n, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch flat(const uint8_t* b, const ChipConfig&) {
    auto p = read<AddParams>(b);
    const uint64_t n = (uint64_t)p.n * p.n_tokens;
    return {0, Dim3((uint32_t)((n + kElementThreads - 1) / kElementThreads)), kElementThreads, 0};
}

MetalLaunch gather_rows(const uint8_t* b, const ChipConfig&) {
    auto p = read<GatherRowsParams>(b);
    return {0, Dim3(ceil_div(p.dim, kElementThreads), p.n_rows), kElementThreads, 0};
}

MetalLaunch add_rows(const uint8_t* b, const ChipConfig&) {
    auto p = read<AddRowsParams>(b);
    return {0, Dim3(ceil_div(p.dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch im2col(const uint8_t* b, const ChipConfig&) {
    auto p = read<Im2ColParams>(b);
    return {0, Dim3(ceil_div(p.channels * p.kernel_size, kElementThreads), p.n_out), kElementThreads, 0};
}

MetalLaunch argmax(const uint8_t* b, const ChipConfig&) {
    auto p = read<ArgmaxParams>(b);
    return {0, Dim3(p.n_rows), kSamplerThreads, 2 * kSamplerThreads * 4};
}

MetalLaunch sample(const uint8_t*, const ChipConfig&) {
    return {0, Dim3(1), kSamplerThreads, (32 + 2 * kSamplerThreads) * 4};
}

// ---- fused decode kernels (kernels/fused.metal) ----

// Whether Metal's GEMV reads weights of this type (the formats below, MLX).
bool metal_reads_format(uint32_t dtype) {
    const DTypeDescriptor* d = dtype_lookup(dtype);
    return d && !is_x8_dtype(dtype) && metal_kernel_spec(d->gemv_kernel) != nullptr;
}

MetalLaunch gemv_multi(const uint8_t* b, const ChipConfig& chip) {
    auto p = read<MultiGemvParams>(b);
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate) throw Error("gemv_multi: bad matrix count or mode");
    const uint32_t used = p.mode == kGemvSeparate ? p.n_mats : p.mode == kGemvAccumulate ? 1 : 2;
    if (used > p.n_mats) throw Error("gemv_multi: the gated modes take two matrices");
    for (uint32_t i = 0; i < used; i++) {
        if (!metal_reads_format(p.dtype[i]))
            throw Error(std::string("gemv_multi: unsupported weight type ") + dtype_name(p.dtype[i]));
        const DTypeDescriptor* d = dtype_lookup(p.dtype[i]);
        const uint32_t be = is_mlx_dtype(p.dtype[i]) ? (uint32_t)mlx_group(p.dtype[i]) : d->block_elems;
        if (p.K % be) throw Error("gemv_multi: K is not a multiple of the format's block");
    }
    uint32_t rows = p.N[0];
    if (p.mode == kGemvSeparate)
        for (uint32_t i = 1; i < p.n_mats; i++) rows += p.N[i];
    // The large-K variant (two SIMD groups a row) on the GEMVs' rule: every
    // matrix of 32-value blocks and K past the chip's threshold.
    bool large = p.K >= (uint32_t)chip.q4_small_k_threshold;
    for (uint32_t i = 0; i < used; i++) large = large && has_large_k_gemv(p.dtype[i]);
    if (large)
        return {1, Dim3(ceil_div(rows, kGemvRowsPerThreadgroup / kGemvLargeSplit)), 32 * kGemvRowsPerThreadgroup,
                (32 + kGemvRowsPerThreadgroup * kGemvMaxTokens * 2) * 4};
    return {0, Dim3(ceil_div(rows, kGemvRowsPerThreadgroup)), 32 * kGemvRowsPerThreadgroup, 32 * 4};
}

// qk_norm_rope_kv and its paged twin: a threadgroup a (head, token), a thread
// a rotary pair, 32 floats of norm scratch.
MetalLaunch per_head(const char* what, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, uint32_t n_tokens) {
    if (head_dim % 2 || head_dim == 0) throw Error(std::string(what) + ": head_dim must be even");
    return {0, Dim3(n_heads + n_kv_heads, n_tokens), std::min<uint32_t>(ceil32(head_dim / 2), 1024), 32 * 4};
}

// One row a token normalized in one threadgroup (rmsnorm_residual, add_rmsnorm).
MetalLaunch norm_per_token(const char* what, const uint8_t* b, const ChipConfig& chip) {
    auto p = read<NormParams>(b);
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error(std::string(what) + ": one row a token, from row 0");
    return {0, Dim3(p.n_tokens), norm_threads(p.dim, chip), 32 * 4};
}

MetalLaunch qk_norm_rope_kv(const uint8_t* b, const ChipConfig&) {
    auto p = read<QKRopeKVParams>(b);
    check_ring_write("qk_norm_rope_kv", p.max_ctx, p.n_tokens);
    return per_head("qk_norm_rope_kv", p.n_heads, p.n_kv_heads, p.head_dim, p.n_tokens);
}

MetalLaunch rmsnorm_residual(const uint8_t* b, const ChipConfig& chip) {
    return norm_per_token("rmsnorm_residual", b, chip);
}

// ---- the fused kernels of batch passes (kernels/fused.metal, matmul.metal) ----

MetalLaunch qk_norm_rope_kv_paged(const uint8_t* b, const ChipConfig&) {
    auto p = read<PagedQKRopeKVParams>(b);
    if (p.block_size == 0) throw Error("qk_norm_rope_kv_paged: block_size 0");
    if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount)
        throw Error("qk_norm_rope_kv_paged: unknown KV cache type");
    return per_head("qk_norm_rope_kv_paged", p.n_heads, p.n_kv_heads, p.head_dim, p.n_tokens);
}

MetalLaunch add_rmsnorm(const uint8_t* b, const ChipConfig& chip) { return norm_per_token("add_rmsnorm", b, chip); }

MetalLaunch matmul_multi(const uint8_t* b, const ChipConfig&) {
    auto p = read<MultiMatmulParams>(b);
    if (p.n_mats == 0 || p.n_mats > 3) throw Error("matmul_multi: 1 to 3 matrices, got " + std::to_string(p.n_mats));
    if (!metal_reads_format(p.dtype))
        throw Error(std::string("matmul_multi: unsupported weight type ") + dtype_name(p.dtype));
    const DTypeDescriptor* d = dtype_lookup(p.dtype);
    const uint32_t be = is_mlx_dtype(p.dtype) ? (uint32_t)mlx_group(p.dtype) : d->block_elems;
    if (p.K % be) throw Error("matmul_multi: K is not a multiple of the format's block");
    uint32_t tiles = 0;
    for (uint32_t i = 0; i < p.n_mats; i++) tiles += ceil_div(p.N[i], kGemmTile);
    return {0, Dim3(tiles, ceil_div(p.n_tokens, kGemmTile)), 128, 3 * kGemmTile * kGemmTile * 4};
}

// ---- mixture of experts (kernels/moe.metal) ----

// Must match kernels/moe.metal: the route keeps a token's probabilities in
// threadgroup memory, moe_matmul_sum a window's ids, rows and per-expert starts.
constexpr uint32_t kMoeMaxExperts = 4096, kMoeMaxUsed = 64, kMoeWindow = 2048;
constexpr uint32_t kMoeGemvGroups = 4, kMoeGroups = 8;  // SIMD groups (output rows) a threadgroup
constexpr uint32_t kMoeSlotRows = 4;                     // moe_matmul_slots: output rows a SIMD group

MetalLaunch moe_route(const uint8_t* b, const ChipConfig&) {
    auto p = read<MoeRouteParams>(b);
    if (p.n_experts > kMoeMaxExperts || p.n_used > kMoeMaxUsed)
        throw Error("moe_route: at most " + std::to_string(kMoeMaxExperts) + " experts and " +
                    std::to_string(kMoeMaxUsed) + " a token");
    if (p.n_experts == 0 || p.n_used == 0) return {0, Dim3(0), 32, 0};
    return {0, Dim3(p.n_tokens), 32, p.n_experts * 4};
}

// variant 0: moe_matmul_slots_gemv, 1: moe_matmul_sum_gemv (up to
// kGemvMaxTokens tokens), 2: moe_matmul_slots, 3: moe_matmul_sum. Every
// variant computes a row's dots and sums alike, so the choice by token count
// keeps batch invariance.
MetalLaunch moe_matmul(const uint8_t* b, const ChipConfig&) {
    auto p = read<MoeMatmulParams>(b);
    const DTypeDescriptor* d = dtype_lookup(p.dtype);
    if (!metal_reads_format(p.dtype) || is_mlx_dtype(p.dtype) || p.K % d->block_elems != 0)
        throw Error(std::string("moe_matmul: unsupported weight type ") + dtype_name(p.dtype) + " or row length");
    if (p.n_experts > kMoeMaxExperts || p.n_used > kMoeMaxUsed)
        throw Error("moe_matmul: at most " + std::to_string(kMoeMaxExperts) + " experts and " +
                    std::to_string(kMoeMaxUsed) + " a token");
    if (p.n_tokens == 0 || p.n_used == 0 || p.N == 0) return {0, Dim3(0), 32, 0};
    if ((uint64_t)p.n_tokens * p.n_used > 0xFFFFFFFFull) throw Error("moe_matmul: too many routed rows");
    if (p.n_tokens <= kGemvMaxTokens) {
        const Dim3 grid(ceil_div(p.N, kMoeGemvGroups), p.weighted ? p.n_tokens : p.n_tokens * p.n_used);
        return {p.weighted ? 1 : 0, grid, 32 * kMoeGemvGroups, 0};
    }
    if (p.weighted)
        return {3, Dim3(ceil_div(p.N, kMoeGroups)), 32 * kMoeGroups, (2 * kMoeWindow + p.n_experts + 1) * 2};
    if (p.n_experts == 0) return {0, Dim3(0), 32, 0};
    return {2, Dim3(ceil_div(p.N, kMoeGroups * kMoeSlotRows), p.n_experts), 32 * kMoeGroups,
            32 * 4 + kMoeWindow * 2};
}

MetalLaunch moe_shared_add(const uint8_t* b, const ChipConfig&) {
    auto p = read<MoeSharedAddParams>(b);
    return {0, Dim3(ceil_div(p.dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

const char* const kFormats[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q5_0",   "q4_1",   "q5_1",
                                "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs", "mlx",
                                "mxfp4"};

const std::vector<MetalKernelSpec>& specs() {
    static const std::vector<MetalKernelSpec> all = [] {
        std::vector<MetalKernelSpec> v = {
            {"rmsnorm", 3, {"rmsnorm"}, norm},
            {"layernorm", 4, {"layernorm"}, norm},
            {"rope", 2, {"rope"}, rope},
            {"rope_rows", 3, {"rope_rows"}, rope},
            {"kv_write", 4, {"kv_write"}, kv_write},
            {"attention", 8, {"attention"}, attention},  // (5 / 6: the CUDA staging rows, 7: sinks)
            {"kv_write_paged", 6, {"kv_write_paged"}, kv_write_paged},
            {"attention_paged", 7, {"attention_paged"}, attention_paged},
            {"silu_gate", 3, {"silu_gate"}, gated},
            {"gelu_gate", 3, {"gelu_gate"}, gated},
            {"swiglu_oai", 3, {"swiglu_oai"}, gated},
            {"add_inplace", 2, {"add_inplace"}, flat},
            {"gather_rows", 3, {"gather_rows"}, gather_rows},
            {"gelu_erf", 1, {"gelu_erf"}, flat},
            {"softcap", 1, {"softcap"}, flat},  // (SoftcapParams begins as AddParams)
            {"add_rows", 3, {"add_rows"}, add_rows},
            {"im2col_1d", 2, {"im2col_1d"}, im2col},
            {"argmax", 2, {"argmax"}, argmax},
            {"sample", 6, {"sample"}, sample},
            {"gemv_multi", 8, {"gemv_multi", "gemv_multi_large"}, gemv_multi},
            {"qk_norm_rope_kv", 8, {"qk_norm_rope_kv"}, qk_norm_rope_kv},
            {"rmsnorm_residual", 3, {"rmsnorm_residual"}, rmsnorm_residual},
            {"qk_norm_rope_kv_paged", 10, {"qk_norm_rope_kv_paged"}, qk_norm_rope_kv_paged},
            {"add_rmsnorm", 4, {"add_rmsnorm"}, add_rmsnorm},
            {"matmul_multi", 10, {"matmul_multi"}, matmul_multi},
            {"moe_route", 2, {"moe_route"}, moe_route},
            {"moe_matmul", 5, {"moe_matmul_slots_gemv", "moe_matmul_sum_gemv", "moe_matmul_slots", "moe_matmul_sum"},
             moe_matmul},
            {"moe_shared_add", 3, {"moe_shared_add"}, moe_shared_add},
        };
        // Per-format names live as long as the table (a deque never moves its strings).
        static std::deque<std::string> names;
        for (const char* f : kFormats) {
            const char* gemv = names.emplace_back(std::string("gemv_") + f).c_str();
            const char* gemm = names.emplace_back(std::string("gemm_") + f).c_str();
            const char* emb = names.emplace_back(std::string("embedding_") + f).c_str();
            const char* wide = names.emplace_back(std::string("gemv_wide_") + f).c_str();
            const char* large = names.emplace_back(std::string("gemv_large_") + f).c_str();
            // both akunu names choose by token count, then by shape and chip
            v.push_back({gemv, 4, {gemv, gemm, wide, large}, matmul});
            v.push_back({gemm, 4, {gemv, gemm, wide, large}, matmul});
            v.push_back({emb, 3, {emb}, embedding});
        }
        return v;
    }();
    return all;
}

}  // namespace

bool metal_fused_decode_from_env() {
    const char* v = std::getenv("AKUNU_METAL_FUSED_DECODE");
    return !(v && std::strcmp(v, "0") == 0);
}

bool metal_fused_batch_from_env() {
    const char* v = std::getenv("AKUNU_METAL_FUSED_BATCH");
    return !(v && std::strcmp(v, "0") == 0);
}

const MetalKernelSpec* metal_kernel_spec(const std::string& name) {
    for (const MetalKernelSpec& s : specs())
        if (name == s.name) return &s;
    return nullptr;
}

std::vector<std::string> metal_kernel_names() {
    std::vector<std::string> out;
    for (const MetalKernelSpec& s : specs()) out.push_back(s.name);
    return out;
}

std::vector<std::string> metal_function_names() {
    std::vector<std::string> out;
    for (const MetalKernelSpec& s : specs())
        for (const char* f : s.functions)
            if (f && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    return out;
}

}  // namespace akunu
