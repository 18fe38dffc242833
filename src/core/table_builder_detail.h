// The table builder's working state and its one-command helpers, shared by
// the files that emit a layer's commands (table_builder.cpp: the plain layer
// and the output head; fused_decode_layer.cpp and fused_batch_layer.cpp: the
// fused kernels of a decode step and of a batch pass).
#pragma once
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <utility>

#include "core/command_builder.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "core/table_builder.h"

namespace akunu {
namespace table_detail {

// The gated activation kernel of a family's FFN (GatedActParams).
inline const char* gated_act_kernel(const ArchDescriptor& arch) {
    switch (arch.activation) {
        case Activation::GeluGate: return "gelu_gate";
        case Activation::SwigluOai: return "swiglu_oai";
        default: return "silu_gate";
    }
}

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

    // matmul with byte offsets into x and y (a column block of a wider row).
    void matmul_at(const char* label, const Weight& w, Buffer x, size_t x_off, uint32_t x_stride, Buffer y,
                   size_t y_off, uint32_t y_stride) {
        MatmulParams p{(uint32_t)w.shape[1], (uint32_t)w.shape[0], 1, w.dtype, x_stride, y_stride,
                       0, 0, batch ? 1u : 0u, 0};
        Cmd cmd(t, dev, matmul_kernel(w), label);
        cmd.buf(w.buf).buf(x, x_off).buf(y, y_off).params(p).patch_n(offsetof(MatmulParams, n_tokens));
        if (batch) cmd.patch_n_generated(offsetof(MatmulParams, generated_rows));
        cmd.emit();
    }

    // The selected experts' matrices of the stacked tensor w over x (see
    // MoeMatmulParams); the route sits in the act buffer's rows.
    // bias: the experts' biases (N floats a matrix) or nullptr.
    void expert_matmul(const char* label, const Weight& w, Buffer x, uint32_t x_stride, uint32_t x_slot_stride,
                       Buffer y, uint32_t y_stride, uint32_t y_slot_stride, bool weighted,
                       const Weight* bias = nullptr) {
        const uint32_t row = (uint32_t)c.moe_row_width();
        // Split by whole experts, a rank's tensor holds experts_per_rank of
        // them from rank x experts_per_rank (patched per rank at the split).
        const uint32_t held = c.experts_per_rank ? (uint32_t)c.experts_per_rank : (uint32_t)c.n_experts;
        MoeMatmulParams p{(uint32_t)w.shape[1], (uint32_t)w.shape[0], 1, w.dtype, held,
                          (uint32_t)c.n_experts_used, x_stride, x_slot_stride, y_stride, y_slot_stride, row,
                          weighted ? 1u : 0u, batch ? 1u : 0u, 0, c.experts_per_rank ? held : 0u,
                          bias ? 1u : 0u};
        Cmd cmd(t, dev, "moe_matmul", label);
        if (c.experts_per_rank) cmd.patch_rank(offsetof(MoeMatmulParams, first_expert));
        cmd.buf(w.buf).buf(x).buf(y).buf(s.act, (size_t)c.moe_route_offset() * sizeof(float));
        if (bias) cmd.buf(bias->buf);
        cmd.params(p).patch_n(offsetof(MoeMatmulParams, n_tokens));
        if (batch) cmd.patch_n_generated(offsetof(MoeMatmulParams, generated_rows));
        cmd.emit();
    }

