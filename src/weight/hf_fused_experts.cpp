// gpt-oss's Hugging Face tensors that are not one module a matrix: its
// experts, fused and transposed as transformers holds them, and its
// attention sinks (a parameter of the attention module). They become the
// tensors llama.cpp's converter writes, which the rest of the core reads.
#include <cstring>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "weight/hf_directory.h"

namespace akunu {
namespace {

// "…layers.N.<scope><part>" -> (N, part); (-1, "") for other names.
std::pair<long, std::string> layer_part(const std::string& name, const std::string& scope) {
    const std::string key = "layers.";
    size_t at = name.find(key);
    if (at == std::string::npos) return {-1, ""};
    size_t i = at + key.size(), j = i;
    while (j < name.size() && j - i < 7 && name[j] >= '0' && name[j] <= '9') j++;
    if (j == i || j >= name.size() || name[j] != '.') return {-1, ""};
    if (name.compare(j + 1, scope.size(), scope) != 0) return {-1, ""};
    return {std::stol(name.substr(i, j - i)), name.substr(j + 1 + scope.size())};
}

size_t float_bytes(const SafeTensor& t) {
    if (t.dtype == "F32") return 4;
    if (t.dtype == "F16" || t.dtype == "BF16") return 2;
    throw UnsupportedError("tensor '" + t.name + "' has dtype " + t.dtype + " (expected F32, F16 or BF16)");
}

uint32_t ggml_float(const SafeTensor& t) { return t.dtype == "F32" ? GGML_F32 : t.dtype == "F16" ? GGML_F16 : GGML_BF16; }

}  // namespace

// Per layer, transformers' GptOssExperts (x @ W, a column an output):
//   mlp.experts.gate_up_proj       [E, dim, 2 ff], gate and up columns interleaved (gate first)
//   mlp.experts.gate_up_proj_bias  [E, 2 ff], interleaved the same way
//   mlp.experts.down_proj          [E, ff, dim]
//   mlp.experts.down_proj_bias     [E, dim]
// become ffn_gate_exps / ffn_up_exps (rows of dim values, GGUF [dim, ff, E]),
// their biases [ff, E], ffn_down_exps (GGUF [ff, dim, E]) and its bias
// [dim, E]: copies in the file's float type, made once at load.
// self_attn.sinks [heads] is attn_sinks.
void HFDirectory::map_fused_experts() {
    for (const auto& shard : shards_)
        for (const SafeTensor& t : shard->tensors()) {
            auto [sl, sink] = layer_part(t.name, "self_attn.");
            if (sl >= 0 && sink == "sinks") {
                if (t.shape.size() != 1) throw FormatError("tensor '" + t.name + "' is not a vector");
                GGUFTensorInfo ti;
                ti.name = "blk." + std::to_string(sl) + ".attn_sinks.weight";
                ti.type = ggml_float(t);
                float_bytes(t);
                ti.shape = {t.shape[0]};
                ti.n_bytes = t.n_bytes;
                ti.data = t.data;
                add_tensor(std::move(ti));
                continue;
            }
            auto [layer, part] = layer_part(t.name, "mlp.experts.");
            if (layer < 0) continue;
            const std::string blk = "blk." + std::to_string(layer) + ".";
            if (part.size() > 7 && (part.compare(part.size() - 7, 7, "_blocks") == 0 ||
                                    part.compare(part.size() - 7, 7, "_scales") == 0))
                throw UnsupportedError("tensor '" + t.name + "': MXFP4-packed Hugging Face experts are not "
                                       "supported; load the GGUF that llama.cpp's converter writes from them");
            const size_t es = float_bytes(t);
            const uint64_t n_elems = t.n_bytes / es;
            auto add = [&](const std::string& name, std::vector<uint64_t> shape, const uint8_t* data, size_t bytes) {
                GGUFTensorInfo ti;
                ti.name = name;
                ti.type = ggml_float(t);
                ti.shape = std::move(shape);
                ti.n_bytes = bytes;
                ti.data = data;
                add_tensor(std::move(ti));
            };
            if (part == "gate_up_proj" || part == "gate_up_proj_bias") {
                const bool bias = part == "gate_up_proj_bias";
                if (t.shape.size() != (bias ? 2u : 3u) || t.shape.back() % 2 != 0)
                    throw FormatError("tensor '" + t.name + "' is not [experts, " + (bias ? "" : "dim, ") + "2 ff]");
                const uint64_t E = t.shape[0], cols = t.shape.back(), ff = cols / 2, dim = bias ? 1 : t.shape[1];
                if (E * dim * cols != n_elems) throw FormatError("tensor '" + t.name + "' has the wrong size");
                for (int which = 0; which < 2; which++) {  // 0: gate (even columns), 1: up (odd)
                    uint8_t* dst = own(t.n_bytes / 2);
                    for (uint64_t e = 0; e < E; e++)
                        for (uint64_t f = 0; f < ff; f++)
                            for (uint64_t k = 0; k < dim; k++)
                                std::memcpy(dst + ((e * ff + f) * dim + k) * es,
                                            t.data + ((e * dim + k) * cols + 2 * f + which) * es, es);
                    const std::string name = blk + (which ? "ffn_up_exps" : "ffn_gate_exps") + (bias ? ".bias" : ".weight");
                    add(name, bias ? std::vector<uint64_t>{ff, E} : std::vector<uint64_t>{dim, ff, E}, dst, t.n_bytes / 2);
                }
            } else if (part == "down_proj") {
                if (t.shape.size() != 3) throw FormatError("tensor '" + t.name + "' is not [experts, ff, dim]");
                const uint64_t E = t.shape[0], ff = t.shape[1], dim = t.shape[2];
                if (E * ff * dim != n_elems) throw FormatError("tensor '" + t.name + "' has the wrong size");
                uint8_t* dst = own(t.n_bytes);
                for (uint64_t e = 0; e < E; e++)
                    for (uint64_t f = 0; f < ff; f++)
                        for (uint64_t d = 0; d < dim; d++)
                            std::memcpy(dst + ((e * dim + d) * ff + f) * es, t.data + ((e * ff + f) * dim + d) * es, es);
                add(blk + "ffn_down_exps.weight", {ff, dim, E}, dst, t.n_bytes);
            } else if (part == "down_proj_bias") {
                if (t.shape.size() != 2) throw FormatError("tensor '" + t.name + "' is not [experts, dim]");
                add(blk + "ffn_down_exps.bias", {t.shape[1], t.shape[0]}, t.data, t.n_bytes);
            }
        }
}

}  // namespace akunu
