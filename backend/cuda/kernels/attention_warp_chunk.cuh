// One warp's share of a decode attention on the tensor cores: the query heads
// of one KV group (G <= 8) are the rows of m16n8k16 products (rows past G
// zero), and the warp walks its keys in chunks of 16 staged in shared memory
// (K and V rows of HD + 8 halves: the padding keeps ldmatrix rows free of
// bank conflicts), keeping an online softmax per head in registers as the
// prefill kernel does (attention_prefill.cuh): S = Q K^T from K's rows by
// ldmatrix, exponentials base 2 (the scale carries log2 e), rounded to F16 as
// the A fragment of O += P V, V's B fragments by ldmatrix.trans.
//
// Lane (g, t) = (lane / 4, lane % 4) holds head g's running max m (base 2),
// its share of the sum l (the quad's four add up to it) and its output dims
// 8i + 2t, 8i + 2t + 1 in o[i][0..1] (o[i][2..3]: the zero rows g + 8).
//
// Meaning as the CPU twin (backend/cpu/kernels/attention.cpp): Q rounded to
// F16, F32 scores times the scale, softmax weights rounded to F16 (here the
// unnormalized exp(s - running max)), F32 sums.
//
// Used by attention_paged_split.cuh and attention_decode_gqa.cuh.
#pragma once
#include <cstddef>
#include <cstdint>

#include "async_copy.cuh"
#include "device_math.cuh"
#include "mma.cuh"

namespace akunu {
namespace attention_warp_chunk {

constexpr int kKeys = 16;  // keys a chunk: the k of P V
constexpr float kLog2e = 1.4426950408889634f;

template <int HD>
constexpr int row_halves() { return HD + 8; }
// A chunk's K rows then V rows.
template <int HD>
constexpr int chunk_halves() { return 2 * kKeys * row_halves<HD>(); }

// A chunk's K and V rows (16 keys) into slot ks by cp.async, one 16-byte
// piece a lane at a time: row(key, off) gives the element offset of the
// key's row from krows / vrows, or false for a key to leave zero (past the
// range, or put in later). Commits nothing (the caller's group).
template <int HD, class Row>
__device__ __forceinline__ void stage_chunk(uint16_t* ks, const uint16_t* krows, const uint16_t* vrows, Row& row) {
    constexpr int LD = row_halves<HD>();
    uint16_t* vs = ks + kKeys * LD;
#pragma unroll
    for (int c = threadIdx.x % 32; c < kKeys * HD / 8; c += 32) {
        const int key = c / (HD / 8), col = (c % (HD / 8)) * 8;
        ptrdiff_t off = 0;
        const bool valid = row(key, off);
        off = (valid ? off : 0) + col;
        copy16_async(ks + key * LD + col, krows + off, valid);
        copy16_async(vs + key * LD + col, vrows + off, valid);
    }
}

// Head g < G of heads (g * HD floats apart) as A fragments, rounded to F16.
template <int HD, int G>
__device__ __forceinline__ void load_q(const float* heads, uint32_t (&qa)[HD / 16][4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float* qs = heads + (size_t)(g < G ? g : 0) * HD + 2 * t;
#pragma unroll
    for (int s = 0; s < HD / 16; s++) {
        const float2 a = *reinterpret_cast<const float2*>(qs + 16 * s);
        const float2 b = *reinterpret_cast<const float2*>(qs + 16 * s + 8);
        qa[s][0] = g < G ? pack_half2(a.x, a.y) : 0u;
        qa[s][2] = g < G ? pack_half2(b.x, b.y) : 0u;
        qa[s][1] = qa[s][3] = 0u;
    }
}

template <int HD>
__device__ __forceinline__ void start(float& m, float& l, float (&o)[HD / 8][4]) {
    m = -INFINITY;
    l = 0.0f;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
}

// The chunk at ks (its V rows after its K rows); key i of it is live when
// i < live_keys (the rest masked). scale2: the scores' map (device_math.cuh),
// base 2.
template <int HD>
__device__ __forceinline__ void add_chunk(const uint16_t* ks, int live_keys, const uint32_t (&qa)[HD / 16][4],
                                          ScoreMap scale2, float& m, float& l, float (&o)[HD / 8][4]) {
    constexpr int LD = row_halves<HD>();
    const int lane = threadIdx.x % 32, t = lane % 4;
    const uint16_t* vs = ks + kKeys * LD;
    // S = Q K^T, 16 rows x 16 keys (B(k = d, n = key) = K[key][d]): one
    // ldmatrix gives both key octets' B fragments of a 16-dim step.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int d16 = 0; d16 < HD / 16; d16++) {
        uint32_t b[4];
        ldmatrix_x4(b, ks + ((lane / 16) * 8 + lane % 8) * LD + 16 * d16 + 8 * (lane / 8 % 2));
        mma_16816(s[0], qa[d16], b[0], b[1]);
        mma_16816(s[1], qa[d16], b[2], b[3]);
    }
    // Head g's scores (c = 0, 1 of each octet; c = 2, 3 are the zero rows g + 8);
    // its four lanes (the quad) hold all 16 keys.
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            s[nt][c] = nt * 8 + 2 * t + c < live_keys ? __fmul_rn(scale2.cap(s[nt][c]), scale2.mul) : -INFINITY;
            mx = fmaxf(mx, s[nt][c]);
        }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(m, mx);  // (finite: a chunk has a live key)
    const float alpha = exp2_ftz(m - mn);
    m = mn;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            s[nt][c] = exp2_ftz(s[nt][c] - mn);
            sum += s[nt][c];
        }
    l = l * alpha + sum;
    if (__any_sync(0xffffffffu, alpha != 1.0f)) {
#pragma unroll
        for (int d = 0; d < HD / 8; d++) {
            o[d][0] *= alpha;
            o[d][1] *= alpha;
        }
    }
    // O += P V (P's rows g + 8 zero)
    const uint32_t pa[4] = {pack_half2(s[0][0], s[0][1]), 0u, pack_half2(s[1][0], s[1][1]), 0u};
#pragma unroll
    for (int nt = 0; nt < HD / 8; nt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + (lane % 16) * LD + (nt + lane / 16) * 8);
        mma_16816(o[nt], pa, b[0], b[1]);
        mma_16816(o[nt + 1], pa, b[2], b[3]);
    }
}

