#include "core/model_weights.h"

#include "core/arch_descriptor.h"
#include "core/error.h"
#include "core/model_config.h"

namespace akunu {

// BERT (llama.cpp's GGUF names): post-norm blocks, every projection biased.
static ModelWeights resolve_encoder_weights(WeightProvider& wp, const ModelConfig& c) {
    ModelWeights w;
    const uint64_t dim = (uint64_t)c.dim, ff = (uint64_t)c.ffn_dim, ctx = (uint64_t)c.context_length;
    w.tok_embd = wp.matrix("token_embd.weight", dim, (uint64_t)c.vocab_size);
    std::vector<float> pos = wp.read_f32("position_embd.weight", {dim, ctx});
    if (wp.has("token_types.weight")) {  // every token has type 0: fold its row into the positions
        const GGUFTensorInfo* tt = wp.file().tensor("token_types.weight");
        if (tt->shape.size() != 2 || tt->shape[0] != dim || tt->shape[1] < 1 || tt->shape[1] > 16)
            throw FormatError("tensor 'token_types.weight' has an unexpected shape");
        std::vector<float> types = wp.read_f32("token_types.weight", tt->shape);
        for (uint64_t p = 0; p < ctx; p++)
            for (uint64_t i = 0; i < dim; i++) pos[p * dim + i] += types[i];
    }
    w.positions = wp.upload_f32(pos, {dim, ctx});
    w.embd_norm = wp.vector_f32("token_embd_norm.weight", dim);
    w.embd_norm_b = wp.vector_f32("token_embd_norm.bias", dim);
    for (int l = 0; l < c.n_layers; l++) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights L;
        L.wq = wp.matrix(p + "attn_q.weight", dim, dim);
        L.bq = wp.vector_f32(p + "attn_q.bias", dim);
        L.wk = wp.matrix(p + "attn_k.weight", dim, dim);
        L.bk = wp.vector_f32(p + "attn_k.bias", dim);
        L.wv = wp.matrix(p + "attn_v.weight", dim, dim);
        L.bv = wp.vector_f32(p + "attn_v.bias", dim);
        L.wo = wp.matrix(p + "attn_output.weight", dim, dim);
        L.bo = wp.vector_f32(p + "attn_output.bias", dim);
        L.attn_norm = wp.vector_f32(p + "attn_output_norm.weight", dim);
        L.attn_norm_b = wp.vector_f32(p + "attn_output_norm.bias", dim);
        L.w_up = wp.matrix(p + "ffn_up.weight", dim, ff);
        L.b_up = wp.vector_f32(p + "ffn_up.bias", ff);
        L.w_down = wp.matrix(p + "ffn_down.weight", ff, dim);
        L.b_down = wp.vector_f32(p + "ffn_down.bias", dim);
        L.ffn_norm = wp.vector_f32(p + "layer_output_norm.weight", dim);
        L.ffn_norm_b = wp.vector_f32(p + "layer_output_norm.bias", dim);
        w.layers.push_back(L);
    }
    return w;
}

// The MoE FFN of one layer (llama.cpp's GGUF names).
static void resolve_experts(WeightProvider& wp, const ModelConfig& c, const ArchDescriptor& arch,
                            const std::string& p, LayerWeights& L) {
    const uint64_t dim = (uint64_t)c.dim, n = (uint64_t)c.n_experts, ef = (uint64_t)c.expert_ffn_dim;
    L.gate_inp = wp.matrix(p + "ffn_gate_inp.weight", dim, n);
    L.gate_exps = wp.experts(p + "ffn_gate_exps.weight", dim, ef, n);
    L.up_exps = wp.experts(p + "ffn_up_exps.weight", dim, ef, n);
    L.down_exps = wp.experts(p + "ffn_down_exps.weight", ef, dim, n);
    if (arch.moe_biases) {
        L.b_gate_inp = wp.vector_f32(p + "ffn_gate_inp.bias", n);
        L.b_gate_exps = wp.upload_f32(wp.read_f32(p + "ffn_gate_exps.bias", {ef, n}), {ef, n});
        L.b_up_exps = wp.upload_f32(wp.read_f32(p + "ffn_up_exps.bias", {ef, n}), {ef, n});
        L.b_down_exps = wp.upload_f32(wp.read_f32(p + "ffn_down_exps.bias", {dim, n}), {dim, n});
    }
    if (c.shared_expert_ffn_dim > 0) {
        const uint64_t sf = (uint64_t)c.shared_expert_ffn_dim;
        L.gate_shexp = wp.matrix(p + "ffn_gate_shexp.weight", dim, sf);
        L.up_shexp = wp.matrix(p + "ffn_up_shexp.weight", dim, sf);
        L.down_shexp = wp.matrix(p + "ffn_down_shexp.weight", sf, dim);
        if (arch.moe_shared_gate) {  // a [dim] vector: the one row of a [dim -> 1] matmul
            L.gate_inp_shexp = wp.vector_f32(p + "ffn_gate_inp_shexp.weight", dim);
            L.gate_inp_shexp.shape = {dim, 1};
        }
    }
}