    // The mixture-of-experts FFN of layer L over the normalized input in xn,
    // its output (the routed experts' weighted sum, plus the shared expert)
    // into proj. Works in scratch rows of moe_row_width() floats (ModelConfig's
    // MoE row layout; the buffers are act_row_width() >= that a token): router logits in up, the route in act's tail, the chosen
    // experts' gate / up / act side by side, the shared expert's after them;
    // the shared expert's down projection reuses xn once nothing reads it.
    // Every command is row-independent and reads only device-side ids: the
    // table replays with no host work per token.
    void moe_ffn(const LayerWeights& L) {
        const uint32_t dim = (uint32_t)c.dim, row = (uint32_t)c.moe_row_width(), k = (uint32_t)c.n_experts_used;
        const uint32_t ef = (uint32_t)c.expert_ffn_dim, sf = (uint32_t)c.shared_expert_ffn_dim;
        const size_t route = (size_t)c.moe_route_offset() * sizeof(float);
        const bool biased = arch.moe_biases;
        matmul("router", L.gate_inp, s.xn, dim, s.up, row, biased ? &L.b_gate_inp : nullptr);
        {
            MoeRouteParams p{(uint32_t)c.n_experts, k, 1, c.moe_gating, c.moe_norm_topk ? 1u : 0u, row, row,
                             c.expert_weights_scale};
            Cmd(t, dev, "moe_route", "moe_route").buf(s.up).buf(s.act, route).params(p)
                .patch_n(offsetof(MoeRouteParams, n_tokens)).emit();
        }
        expert_matmul("gate_exps", L.gate_exps, s.xn, dim, 0, s.gate, row, ef, false,
                      biased ? &L.b_gate_exps : nullptr);
        expert_matmul("up_exps", L.up_exps, s.xn, dim, 0, s.up, row, ef, false, biased ? &L.b_up_exps : nullptr);
        const size_t shared = (size_t)k * ef * sizeof(float);
        if (sf) {
            matmul_at("gate_shexp", L.gate_shexp, s.xn, 0, dim, s.gate, shared, row);
            matmul_at("up_shexp", L.up_shexp, s.xn, 0, dim, s.up, shared, row);
        }
        const size_t shared_gate = route + (size_t)2 * k * sizeof(float);
        if (sf && arch.moe_shared_gate) matmul_at("shexp_gate", L.gate_inp_shexp, s.xn, 0, dim, s.act, shared_gate, row);
        {
            const uint32_t n = k * ef + sf;
            GatedActParams p{n, 1, row, row, row};
            Cmd(t, dev, gated_act_kernel(arch), "moe_activation")
                .buf(s.gate).buf(s.up).buf(s.act).params(p).patch_n(offsetof(GatedActParams, n_tokens)).emit();
        }
        expert_matmul("down_exps", L.down_exps, s.act, row, ef, s.proj, dim, 0, true,
                      biased ? &L.b_down_exps : nullptr);
        if (sf) {
            matmul_at("down_shexp", L.down_shexp, s.act, shared, row, s.xn, 0, dim);
            MoeSharedAddParams p{dim, 1, dim, dim, row, arch.moe_shared_gate ? 1u : 0u};
            Cmd(t, dev, "moe_shared_add", "shexp_add").buf(s.xn).buf(s.act, shared_gate).buf(s.proj).params(p)
                .patch_n(offsetof(MoeSharedAddParams, n_tokens)).emit();
        }
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

    // Tensor parallelism: x (n_tokens rows of dim) is each rank's partial sum
    // of a row-split projection (O, down): summed over the ranks, in place.
    void all_reduce(const char* label, Buffer x) {
        if (c.tp_ranks <= 1) return;
        AllReduceParams p{(uint32_t)c.dim, 1, 0};
        Cmd(t, dev, "all_reduce_sum", label).buf(x).params(p).patch_n(offsetof(AllReduceParams, n_tokens)).emit();
    }

    // h += y, y a block's output (n_tokens rows of dim): with tensor
    // parallelism each rank's y is a partial sum, and the ranks' sums are
    // added to h in the same command (one launch where the GPU reduces over
    // its peer-to-peer links).
    void reduce_add(const char* label, Buffer y, Buffer h) {
        if (c.tp_ranks <= 1) return add(label, h, y);
        AllReduceParams p{(uint32_t)c.dim, 1, 1};
        Cmd(t, dev, "all_reduce_sum", label).buf(y).buf(h).params(p).patch_n(offsetof(AllReduceParams, n_tokens))
            .emit();
    }

    void add(const char* label, Buffer x, Buffer y) {
        AddParams p{(uint32_t)c.dim, 1};
        Cmd(t, dev, "add_inplace", label).buf(x).buf(y).params(p).patch_n(offsetof(AddParams, n_tokens)).emit();
    }

    // Causal attention of layer l over its KV cache (sliding window on local
    // layers); sinks: the layer's sink logits (gpt-oss) or nullptr.
    void attention(const KVCache& kv, int l, bool local, const Weight* sinks = nullptr) {
        const uint32_t qd = (uint32_t)c.q_dim();
        if (batch) {  // each row over its own sequence's blocks
            const PagedKVCache& pk = *batch->kv;
            PagedAttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1,
                                   local ? (uint32_t)c.sliding_window : 0u, qd, qd, c.attn_scale,
                                   (uint32_t)pk.block_size, (uint32_t)pk.max_blocks, 0, pk.k_type, pk.v_type,
                                   c.attn_softcap, sinks ? 1u : 0u};
            Cmd cmd(t, dev, "attention_paged", "attention");
            cmd.buf(s.q).buf(pk.k[(size_t)l]).buf(pk.v[(size_t)l]).buf(s.attn).buf(batch->rows).buf(pk.tables);
            if (sinks) cmd.buf(sinks->buf);
            cmd.params(p).patch_n(offsetof(PagedAttentionParams, n_tokens)).emit();
            return;
        }
        AttentionParams p{(uint32_t)c.n_heads, (uint32_t)c.n_kv_heads, (uint32_t)c.head_dim, 1, 0,
                          local ? (uint32_t)c.sliding_window : 0u, qd, qd, c.attn_scale, kv.rows_of(l), 1, 0, 0,
                          kv.k_type, kv.v_type, c.attn_softcap, sinks ? 1u : 0u};
        Cmd cmd(t, dev, "attention", "attention");
        cmd.buf(s.q).buf(kv.k[(size_t)l]).buf(kv.v[(size_t)l]).buf(s.attn);
        if (kv.stage_k.handle)  // 5 / 6: a typed cache's F16 staging rows (4: segments, unused here)
            cmd.buf(s.attn).buf(kv.stage_k).buf(kv.stage_v);
        else if (sinks)  // 4 to 6 bound, unread
            cmd.buf(s.attn).buf(s.attn).buf(s.attn);
        if (sinks) cmd.buf(sinks->buf);  // 7
        cmd.params(p).patch_n(offsetof(AttentionParams, n_tokens)).patch_pos(offsetof(AttentionParams, pos0)).emit();
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

// One decoder layer of a decode step with the fused kernels (fused_decode_layer.cpp).
void fused_decode_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                        const LayerWeights& L, const KVCache& kv, int l, float base, float scale, float attn,
                        bool local);

// Whether a batch pass can use the fused batch kernels for this model, and one
// decoder layer of such a pass (fused_batch_layer.cpp).
bool fused_batch_supported(const Builder& b, const ArchDescriptor& arch, const ModelWeights& w);
void fused_batch_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                       const LayerWeights& L, int l, float base, float scale, float attn, bool local);

}  // namespace table_detail
}  // namespace akunu
