#include "metal_launch.h"

#include <algorithm>
#include <cstring>

#include "core/kernel_params.h"

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
constexpr uint32_t kGemvRowsPerThreadgroup = 4;
constexpr uint32_t kGemmTile = 32;
constexpr uint32_t kAttnThreads = 128, kAttnMaxHeadDim = 256;
constexpr uint32_t kSamplerThreads = 256;

// "gemv_q4_0" / "gemm_q4_0" -> "q4_0"
std::string format_suffix(const char* name) { return std::string(name).substr(5); }

MetalLaunch matmul(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<MatmulParams>(b);
    if (p.n_tokens <= kGemvMaxTokens)
        return {"gemv_" + format_suffix(name), Dim3(ceil_div(p.N, kGemvRowsPerThreadgroup)), 32 * kGemvRowsPerThreadgroup, 0};
    return {"gemm_" + format_suffix(name), Dim3(ceil_div(p.N, kGemmTile), ceil_div(p.n_tokens, kGemmTile)), 128,
            3 * kGemmTile * kGemmTile * 4};
}

MetalLaunch embedding(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<EmbeddingParams>(b);
    return {name, Dim3(p.n_tokens), 128, 0};
}

MetalLaunch norm(const char* name, const uint8_t* b, const ChipConfig& chip) {
    auto p = read<NormParams>(b);
    return {name, Dim3(p.n_tokens * p.rows_per_token), std::min<uint32_t>(ceil32(p.dim), chip.norm_tg_size), 32 * 4};
}

MetalLaunch rope(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<RopeParams>(b);
    return {name, Dim3(p.n_tokens), std::min<uint32_t>(ceil32(p.n_heads * p.head_dim / 2), kElementThreads), 0};
}

MetalLaunch kv_write(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<KVWriteParams>(b);
    return {name, Dim3(ceil_div(p.kv_dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch attention(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<AttentionParams>(b);
    return {name, Dim3(p.n_heads, p.n_tokens), kAttnThreads, (kAttnMaxHeadDim + kAttnThreads + 32) * 4};
}

MetalLaunch gated(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<GatedActParams>(b);
    return {name, Dim3(ceil_div(p.n, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch flat(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<AddParams>(b);
    const uint64_t n = (uint64_t)p.n * p.n_tokens;
    return {name, Dim3((uint32_t)((n + kElementThreads - 1) / kElementThreads)), kElementThreads, 0};
}

MetalLaunch add_rows(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<AddRowsParams>(b);
    return {name, Dim3(ceil_div(p.dim, kElementThreads), p.n_tokens), kElementThreads, 0};
}

MetalLaunch im2col(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<Im2ColParams>(b);
    return {name, Dim3(ceil_div(p.channels * p.kernel_size, kElementThreads), p.n_out), kElementThreads, 0};
}

MetalLaunch argmax(const char* name, const uint8_t* b, const ChipConfig&) {
    auto p = read<ArgmaxParams>(b);
    return {name, Dim3(p.n_rows), kSamplerThreads, 2 * kSamplerThreads * 4};
}

MetalLaunch sample(const char* name, const uint8_t*, const ChipConfig&) {
    return {name, Dim3(1), kSamplerThreads, (32 + 2 * kSamplerThreads) * 4};
}

const char* const kFormats[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q5_0",   "q4_1",   "q5_1",
                                "iq4_nl", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs", "mlx"};

const std::vector<MetalKernelSpec>& specs() {
    static const std::vector<MetalKernelSpec> all = [] {
        std::vector<MetalKernelSpec> v = {
            {"rmsnorm", 3, norm},        {"layernorm", 4, norm},      {"rope", 2, rope},
            {"kv_write", 4, kv_write},   {"attention", 5, attention}, {"silu_gate", 3, gated},
            {"gelu_gate", 3, gated},     {"add_inplace", 2, flat},    {"gelu_erf", 1, flat},
            {"add_rows", 3, add_rows},   {"im2col_1d", 2, im2col},    {"argmax", 2, argmax},
            {"sample", 6, sample},
        };
        static std::vector<std::string> names;  // stable storage for the per-format names
        names.reserve(3 * sizeof(kFormats) / sizeof(kFormats[0]));
        for (const char* f : kFormats)
            for (const char* kind : {"gemv_", "gemm_", "embedding_"}) names.push_back(std::string(kind) + f);
        for (const std::string& n : names)
            v.push_back({n.c_str(), n.rfind("embedding_", 0) == 0 ? 3 : 4,
                         n.rfind("embedding_", 0) == 0 ? embedding : matmul});
        return v;
    }();
    return all;
}

}  // namespace

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
    for (const MetalKernelSpec& s : specs()) {
        const std::string n = s.name;
        if (n.rfind("gemm_", 0) == 0) continue;  // gemv_X's spec launches gemv_X or gemm_X
        out.push_back(n);
        if (n.rfind("gemv_", 0) == 0) out.push_back("gemm_" + n.substr(5));
    }
    return out;
}

}  // namespace akunu
