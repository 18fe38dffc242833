// gpt-oss's Hugging Face tensors that are not one module a matrix: its
// experts, fused and transposed as transformers holds them, and its
// attention sinks (a parameter of the attention module). They become the
// tensors llama.cpp's converter writes, which the rest of the core reads.
#include <algorithm>
#include <cstring>
#include <map>

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

// One MXFP4 block as OpenAI's checkpoints pack it (16 bytes, value 2i in the
// low nibble of byte i and 2i + 1 in its high nibble; its E8M0 scale apart)
// as GGML's block_mxfp4 (the scale byte, then value j in the low nibble of
// byte j and j + 16 in its high nibble). Both scale bytes mean 2^(e - 127)
// times the same FP4 code (GGML's codes are doubled and its scale halved).
void mxfp4_block_from_packed(const uint8_t* packed, uint8_t scale, uint8_t* out) {
    uint8_t code[32];
    for (int i = 0; i < 16; i++) {
        code[2 * i] = packed[i] & 0x0F;
        code[2 * i + 1] = packed[i] >> 4;
    }
    out[0] = scale;
    for (int j = 0; j < 16; j++) out[1 + j] = (uint8_t)(code[j] | (code[j + 16] << 4));
}

struct PackedExperts {
    const SafeTensor* blocks = nullptr;
    const SafeTensor* scales = nullptr;
};

}  // namespace

// MXFP4-packed experts (the checkpoints OpenAI publishes; transformers'
// Mxfp4 integration): per layer
//   mlp.experts.gate_up_proj_blocks [E, 2 ff, K / 32, 16] u8, _scales [E, 2 ff, K / 32] u8
//     (rows of the output features, gate and up interleaved, gate first)
//   mlp.experts.down_proj_blocks    [E, dim, ff / 32, 16] u8, _scales [E, dim, ff / 32] u8
// become ffn_gate_exps / ffn_up_exps / ffn_down_exps in GGML's MXFP4, a row
// an output feature as llama.cpp's converter writes them.
void HFDirectory::map_packed_experts(const std::string& blk, const std::string& part, const SafeTensor& blocks,
                                     const SafeTensor& scales) {
    const std::string what = "tensors '" + blocks.name + "' and '" + scales.name + "'";
    if (blocks.dtype != "U8" || scales.dtype != "U8")
        throw FormatError(what + ": MXFP4 blocks and scales are bytes (U8), not " + blocks.dtype + " / " + scales.dtype);
    if (blocks.shape.size() != 4 || blocks.shape[3] != 16 || scales.shape.size() != 3 ||
        !std::equal(scales.shape.begin(), scales.shape.end(), blocks.shape.begin()))
        throw FormatError(what + " are not MXFP4 blocks [experts, rows, groups, 16] with scales [experts, rows, groups]");
    const uint64_t E = blocks.shape[0], rows = blocks.shape[1], groups = blocks.shape[2];
    if (E == 0 || rows == 0 || groups == 0) throw FormatError(what + " are empty");
    const bool gate_up = part == "gate_up_proj";
    if (gate_up && rows % 2 != 0) throw FormatError(what + ": gate and up rows interleaved need an even count");
    const uint64_t block_bytes = 17, row_bytes = groups * block_bytes;
    auto convert = [&](const std::string& name, uint64_t n_rows, uint64_t first, uint64_t step) {
        uint8_t* dst = own(E * n_rows * row_bytes);
        for (uint64_t e = 0; e < E; e++)
            for (uint64_t r = 0; r < n_rows; r++) {
                const uint64_t src_row = e * rows + first + r * step;  // (expert, row) in the file
                for (uint64_t g = 0; g < groups; g++)
                    mxfp4_block_from_packed(blocks.data + (src_row * groups + g) * 16, scales.data[src_row * groups + g],
                                            dst + ((e * n_rows + r) * groups + g) * block_bytes);
            }
        GGUFTensorInfo ti;
        ti.name = blk + name + ".weight";
        ti.type = GGML_MXFP4;
        ti.shape = {groups * 32, n_rows, E};
        ti.n_bytes = E * n_rows * row_bytes;
        ti.data = dst;
        add_tensor(std::move(ti));
    };
    if (gate_up) {
        convert("ffn_gate_exps", rows / 2, 0, 2);
        convert("ffn_up_exps", rows / 2, 1, 2);
    } else {
        convert("ffn_down_exps", rows, 0, 1);
    }
}

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
    std::map<std::pair<long, std::string>, PackedExperts> packed;  // (layer, matrix) -> its MXFP4 tensors
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
            const bool is_blocks = part.size() > 7 && part.compare(part.size() - 7, 7, "_blocks") == 0;
            if (is_blocks || (part.size() > 7 && part.compare(part.size() - 7, 7, "_scales") == 0)) {
                const std::string matrix = part.substr(0, part.size() - 7);
                if (matrix != "gate_up_proj" && matrix != "down_proj")
                    throw UnsupportedError("tensor '" + t.name + "': an MXFP4-packed expert tensor akunu does not know");
                PackedExperts& pe = packed[{layer, matrix}];
                (is_blocks ? pe.blocks : pe.scales) = &t;
                continue;
            }
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
    for (const auto& [key, pe] : packed) {
        const std::string blk = "blk." + std::to_string(key.first) + ".";
        if (!pe.blocks || !pe.scales)
            throw FormatError("layer " + std::to_string(key.first) + "'s MXFP4 experts '" + key.second + "' have " +
                              (pe.blocks ? "blocks but no scales" : "scales but no blocks"));
        map_packed_experts(blk, key.second, *pe.blocks, *pe.scales);
    }
}

}  // namespace akunu
