// Attention (causal with GQA and sliding window; bidirectional; cross over a
// fixed key set) against the KV cache, and the KV-cache write, with the
// CPU twin's precision (backend/cpu/kernels/attention.cpp: Q and softmax
// weights rounded to F16, as llama.cpp). Three kernels take a pass:
// - one query token: flash-decoding over key splits (attention_decode.cuh);
// - many tokens, causal or not, packed sequences (encoders) too: flash
//   attention on the tensor cores (attention_prefill.cuh);
// - the rest (cross attention, other head sizes): the general kernel here,
//   one thread block per (token, head), scores in shared memory.
// Caches of another element type than F16 (core/kv_layout.h) take the
// one-token kernel of attention_decode_kv.cuh; the prefill kernel converts
// their tiles to F16 as it stages them; the general kernel reads any type.
// The paged-KV twins of attention and kv_write (attention_paged,
// kv_write_paged: each row at its own sequence and position, K/V read through
// block tables) are in attention_paged.cuh.
// Attention sinks (AttentionParams::sinks, gpt-oss: buffer 7) reach every one
// of these kernels, each joining a head's sink once a row where the row's
// softmax is final (device_math.cuh join_sink).
#include <cfloat>
#include <cstring>

#include "attention_decode.cuh"
#include "attention_decode_kv.cuh"
#include "attention_paged.cuh"
#include "attention_prefill.cuh"
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_rows_check.h"
#include "cuda_kernel.h"
#include "device_math.cuh"
#include "kv_cache.cuh"

namespace akunu {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxShared = 200 * 1024;

__device__ float block_reduce(float v, float* red, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = red[0];
        for (int i = 1; i < kThreads / 32; i++) r = is_max ? fmaxf(r, red[i]) : r + red[i];
        red[0] = r;
    }
    __syncthreads();
    float r = red[0];
    __syncthreads();
    return r;
}

// sinks: the heads' sink logits (AttentionParams::sinks), or nullptr.
__global__ void attention_kernel(AttentionParams p, const float* q, const uint8_t* kc, const uint8_t* vc,
                                 float* out, const int32_t* seg, const float* sinks) {
    extern __shared__ float smem[];
    __shared__ float red[kThreads / 32];
    const uint32_t t = blockIdx.x / p.n_heads, h = blockIdx.x % p.n_heads;
    const uint32_t kv_dim = p.n_kv_heads * p.head_dim;
    const uint32_t group = p.n_heads / p.n_kv_heads;
    const uint32_t pos = p.pos0 + t;
    uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    uint32_t last = p.causal ? pos : p.pos0 + p.n_tokens - 1;  // encoders see every key of the pass
    if (seg) {  // packed sequences: only the token's own
        lo = (uint32_t)seg[2 * t];
        last = (uint32_t)seg[2 * t + 1] - 1;
    }
    if (p.n_keys) {  // cross-attention: the whole (fixed) encoder output
        lo = 0;
        last = p.n_keys - 1;
    }
    const uint32_t n = last + 1 - lo;
    // key lo + j at ring row ring_add(lo_row, j) (n <= the cache's rows: launch_attention checks)
    const uint32_t lo_row = kv_ring_row(lo, p.max_ctx);
    float* qr = smem;                 // head_dim
    float* scores = smem + p.head_dim;  // n
    const float* qsrc = q + (size_t)t * p.q_stride + (size_t)h * p.head_dim;
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) qr[d] = f16_to_f32(f32_to_f16(qsrc[d]));
    __syncthreads();
    const size_t koff = (size_t)(h / group) * p.head_dim;
    // a warp per key, its lanes splitting the head dimension
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    const ScoreMap score = score_map(p.scale, p.softcap, 1.0f);
    float mx = -FLT_MAX;
    for (uint32_t j = warp; j < n; j += n_warps) {
        const uint8_t* kr = kv_cache::row_at(kc, p.k_type, kv_dim, kv_cache::ring_add(lo_row, j, p.max_ctx));
        float s = 0.0f;
        for (uint32_t d = lane; d < p.head_dim; d += 32) s += qr[d] * kv_cache::load(p.k_type, kr, kv_dim, koff + d);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        s = score.cap(s);
        s *= score.mul;
        if (lane == 0) scores[j] = s;
        mx = fmaxf(mx, s);
    }
    __syncthreads();
    mx = block_reduce(mx, red, true);
    float sum = 0.0f;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float e = expf(scores[j] - mx);
        scores[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, red, false);
    // a sink joins the max and the sum: every weight e^(s - mx) / sum times c
    const float c = sink_factor<false>(sinks, h, mx, sum);
    const float inv = c / sum;
    for (uint32_t j = threadIdx.x; j < n; j += blockDim.x) scores[j] = f16_to_f32(f32_to_f16(scores[j] * inv));
    __syncthreads();
    // weighted sum of V: warps split the keys, lanes the head dimension (up to
    // 8 values each, so head_dim <= 256); the warps' partial sums meet in shared memory.
    __shared__ float partial[kThreads / 32][256];
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint32_t per_lane = (p.head_dim + 31) / 32;
    for (uint32_t j = warp; j < n; j += n_warps) {
        const uint8_t* vr = kv_cache::row_at(vc, p.v_type, kv_dim, kv_cache::ring_add(lo_row, j, p.max_ctx));
        const float w = scores[j];
        for (uint32_t i = 0; i < per_lane; i++) {
            const uint32_t d = lane + 32 * i;
            if (d < p.head_dim) acc[i] += w * kv_cache::load(p.v_type, vr, kv_dim, koff + d);
        }
    }
    for (uint32_t i = 0; i < per_lane; i++) {
        const uint32_t d = lane + 32 * i;
        if (d < p.head_dim) partial[warp][d] = acc[i];
    }
    __syncthreads();
    float* o = out + (size_t)t * p.out_stride + (size_t)h * p.head_dim;
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
        float v = 0.0f;
        for (uint32_t w = 0; w < n_warps; w++) v += partial[w][d];
        o[d] = v;
    }
}

