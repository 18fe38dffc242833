#include "core/table_builder.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/command_builder.h"
#include "core/kernel_params.h"

namespace akunu {
namespace {

struct Builder {
    Device& dev;
    const ModelConfig& c;
    const ArchDescriptor& arch;
    const ScratchBuffers& s;
    TableKind kind;
    const BatchBuffers* batch;  // TableKind::Batch: paged KV, row and gather tables
    DispatchTable t;

    const char* matmul_kernel(const Weight& w) const {
        const DTypeDescriptor* dt = dtype_lookup(w.dtype);
        return kind == TableKind::Decode ? dt->gemv_kernel : dt->gemm_kernel;
    }

    void matmul(const char* label, const Weight& w, Buffer x, uint32_t x_stride, Buffer y, uint32_t y_stride,
                const Weight* bias = nullptr, bool is_head = false) {
        MatmulParams p{(uint32_t)w.shape[1], (uint32_t)w.shape[0], 1, w.dtype, x_stride, y_stride,
                       bias ? 1u : 0u, 0, batch ? 1u : 0u, 0};
        Cmd cmd(t, dev, matmul_kernel(w), label);
        cmd.buf(w.buf).buf(x).buf(y);
        if (bias) cmd.buf(bias->buf);
        cmd.params(p).patch_n(offsetof(MatmulParams, n_tokens));
        if (batch) cmd.patch_n_generated(offsetof(MatmulParams, generated_rows));
        if (is_head) cmd.head();
        cmd.emit();
    }

    // rows_per_token > 1 normalizes each head separately (QK norm).
    void rmsnorm(const char* label, Buffer x, const Weight& w, Buffer y, uint32_t dim, uint32_t rows_per_token,
                 uint32_t stride, bool is_head = false) {
        NormParams p{dim, 1, rows_per_token, stride, c.norm_eps, c.norm_weight_offset, 0, stride};
        Cmd cmd(t, dev, "rmsnorm", label);
        cmd.buf(x).buf(w.buf).buf(y).params(p).patch_n(offsetof(NormParams, n_tokens));
        if (is_head) cmd.head().patch_row0(offsetof(NormParams, row0));
        cmd.emit();
    }

    // h += rmsnorm(y) * w (Gemma 3's post-norms; the fused decode tables only).
    void rmsnorm_residual(const char* label, Buffer y, const Weight& w, Buffer h) {
        const uint32_t dim = (uint32_t)c.dim;
        NormParams p{dim, 1, 1, dim, c.norm_eps, c.norm_weight_offset, 0, dim};
        Cmd(t, dev, "rmsnorm_residual", label).buf(y).buf(w.buf).buf(h).params(p)
            .patch_n(offsetof(NormParams, n_tokens)).emit();
    }

    void add(const char* label, Buffer x, Buffer y) {
        AddParams p{(uint32_t)c.dim, 1};
        Cmd(t, dev, "add_inplace", label).buf(x).buf(y).params(p).patch_n(offsetof(AddParams, n_tokens)).emit();
    }

