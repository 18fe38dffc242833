// The fused layer of a batch pass (continuous batching): 9 commands for a
// plain pre-norm layer instead of 16, each row's meaning unchanged.
//   - Q, K and V in one matmul command (matmul_multi), gate and up in
//     another, where each group's weights share a type;
//   - QK norm, RoPE of q and k, and the paged K / V write: one launch
//     (qk_norm_rope_kv_paged) instead of up to five;
//   - each residual add with the RMSNorm after it (the FFN norm, or the next
//     layer's attention norm): one launch (add_rmsnorm), so a layer's
//     attention norm is done by the layer before it;
//   - the paged attention learns which rows are generated (one query a
//     sequence), which a GPU serves with a split kernel of the same meaning.
#include <initializer_list>
#include <tuple>

#include "core/table_builder_detail.h"

namespace akunu {
namespace table_detail {
namespace {

// h += y, then xn = rmsnorm(h) * norm.
void add_rmsnorm(Builder& b, const char* label, Buffer h, Buffer y, const Weight& norm, Buffer xn) {
    const uint32_t dim = (uint32_t)b.c.dim;
    NormParams p{dim, 1, 1, dim, b.c.norm_eps, b.c.norm_weight_offset, 0, dim};
    Cmd(b.t, b.dev, "add_rmsnorm", label).buf(h).buf(y).buf(norm.buf).buf(xn).params(p)
        .patch_n(offsetof(NormParams, n_tokens)).emit();
}

void qk_norm_rope_kv_paged(Builder& b, const ArchDescriptor& arch, const ModelWeights& w, const LayerWeights& L,
                           int l, float base, float scale, float attn) {
    const ModelConfig& c = b.c;
    const ScratchBuffers& s = b.s;
    const PagedKVCache& pk = *b.batch->kv;
    PagedQKRopeKVParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1,
                          arch.has_qk_norm ? 1u : 0u, c.norm_eps, c.norm_weight_offset,
                          arch.rope_neox ? 1u : 0u, w.has_rope_freqs ? 1u : 0u, base, scale, attn,
                          (uint32_t)pk.block_size, (uint32_t)pk.max_blocks, pk.k_type, pk.v_type};
    Cmd cmd(b.t, b.dev, "qk_norm_rope_kv_paged", "qk_norm_rope_kv");
    cmd.buf(s.q).buf(s.k).buf(s.v);
    cmd.buf(arch.has_qk_norm ? L.q_norm.buf : s.q).buf(arch.has_qk_norm ? L.k_norm.buf : s.k);
    cmd.buf(w.has_rope_freqs ? w.rope_freqs.buf : s.q).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]);
    cmd.buf(b.batch->rows).buf(pk.tables);
    cmd.params(p).patch_n(offsetof(PagedQKRopeKVParams, n_tokens)).emit();
}

// y_i = W_i x for matrices of one weight type and K in one command
// (matmul_multi); otherwise each its own matmul.
void matmuls(Builder& b, const char* label, Buffer x, uint32_t x_stride,
             std::initializer_list<std::tuple<const Weight*, Buffer, const Weight*>> mats) {
    const Weight& w0 = *std::get<0>(*mats.begin());
    bool same = !is_mlx_dtype(w0.dtype);
    for (const auto& m : mats) same = same && std::get<0>(m)->dtype == w0.dtype && std::get<0>(m)->shape[0] == w0.shape[0];
    if (!same) {
        for (const auto& m : mats)
            b.matmul(label, *std::get<0>(m), x, x_stride, std::get<1>(m), (uint32_t)std::get<0>(m)->shape[1],
                     std::get<2>(m));
        return;
    }
    MultiMatmulParams p{};
    p.K = (uint32_t)w0.shape[0];  // GGUF order: shape[0] is the row length
    p.n_tokens = 1;
    p.dtype = w0.dtype;
    p.x_stride = x_stride;
    p.n_mats = (uint32_t)mats.size();
    p.has_bias = std::get<2>(*mats.begin()) ? 1u : 0u;
    Buffer W[3], y[3], bias[3];
    int i = 0;
    for (const auto& m : mats) {
        p.N[i] = (uint32_t)std::get<0>(m)->shape[1];
        p.y_stride[i] = p.N[i];
        W[i] = std::get<0>(m)->buf;
        y[i] = std::get<1>(m);
        bias[i] = std::get<2>(m) ? std::get<2>(m)->buf : W[i];
        i++;
    }
    for (; i < 3; i++) {  // unused slots repeat the first (bound, never read)
        W[i] = W[0];
        y[i] = y[0];
        bias[i] = bias[0];
    }
    Cmd cmd(b.t, b.dev, "matmul_multi", label);
    cmd.buf(x).buf(W[0]).buf(W[1]).buf(W[2]).buf(y[0]).buf(y[1]).buf(y[2]).buf(bias[0]).buf(bias[1]).buf(bias[2]);
    cmd.params(p).patch_n(offsetof(MultiMatmulParams, n_tokens))
        .patch_n_generated(offsetof(MultiMatmulParams, generated_rows)).emit();
}

