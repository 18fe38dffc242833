// The fused decode layer: 6 launches for a plain pre-norm layer.
#include "core/table_builder_detail.h"

namespace akunu {
namespace table_detail {

// One decoder layer of a decode step with the fused kernels: 6 launches for a
// plain pre-norm layer instead of 18. Same meaning as the unfused sequence
// below (the fused kernels are defined as those sequences).
void fused_decode_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                        const LayerWeights& L, const KVCache& kv, int l, float base, float scale, float attn,
                        bool local) {
    const ScratchBuffers& s = b.s;
    Device& device = b.dev;
    DispatchTable& t = b.t;
    const uint32_t dim = (uint32_t)c.dim, qd = (uint32_t)c.q_dim(), kvd = (uint32_t)c.kv_dim();
    if (arch.has_qkv_bias) {
        b.rmsnorm("attn_norm", s.h, L.attn_norm, s.xn, dim, 1, dim);
        b.matmul("q_proj", L.wq, s.xn, dim, s.q, qd, &L.bq);
        b.matmul("k_proj", L.wk, s.xn, dim, s.k, kvd, &L.bk);
        b.matmul("v_proj", L.wv, s.xn, dim, s.v, kvd, &L.bv);
    } else {
        b.multi("qkv_proj", kGemvSeparate, s.h, &L.attn_norm, {{&L.wq, s.q}, {&L.wk, s.k}, {&L.wv, s.v}});
    }
    {
        QKRopeKVParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1, 0,
                         arch.has_qk_norm ? 1u : 0u, c.norm_eps, c.norm_weight_offset, arch.rope_neox ? 1u : 0u,
                         w.has_rope_freqs ? 1u : 0u, base, scale, kv.rows_of(l),
                         attn, kv.k_type, kv.v_type};
        Cmd cmd(t, device, "qk_norm_rope_kv", "qk_norm_rope_kv");
        cmd.buf(s.q).buf(s.k).buf(s.v);
        cmd.buf(arch.has_qk_norm ? L.q_norm.buf : s.q).buf(arch.has_qk_norm ? L.k_norm.buf : s.k);
        cmd.buf(w.has_rope_freqs ? w.rope_freqs.buf : s.q).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l]);
        cmd.params(p).patch_n(offsetof(QKRopeKVParams, n_tokens)).patch_pos(offsetof(QKRopeKVParams, pos0)).emit();
    }
    b.attention(kv, l, local, arch.attn_sinks ? &L.sinks : nullptr);
    // Post-norms (Gemma 3): the projection alone through gemv_multi (which
    // reads a Q8Link: no rounding kernel of its own), then norm and residual
    // in one (rmsnorm_residual): 11 launches a layer instead of 14.
    // Tensor parallelism: each rank's O and down projections are partial
    // sums, added up (all_reduce) before they meet the residual stream.
    // A biased O projection (gpt-oss) is a plain matmul (gemv_multi carries no bias).
    const bool split = c.tp_ranks > 1;
    if (arch.has_attn_out_bias) {
        b.matmul("o_proj", L.wo, s.attn, qd, s.proj, dim, &L.bo);
        b.reduce_add("attn_residual", s.proj, s.h);
    } else if (arch.has_post_attn_norm || split) {
        b.multi("o_proj", kGemvSeparate, s.attn, nullptr, {{&L.wo, s.proj}});
        if (arch.has_post_attn_norm) {
            b.all_reduce("o_proj_all_reduce", s.proj);
            b.rmsnorm_residual("post_attn_norm_residual", s.proj, L.post_attn_norm, s.h);
        } else {
            b.reduce_add("attn_residual", s.proj, s.h);
        }
    } else {
        b.multi("o_proj_residual", kGemvAccumulate, s.attn, nullptr, {{&L.wo, s.h}});
    }
    if (c.n_experts > 0) {  // the MoE FFN's own commands (moe_ffn), then the residual
        b.rmsnorm("ffn_norm", s.h, L.ffn_norm, s.xn, dim, 1, dim);
        b.moe_ffn(L);
        if (arch.has_post_ffn_norm) {
            b.all_reduce("ffn_all_reduce", s.proj);
            b.rmsnorm_residual("post_ffn_norm_residual", s.proj, L.post_ffn_norm, s.h);
        } else {
            b.reduce_add("ffn_residual", s.proj, s.h);
        }
        return;
    }
    const MultiGemvMode act = arch.activation == Activation::GeluGate ? kGemvGeluGate : kGemvSiluGate;
    b.multi("gate_up_act", act, s.h, &L.ffn_norm, {{&L.w_gate, s.act}, {&L.w_up, s.act}});
    if (arch.has_post_ffn_norm || split) {
        b.multi("down_proj", kGemvSeparate, s.act, nullptr, {{&L.w_down, s.proj}});
        if (arch.has_post_ffn_norm) {
            b.all_reduce("ffn_all_reduce", s.proj);
            b.rmsnorm_residual("post_ffn_norm_residual", s.proj, L.post_ffn_norm, s.h);
        } else {
            b.reduce_add("ffn_residual", s.proj, s.h);
        }
    } else {
        b.multi("down_proj_residual", kGemvAccumulate, s.act, nullptr, {{&L.w_down, s.h}});
    }
}

}  // namespace table_detail
}  // namespace akunu