    // Causal attention of layer l over its KV cache (sliding window on local layers).
    void attention(const KVCache& kv, int l, bool local) {
        const uint32_t qd = (uint32_t)c.q_dim();
        if (batch) {  // each row over its own sequence's blocks
            const PagedKVCache& pk = *batch->kv;
            PagedAttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1,
                                   local ? (uint32_t)c.sliding_window : 0u, qd, qd, c.attn_scale,
                                   (uint32_t)pk.block_size, (uint32_t)pk.max_blocks};
            Cmd(t, dev, "attention_paged", "attention")
                .buf(s.q).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]).buf(s.attn).buf(batch->rows).buf(pk.tables)
                .params(p).patch_n(offsetof(PagedAttentionParams, n_tokens)).emit();
            return;
        }
        AttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1, 0,
                          local ? (uint32_t)c.sliding_window : 0u, qd, qd, c.attn_scale, (uint32_t)kv.n_ctx, 1, 0, 0};
        Cmd(t, dev, "attention", "attention")
            .buf(s.q).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l]).buf(s.attn)
            .params(p).patch_n(offsetof(AttentionParams, n_tokens)).patch_pos(offsetof(AttentionParams, pos0))
            .emit();
    }

    // gemv_multi over x (see MultiGemvParams); `norm` (or nullptr) normalizes x first.
    void multi(const char* label, MultiGemvMode mode, Buffer x, const Weight* norm,
               std::initializer_list<std::pair<const Weight*, Buffer>> mats) {
        MultiGemvParams p{};
        p.K = (uint32_t)mats.begin()->first->shape[0];  // GGUF order: shape[0] is the row length
        p.n_tokens = 1;
        p.n_mats = (uint32_t)mats.size();
        p.mode = mode;
        p.norm = norm ? 1u : 0u;
        p.eps = c.norm_eps;
        p.weight_offset = c.norm_weight_offset;
        Buffer w[3] = {}, y[3] = {};
        int i = 0;
        for (const auto& m : mats) {
            p.N[i] = (uint32_t)m.first->shape[1];
            p.dtype[i] = m.first->dtype;
            w[i] = m.first->buf;
            y[i] = m.second;
            i++;
        }
        Cmd cmd(t, dev, "gemv_multi", label);
        for (; i < 3; i++) {  // unused slots repeat the first matrix (bound, never read)
            w[i] = w[0];
            y[i] = y[0];
        }
        cmd.buf(x).buf(norm ? norm->buf : x).buf(w[0]).buf(w[1]).buf(w[2]).buf(y[0]).buf(y[1]).buf(y[2]);
        cmd.params(p).patch_n(offsetof(MultiGemvParams, n_tokens)).emit();
    }

    void rope(const char* label, Buffer x, uint32_t n_heads, uint32_t stride, float base, float scale, float attn,
              const ModelWeights& w) {
        RopeParams p{n_heads, (uint32_t)c.head_dim, 1, 0, stride, arch.rope_neox ? 1u : 0u,
                     w.has_rope_freqs ? 1u : 0u, base, scale, attn};
        Cmd cmd(t, dev, batch ? "rope_rows" : "rope", label);
        cmd.buf(x).buf(w.has_rope_freqs ? w.rope_freqs.buf : x);
        if (batch) cmd.buf(batch->rows);  // each row at its own position
        else cmd.patch_pos(offsetof(RopeParams, pos0));
        cmd.params(p).patch_n(offsetof(RopeParams, n_tokens)).emit();
    }
};

// One decoder layer of a decode step with the fused kernels: 6 launches for a
// plain pre-norm layer instead of 18. Same meaning as the unfused sequence
// below (the fused kernels are defined as those sequences).
void fused_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                 const LayerWeights& L, const KVCache& kv, int l, float base, float scale, bool local) {
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
                         w.has_rope_freqs ? 1u : 0u, base, scale, (uint32_t)kv.n_ctx,
                         local ? 1.0f : c.rope_attn_factor};
        Cmd cmd(t, device, "qk_norm_rope_kv", "qk_norm_rope_kv");
        cmd.buf(s.q).buf(s.k).buf(s.v);
        cmd.buf(arch.has_qk_norm ? L.q_norm.buf : s.q).buf(arch.has_qk_norm ? L.k_norm.buf : s.k);
        cmd.buf(w.has_rope_freqs ? w.rope_freqs.buf : s.q).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l]);
        cmd.params(p).patch_n(offsetof(QKRopeKVParams, n_tokens)).patch_pos(offsetof(QKRopeKVParams, pos0)).emit();
    }
    b.attention(kv, l, local);
    // Post-norms (Gemma 3): the projection alone through gemv_multi (which
    // reads a Q8Link: no rounding kernel of its own), then norm and residual
    // in one (rmsnorm_residual): 11 launches a layer instead of 14.
    if (arch.has_post_attn_norm) {
        b.multi("o_proj", kGemvSeparate, s.attn, nullptr, {{&L.wo, s.proj}});
        b.rmsnorm_residual("post_attn_norm_residual", s.proj, L.post_attn_norm, s.h);
    } else {
        b.multi("o_proj_residual", kGemvAccumulate, s.attn, nullptr, {{&L.wo, s.h}});
    }
    const MultiGemvMode act = arch.activation == Activation::GeluGate ? kGemvGeluGate : kGemvSiluGate;
    b.multi("gate_up_act", act, s.h, &L.ffn_norm, {{&L.w_gate, s.act}, {&L.w_up, s.act}});
    if (arch.has_post_ffn_norm) {
        b.multi("down_proj", kGemvSeparate, s.act, nullptr, {{&L.w_down, s.proj}});
        b.rmsnorm_residual("post_ffn_norm_residual", s.proj, L.post_ffn_norm, s.h);
    } else {
        b.multi("down_proj_residual", kGemvAccumulate, s.act, nullptr, {{&L.w_down, s.h}});
    }
}

}  // namespace

