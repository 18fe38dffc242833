#include "core/table_builder.h"

#include "core/table_builder_detail.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/command_builder.h"
#include "core/kernel_params.h"

namespace akunu {
using namespace table_detail;

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
    // Whole-projection Q / K norms (OLMoE) are not qk_norm_rope_kv's per-head ones.
    if (arch.qk_norm_full_width) fused = false;
    // Blocks without pre-norms (OLMo 2) are not the fused projections' norm-first GEMV.
    if (!arch.has_pre_norm) fused = false;
    // gemv_multi's gated modes are SiLU and GELU: a dense FFN of another
    // activation keeps the plain ops (MoE FFNs are their own commands).
    if (c.n_experts == 0 && arch.activation == Activation::SwigluOai) fused = false;
    // Batch passes on devices that ask for it: fewer launches a layer
    // (fused_batch_layer.cpp), the same result row for row.
    const bool fused_batch = b.batch && fused_batch_supported(b, arch, w);

    {  // token embedding (scaled by sqrt(dim) for Gemma, Granite's multiplier)
        EmbeddingParams p{dim, 1, w.tok_embd.dtype, c.embedding_scale};
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
        // Layers without RoPE (SmolLM3) rotate by angle 0 in the fused
        // kernels (frequency scale 0, magnitude 1: the identity); the plain
        // sequence leaves the rotation out.
        const bool rotates = c.layer_uses_rope[(size_t)l] != 0;
        const bool scaled = !local || arch.swa_layers_scale_rope;
        const float scale = !rotates ? 0.0f : scaled ? c.rope_freq_scale : 1.0f;
        const float attn = rotates && scaled ? c.rope_attn_factor : 1.0f;  // cos / sin magnitude (YaRN)

        if (fused) {
            fused_decode_layer(b, c, arch, w, L, kv, l, base, scale, attn, local);
            continue;
        }
        if (fused_batch) {
            fused_batch_layer(b, c, arch, w, L, l, base, scale, attn, local);
            continue;
        }
        // Without pre-norms (OLMo 2) the projections read the residual stream itself.
        const Buffer x_in = arch.has_pre_norm ? s.xn : s.h;
        if (arch.has_pre_norm) b.rmsnorm("attn_norm", s.h, L.attn_norm, s.xn, dim, 1, dim);
        b.matmul("q_proj", L.wq, x_in, dim, s.q, qd, arch.has_qkv_bias ? &L.bq : nullptr);
        b.matmul("k_proj", L.wk, x_in, dim, s.k, kvd, arch.has_qkv_bias ? &L.bk : nullptr);
        b.matmul("v_proj", L.wv, x_in, dim, s.v, kvd, arch.has_qkv_bias ? &L.bv : nullptr);
        if (arch.has_qk_norm && arch.qk_norm_full_width) {
            b.rmsnorm("q_norm", s.q, L.q_norm, s.q, qd, 1, qd);
            b.rmsnorm("k_norm", s.k, L.k_norm, s.k, kvd, 1, kvd);
        } else if (arch.has_qk_norm) {
            b.rmsnorm("q_norm", s.q, L.q_norm, s.q, (uint32_t)c.head_dim, (uint32_t)c.n_heads, qd);
            b.rmsnorm("k_norm", s.k, L.k_norm, s.k, (uint32_t)c.head_dim, (uint32_t)c.n_kv_heads, kvd);
        }
        if (rotates) {
            b.rope("rope_q", s.q, (uint32_t)c.n_heads, qd, base, scale, attn, w);
            b.rope("rope_k", s.k, (uint32_t)c.n_kv_heads, kvd, base, scale, attn, w);
        }
        if (b.batch) {
            const PagedKVCache& pk = *b.batch->kv;
            PagedKVWriteParams p{kvd, 1, kvd, kvd, (uint32_t)pk.block_size, (uint32_t)pk.max_blocks, pk.k_type, pk.v_type};
            Cmd(t, device, "kv_write_paged", "kv_write")
                .buf(s.k).buf(s.v).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]).buf(b.batch->rows).buf(pk.tables)
                .params(p).patch_n(offsetof(PagedKVWriteParams, n_tokens)).emit();
        } else {
            KVWriteParams p{kvd, 1, 0, kvd, kvd, kv.rows_of(l), kv.k_type, kv.v_type};
            Cmd(t, device, "kv_write", "kv_write")
                .buf(s.k).buf(s.v).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l])
                .params(p).patch_n(offsetof(KVWriteParams, n_tokens)).patch_pos(offsetof(KVWriteParams, pos0))
                .emit();
        }
        b.attention(kv, l, local, arch.attn_sinks ? &L.sinks : nullptr);
        b.matmul("o_proj", L.wo, s.attn, qd, s.proj, dim, arch.has_attn_out_bias ? &L.bo : nullptr);
        if (arch.has_post_attn_norm) {  // (split: the ranks' sums are added up before the norm)
            b.all_reduce("o_proj_all_reduce", s.proj);
            b.rmsnorm("post_attn_norm", s.proj, L.post_attn_norm, s.proj, dim, 1, dim);
            b.add("attn_residual", s.h, s.proj);
        } else {
            b.reduce_add("attn_residual", s.proj, s.h);
        }

        if (arch.has_pre_norm) b.rmsnorm("ffn_norm", s.h, L.ffn_norm, s.xn, dim, 1, dim);
        if (c.n_experts > 0) {
            b.moe_ffn(L);
        } else {
            b.matmul("gate_proj", L.w_gate, x_in, dim, s.gate, ff);
            b.matmul("up_proj", L.w_up, x_in, dim, s.up, ff);
            GatedActParams p{ff, 1, ff, ff, ff};
            Cmd(t, device, gated_act_kernel(arch), "activation")
                .buf(s.gate).buf(s.up).buf(s.act).params(p).patch_n(offsetof(GatedActParams, n_tokens)).emit();
            b.matmul("down_proj", L.w_down, s.act, ff, s.proj, dim);
        }
        if (arch.has_post_ffn_norm) {
            b.all_reduce("ffn_all_reduce", s.proj);
            b.rmsnorm("post_ffn_norm", s.proj, L.post_ffn_norm, s.proj, dim, 1, dim);
            b.add("ffn_residual", s.h, s.proj);
        } else {
            b.reduce_add("ffn_residual", s.proj, s.h);
        }
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
        const bool split = c.tp_ranks > 1;  // each rank its vocabulary slice, then gathered
        const uint32_t rows_out = split ? (uint32_t)c.vocab_shard : (uint32_t)c.vocab_size;
        MatmulParams mp{(uint32_t)w.output.shape[1], (uint32_t)w.output.shape[0], 1, w.output.dtype, dim,
                        rows_out, 0, 0, 1, 0};
        Cmd(t, device, dtype_lookup(w.output.dtype)->gemm_kernel, "lm_head").buf(w.output.buf).buf(s.xn)
            .buf(split ? s.logits_shard : s.logits).params(mp).patch_n_out(offsetof(MatmulParams, n_tokens))
            .patch_n_out_generated(offsetof(MatmulParams, generated_rows)).emit();
        if (split) {
            AllGatherColsParams gp{rows_out, 1, (uint32_t)c.vocab_size, (uint32_t)c.vocab_size};
            Cmd(t, device, "all_gather_cols", "lm_head_gather").buf(s.logits_shard).buf(s.logits).buf(s.logits_stage)
                .params(gp).patch_n_out(offsetof(AllGatherColsParams, n_rows)).emit();
        }
        if (c.final_softcap > 0.0f) {
            SoftcapParams sp{(uint32_t)c.vocab_size, 1, c.final_softcap};
            Cmd(t, device, "softcap", "logit_softcap").buf(s.logits).params(sp)
                .patch_n_out(offsetof(SoftcapParams, n_tokens)).emit();
        }
        return t;
    }

    // Output head. In last-row mode (generation) only the final token's row is
    // normalized and projected, into logits row 0.
    b.rmsnorm("output_norm", s.h, w.output_norm, s.xn, dim, 1, dim, true);
    if (c.tp_ranks > 1) {  // each rank its vocabulary slice, then gathered into whole rows
        b.matmul("lm_head", w.output, s.xn, dim, s.logits_shard, (uint32_t)c.vocab_shard, nullptr, true);
        AllGatherColsParams gp{(uint32_t)c.vocab_shard, 1, (uint32_t)c.vocab_size, (uint32_t)c.vocab_size};
        Cmd(t, device, "all_gather_cols", "lm_head_gather").buf(s.logits_shard).buf(s.logits).buf(s.logits_stage)
            .params(gp).head().patch_n(offsetof(AllGatherColsParams, n_rows)).emit();
    } else {
        b.matmul("lm_head", w.output, s.xn, dim, s.logits, (uint32_t)c.vocab_size, nullptr, true);
    }
    if (c.final_softcap > 0.0f) {
        SoftcapParams sp{(uint32_t)c.vocab_size, 1, c.final_softcap};
        Cmd(t, device, "softcap", "logit_softcap").buf(s.logits).params(sp).head()
            .patch_n(offsetof(SoftcapParams, n_tokens)).emit();
    }
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