// The warp's chunks 0 .. n - 1 through its ring of S slots, S - 1 of them
// staged before the call: issue(i, slot) stages chunk i (and commits a
// group, empty past the last chunk, so the waits count alike); live(i, ks),
// once chunk i has landed, gives its live keys (and may write rows in, then
// __syncwarp).
template <int HD, int S, class Issue, class Live>
__device__ __forceinline__ void walk(uint16_t* ring, uint32_t n, Issue& issue, Live& live,
                                     const uint32_t (&qa)[HD / 16][4], ScoreMap scale2, float& m, float& l,
                                     float (&o)[HD / 8][4]) {
    for (uint32_t i = 0; i < n; i++) {  // warp-uniform
        issue(i + S - 1, (i + S - 1) % S);  // (the slot consumed last iteration)
        copy_wait<S - 1>();
        __syncwarp();  // chunk i landed for every lane
        uint16_t* ks = ring + (i % S) * chunk_halves<HD>();
        add_chunk<HD>(ks, live(i, ks), qa, scale2, m, l, o);
        __syncwarp();  // every lane's reads of this slot done before it is refilled
    }
    copy_wait<0>();  // no copy outstanding at exit
}

// The warp's state for heads g < G to shared memory: wm[g] (times m_scale:
// ln 2 gives natural-log maxima), wl[g] (the quad's sum), acc[g * HD + d].
template <int HD, int G>
__device__ __forceinline__ void store_warp(float m, float l, const float (&o)[HD / 8][4], float m_scale, float* wm,
                                           float* wl, float* acc) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g >= G) return;
    if (t == 0) {
        wm[g] = m * m_scale;
        wl[g] = l;
    }
    float* row = acc + (size_t)g * HD + 2 * t;
#pragma unroll
    for (int d = 0; d < HD / 8; d++) *reinterpret_cast<float2*>(row + 8 * d) = make_float2(o[d][0], o[d][1]);
}

}  // namespace attention_warp_chunk
}  // namespace akunu