DispatchTable build_dispatch_table(Device& device, const ModelConfig& c, const ArchDescriptor& arch,
                                   const ModelWeights& w, const KVCache& kv, const ScratchBuffers& s,
                                   TableKind kind, const BatchBuffers* batch) {
    if ((kind == TableKind::Batch) != (batch != nullptr))
        throw Error("internal error: batch tables (and only they) take batch buffers");
    Builder b{device, c, arch, s, kind, kind == TableKind::Batch ? batch : nullptr, {}};
    DispatchTable& t = b.t;
    const uint32_t dim = (uint32_t)c.dim, qd = (uint32_t)c.q_dim(), kvd = (uint32_t)c.kv_dim();
    const uint32_t ff = (uint32_t)c.ffn_dim;
    const bool decode = kind == TableKind::Decode;
    // GPUs replay decode steps with fused kernels (fewer launches); weights
    // in MLX's packing, which the fused GEMV does not read, keep the plain ops.
    bool fused = decode && device.fused_decode();
    for (const LayerWeights& L : w.layers)
        for (const Weight* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
            if (is_mlx_dtype(x->dtype)) fused = false;

    {  // token embedding (scaled by sqrt(dim) for Gemma)
        EmbeddingParams p{dim, 1, w.tok_embd.dtype,
                          arch.embedding_scale_sqrt_dim ? std::sqrt((float)c.dim) : 1.0f};
        Cmd cmd(t, device, dtype_lookup(w.tok_embd.dtype)->embedding_kernel, "embedding");
        cmd.buf(w.tok_embd.buf).buf(decode ? s.chain_ids : s.prompt_ids).buf(s.h);
        cmd.params(p).patch_n(offsetof(EmbeddingParams, n_tokens));
        if (decode) cmd.patch_token_buffer(1);
        cmd.emit();
    }

    for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = w.layers[(size_t)l];
        const bool local = c.layer_is_local[(size_t)l] != 0;
        const float base = local ? c.rope_base_swa : c.rope_base;
        const float scale = local ? 1.0f : c.rope_freq_scale;
        const float attn = local ? 1.0f : c.rope_attn_factor;  // cos / sin magnitude (YaRN)

        if (fused) {
            fused_layer(b, c, arch, w, L, kv, l, base, scale, local);
            continue;
        }
        b.rmsnorm("attn_norm", s.h, L.attn_norm, s.xn, dim, 1, dim);
        b.matmul("q_proj", L.wq, s.xn, dim, s.q, qd, arch.has_qkv_bias ? &L.bq : nullptr);
        b.matmul("k_proj", L.wk, s.xn, dim, s.k, kvd, arch.has_qkv_bias ? &L.bk : nullptr);
        b.matmul("v_proj", L.wv, s.xn, dim, s.v, kvd, arch.has_qkv_bias ? &L.bv : nullptr);
        if (arch.has_qk_norm) {
            b.rmsnorm("q_norm", s.q, L.q_norm, s.q, (uint32_t)c.head_dim, (uint32_t)c.n_heads, qd);
            b.rmsnorm("k_norm", s.k, L.k_norm, s.k, (uint32_t)c.head_dim, (uint32_t)c.n_kv_heads, kvd);
        }
        b.rope("rope_q", s.q, (uint32_t)c.n_heads, qd, base, scale, attn, w);
        b.rope("rope_k", s.k, (uint32_t)c.n_kv_heads, kvd, base, scale, attn, w);
        if (b.batch) {
            const PagedKVCache& pk = *b.batch->kv;
            PagedKVWriteParams p{kvd, 1, kvd, kvd, (uint32_t)pk.block_size, (uint32_t)pk.max_blocks};
            Cmd(t, device, "kv_write_paged", "kv_write")
                .buf(s.k).buf(s.v).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]).buf(b.batch->rows).buf(pk.tables)
                .params(p).patch_n(offsetof(PagedKVWriteParams, n_tokens)).emit();
        } else {
            KVWriteParams p{kvd, 1, 0, kvd, kvd, (uint32_t)kv.n_ctx};
            Cmd(t, device, "kv_write", "kv_write")
                .buf(s.k).buf(s.v).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l])
                .params(p).patch_n(offsetof(KVWriteParams, n_tokens)).patch_pos(offsetof(KVWriteParams, pos0))
                .emit();
        }
        b.attention(kv, l, local);
        b.matmul("o_proj", L.wo, s.attn, qd, s.proj, dim);
        if (arch.has_post_attn_norm) b.rmsnorm("post_attn_norm", s.proj, L.post_attn_norm, s.proj, dim, 1, dim);
        b.add("attn_residual", s.h, s.proj);

        b.rmsnorm("ffn_norm", s.h, L.ffn_norm, s.xn, dim, 1, dim);
        b.matmul("gate_proj", L.w_gate, s.xn, dim, s.gate, ff);
        b.matmul("up_proj", L.w_up, s.xn, dim, s.up, ff);
        {
            GatedActParams p{ff, 1, ff, ff, ff};
            const char* act = arch.activation == Activation::GeluGate ? "gelu_gate" : "silu_gate";
            Cmd(t, device, act, "activation")
                .buf(s.gate).buf(s.up).buf(s.act).params(p).patch_n(offsetof(GatedActParams, n_tokens)).emit();
        }
        b.matmul("down_proj", L.w_down, s.act, ff, s.proj, dim);
        if (arch.has_post_ffn_norm) b.rmsnorm("post_ffn_norm", s.proj, L.post_ffn_norm, s.proj, dim, 1, dim);
        b.add("ffn_residual", s.h, s.proj);
    }

    if (b.batch) {
        // Ragged batch pass: the rows named by the gather table (the last row
        // of each sequence that samples) are normalized and projected, into
        // logits rows 0..n_out-1; sampling follows per row (batch_engine.cpp).
        GatherRowsParams gp{dim, 1, dim, dim};
        Cmd(t, device, "gather_rows", "gather_rows").buf(s.h).buf(b.batch->out_rows).buf(s.proj)
            .params(gp).patch_n_out(offsetof(GatherRowsParams, n_rows)).emit();
        NormParams np{dim, 1, 1, dim, c.norm_eps, c.norm_weight_offset, 0, dim};
        Cmd(t, device, "rmsnorm", "output_norm").buf(s.proj).buf(w.output_norm.buf).buf(s.xn)
            .params(np).patch_n_out(offsetof(NormParams, n_tokens)).emit();
        MatmulParams mp{(uint32_t)w.output.shape[1], (uint32_t)w.output.shape[0], 1, w.output.dtype, dim,
                        (uint32_t)c.vocab_size, 0, 0, 1, 0};
        Cmd(t, device, dtype_lookup(w.output.dtype)->gemm_kernel, "lm_head").buf(w.output.buf).buf(s.xn)
            .buf(s.logits).params(mp).patch_n_out(offsetof(MatmulParams, n_tokens))
            .patch_n_out_generated(offsetof(MatmulParams, generated_rows)).emit();
        return t;
    }

    // Output head. In last-row mode (generation) only the final token's row is
    // normalized and projected, into logits row 0.
    b.rmsnorm("output_norm", s.h, w.output_norm, s.xn, dim, 1, dim, true);
    b.matmul("lm_head", w.output, s.xn, dim, s.logits, (uint32_t)c.vocab_size, nullptr, true);
    {
        // Decode writes the next id into chain slot token_index + 1; prefill
        // writes one id per logits row (the last row's in last-row mode).
        ArgmaxParams p{(uint32_t)c.vocab_size, 0, 1};
        Cmd cmd(t, device, "argmax", "argmax");
        cmd.buf(s.logits).buf(decode ? s.chain_ids : s.row_ids, decode ? 4 : 0).params(p);
        if (decode) cmd.patch_token_buffer(1);
        else cmd.head().patch_n(offsetof(ArgmaxParams, n_rows));
        cmd.emit();
    }
    return t;
}

DispatchTable build_sample_table(Device& device, const ModelConfig& c, const ScratchBuffers& s,
                                 const SamplerBuffers& sb, const SampleParams& params, bool chained) {
    DispatchTable t;
    SampleParams p = params;
    p.vocab = (uint32_t)c.vocab_size;
    Cmd cmd(t, device, "sample", "sample");
    cmd.buf(s.logits).buf(s.chain_ids, chained ? 4 : 0).buf(sb.history).buf(sb.bias).buf(sb.mask).buf(sb.work);
    cmd.params(p).patch_pos(offsetof(SampleParams, pos0));
    if (chained) cmd.patch_token_buffer(1);
    cmd.emit();
    return t;
}

}  // namespace akunu