void attention(Builder& b, int l, bool local) {
    const ModelConfig& c = b.c;
    const PagedKVCache& pk = *b.batch->kv;
    const uint32_t qd = (uint32_t)c.q_dim();
    PagedAttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1,
                           local ? (uint32_t)c.sliding_window : 0u, qd, qd, c.attn_scale,
                           (uint32_t)pk.block_size, (uint32_t)pk.max_blocks, 0, pk.k_type, pk.v_type, c.attn_softcap,
                           0u};  // (models with sinks take the plain layer)
    Cmd(b.t, b.dev, "attention_paged", "attention")
        .buf(b.s.q).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]).buf(b.s.attn).buf(b.batch->rows).buf(pk.tables)
        .params(p).patch_n(offsetof(PagedAttentionParams, n_tokens))
        .patch_n_generated(offsetof(PagedAttentionParams, generated_rows)).emit();
}

}  // namespace

bool fused_batch_supported(const Builder& b, const ArchDescriptor& arch, const ModelWeights& w) {
    // Mixture-of-experts FFNs keep the plain sequence, and so do blocks the
    // fused kernels do not express: no pre-norm (add_rmsnorm would normalize
    // the stream the projections read as it is) and whole-projection Q / K
    // norms (qk_norm_rope_kv_paged normalizes each head).
    return b.batch && b.dev.fused_batch() && b.c.n_experts == 0 && !w.layers.empty() && arch.has_pre_norm &&
           !arch.qk_norm_full_width && !arch.attn_sinks && !arch.has_attn_out_bias &&
           arch.activation != Activation::SwigluOai;
}

void fused_batch_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                       const LayerWeights& L, int l, float base, float scale, float attn, bool local) {
    const ScratchBuffers& s = b.s;
    const uint32_t dim = (uint32_t)c.dim, qd = (uint32_t)c.q_dim();
    const uint32_t ff = (uint32_t)c.ffn_dim;
    const bool last = (size_t)l + 1 == w.layers.size();
    // Layer 0 normalizes its own input; the others find it in xn (the
    // previous layer's last add_rmsnorm).
    if (l == 0) b.rmsnorm("attn_norm", s.h, L.attn_norm, s.xn, dim, 1, dim);
    const bool bias = arch.has_qkv_bias;
    matmuls(b, "qkv_proj", s.xn, dim,
            {{&L.wq, s.q, bias ? &L.bq : nullptr}, {&L.wk, s.k, bias ? &L.bk : nullptr},
             {&L.wv, s.v, bias ? &L.bv : nullptr}});
    qk_norm_rope_kv_paged(b, arch, w, L, l, base, scale, attn);
    attention(b, l, local);
    b.matmul("o_proj", L.wo, s.attn, qd, s.proj, dim);
    b.all_reduce("o_proj_all_reduce", s.proj);
    if (arch.has_post_attn_norm) {
        b.rmsnorm_residual("post_attn_norm_residual", s.proj, L.post_attn_norm, s.h);
        b.rmsnorm("ffn_norm", s.h, L.ffn_norm, s.xn, dim, 1, dim);
    } else {
        add_rmsnorm(b, "attn_residual_ffn_norm", s.h, s.proj, L.ffn_norm, s.xn);
    }
    matmuls(b, "gate_up_proj", s.xn, dim, {{&L.w_gate, s.gate, nullptr}, {&L.w_up, s.up, nullptr}});
    {
        GatedActParams p{ff, 1, ff, ff, ff};
        Cmd(b.t, b.dev, gated_act_kernel(arch), "activation")
            .buf(s.gate).buf(s.up).buf(s.act).params(p).patch_n(offsetof(GatedActParams, n_tokens)).emit();
    }
    b.matmul("down_proj", L.w_down, s.act, ff, s.proj, dim);
    b.all_reduce("ffn_all_reduce", s.proj);
    const Weight* next_norm = last ? nullptr : &w.layers[(size_t)l + 1].attn_norm;
    if (arch.has_post_ffn_norm) {
        b.rmsnorm_residual("post_ffn_norm_residual", s.proj, L.post_ffn_norm, s.h);
        if (next_norm) b.rmsnorm("attn_norm", s.h, *next_norm, s.xn, dim, 1, dim);
    } else if (next_norm) {
        add_rmsnorm(b, "ffn_residual_attn_norm", s.h, s.proj, *next_norm, s.xn);
    } else {
        b.add("ffn_residual", s.h, s.proj);
    }
}

}  // namespace table_detail
}  // namespace akunu