// A typed cache's keys [first, first + n_rows) as F16 rows at the same
// positions of the staging buffers (n_ctx rows, so never a ring), read from
// their ring rows (first's is first_row; n_rows <= the cache's rows): a
// thread converts 8 values (kv_cache.cuh load8_f16).
__global__ void stage_f16_kernel(AttentionParams p, uint32_t first, uint32_t first_row, uint32_t n_rows,
                                 const uint8_t* kc, const uint8_t* vc, uint16_t* ks, uint16_t* vs) {
    const uint32_t kv_dim = p.n_kv_heads * p.head_dim, per_row = kv_dim / 8;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n_rows * per_row) return;
    const uint32_t j = (uint32_t)(idx / per_row), i = (uint32_t)(idx % per_row) * 8;
    const size_t pos = first + j, row = kv_cache::ring_add(first_row, j, p.max_ctx);
    *reinterpret_cast<uint4*>(ks + pos * kv_dim + i) =
        kv_cache::load8_f16(p.k_type, kv_cache::row_at(kc, p.k_type, kv_dim, row), kv_dim, i);
    *reinterpret_cast<uint4*>(vs + pos * kv_dim + i) =
        kv_cache::load8_f16(p.v_type, kv_cache::row_at(vc, p.v_type, kv_dim, row), kv_dim, i);
}

// A many-token pass over a typed cache with staging rows (buffers 5 / 6,
// KVCache::stage_k / stage_v): the keys the pass reads converted to F16 once,
// then the F16 tensor-core kernel over them (converting in every tile costs
// each key once per 64 queries of every head). Buffers 5 / 6 are staging
// rows only where they hold the pass's positions (with sinks, buffers 4 to 6
// may be bound to anything).
bool launch_staged_prefill(const CudaArgs& a, const AttentionParams& p) {
    if ((p.k_type == kKvF16 && p.v_type == kKvF16) || p.n_tokens < 2 || !a.buf[5] || !a.buf[6]) return false;
    if (p.segmented || p.n_keys || !p.causal || (p.n_kv_heads * p.head_dim) % 8) return false;
    const size_t stage_bytes = ((size_t)p.pos0 + p.n_tokens) * p.n_kv_heads * p.head_dim * sizeof(uint16_t);
    if (a.buf_bytes[5] < stage_bytes || a.buf_bytes[6] < stage_bytes) return false;
    const uint32_t first = (p.window && p.pos0 + 1 > p.window) ? p.pos0 + 1 - p.window : 0;
    const uint32_t rows = p.pos0 + p.n_tokens - first;
    const size_t n = (size_t)rows * (p.n_kv_heads * p.head_dim / 8);
    AttentionParams f16 = p;
    f16.k_type = f16.v_type = kKvF16;
    // The stage holds each position at its own row (n_ctx rows, past every
    // position of the pass): no ring there, whatever the cache's rows.
    f16.max_ctx = p.pos0 + p.n_tokens;
    CudaArgs b = a;
    b.buf[1] = a.buf[5];
    b.buf[2] = a.buf[6];
    std::memcpy(b.params, &f16, sizeof(f16));
    if (!attention_prefill::takes(b, f16)) return false;
    stage_f16_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, first, kv_ring_row(first, p.max_ctx), rows,
                                                               a.b<uint8_t>(1), a.b<uint8_t>(2), b.b<uint16_t>(1),
                                                               b.b<uint16_t>(2));
    return attention_prefill::launch(b, f16);
}

