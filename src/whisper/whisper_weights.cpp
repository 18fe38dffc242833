#include "whisper/whisper_weights.h"

namespace akunu {

namespace {

WhisperAttentionWeights attention(WeightProvider& wp, const std::string& p, uint64_t dim, uint64_t kv_in) {
    WhisperAttentionWeights a;
    a.norm = wp.vector_f32(p + "_norm.weight", dim);
    a.norm_b = wp.vector_f32(p + "_norm.bias", dim);
    a.wq = wp.matrix(p + "_q.weight", dim, dim);
    a.bq = wp.vector_f32(p + "_q.bias", dim);
    a.wk = wp.matrix(p + "_k.weight", kv_in, dim);
    a.has_bk = wp.has(p + "_k.bias");
    if (a.has_bk) a.bk = wp.vector_f32(p + "_k.bias", dim);
    a.wv = wp.matrix(p + "_v.weight", kv_in, dim);
    a.bv = wp.vector_f32(p + "_v.bias", dim);
    a.wo = wp.matrix(p + "_output.weight", dim, dim);
    a.bo = wp.vector_f32(p + "_output.bias", dim);
    return a;
}

void ffn(WeightProvider& wp, const std::string& p, uint64_t dim, uint64_t ff, WhisperLayerWeights& L) {
    L.ffn_norm = wp.vector_f32(p + "ffn_norm.weight", dim);
    L.ffn_norm_b = wp.vector_f32(p + "ffn_norm.bias", dim);
    L.up = wp.matrix(p + "ffn_up.weight", dim, ff);
    L.b_up = wp.vector_f32(p + "ffn_up.bias", ff);
    L.down = wp.matrix(p + "ffn_down.weight", ff, dim);
    L.b_down = wp.vector_f32(p + "ffn_down.bias", dim);
}

// Position tables are added by add_rows, which reads F32 rows.
Weight positions(WeightProvider& wp, const std::string& name, uint64_t dim, uint64_t n) {
    return wp.upload_f32(wp.read_f32(name, {dim, n}), {dim, n});
}

}  // namespace

WhisperWeights resolve_whisper_weights(WeightProvider& wp, const WhisperConfig& c) {
    WhisperWeights w;
    const uint64_t ed = (uint64_t)c.enc_dim, dd = (uint64_t)c.dim;
    w.conv1 = wp.matrix("enc.conv1.weight", 3 * (uint64_t)c.n_mels, ed);
    w.conv1_b = wp.vector_f32("enc.conv1.bias", ed);
    w.conv2 = wp.matrix("enc.conv2.weight", 3 * ed, ed);
    w.conv2_b = wp.vector_f32("enc.conv2.bias", ed);
    w.enc_positions = positions(wp, "enc.position_embd.weight", ed, (uint64_t)c.n_audio_ctx);
    for (int l = 0; l < c.enc_layers; l++) {
        const std::string p = "enc.blk." + std::to_string(l) + ".";
        WhisperLayerWeights L;
        L.self = attention(wp, p + "attn", ed, ed);
        ffn(wp, p, ed, (uint64_t)c.enc_ffn, L);
        w.enc.push_back(L);
    }
    w.enc_norm = wp.vector_f32("enc.output_norm.weight", ed);
    w.enc_norm_b = wp.vector_f32("enc.output_norm.bias", ed);
    w.tok_embd = wp.matrix("token_embd.weight", dd, (uint64_t)c.vocab_size);
    w.dec_positions = positions(wp, "position_embd.weight", dd, (uint64_t)c.n_text_ctx);
    for (int l = 0; l < c.n_layers; l++) {
        const std::string p = "blk." + std::to_string(l) + ".";
        WhisperLayerWeights L;
        L.self = attention(wp, p + "attn", dd, dd);
        L.cross = attention(wp, p + "cross_attn", dd, ed);
        ffn(wp, p, dd, (uint64_t)c.ffn_dim, L);
        w.dec.push_back(L);
    }
    w.out_norm = wp.vector_f32("output_norm.weight", dd);
    w.out_norm_b = wp.vector_f32("output_norm.bias", dd);
    return w;
}

}  // namespace akunu
