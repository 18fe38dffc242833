#include "cuda_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace akunu {

namespace {

constexpr const char* kVariable = "AKUNU_CUDA_TUNING";
constexpr const char* kKeys =
    "sm_count, pdl, graph_steps, prefetch_bytes, float_prefetch_bytes, lean_min_bytes, q8_link, prefill_gemm, repack, batch_decode, gqa_min_span, fused_batch, prefill_async, paged_prefill_tc, blas_chunk_mb, rows_half, rows_kq, prefill_splits, paged_split_tiles, moe_tensor_cores, moe_tile_rows, moe_int8_decode, moe_fuse_decode";

[[noreturn]] void bad(const std::string& key, const std::string& value, const std::string& want) {
    throw Error(std::string(kVariable) + ": bad value '" + value + "' for " + key + " (" + want + ")");
}

uint64_t parse_uint(const std::string& key, const std::string& v, uint64_t lo, uint64_t hi) {
    const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 19) bad(key, v, range);
    const uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
    if (n < lo || n > hi) bad(key, v, range);
    return n;
}

bool parse_bool(const std::string& key, const std::string& v) {
    if (v == "1" || v == "true" || v == "on") return true;
    if (v == "0" || v == "false" || v == "off") return false;
    bad(key, v, "0 or 1");
}

// "all", "none", or kinds joined by '+': attention, gate, residual.
uint32_t parse_q8_link(const std::string& v) {
    const std::string want = "all, none, or attention, gate, residual joined by '+'";
    if (v == "all") return kQ8LinkAll;
    if (v == "none" || v == "0") return 0;
    uint32_t kinds = 0;
    size_t at = 0;
    while (at <= v.size()) {
        const size_t end = std::min(v.find('+', at), v.size());
        const std::string name = v.substr(at, end - at);
        if (name == "attention") kinds |= kQ8LinkAttention;
        else if (name == "gate") kinds |= kQ8LinkGate;
        else if (name == "residual") kinds |= kQ8LinkResidual;
        else bad("q8_link", v, want);
        at = end + 1;
    }
    return kinds;
}

}  // namespace

CudaTuning CudaTuning::for_gpu(const GpuProperties& gpu) {
    CudaTuning t;
    if (gpu.sm_count > 0) t.sm_count = gpu.sm_count;
    // griddepcontrol (programmatic dependent launch) exists from sm_90 on.
    t.pdl = gpu.cc_major >= 9;
    if (gpu.memory_mib > 0) t.blas_chunk_mb = (uint32_t)std::min<uint64_t>(256, std::max<uint64_t>(16, gpu.memory_mib / 64));
    return t;
}

void CudaTuning::apply(const std::string& overrides) {
    size_t at = 0;
    while (at < overrides.size()) {
        const size_t end = std::min(overrides.find(',', at), overrides.size());
        const std::string item = overrides.substr(at, end - at);
        at = end + 1;
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string::npos)
            throw Error(std::string(kVariable) + ": '" + item + "' is not key=value (keys: " + kKeys + ")");
        const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
        constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
        if (key == "sm_count") sm_count = (int)parse_uint(key, v, 1, 1 << 16);
        else if (key == "pdl") pdl = parse_bool(key, v);
        else if (key == "graph_steps") graph_steps = (int)parse_uint(key, v, 1, 64);
        else if (key == "prefetch_bytes") prefetch_bytes = (uint32_t)parse_uint(key, v, 0, kU32);
        else if (key == "float_prefetch_bytes") float_prefetch_bytes = (uint32_t)parse_uint(key, v, 0, kU32);
        else if (key == "lean_min_bytes") lean_min_bytes = (uint32_t)parse_uint(key, v, 0, kU32);
        else if (key == "q8_link") q8_link = parse_q8_link(v);
        else if (key == "prefill_gemm") {
            if (v == "auto") prefill_gemm = PrefillGemm::kAuto;
            else if (v == "blas") prefill_gemm = PrefillGemm::kBlas;
            else if (v == "tc") prefill_gemm = PrefillGemm::kTc;
            else bad(key, v, "auto, blas or tc");
        } else if (key == "repack") repack = parse_bool(key, v);
        else if (key == "gqa_min_span") gqa_min_span = (uint32_t)parse_uint(key, v, 0, kU32);
        else if (key == "fused_batch") fused_batch = parse_bool(key, v);
        else if (key == "moe_tensor_cores") moe_tensor_cores = parse_bool(key, v);
        else if (key == "moe_tile_rows") {
            moe_tile_rows = (uint32_t)parse_uint(key, v, 32, 64);
            if (moe_tile_rows != 32 && moe_tile_rows != 64) bad(key, v, "32 or 64");
        }
        else if (key == "moe_int8_decode") moe_int8_decode = parse_bool(key, v);
        else if (key == "moe_fuse_decode") moe_fuse_decode = parse_bool(key, v);
        else if (key == "prefill_async") prefill_async = parse_bool(key, v);
        else if (key == "prefill_splits") prefill_splits = (uint32_t)parse_uint(key, v, 0, 8);
        else if (key == "paged_split_tiles") paged_split_tiles = (uint32_t)parse_uint(key, v, 1, 1024);
        else if (key == "paged_prefill_tc") paged_prefill_tc = parse_bool(key, v);
        else if (key == "rows_half") rows_half = parse_bool(key, v);
        else if (key == "rows_kq") rows_kq = (uint32_t)parse_uint(key, v, 0, 2);
        else if (key == "blas_chunk_mb") blas_chunk_mb = (uint32_t)parse_uint(key, v, 1, 4096);
        else if (key == "batch_decode") {
            if (v == "auto") batch_decode = BatchDecode::kAuto;
            else if (v == "rows") batch_decode = BatchDecode::kRows;
            else if (v == "tc") batch_decode = BatchDecode::kTc;
            else if (v == "gemv") batch_decode = BatchDecode::kGemv;
            else bad(key, v, "auto, rows, tc or gemv");
            batch_decode_now = batch_decode == BatchDecode::kAuto ? BatchDecode::kRows : batch_decode;
        }
        else throw Error(std::string(kVariable) + ": unknown key '" + key + "' (keys: " + kKeys + ")");
    }
}

CudaTuning CudaTuning::from_environment(const GpuProperties& gpu) {
    CudaTuning t = for_gpu(gpu);
    if (const char* e = std::getenv(kVariable)) t.apply(e);
    return t;
}

}  // namespace akunu