void launch_attention(const CudaArgs& a) {
    AttentionParams p = a.p<AttentionParams>();
    if (p.head_dim > 256) throw Error("CUDA attention: head_dim " + std::to_string(p.head_dim) + " > 256");
    if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("CUDA attention: unknown KV cache type");
    // keys at their ring rows: the rows must still hold every key of the pass
    if (const char* problem = kv_rows_problem(p)) throw Error(std::string("CUDA attention: ") + problem);
    if (attention_decode::launch(a, p)) return;
    if (attention_decode_kv::launch(a, p)) return;
    if (launch_staged_prefill(a, p)) return;
    if (attention_prefill::launch(a, p)) return;
    // The general kernel's shared memory grows with the position: not capturable.
    if (a.replay_pos) throw Error("CUDA attention: this pass cannot run inside a decode graph");
    allow_dynamic_shared((const void*)attention_kernel, (int)kMaxShared);
    size_t span = p.n_keys ? (size_t)p.n_keys : (size_t)p.pos0 + p.n_tokens;
    if (p.window && span > p.window) span = p.window;
    const size_t shared = (span + p.head_dim) * sizeof(float);
    if (shared > kMaxShared)
        throw Error("CUDA attention: context of " + std::to_string(span) + " positions exceeds this kernel's " +
                    std::to_string(kMaxShared / 4 - p.head_dim));
    attention_kernel<<<p.n_tokens * p.n_heads, kThreads, shared, a.stream>>>(
        p, a.b<float>(0), a.b<uint8_t>(1), a.b<uint8_t>(2), a.b<float>(3), p.segmented ? a.b<int32_t>(4) : nullptr,
        p.sinks ? a.b<float>(7) : nullptr);
}

// Q8Link writer: one-token decode attention rounds its output for the next
// command (the output projection) when asked.
bool attention_q8_output(const CudaArgs& a, Q8Link* link) {
    const AttentionParams p = a.p<AttentionParams>();
    if (!attention_decode::takes(p)) return false;
    *link = Q8Link{a.b<float>(3), p.n_heads * p.head_dim, 1};
    link->kind = kQ8LinkAttention;
    return true;
}

// K/V rounded to the F16 cache with the CPU's rounding (round to nearest
// even), each token at its position's ring row (a division only where the
// position has passed the rows: a ring's, one a thread).
__global__ void kv_write_kernel(KVWriteParams p, const float* k, const float* v, uint16_t* kc, uint16_t* vc,
                                const uint32_t* replay_pos) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.kv_dim * p.n_tokens) return;
    const size_t t = idx / p.kv_dim, i = idx % p.kv_dim;
    const uint32_t row = kv_ring_row(replay_position(replay_pos, p.pos0) + (uint32_t)t, p.max_ctx);
    const size_t dst = (size_t)row * p.kv_dim + i;
    kc[dst] = f32_to_f16(k[t * p.k_stride + i]);
    vc[dst] = f32_to_f16(v[t * p.v_stride + i]);
}

// Other cache types: a block per token, its K row then its V row in the
// cache's rounding (kv_cache.cuh).
__global__ void kv_write_typed_kernel(KVWriteParams p, const float* k, const float* v, uint8_t* kc, uint8_t* vc,
                                      const uint32_t* replay_pos) {
    const size_t t = blockIdx.x;
    const uint32_t row = kv_ring_row(replay_position(replay_pos, p.pos0) + (uint32_t)t, p.max_ctx);
    kv_cache::store_span_block(p.k_type, kv_cache::row_at(kc, p.k_type, p.kv_dim, row), p.kv_dim, 0, p.kv_dim,
                               k + t * p.k_stride);
    kv_cache::store_span_block(p.v_type, kv_cache::row_at(vc, p.v_type, p.kv_dim, row), p.kv_dim, 0, p.kv_dim,
                               v + t * p.v_stride);
}

void launch_kv_write(const CudaArgs& a) {
    KVWriteParams p = a.p<KVWriteParams>();
    kv_cache::check_ring_write("kv_write", p.max_ctx, p.n_tokens);
    if (p.k_type != kKvF16 || p.v_type != kKvF16) {
        if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("kv_write: unknown KV cache type");
        if (p.kv_dim % kKvBlock) throw Error("kv_write: a Q8_0 / Q4_0 cache needs rows of whole 32-value blocks");
        if (p.n_tokens) kv_write_typed_kernel<<<p.n_tokens, 128, 0, a.stream>>>(
            p, a.b<float>(0), a.b<float>(1), a.b<uint8_t>(2), a.b<uint8_t>(3), a.replay_pos);
        return;
    }
    const size_t n = (size_t)p.kv_dim * p.n_tokens;
    kv_write_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1), a.b<uint16_t>(2),
                                                              a.b<uint16_t>(3), a.replay_pos);
}

}  // namespace

extern const CudaKernelEntry kCudaAttentionKernels[] = {
    {"attention", launch_attention, true, attention_q8_output, nullptr, attention_decode::absorbs},
    {"kv_write", launch_kv_write, true},
    {"attention_paged", attention_paged::launch},
    {"kv_write_paged", attention_paged::launch_kv_write},
    {nullptr, nullptr},
};

}  // namespace akunu
