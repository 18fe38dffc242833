// The encoder pass (book Part V, "The BERT/Encoder Path"): same scratch, KV
// cache and kernels as the decoder's prefill, different order and kernels
// chosen by the ArchDescriptor: learned positions, LayerNorm after each
// residual add, ungated GELU FFN, biases everywhere, no causal mask, no head.
#include <cstddef>

#include "core/command_builder.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/table_builder.h"

namespace akunu {

DispatchTable build_encoder_table(Device& device, const ModelConfig& c, const ArchDescriptor& arch,
                                  const ModelWeights& w, const KVCache& kv, const ScratchBuffers& s) {
    if (arch.norm != NormKind::LayerNorm || !arch.post_norm || arch.gated_ffn || !arch.learned_positions)
        throw UnsupportedError(std::string("encoder layout of '") + arch.name + "' is not implemented");
    DispatchTable t;
    const uint32_t dim = (uint32_t)c.dim, ff = (uint32_t)c.ffn_dim;

    auto matmul = [&](const char* label, const Weight& wt, const Weight& bias, Buffer x, uint32_t x_stride,
                      Buffer y, uint32_t y_stride) {
        MatmulParams p{(uint32_t)wt.shape[1], (uint32_t)wt.shape[0], 1, wt.dtype, x_stride, y_stride, 1, 0, 0, 0};
        Cmd(t, device, dtype_lookup(wt.dtype)->gemm_kernel, label)
            .buf(wt.buf).buf(x).buf(y).buf(bias.buf)
            .params(p).patch_n(offsetof(MatmulParams, n_tokens)).emit();
    };
    auto layernorm = [&](const char* label, const Weight& wt, const Weight& b) {  // in place on h
        NormParams p{dim, 1, 1, dim, c.norm_eps, 0.0f, 0, dim};
        Cmd(t, device, "layernorm", label)
            .buf(s.h).buf(wt.buf).buf(s.h).buf(b.buf)
            .params(p).patch_n(offsetof(NormParams, n_tokens)).emit();
    };
    auto add = [&](const char* label, Buffer x, Buffer y) {
        AddParams p{dim, 1};
        Cmd(t, device, "add_inplace", label).buf(x).buf(y).params(p).patch_n(offsetof(AddParams, n_tokens)).emit();
    };

    {
        EmbeddingParams p{dim, 1, w.tok_embd.dtype, 1.0f};
        Cmd(t, device, dtype_lookup(w.tok_embd.dtype)->embedding_kernel, "embedding")
            .buf(w.tok_embd.buf).buf(s.prompt_ids).buf(s.h)
            .params(p).patch_n(offsetof(EmbeddingParams, n_tokens)).emit();
    }
    {
        AddRowsParams p{dim, 1, 0, 1};
        Cmd(t, device, "add_rows", "positions")
            .buf(s.h).buf(w.positions.buf).buf(s.segments)
            .params(p).patch_n(offsetof(AddRowsParams, n_tokens)).patch_pos(offsetof(AddRowsParams, pos0)).emit();
    }
    layernorm("embd_norm", w.embd_norm, w.embd_norm_b);

    for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = w.layers[(size_t)l];
        const uint32_t qd = (uint32_t)c.q_dim(), kvd = (uint32_t)c.kv_dim();
        matmul("q_proj", L.wq, L.bq, s.h, dim, s.q, qd);
        matmul("k_proj", L.wk, L.bk, s.h, dim, s.k, kvd);
        matmul("v_proj", L.wv, L.bv, s.h, dim, s.v, kvd);
        {
            KVWriteParams p{kvd, 1, 0, kvd, kvd, (uint32_t)kv.n_ctx, kKvF16, kKvF16};  // (encoders cache F16)
            Cmd(t, device, "kv_write", "kv_write")
                .buf(s.k).buf(s.v).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l])
                .params(p).patch_n(offsetof(KVWriteParams, n_tokens)).patch_pos(offsetof(KVWriteParams, pos0))
                .emit();
        }
        {
            AttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1, 0, 0u,
                              qd, qd, c.attn_scale, (uint32_t)kv.n_ctx, 0, 1, 0, kKvF16, kKvF16, 0.0f, 0u};
            Cmd(t, device, "attention", "attention")
                .buf(s.q).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l]).buf(s.attn).buf(s.segments)
                .params(p).patch_n(offsetof(AttentionParams, n_tokens)).patch_pos(offsetof(AttentionParams, pos0))
                .emit();
        }
        matmul("o_proj", L.wo, L.bo, s.attn, qd, s.proj, dim);
        add("attn_residual", s.h, s.proj);
        layernorm("attn_norm", L.attn_norm, L.attn_norm_b);
        matmul("up_proj", L.w_up, L.b_up, s.h, dim, s.up, ff);
        {
            AddParams p{ff, 1};
            Cmd(t, device, "gelu_erf", "activation").buf(s.up).params(p).patch_n(offsetof(AddParams, n_tokens)).emit();
        }
        matmul("down_proj", L.w_down, L.b_down, s.up, ff, s.proj, dim);
        add("ffn_residual", s.h, s.proj);
        layernorm("ffn_norm", L.ffn_norm, L.ffn_norm_b);
    }
    return t;
}

}  // namespace akunu
