// Parameter structs shared by the table builder and every backend's kernels
// (the book's ShaderTypes.h). Plain 4-byte fields only, so the layout is the
// same in C++, CUDA and Metal. Fields named n_tokens / pos0 / row0 are patched
// per replay.
// Also included by the Metal kernels (AKUNU_MSL), where <cstdint> is built in.
#pragma once
#if !defined(AKUNU_MSL)
#include <cstdint>
#endif

namespace akunu {

struct EmbeddingParams {
    uint32_t dim;
    uint32_t n_tokens;
    uint32_t dtype;
    float scale;  // 1.0 unless the architecture scales embeddings (Gemma)
};

// y[t, :] = rmsnorm(x[t, :]) * (w + weight_offset), for rows = n_tokens * rows_per_token.
// layernorm uses the same fields: y = (x - mean) / sqrt(var + eps) * w + b.
struct NormParams {
    uint32_t dim;
    uint32_t n_tokens;
    uint32_t rows_per_token;
    uint32_t x_stride;  // floats between consecutive rows of x (and y)
    float eps;
    float weight_offset;
    uint32_t row0;  // first token row (head in last-row mode)
    uint32_t y_stride;
};

// y[t, n] = sum_k W[n, k] * x[t, k] (+ bias[n]); W is N x K in its dtype.
struct MatmulParams {
    uint32_t N;
    uint32_t K;
    uint32_t n_tokens;
    uint32_t dtype;
    uint32_t x_stride;
    uint32_t y_stride;
    uint32_t has_bias;
    uint32_t row0;  // first token row of x (head in last-row mode); y starts at row 0
    // Batch invariance (continuous batching's tables; 0 elsewhere): each row's
    // sum runs in an order fixed by the row's kind alone, never by n_tokens
    // or the other rows. Rows [0, generated_rows) hold generated tokens (a
    // decode row's path); the rest hold prompt tokens (a prefill path). A
    // backend whose kernels are row-independent anyway (CPU) ignores both.
    uint32_t invariant;
    uint32_t generated_rows;
};

// rope_rows: the same rotation with each row's position read from a rows
// buffer (buffer 2, int32 pairs (sequence, position); pos0 unused).
struct RopeParams {
    uint32_t n_heads;
    uint32_t head_dim;
    uint32_t n_tokens;
    uint32_t pos0;
    uint32_t row_stride;  // floats between tokens
    uint32_t neox;        // 1: rotate (i, i + d/2); 0: rotate (2i, 2i + 1)
    uint32_t has_freq_factors;
    float freq_base;
    float freq_scale;
    // Magnitude of cos and sin (YaRN's attention factor, mscale; 1 without
    // YaRN): the rotation scales both elements of each pair by it.
    float attn_factor;
};

struct KVWriteParams {
    uint32_t kv_dim;
    uint32_t n_tokens;
    uint32_t pos0;
    uint32_t k_stride;  // floats between tokens in the K source
    uint32_t v_stride;
    // Rows of the cache: position p is written at row kv_ring_row(p, max_ctx)
    // (core/kv_layout.h; a ring on sliding-window layers, n_ctx elsewhere).
    uint32_t max_ctx;
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
};

struct AttentionParams {
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_tokens;
    uint32_t pos0;
    uint32_t window;    // 0: full causal; else each query sees the last `window` positions
    uint32_t q_stride;  // floats between tokens in q
    uint32_t out_stride;
    float scale;
    // Rows of the cache: key position j is read from row kv_ring_row(j, max_ctx)
    // (a ring of max_ctx >= window + n_tokens - 1 rows on sliding-window
    // layers, so every key a query sees is still there; n_ctx elsewhere).
    uint32_t max_ctx;
    uint32_t causal;  // 1: causal (decoders); 0: each query sees keys [0, pos0 + n_tokens) (encoders)
    // 1: several sequences packed in one pass (encoders): buffer 4 holds each
    // token's [start, end) cache positions and a query sees only those keys
    uint32_t segmented;
    // non-zero: every query sees keys [0, n_keys), whatever pos0 (cross-attention
    // over an encoder output that is fixed for the whole decode)
    uint32_t n_keys;
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
    // Logit soft-capping (Gemma 2): a score s = scale * q.k becomes
    // softcap * tanh(s / softcap) before the softmax; 0: none.
    float softcap;
    // Attention sinks (gpt-oss): 1: buffer 7 holds n_heads float logits, one
    // a query head, and each query's softmax also spans that head's logit
    // sink[h] (taken as it is: not scaled, not capped) with a value vector of
    // zeros: out = sum_j e^(s_j) v_j / (sum_j e^(s_j) + e^(sink[h])).
    // Buffers 4 to 6 are bound (to anything) when it is set. 0: none.
    uint32_t sinks;
};

// Paged KV cache (continuous batching). Each token row t of a pass belongs to
// sequence rows[2t] at position rows[2t + 1] (buffer "rows", int32 pairs).
// Sequence s keeps its K/V in fixed-size blocks of a pool laid out as the
// contiguous cache ([pool row][row bytes], core/kv_layout.h): position p lives at pool row
//   tables[s * max_blocks + p / block_size] * block_size + p % block_size
// (buffer "tables", int32 block ids, one row of max_blocks per sequence).
// kv_write_paged buffers: 0 k, 1 v, 2 K pool, 3 V pool, 4 rows, 5 tables.
struct PagedKVWriteParams {
    uint32_t kv_dim;
    uint32_t n_tokens;
    uint32_t k_stride;  // floats between tokens in the K source
    uint32_t v_stride;
    uint32_t block_size;
    uint32_t max_blocks;
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
};

// attention_paged: causal attention of each row over its own sequence's keys
// [lo, pos] (lo = pos + 1 - window on windowed layers, else 0), read through
// the block table; GQA as `attention`. Buffers: 0 q, 1 K pool, 2 V pool,
// 3 out, 4 rows, 5 tables. A row's result depends only on its own sequence's
// cache, never on the other rows of the pass (batch invariance).
struct PagedAttentionParams {
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_tokens;
    uint32_t window;
    uint32_t q_stride;
    uint32_t out_stride;
    float scale;
    uint32_t block_size;
    uint32_t max_blocks;
    // Patched: the pass's leading generated rows (one query a sequence),
    // which a GPU may run through another kernel with the same meaning; 0 in
    // tables that do not patch it.
    uint32_t generated_rows;
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
    float softcap;  // as AttentionParams::softcap
    uint32_t sinks;  // as AttentionParams::sinks, the logits in buffer 6
};

// gather_rows: dst[r, :] = src[idx[r], :] for r < n_rows (the rows of a
// ragged pass whose logits are wanted). Buffers: 0 src, 1 idx (int32), 2 dst.
// Tensor parallelism (core/collective.h): x[t, 0..n) summed over the ranks,
// in place, for n_tokens rows n floats apart. accumulate: the sum is added
// to buffer 1 (the residual stream, same rows) instead, and x is left
// unspecified (scratch).
struct AllReduceParams {
    uint32_t n;
    uint32_t n_tokens;
    uint32_t accumulate;
};

// Tensor parallelism: each rank holds `cols` columns of an n_rows-row matrix
// (buffer 0, rows `cols` apart: rank r's columns [r * cols, (r + 1) * cols));
// out (buffer 1, rows out_stride apart) gets columns [0, out_cols) of the
// whole, the same on every rank; buffer 2 is staging of size x n_rows x cols
// floats (the gathered blocks, rank-major, before their interleaving).
struct AllGatherColsParams {
    uint32_t cols;
    uint32_t n_rows;
    uint32_t out_stride;
    uint32_t out_cols;
};

struct GatherRowsParams {
    uint32_t dim;
    uint32_t n_rows;
    uint32_t src_stride;
    uint32_t dst_stride;
};

// x[t, :] += table[pos0 + t, :] (learned absolute positions; table F32 [n_ctx, dim]).
// segmented: the row is t - start of the token's sequence (buffer 2: [start, end) per token).
struct AddRowsParams {
    uint32_t dim;
    uint32_t n_tokens;
    uint32_t pos0;
    uint32_t segmented;
};

// col[t, c * kernel_size + j] = x[t * stride + j - pad, c] (0 outside [0, in_len)):
// the columns of a 1-D convolution over x [in_len, channels], so that the
// convolution is one matmul with its weight read as [out, channels * kernel]
// (PyTorch's [out, in, k], row-major). Whisper's audio front end.
struct Im2ColParams {
    uint32_t channels;
    uint32_t n_out;
    uint32_t in_len;
    uint32_t kernel_size;
    uint32_t stride;
    uint32_t pad;
};

// out[t, i] = act(gate[t, i]) * up[t, i]. swiglu_oai (gpt-oss's experts)
// with the same parameters: g = min(gate, L), u = clamp(up, -L, L),
// out = g * sigmoid(kSwigluOaiAlpha * g) * (u + 1), L = kSwigluOaiLimit.
constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;
struct GatedActParams {
    uint32_t n;
    uint32_t n_tokens;
    uint32_t gate_stride;
    uint32_t up_stride;
    uint32_t out_stride;
};

// gemv_multi: fused decode projections over one input (n_tokens <= 8, rows
// contiguous: x [n_tokens, K], y_i [n_tokens, N_i]). Buffers: 0 x, 1 RMSNorm
// weights (norm = 1: x is normalized first, exactly as the rmsnorm kernel with
// dim K), 2..4 W0..W2 (dtype_i), 5..7 y0..y2. Modes:
//   Separate:   y_i = W_i x for i < n_mats (Q, K and V in one launch)
//   SiluGate / GeluGate: y0 = act(W0 x) * (W1 x) (gate and up; N0 == N1)
//   Accumulate: y0 += W0 x (a projection and its residual add)
// Meaning: the unfused sequence rmsnorm, gemv_<fmt>, silu_gate/gelu_gate, add_inplace.
enum MultiGemvMode : uint32_t { kGemvSeparate = 0, kGemvSiluGate = 1, kGemvGeluGate = 2, kGemvAccumulate = 3 };
struct MultiGemvParams {
    uint32_t K;
    uint32_t n_tokens;
    uint32_t n_mats;
    uint32_t mode;
    uint32_t N[3];
    uint32_t dtype[3];
    uint32_t norm;
    float eps;
    float weight_offset;
};

// qk_norm_rope_kv: the decode attention prologue in one launch. Per token t:
// q [n_heads * head_dim] and k [n_kv_heads * head_dim] get per-head RMSNorm
// (has_qk_norm, weights buffers 3 / 4) and RoPE at pos0 + t (freq factors
// buffer 5 when has_freq_factors), in place; then k and v (buffer 2) go to
// the caches (buffers 6 / 7) at row kv_ring_row(pos0 + t, max_ctx) (as
// KVWriteParams::max_ctx). Buffers 0 q, 1 k.
// Meaning: rmsnorm (q, k), rope (q, k), kv_write.
struct QKRopeKVParams {
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_tokens;
    uint32_t pos0;
    uint32_t has_qk_norm;
    float eps;
    float weight_offset;
    uint32_t neox;
    uint32_t has_freq_factors;
    float freq_base;
    float freq_scale;
    uint32_t max_ctx;
    float attn_factor;  // as RopeParams::attn_factor
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
};

// qk_norm_rope_kv_paged: qk_norm_rope_kv for the rows of a batch pass, each
// row at its own sequence and position (buffer 8 rows: int32 (sequence,
// position) pairs; buffer 9: block tables, as PagedKVWriteParams). Buffers
// 0 q, 1 k, 2 v, 3 / 4 QK-norm weights, 5 freq factors, 6 K pool, 7 V pool.
// Meaning: rmsnorm (q, k), rope_rows (q, k), kv_write_paged.
struct PagedQKRopeKVParams {
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t n_tokens;
    uint32_t has_qk_norm;
    float eps;
    float weight_offset;
    uint32_t neox;
    uint32_t has_freq_factors;
    float freq_base;
    float freq_scale;
    float attn_factor;
    uint32_t block_size;
    uint32_t max_blocks;
    // KV cache element types (core/kv_layout.h KvType; 0: F16)
    uint32_t k_type;
    uint32_t v_type;
};

// matmul_multi: y_i = W_i x (+ bias_i) for up to three matrices of one K and
// weight type (batch tables: q, k and v; gate and up). Buffers 0 x, 1-3 W,
// 4-6 y, 7-9 bias (unused slots repeat the first). Meaning: gemm_<fmt> of
// each matrix with `invariant` set and the pass's generated_rows.
struct MultiMatmulParams {
    uint32_t K;
    uint32_t n_tokens;
    uint32_t dtype;
    uint32_t x_stride;
    uint32_t n_mats;
    uint32_t has_bias;
    uint32_t generated_rows;
    uint32_t N[3];
    uint32_t y_stride[3];
};

// add_rmsnorm: h += y, then xn = rmsnorm(h) * (w + offset), per row (NormParams
// with rows_per_token 1 and row0 0; x_stride for h and y, y_stride for xn).
// Buffers 0 h, 1 y, 2 w, 3 xn. Meaning: add_inplace, rmsnorm.

// add_inplace: x += y; gelu_erf: x = gelu(x) (erf form), both over n * n_tokens floats
struct AddParams {
    uint32_t n;
    uint32_t n_tokens;
};

// softcap: x = cap * tanh(x / cap) over n * n_tokens floats (Gemma 2's final
// logit soft-capping, on the logits rows).
struct SoftcapParams {
    uint32_t n;
    uint32_t n_tokens;
    float cap;
};

// out[r] = argmax of logits row (row + r), r < n_rows (first index on ties).
struct ArgmaxParams {
    uint32_t vocab;
    uint32_t row;     // first logits row to reduce
    uint32_t n_rows;  // patched: n_tokens (1 for the head in last-row mode)
};

// One token drawn from logits row 0 (book Part V, sampled decode). The
// processed logits (bias, penalties, grammar mask; before temperature) are
// left in the work buffer. Order of filters: temperature, top_k, top_p, min_p;
// the draw is exact, from a counter-based RNG keyed by (seed, pos0), so a seed
// gives the same tokens however the chain is chunked.
// Buffers: 0 logits, 1 out id, 2 history (token fed at each position; the
// chosen id is written at pos0 + 1), 3 bias pairs (int32 id, float value),
// 4 mask (bit per token, 1 = allowed), 5 work (vocab floats + vocab int32).
struct SampleParams {
    uint32_t vocab;
    float temperature;        // 0: argmax of the processed logits
    uint32_t top_k;           // 0: off
    float top_p;              // 1: off
    float min_p;              // 0: off
    float repeat_penalty;     // 1: off
    float presence_penalty;   // 0: off
    float frequency_penalty;  // 0: off
    uint32_t penalty_window;  // latest context tokens the penalties see
    uint32_t n_bias;
    uint32_t seed_lo, seed_hi;
    uint32_t pos0;      // patched: position of the token just fed
    uint32_t use_mask;  // 0: buffer 4 ignored
};

// Mixture-of-experts FFN (backend/*/kernels/moe.*). moe_route: per token, the
// router logits (buffer 0, row stride logit_stride) become probabilities
// (gating: softmax over all experts, or sigmoid each), the n_used largest are
// chosen (ties: the lower expert id first), their probabilities are the
// weights, divided by their sum when norm_topk (the sum clamped below at
// 2^-14 as llama.cpp does), then multiplied by weight_scale unless it is 0 or
// 1. Buffer 1 (the route, row stride route_stride floats) gets per token the
// n_used expert ids (int32, in that order) followed by their n_used weights.
enum MoeGating : uint32_t { kMoeSoftmax = 0, kMoeSigmoid = 1 };
struct MoeRouteParams {
    uint32_t n_experts;
    uint32_t n_used;
    uint32_t n_tokens;
    uint32_t gating;
    uint32_t norm_topk;
    uint32_t logit_stride;
    uint32_t route_stride;
    float weight_scale;
};

// moe_matmul (llama.cpp's mul_mat_id): for token t and slot j < n_used, with
// e = the route's id (t, j): r = W[e] x(t, j), W[e] the N x K matrix e of the
// expert tensor (buffer 0, n_experts of them back to back in dtype), x(t, j)
// = x[t * x_stride + j * x_slot_stride] (x_slot_stride 0: every slot reads
// the token's one row). Buffers: 0 W, 1 x, 2 y, 3 route (as moe_route).
//   weighted = 0: y[t * y_stride + j * y_slot_stride, :] = r
//   weighted = 1: y[t * y_stride, :] = sum over the slots of weight(t, j) * r,
//                 summed in ascending expert id (an order fixed by the row alone)
// bias = 1: buffer 4 holds float biases, N a matrix of the tensor (expert e
// at (e - first_expert) * N), added to r before it is stored or weighted
// (gpt-oss). Only the selected experts' rows are read. invariant / generated_rows as in
// MatmulParams (batch tables), for the per-expert matmuls. first_expert:
// the tensor holds experts [first_expert, first_expert + n_experts) of the
// model (a tensor-parallel rank's whole experts; 0 elsewhere): a route id e
// means matrix e - first_expert, and ids outside that range add nothing.
struct MoeMatmulParams {
    uint32_t N;
    uint32_t K;
    uint32_t n_tokens;
    uint32_t dtype;
    uint32_t n_experts;
    uint32_t n_used;
    uint32_t x_stride;
    uint32_t x_slot_stride;
    uint32_t y_stride;
    uint32_t y_slot_stride;
    uint32_t route_stride;
    uint32_t weighted;
    uint32_t invariant;
    uint32_t generated_rows;
    uint32_t first_expert;
    uint32_t bias;
};

// moe_shared_add: y[t, :] += g(t) * x[t, :] over dim floats, the shared
// expert's output x added to the routed experts' sum y with g(t) =
// sigmoid(gate[t * gate_stride]) when gated (Qwen2-MoE's shared expert
// gate), else 1. Buffers: 0 x, 1 gate, 2 y.
struct MoeSharedAddParams {
    uint32_t dim;
    uint32_t n_tokens;
    uint32_t x_stride;
    uint32_t y_stride;
    uint32_t gate_stride;
    uint32_t gated;
};

}  // namespace akunu
