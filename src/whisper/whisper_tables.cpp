#include "whisper/whisper_tables.h"

#include <cmath>
#include <cstddef>

#include "core/command_builder.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"

namespace akunu {
namespace {

// Emits commands whose token count is either fixed (the encoder always runs a
// full window) or patched per replay (`patch`, the decoder).
struct Emitter {
    Device& dev;
    bool patch;
    bool decode;  // GEMV kernels
    float eps;
    DispatchTable t;

    void matmul(const char* label, const Weight& w, const Weight* bias, Buffer x, uint32_t x_stride, Buffer y,
                uint32_t y_stride, uint32_t n, bool head = false) {
        const DTypeDescriptor* dt = dtype_lookup(w.dtype);
        MatmulParams p{(uint32_t)w.shape[1], (uint32_t)w.shape[0], n, w.dtype, x_stride, y_stride, bias ? 1u : 0u, 0, 0, 0};
        Cmd cmd(t, dev, decode ? dt->gemv_kernel : dt->gemm_kernel, label);
        cmd.buf(w.buf).buf(x).buf(y);
        if (bias) cmd.buf(bias->buf);
        cmd.params(p);
        if (patch) cmd.patch_n(offsetof(MatmulParams, n_tokens));
        if (head) cmd.head();
        cmd.emit();
    }
    void layernorm(const char* label, Buffer x, const Weight& w, const Weight& b, Buffer y, uint32_t dim, uint32_t n,
                   bool head = false) {
        NormParams p{dim, n, 1, dim, eps, 0.0f, 0, dim};
        Cmd cmd(t, dev, "layernorm", label);
        cmd.buf(x).buf(w.buf).buf(y).buf(b.buf).params(p);
        if (patch) cmd.patch_n(offsetof(NormParams, n_tokens));
        if (head) cmd.head().patch_row0(offsetof(NormParams, row0));
        cmd.emit();
    }
    void add(const char* label, Buffer x, Buffer y, uint32_t dim, uint32_t n) {
        AddParams p{dim, n};
        Cmd cmd(t, dev, "add_inplace", label);
        cmd.buf(x).buf(y).params(p);
        if (patch) cmd.patch_n(offsetof(AddParams, n_tokens));
        cmd.emit();
    }
    void gelu(const char* label, Buffer x, uint32_t width, uint32_t n) {
        AddParams p{width, n};
        Cmd cmd(t, dev, "gelu_erf", label);
        cmd.buf(x).params(p);
        if (patch) cmd.patch_n(offsetof(AddParams, n_tokens));
        cmd.emit();
    }
    void im2col(const char* label, Buffer x, Buffer col, uint32_t channels, uint32_t n_out, uint32_t in_len,
                uint32_t stride) {
        Im2ColParams p{channels, n_out, in_len, 3, stride, 1};
        Cmd(t, dev, "im2col_1d", label).buf(x).buf(col).params(p).emit();
    }
    void add_positions(Buffer h, const Weight& table, uint32_t dim, uint32_t n) {
        AddRowsParams p{dim, n, 0, 0};
        Cmd cmd(t, dev, "add_rows", "positions");
        cmd.buf(h).buf(table.buf).buf(h).params(p);
        if (patch) cmd.patch_n(offsetof(AddRowsParams, n_tokens)).patch_pos(offsetof(AddRowsParams, pos0));
        cmd.emit();
    }
    void kv_write(Buffer k, Buffer v, Buffer kc, Buffer vc, uint32_t kvd, uint32_t n, uint32_t max_ctx) {
        KVWriteParams p{kvd, n, 0, kvd, kvd, max_ctx, kKvF16, kKvF16};  // (Whisper's caches are F16)
        Cmd cmd(t, dev, "kv_write", "kv_write");
        cmd.buf(k).buf(v).buf(kc).buf(vc).params(p);
        if (patch) cmd.patch_n(offsetof(KVWriteParams, n_tokens)).patch_pos(offsetof(KVWriteParams, pos0));
        cmd.emit();
    }
    // causal: self-attention over the cache up to each token; else n_keys fixed
    // keys (cross-attention), or the whole pass (encoder, n_keys = 0).
    void attention(const char* label, Buffer q, Buffer kc, Buffer vc, Buffer out, uint32_t heads, uint32_t dim,
                   uint32_t n, uint32_t max_ctx, bool causal, uint32_t n_keys) {
        const uint32_t hd = dim / heads;
        AttentionParams p{heads, heads, hd, n, 0, 0u, dim, dim, 1.0f / std::sqrt((float)hd), max_ctx,
                          causal ? 1u : 0u, 0, n_keys, kKvF16, kKvF16, 0.0f, 0u};
        Cmd cmd(t, dev, "attention", label);
        cmd.buf(q).buf(kc).buf(vc).buf(out).params(p);
        if (patch) cmd.patch_n(offsetof(AttentionParams, n_tokens));
        if (patch && causal) cmd.patch_pos(offsetof(AttentionParams, pos0));
        cmd.emit();
    }
    void ffn(const WhisperLayerWeights& L, const ScratchBuffers& s, uint32_t dim, uint32_t ff, uint32_t n) {
        layernorm("ffn_norm", s.h, L.ffn_norm, L.ffn_norm_b, s.xn, dim, n);
        matmul("up_proj", L.up, &L.b_up, s.xn, dim, s.up, ff, n);
        gelu("activation", s.up, ff, n);
        matmul("down_proj", L.down, &L.b_down, s.up, ff, s.proj, dim, n);
        add("ffn_residual", s.h, s.proj, dim, n);
    }
};

}  // namespace

DispatchTable build_whisper_encoder_table(Device& dev, const WhisperConfig& c, const WhisperWeights& w,
                                          const ScratchBuffers& s, const WhisperAudioBuffers& audio,
                                          const KVCache& enc_kv, const KVCache& cross_kv) {
    Emitter e{dev, false, false, c.eps, {}};
    const uint32_t d = (uint32_t)c.enc_dim, n = (uint32_t)c.n_audio_ctx, frames = (uint32_t)c.n_frames();
    // conv1 (stride 1) and conv2 (stride 2), kernel 3, padding 1, each + GELU
    e.im2col("conv1_columns", audio.mel, audio.col, (uint32_t)c.n_mels, frames, frames, 1);
    e.matmul("conv1", w.conv1, &w.conv1_b, audio.col, 3 * (uint32_t)c.n_mels, audio.conv, d, frames);
    e.gelu("conv1_gelu", audio.conv, d, frames);
    e.im2col("conv2_columns", audio.conv, audio.col, d, n, frames, 2);
    e.matmul("conv2", w.conv2, &w.conv2_b, audio.col, 3 * d, s.h, d, n);
    e.gelu("conv2_gelu", s.h, d, n);
    e.add_positions(s.h, w.enc_positions, d, n);
    for (const WhisperLayerWeights& L : w.enc) {
        const WhisperAttentionWeights& a = L.self;
        e.layernorm("attn_norm", s.h, a.norm, a.norm_b, s.xn, d, n);
        e.matmul("q_proj", a.wq, &a.bq, s.xn, d, s.q, d, n);
        e.matmul("k_proj", a.wk, a.has_bk ? &a.bk : nullptr, s.xn, d, s.k, d, n);
        e.matmul("v_proj", a.wv, &a.bv, s.xn, d, s.v, d, n);
        e.kv_write(s.k, s.v, enc_kv.k[0], enc_kv.v[0], d, n, (uint32_t)enc_kv.n_ctx);
        e.attention("attention", s.q, enc_kv.k[0], enc_kv.v[0], s.attn, (uint32_t)c.enc_heads, d, n,
                    (uint32_t)enc_kv.n_ctx, false, 0);
        e.matmul("o_proj", a.wo, &a.bo, s.attn, d, s.proj, d, n);
        e.add("attn_residual", s.h, s.proj, d, n);
        e.ffn(L, s, d, (uint32_t)c.enc_ffn, n);
    }
    e.layernorm("output_norm", s.h, w.enc_norm, w.enc_norm_b, s.xn, d, n);
    // cross-attention K/V of every decoder layer, once per window
    const uint32_t dd = (uint32_t)c.dim;
    for (size_t l = 0; l < w.dec.size(); l++) {
        const WhisperAttentionWeights& x = w.dec[l].cross;
        e.matmul("cross_k_proj", x.wk, x.has_bk ? &x.bk : nullptr, s.xn, d, s.k, dd, n);
        e.matmul("cross_v_proj", x.wv, &x.bv, s.xn, d, s.v, dd, n);
        e.kv_write(s.k, s.v, cross_kv.k[l], cross_kv.v[l], dd, n, (uint32_t)cross_kv.n_ctx);
    }
    return std::move(e.t);
}

DispatchTable build_whisper_decoder_table(Device& dev, const WhisperConfig& c, const WhisperWeights& w,
                                          const ScratchBuffers& s, const KVCache& self_kv, const KVCache& cross_kv,
                                          bool decode) {
    Emitter e{dev, true, decode, c.eps, {}};
    const uint32_t d = (uint32_t)c.dim, heads = (uint32_t)c.n_heads;
    {
        EmbeddingParams p{d, 1, w.tok_embd.dtype, 1.0f};
        Cmd(e.t, dev, dtype_lookup(w.tok_embd.dtype)->embedding_kernel, "embedding")
            .buf(w.tok_embd.buf).buf(s.prompt_ids).buf(s.h)
            .params(p).patch_n(offsetof(EmbeddingParams, n_tokens)).emit();
    }
    e.add_positions(s.h, w.dec_positions, d, 1);
    for (size_t l = 0; l < w.dec.size(); l++) {
        const WhisperLayerWeights& L = w.dec[l];
        const WhisperAttentionWeights &a = L.self, &x = L.cross;
        e.layernorm("attn_norm", s.h, a.norm, a.norm_b, s.xn, d, 1);
        e.matmul("q_proj", a.wq, &a.bq, s.xn, d, s.q, d, 1);
        e.matmul("k_proj", a.wk, a.has_bk ? &a.bk : nullptr, s.xn, d, s.k, d, 1);
        e.matmul("v_proj", a.wv, &a.bv, s.xn, d, s.v, d, 1);
        e.kv_write(s.k, s.v, self_kv.k[l], self_kv.v[l], d, 1, (uint32_t)self_kv.n_ctx);
        e.attention("attention", s.q, self_kv.k[l], self_kv.v[l], s.attn, heads, d, 1, (uint32_t)self_kv.n_ctx,
                    true, 0);
        e.matmul("o_proj", a.wo, &a.bo, s.attn, d, s.proj, d, 1);
        e.add("attn_residual", s.h, s.proj, d, 1);
        e.layernorm("cross_attn_norm", s.h, x.norm, x.norm_b, s.xn, d, 1);
        e.matmul("cross_q_proj", x.wq, &x.bq, s.xn, d, s.q, d, 1);
        e.attention("cross_attention", s.q, cross_kv.k[l], cross_kv.v[l], s.attn, heads, d, 1,
                    (uint32_t)cross_kv.n_ctx, false, (uint32_t)c.n_audio_ctx);
        e.matmul("cross_o_proj", x.wo, &x.bo, s.attn, d, s.proj, d, 1);
        e.add("cross_attn_residual", s.h, s.proj, d, 1);
        e.ffn(L, s, d, (uint32_t)c.ffn_dim, 1);
    }
    // output head: the last row only, projected by the token embedding (tied)
    e.layernorm("output_norm", s.h, w.out_norm, w.out_norm_b, s.xn, d, 1, true);
    e.matmul("lm_head", w.tok_embd, nullptr, s.xn, d, s.logits, (uint32_t)c.vocab_size, 1, true);
    return std::move(e.t);
}

}  // namespace akunu