ModelWeights resolve_weights(WeightProvider& wp, const ModelConfig& c, const ArchDescriptor& arch) {
    if (arch.encoder) return resolve_encoder_weights(wp, c);
    ModelWeights w;
    const uint64_t dim = (uint64_t)c.dim, qd = (uint64_t)c.q_dim(), kvd = (uint64_t)c.kv_dim();
    const uint64_t ff = (uint64_t)c.ffn_dim, vocab = (uint64_t)c.vocab_size;
    w.tok_embd = wp.matrix("token_embd.weight", dim, vocab);
    if (c.logit_scale != 1.0f) {
        // Granite's logits / logit_scale, folded into the output norm's
        // weights (the logit projection is linear): (w + offset) / scale,
        // less the offset the norm kernel adds back.
        std::vector<float> g = wp.read_f32("output_norm.weight", {dim});
        for (float& x : g) x = (x + c.norm_weight_offset) / c.logit_scale - c.norm_weight_offset;
        w.output_norm = wp.upload_f32(g, {dim});
    } else {
        w.output_norm = wp.vector_f32("output_norm.weight", dim);
    }
    // Tied embeddings: the logit projection reuses the token embedding.
    w.output = wp.has("output.weight") ? wp.matrix("output.weight", dim, vocab) : w.tok_embd;
    const uint64_t half = (uint64_t)c.head_dim / 2;
    if (!c.rope_yarn_divisors.empty()) {
        // YaRN's divisors times the file's own factors, as llama.cpp divides
        // the angle by both (ggml_rope_cache_init): one table, built once.
        std::vector<float> f = c.rope_yarn_divisors;
        if (wp.has("rope_freqs.weight")) {
            const std::vector<float> own = wp.read_f32("rope_freqs.weight", {half});
            for (size_t i = 0; i < f.size(); i++) f[i] *= own[i];
        }
        w.rope_freqs = wp.upload_f32(f, {half});
        w.has_rope_freqs = true;
    } else if (wp.has("rope_freqs.weight")) {
        w.rope_freqs = wp.vector_f32("rope_freqs.weight", half);
        w.has_rope_freqs = true;
    }
    for (int l = 0; l < c.n_layers; l++) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights L;
        if (arch.has_pre_norm) L.attn_norm = wp.vector_f32(p + "attn_norm.weight", dim);
        if (wp.has(p + "attn_qkv.weight") && !wp.has(p + "attn_q.weight")) {
            // Q, K and V in one tensor (Phi-3; llama.cpp reads it for any family): rows Q, then K, then V
            const std::string qkv = p + "attn_qkv.weight";
            L.wq = wp.matrix_rows(qkv, dim, qd + 2 * kvd, 0, qd);
            L.wk = wp.matrix_rows(qkv, dim, qd + 2 * kvd, qd, kvd);
            L.wv = wp.matrix_rows(qkv, dim, qd + 2 * kvd, qd + kvd, kvd);
        } else {
            L.wq = wp.matrix(p + "attn_q.weight", dim, qd);
            L.wk = wp.matrix(p + "attn_k.weight", dim, kvd);
            L.wv = wp.matrix(p + "attn_v.weight", dim, kvd);
        }
        if (arch.has_qkv_bias) {
            L.bq = wp.vector_f32(p + "attn_q.bias", qd);
            L.bk = wp.vector_f32(p + "attn_k.bias", kvd);
            L.bv = wp.vector_f32(p + "attn_v.bias", kvd);
        }
        if (arch.has_qk_norm) {
            L.q_norm = wp.vector_f32(p + "attn_q_norm.weight", arch.qk_norm_full_width ? qd : (uint64_t)c.head_dim);
            L.k_norm = wp.vector_f32(p + "attn_k_norm.weight", arch.qk_norm_full_width ? kvd : (uint64_t)c.head_dim);
        }
        L.wo = wp.matrix(p + "attn_output.weight", qd, dim);
        if (arch.has_attn_out_bias) L.bo = wp.vector_f32(p + "attn_output.bias", dim);
        if (arch.attn_sinks) L.sinks = wp.vector_f32(p + "attn_sinks.weight", (uint64_t)c.n_heads);
        if (arch.has_post_attn_norm) L.post_attn_norm = wp.vector_f32(p + "post_attention_norm.weight", dim);
        if (arch.has_pre_norm) L.ffn_norm = wp.vector_f32(p + arch.ffn_norm_name + ".weight", dim);
        if (c.n_experts > 0) {
            resolve_experts(wp, c, arch, p, L);
        } else {
            if (arch.ffn_up_holds_gate) {  // SwiGLU over one tensor: silu(first half) * second half
                L.w_gate = wp.matrix_rows(p + "ffn_up.weight", dim, 2 * ff, 0, ff);
                L.w_up = wp.matrix_rows(p + "ffn_up.weight", dim, 2 * ff, ff, ff);
            } else {
                L.w_gate = wp.matrix(p + "ffn_gate.weight", dim, ff);
                L.w_up = wp.matrix(p + "ffn_up.weight", dim, ff);
            }
            L.w_down = wp.matrix(p + "ffn_down.weight", ff, dim);
        }
        if (arch.has_post_ffn_norm) L.post_ffn_norm = wp.vector_f32(p + "post_ffw_norm.weight", dim);
        w.layers.push_back(L);
    }
    return w;
}

}  // namespace akunu
