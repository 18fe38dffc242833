#include "whisper/whisper_config.h"

#include "core/error.h"

namespace akunu {

namespace {
ModelConfig shape(int dim, int heads, int ffn, int vocab, float eps) {
    ModelConfig c;
    c.architecture = "whisper";
    c.dim = dim;
    c.n_heads = c.n_kv_heads = heads;
    c.head_dim = dim / heads;
    c.ffn_dim = ffn;
    c.vocab_size = vocab;
    c.norm_eps = eps;
    return c;
}
}  // namespace

ModelConfig WhisperConfig::encoder_shape() const { return shape(enc_dim, enc_heads, enc_ffn, 1, eps); }
ModelConfig WhisperConfig::decoder_shape() const { return shape(dim, n_heads, ffn_dim, vocab_size, eps); }

WhisperConfig whisper_config_from_file(const ModelFile& f) {
    WhisperConfig c;
    auto get = [&](const std::string& key, int64_t lo, int64_t hi) {
        if (!f.has(key)) throw FormatError("Whisper metadata '" + key + "' is missing");
        const int64_t v = f.get_int(key, 0);
        if (v < lo || v > hi)
            throw FormatError("Whisper metadata '" + key + "' = " + std::to_string(v) + " is outside [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return (int)v;
    };
    c.n_mels = get("whisper.n_mels", 1, 512);
    c.n_audio_ctx = get("whisper.encoder.context_length", 1, 8192);
    c.enc_dim = get("whisper.encoder.embedding_length", 1, 16384);
    c.enc_layers = get("whisper.encoder.block_count", 1, 256);
    c.enc_heads = get("whisper.encoder.attention.head_count", 1, 256);
    c.enc_ffn = get("whisper.encoder.feed_forward_length", 1, 65536);
    c.n_text_ctx = get("whisper.context_length", 1, 8192);
    c.dim = get("whisper.embedding_length", 1, 16384);
    c.n_layers = get("whisper.block_count", 1, 256);
    c.n_heads = get("whisper.attention.head_count", 1, 256);
    c.ffn_dim = get("whisper.feed_forward_length", 1, 65536);
    c.eps = (float)f.get_float("whisper.attention.layer_norm_epsilon", 1e-5);
    if (!(c.eps > 0 && c.eps < 1)) throw FormatError("Whisper layer_norm_epsilon is out of range");
    if (c.enc_dim % c.enc_heads || c.dim % c.n_heads)
        throw FormatError("Whisper widths are not multiples of their head counts");
    if (c.enc_dim / c.enc_heads > 256 || c.dim / c.n_heads > 256)
        throw UnsupportedError("Whisper head dimensions above 256 are not supported");
    const GGUFTensorInfo* embd = f.tensor("token_embd.weight");
    if (!embd || embd->shape.size() != 2) throw FormatError("tensor 'token_embd.weight' is missing or not 2-D");
    if (embd->shape[1] == 0 || embd->shape[1] > (1u << 20)) throw FormatError("implausible Whisper vocabulary size");
    c.vocab_size = (int)embd->shape[1];
    return c;
}

}  // namespace akunu
