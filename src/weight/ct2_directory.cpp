#include "weight/ct2_directory.h"

#include <sys/stat.h>

#include <cstring>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "weight/json.h"
#include "weight/whisper_names.h"

namespace akunu {
namespace {

bool is_file(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Bounds-checked reads from the mapping; every failure names the offset.
struct Reader {
    const uint8_t* p;
    size_t size, off = 0;
    std::string what;

    const uint8_t* take(size_t n) {
        if (n > size - off)
            throw FormatError(what + ": truncated at byte " + std::to_string(off) + " (needs " + std::to_string(n) +
                              " more bytes, file has " + std::to_string(size) + ")");
        const uint8_t* r = p + off;
        off += n;
        return r;
    }
    template <typename T>
    T read() {
        T v;
        std::memcpy(&v, take(sizeof(T)), sizeof(T));
        return v;
    }
    std::string string() {  // uint16 length including the terminating NUL
        const uint16_t n = read<uint16_t>();
        if (n == 0) throw FormatError(what + ": empty string at byte " + std::to_string(off));
        const char* s = (const char*)take(n);
        if (s[n - 1] != '\0') throw FormatError(what + ": unterminated string at byte " + std::to_string(off - n));
        return std::string(s, n - 1);
    }
};

size_t ct2_item_size(uint8_t dtype) {
    switch (dtype) {
        case 0: case 3: return 4;
        case 1: return 1;
        case 2: case 4: case 5: return 2;
        default: return 0;
    }
}

uint32_t ggml_float_type(uint8_t dtype) {
    switch (dtype) {
        case 0: return GGML_F32;
        case 4: return GGML_F16;
        case 5: return GGML_BF16;
        default: return UINT32_MAX;
    }
}

}  // namespace

bool CT2Directory::is_ct2_directory(const std::string& dir) {
    return is_file(dir + "/model.bin") && is_file(dir + "/config.json");
}

CT2Directory::CT2Directory(const std::string& dir) : dir_(dir) {
    file_ = std::make_unique<MappedFile>(dir_ + "/model.bin");
    parse_model_bin();
    map_whisper();
    read_config();
}

void CT2Directory::parse_model_bin() {
    Reader r{file_->data(), file_->size(), 0, "'" + dir_ + "/model.bin'"};
    const uint32_t version = r.read<uint32_t>();
    if (version < 4 || version > 6)
        throw UnsupportedError(r.what + ": CTranslate2 binary version " + std::to_string(version) +
                               " is not supported (4 to 6)");
    const std::string spec = r.string();
    r.read<uint32_t>();  // spec revision
    if (spec != "WhisperSpec")
        throw UnsupportedError(r.what + ": CTranslate2 model '" + spec + "' is not supported (only WhisperSpec)");
    const uint32_t n_vars = r.read<uint32_t>();
    if (n_vars > 100000) throw FormatError(r.what + ": implausible variable count " + std::to_string(n_vars));
    for (uint32_t i = 0; i < n_vars; i++) {
        Variable v;
        v.name = r.string();
        const uint8_t rank = r.read<uint8_t>();
        if (rank > 4) throw FormatError(r.what + ": variable '" + v.name + "' has rank " + std::to_string(rank));
        uint64_t count = 1;
        for (uint8_t d = 0; d < rank; d++) {
            v.dims.push_back(r.read<uint32_t>());
            if (v.dims.back() == 0 || v.dims.back() > (1ull << 40) / count)  // checked before it can overflow
                throw FormatError(r.what + ": variable '" + v.name + "' has a bad shape");
            count *= v.dims.back();
        }
        v.dtype = r.read<uint8_t>();
        const size_t item = ct2_item_size(v.dtype);
        if (!item)
            throw FormatError(r.what + ": variable '" + v.name + "' has unknown dtype " + std::to_string(v.dtype));
        v.n_bytes = r.read<uint32_t>();
        if (v.n_bytes != count * item)
            throw FormatError(r.what + ": variable '" + v.name + "' has " + std::to_string(v.n_bytes) +
                              " bytes for " + std::to_string(count) + " elements of " + std::to_string(item) +
                              " bytes");
        v.data = r.take(v.n_bytes);
        if (!vars_.emplace(v.name, v).second) throw FormatError(r.what + ": variable '" + v.name + "' appears twice");
    }
    const uint32_t n_aliases = r.read<uint32_t>();
    if (n_aliases > 100000) throw FormatError(r.what + ": implausible alias count");
    for (uint32_t i = 0; i < n_aliases; i++) {
        std::string alias = r.string(), target = r.string();
        auto it = vars_.find(target);
        if (it == vars_.end())
            throw FormatError(r.what + ": alias '" + alias + "' names unknown variable '" + target + "'");
        Variable v = it->second;
        v.name = alias;
        vars_.emplace(alias, v);
    }
}

const CT2Directory::Variable& CT2Directory::var(const std::string& name) const {
    auto it = vars_.find(name);
    if (it == vars_.end()) throw FormatError("'" + dir_ + "/model.bin' has no variable '" + name + "'");
    return it->second;
}

int64_t CT2Directory::scalar(const std::string& name) const {
    const Variable& v = var(name);
    if (!v.dims.empty()) throw FormatError("CTranslate2 variable '" + name + "' is not a scalar");
    switch (v.dtype) {
        case 1: return (int8_t)v.data[0];
        case 2: { int16_t x; std::memcpy(&x, v.data, 2); return x; }
        case 3: { int32_t x; std::memcpy(&x, v.data, 4); return x; }
        default: throw FormatError("CTranslate2 variable '" + name + "' is not an integer");
    }
}

void CT2Directory::add_rows(const std::string& name, const std::string& gguf, uint64_t row0, uint64_t rows) {
    const Variable& v = var(name);
    const uint64_t n_rows = v.dims.empty() ? 1 : v.dims[0];
    uint64_t row_elems = 1;
    for (size_t i = 1; i < v.dims.size(); i++) row_elems *= v.dims[i];
    if (rows == 0) rows = n_rows - row0;
    if (row0 + rows > n_rows) throw FormatError("CTranslate2 variable '" + name + "' has too few rows to split");
    GGUFTensorInfo t;
    t.name = gguf;
    t.shape.assign(v.dims.rbegin(), v.dims.rend());
    t.shape.back() = rows;
    const size_t n = (size_t)(rows * row_elems);
    if (v.dtype == 1) {  // int8 with a float32 scale per row: w = q / scale
        const Variable& s = var(name + "_scale");
        if (s.dtype != 0 || s.dims.size() != 1 || s.dims[0] != n_rows)
            throw FormatError("CTranslate2 int8 variable '" + name + "' has no matching per-row scale");
        owned_.emplace_back(new uint8_t[n * 4]);
        float* out = reinterpret_cast<float*>(owned_.back().get());
        for (uint64_t r = 0; r < rows; r++) {
            float scale;
            std::memcpy(&scale, s.data + 4 * (row0 + r), 4);
            if (!(scale != 0.0f)) throw FormatError("CTranslate2 variable '" + name + "' has a zero scale");
            const int8_t* q = reinterpret_cast<const int8_t*>(v.data) + (row0 + r) * row_elems;
            for (uint64_t c = 0; c < row_elems; c++) out[r * row_elems + c] = (float)q[c] / scale;
        }
        t.type = GGML_F32;
        t.data = owned_.back().get();
        t.n_bytes = n * 4;
    } else {
        t.type = ggml_float_type(v.dtype);
        if (t.type == UINT32_MAX)
            throw UnsupportedError("CTranslate2 variable '" + name + "' has dtype " + std::to_string(v.dtype) +
                                   " (supported: float32, float16, bfloat16, int8)");
        const size_t item = ct2_item_size(v.dtype);
        t.data = v.data + row0 * row_elems * item;
        t.n_bytes = n * item;
    }
    if (gguf.rfind("enc.conv", 0) == 0 && gguf.size() > 7 && gguf.compare(gguf.size() - 7, 7, ".weight") == 0)
        flatten_conv_weight(t);
    add_tensor(std::move(t));
}

void CT2Directory::map_whisper() {
    auto count_layers = [&](const std::string& side) {
        int n = 0;
        while (vars_.count(side + "/layer_" + std::to_string(n) + "/ffn/linear_0/weight")) n++;
        if (n == 0) throw FormatError("'" + dir_ + "/model.bin' has no " + side + " layers");
        return n;
    };
    const int n_enc = count_layers("encoder"), n_dec = count_layers("decoder");
    if (scalar("decoder/scale_embeddings") != 0 || scalar("decoder/pre_norm") != 1 || scalar("decoder/alibi") != 0)
        throw UnsupportedError("'" + dir_ + "': this CTranslate2 decoder layout is not Whisper's");
    if (scalar("decoder/activation") != 3)
        throw UnsupportedError("'" + dir_ + "': the CTranslate2 activation is not GELU");

    const Variable& conv1 = var("encoder/conv1/weight");
    const Variable& enc_pos = var("encoder/position_encodings/encodings");
    const Variable& dec_pos = var("decoder/position_encodings/encodings");
    const Variable& embd = var("decoder/embeddings/weight");
    if (conv1.dims.size() != 3 || enc_pos.dims.size() != 2 || dec_pos.dims.size() != 2 || embd.dims.size() != 2)
        throw FormatError("'" + dir_ + "/model.bin': unexpected Whisper variable shapes");
    const uint64_t d = conv1.dims[0];
    kv_["general.architecture"] = gguf_string("whisper");
    kv_["general.name"] = gguf_string(dir_);
    kv_["whisper.n_mels"] = gguf_int((int64_t)conv1.dims[1]);
    kv_["whisper.encoder.context_length"] = gguf_int((int64_t)enc_pos.dims[0]);
    kv_["whisper.encoder.embedding_length"] = gguf_int((int64_t)d);
    kv_["whisper.encoder.block_count"] = gguf_int(n_enc);
    kv_["whisper.encoder.attention.head_count"] = gguf_int(scalar("encoder/num_heads"));
    kv_["whisper.encoder.feed_forward_length"] = gguf_int((int64_t)var("encoder/layer_0/ffn/linear_0/weight").dims[0]);
    kv_["whisper.context_length"] = gguf_int((int64_t)dec_pos.dims[0]);
    kv_["whisper.embedding_length"] = gguf_int((int64_t)embd.dims[1]);
    kv_["whisper.block_count"] = gguf_int(n_dec);
    kv_["whisper.attention.head_count"] = gguf_int(scalar("decoder/num_heads"));
    kv_["whisper.feed_forward_length"] = gguf_int((int64_t)var("decoder/layer_0/ffn/linear_0/weight").dims[0]);
    kv_["whisper.attention.layer_norm_epsilon"] = gguf_float(1e-5);

    auto norm = [&](const std::string& src, const std::string& dst) {
        add_rows(src + "/gamma", dst + ".weight");
        add_rows(src + "/beta", dst + ".bias");
    };
    auto linear = [&](const std::string& src, const std::string& dst, uint64_t row0 = 0, uint64_t rows = 0) {
        add_rows(src + "/weight", dst + ".weight", row0, rows);
        add_rows(src + "/bias", dst + ".bias", row0, rows);
    };
    auto self_attention = [&](const std::string& src, const std::string& dst) {
        const uint64_t n = var(src + "/linear_0/weight").dims[0] / 3;
        norm(src + "/layer_norm", dst + ".attn_norm");
        linear(src + "/linear_0", dst + ".attn_q", 0, n);
        linear(src + "/linear_0", dst + ".attn_k", n, n);
        linear(src + "/linear_0", dst + ".attn_v", 2 * n, n);
        linear(src + "/linear_1", dst + ".attn_output");
    };
    auto ffn = [&](const std::string& src, const std::string& dst) {
        norm(src + "/layer_norm", dst + ".ffn_norm");
        linear(src + "/linear_0", dst + ".ffn_up");
        linear(src + "/linear_1", dst + ".ffn_down");
    };
    linear("encoder/conv1", "enc.conv1");
    linear("encoder/conv2", "enc.conv2");
    add_rows("encoder/position_encodings/encodings", "enc.position_embd.weight");
    for (int l = 0; l < n_enc; l++) {
        const std::string src = "encoder/layer_" + std::to_string(l), dst = "enc.blk." + std::to_string(l);
        self_attention(src + "/self_attention", dst);
        ffn(src + "/ffn", dst);
    }
    norm("encoder/layer_norm", "enc.output_norm");
    add_rows("decoder/embeddings/weight", "token_embd.weight");
    add_rows("decoder/position_encodings/encodings", "position_embd.weight");
    for (int l = 0; l < n_dec; l++) {
        const std::string src = "decoder/layer_" + std::to_string(l), dst = "blk." + std::to_string(l);
        self_attention(src + "/self_attention", dst);
        const std::string cross = src + "/attention";
        const uint64_t n = var(cross + "/linear_1/weight").dims[0] / 2;
        norm(cross + "/layer_norm", dst + ".cross_attn_norm");
        linear(cross + "/linear_0", dst + ".cross_attn_q");
        linear(cross + "/linear_1", dst + ".cross_attn_k", 0, n);
        linear(cross + "/linear_1", dst + ".cross_attn_v", n, n);
        linear(cross + "/linear_2", dst + ".cross_attn_output");
        ffn(src + "/ffn", dst);
    }
    norm("decoder/layer_norm", "output_norm");
}

void CT2Directory::read_config() {
    const std::string path = dir_ + "/config.json";
    JsonValue c = read_json_file(path);
    const std::string what = "'" + path + "'";
    put_token_ids(c.get("suppress_ids"), "whisper.suppress_tokens", what, kv_);
    put_token_ids(c.get("suppress_ids_begin"), "whisper.begin_suppress_tokens", what, kv_);
}

}  // namespace akunu
