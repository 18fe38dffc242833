// Mixture-of-experts kernels (CPU twin: backend/cpu/kernels/moe.cpp; the
// meaning: core/kernel_params.h, MoeRouteParams, MoeMatmulParams,
// MoeSharedAddParams). No kernel reads anything from the host: expert ids
// come from the route buffer, so the commands replay in one command buffer.
//   moe_route        one SIMD group a token: softmax / sigmoid, top-k with
//                    the CPU's tie and NaN rules, normalization, scale
//   moe_matmul_*     the selected experts' rows only (llama.cpp's
//                    mul_mat_id), one output row a SIMD group:
//     *_slots_gemv   few tokens, per (token, slot): y(t, j) = W[e] x(t, j)
//     *_sum_gemv     few tokens, per token: y(t) = sum_j w(t, j) W[e] x(t, j)
//     *_slots        many tokens, per (row group, expert): the expert's
//                    (token, slot) rows listed, each block of W[e] decoded
//                    once for up to kMoeChunk of them
//     *_sum          many tokens, per row group: the pass's rows sorted by
//                    expert (stable), the experts taken in ascending id
//   moe_shared_add   one thread an element
// Every (token, slot, row) dot is the same sequence of float operations in
// all four matmul kernels (lanes take blocks lane, lane + 32, ..., then
// simd_sum), and the weighted sums add the slots in ascending (expert id,
// slot) order, the CPU's: a row's result depends on the row alone, never on
// the other rows of the pass or on the variant (batch invariance).
#include "formats.h"

// Must match metal_launch.cpp.
enum { kMoeMaxExperts = 4096 };  // ModelConfig's bound on expert_count
enum { kMoeMaxUsed = 64 };       // and on expert_used_count
enum { kMoeChunk = 8 };          // routed rows a SIMD group multiplies at once (registers; a multiple of 4)
enum { kMoeSlotRows = 4 };       // moe_matmul_slots: output rows a SIMD group (one listing serves them all)
enum { kMoeWindow = 2048 };      // routed rows listed at once (threadgroup memory, 16-bit indices)

// ---- moe_route ------------------------------------------------------------------

// A float held as an unevaluated sum hi + lo (about 48 bits): the CPU sums the
// softmax terms in double, which Metal does not have. TwoSum keeps the
// rounding error of each addition.
struct MoeSum {
    float hi, lo;
};
inline MoeSum moe_add(MoeSum a, float b) {
    const float s = a.hi + b, bb = s - a.hi, err = (a.hi - (s - bb)) + (b - bb);
    return MoeSum{s, a.lo + err};
}
inline MoeSum moe_add(MoeSum a, MoeSum b) {
    MoeSum r = moe_add(a, b.hi);
    r.lo += b.lo;
    return r;
}

// Buffers: 0 router logits, 1 route (see MoeRouteParams). One SIMD group a
// token; threadgroup memory: the token's n_experts probabilities, a chosen
// expert's overwritten with kTaken.
kernel void moe_route(device const float* logits [[buffer(0)]], device uint8_t* route [[buffer(1)]],
                      constant MoeRouteParams& p [[buffer(AK_PARAMS)]], threadgroup float* probs AK_THREADGROUP_MEMORY,
                      AK_THREAD_ARGS) {
    const float kTaken = -1.0f;  // below every probability (softmax and sigmoid give >= 0 or NaN)
    const uint t = tgpig.x, n = p.n_experts, k = min(p.n_used, p.n_experts);
    device const float* l = logits + (ulong)t * p.logit_stride;
    const bool sigmoid = p.gating == kMoeSigmoid;
    // The CPU's running max from l[0]: a NaN there stays, later NaNs are passed over.
    float m = -INFINITY;
    for (uint e = tiisg; e < n; e += 32) m = l[e] > m ? l[e] : m;
    m = simd_max(m);
    if (isnan(l[0])) m = l[0];
    MoeSum sum = {0.0f, 0.0f};
    for (uint e = tiisg; e < n; e += 32) {
        const float pe = sigmoid ? 1.0f / (1.0f + exp(-l[e])) : exp(l[e] - m);
        probs[e] = pe;
        sum = moe_add(sum, pe);
    }
    if (!sigmoid) {
        for (ushort o = 16; o > 0; o >>= 1)
            sum = moe_add(sum, MoeSum{simd_shuffle_xor(sum.hi, o), simd_shuffle_xor(sum.lo, o)});
        // lane 0's value for all: lanes combined the partial sums in different orders
        sum.hi = simd_broadcast(sum.hi, 0);
        sum.lo = simd_broadcast(sum.lo, 0);
        // 1 / (hi + lo) rounded once, as the CPU's (float)(1.0 / sum): a Newton step on the float reciprocal
        const float r0 = 1.0f / (sum.hi + sum.lo);
        const float res = fma(-r0, sum.hi, 1.0f) - r0 * sum.lo;
        const float inv = fma(r0, res, r0);
        for (uint e = tiisg; e < n; e += 32) probs[e] *= inv;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    device int* ids = (device int*)(route + (ulong)t * p.route_stride * 4);
    device float* w = (device float*)(ids + p.n_used);
    // The CPU's pick: start at the first expert not taken; a larger
    // probability replaces the best (strictly: the lower id wins ties, a NaN
    // never replaces and is never replaced by a later one). So the first
    // untaken expert when its probability is NaN, else the largest non-NaN
    // probability among the untaken, lowest id first.
    // Every lane reads probs only before the pick's SIMD reductions: lane 0
    // marks the pick taken after them.
    for (uint j = 0; j < k; j++) {
        uint first = 0xFFFFFFFFu, best = 0xFFFFFFFFu;
        bool first_nan = false;
        float bp = kTaken;
        for (uint e = tiisg; e < n; e += 32) {
            const float pe = probs[e];
            if (pe == kTaken) continue;
            if (first == 0xFFFFFFFFu) {
                first = e;
                first_nan = isnan(pe);
            }
            if (pe > bp) {
                bp = pe;
                best = e;
            }
        }
        const uint f = simd_min(first);  // k <= n: some expert is untaken
        const bool nan_first = simd_max(first == f && first_nan ? 1u : 0u) != 0;
        uint pick = f;
        if (!nan_first) {
            const float top = simd_max(bp);
            pick = simd_min(bp == top ? best : 0xFFFFFFFFu);
        }
        if (tiisg == 0) {
            ids[j] = (int)pick;
            w[j] = probs[pick];
            probs[pick] = kTaken;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tiisg != 0) return;
    if (p.norm_topk) {
        float s = 0.0f;
        for (uint j = 0; j < k; j++) s += w[j];
        s = s < 6.103515625e-5f ? 6.103515625e-5f : s;  // llama.cpp's clamp; a NaN sum stays NaN, as the CPU's
        for (uint j = 0; j < k; j++) w[j] /= s;
    }
    if (p.weight_scale != 0.0f && p.weight_scale != 1.0f)
        for (uint j = 0; j < k; j++) w[j] *= p.weight_scale;
}
AK_EXPORT_KERNEL(moe_route)

// ---- moe_matmul -----------------------------------------------------------------

// The matrix of this tensor that slot j of token t names (first_expert: a
// tensor-parallel rank's first expert); outside [0, n_experts): none.
inline int moe_expert(device const uint8_t* route, constant MoeMatmulParams& p, uint t, uint j) {
    return ((device const int*)(route + (ulong)t * p.route_stride * 4))[j] - (int)p.first_expert;
}
inline bool moe_held(int e, constant MoeMatmulParams& p) { return e >= 0 && (uint)e < p.n_experts; }
inline float moe_weight(device const uint8_t* route, constant MoeMatmulParams& p, uint t, uint j) {
    return ((device const float*)(route + (ulong)t * p.route_stride * 4))[p.n_used + j];
}
inline ulong moe_row_bytes(constant MoeMatmulParams& p) {
    return (ulong)(p.K / FmtAny::be(p.dtype)) * FmtAny::bb(p.dtype);
}
inline device const float* moe_x(device const float* x, constant MoeMatmulParams& p, uint t, uint j) {
    return x + (ulong)t * p.x_stride + (ulong)j * p.x_slot_stride;
}
// Matrix e's bias of output n (MoeMatmulParams::bias, gpt-oss), 0 without.
inline float moe_bias(device const float* bias, constant MoeMatmulParams& p, int e, uint n) {
    return p.bias ? bias[(ulong)e * p.N + n] : 0.0f;
}

// acc[i] += this lane's share of row . xs[i] for i < m: the lanes take the
// row's blocks lane, lane + 32, ... and decode each once for the m vectors.
// (The weight format is a run-time choice, uniform in a dispatch; float
// formats with K % 4 == 0 load four values at once, as the GEMVs.)
inline void moe_dots(device const uint8_t* row, uint dtype, uint K, device const float* thread* xs, uint m, uint lane,
                     thread float* acc) {
    const bool vec = any_load4_ok(dtype) && K % 4 == 0;
    const uint be = vec ? 4 : FmtAny::be(dtype), bb = vec ? 4 * FmtAny::bb(dtype) : FmtAny::bb(dtype), nb = K / be;
    float w[FmtAny::MAX_BE];
    for (uint b = lane; b < nb; b += 32) {
        if (vec) any_load4(row + (ulong)b * bb, w, dtype);
        else FmtAny::decode(row + (ulong)b * bb, w, dtype);
        for (uint i = 0; i < m; i++) {
            device const float* xb = xs[i] + (ulong)b * be;
            float s = 0.0f;
            for (uint q = 0; q < be; q++) s += w[q] * xb[q];
            acc[i] += s;
        }
    }
}

// acc[i] for i < m summed over the SIMD group, in every lane: four sums a
// SIMD exchange (acc holds a multiple of 4). The GEMV kernels (m = 1) take
// the same path, so each sum is the same operations in every kernel.
inline void moe_simd_sums(thread float* acc, uint m) {
    for (uint i = 0; i < m; i += 4) {
        float4 v = 0.0f;
        v.x = acc[i];
        v.y = acc[i + 1];
        v.z = acc[i + 2];
        v.w = acc[i + 3];
        v = simd_sum(v);
        acc[i] = v.x;
        acc[i + 1] = v.y;
        acc[i + 2] = v.z;
        acc[i + 3] = v.w;
    }
}

// One (token, slot) a threadgroup row of the grid (y), one output row a SIMD
// group. Grid: (ceil(N / SIMD groups), n_tokens * n_used).
kernel void moe_matmul_slots_gemv(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                                  device float* y [[buffer(2)]], device const uint8_t* route [[buffer(3)]], device const float* bias [[buffer(4)]],
                                  constant MoeMatmulParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint n = tgpig.x * nsg + sgitg, t = tgpig.y / p.n_used, j = tgpig.y % p.n_used;
    const int e = moe_expert(route, p, t, j);
    if (n >= p.N || !moe_held(e, p)) return;  // uniform in the SIMD group
    const ulong rb = moe_row_bytes(p);
    device const float* xs[1] = {moe_x(x, p, t, j)};
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    moe_dots(W + ((ulong)e * p.N + n) * rb, p.dtype, p.K, xs, 1, tiisg, acc);
    moe_simd_sums(acc, 1);
    if (tiisg == 0) y[(ulong)t * p.y_stride + (ulong)j * p.y_slot_stride + n] = acc[0] + moe_bias(bias, p, e, n);
}
AK_EXPORT_KERNEL(moe_matmul_slots_gemv)

// One token a threadgroup row of the grid (y), one output row a SIMD group:
// the slots in ascending (expert id, slot), each found as the least after the
// previous one (no per-token array). Grid: (ceil(N / SIMD groups), n_tokens).
kernel void moe_matmul_sum_gemv(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                                device float* y [[buffer(2)]], device const uint8_t* route [[buffer(3)]], device const float* bias [[buffer(4)]],
                                constant MoeMatmulParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint n = tgpig.x * nsg + sgitg, t = tgpig.y;
    if (n >= p.N) return;
    const ulong rb = moe_row_bytes(p);
    float sum = 0.0f;
    int prev_e = -1;
    uint prev_j = 0;
    for (uint q = 0; q < p.n_used; q++) {
        int be = 0x7FFFFFFF;
        uint bj = 0xFFFFFFFFu;
        for (uint j = 0; j < p.n_used; j++) {
            const int e = moe_expert(route, p, t, j);
            const bool after = e > prev_e || (e == prev_e && j > prev_j);
            if (moe_held(e, p) && after && (e < be || (e == be && j < bj))) {
                be = e;
                bj = j;
            }
        }
        if (bj == 0xFFFFFFFFu) break;
        device const float* xs[1] = {moe_x(x, p, t, bj)};
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        moe_dots(W + ((ulong)be * p.N + n) * rb, p.dtype, p.K, xs, 1, tiisg, acc);
        moe_simd_sums(acc, 1);
        sum += moe_weight(route, p, t, bj) * (acc[0] + moe_bias(bias, p, be, n));
        prev_e = be;
        prev_j = bj;
    }
    if (tiisg == 0) y[(ulong)t * p.y_stride + n] = sum;
}
AK_EXPORT_KERNEL(moe_matmul_sum_gemv)

// Many tokens, per slot: threadgroup (row group, expert e) lists the routed
// rows (token, slot) that name e, in ascending order, kMoeWindow route
// entries at a time (a prefix sum over each SIMD group's hits places them),
// then each SIMD group multiplies its kMoeSlotRows rows of W[e] with them
// kMoeChunk at a time. Threadgroups of experts no token chose read nothing of W.
// Threadgroup memory: 32 hit counts, then kMoeWindow 16-bit list entries.
kernel void moe_matmul_slots(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                             device float* y [[buffer(2)]], device const uint8_t* route [[buffer(3)]], device const float* bias [[buffer(4)]],
                             constant MoeMatmulParams& p [[buffer(AK_PARAMS)]],
                             threadgroup uint* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    threadgroup uint* counts = shared;
    threadgroup ushort* list = (threadgroup ushort*)(shared + 32);
    const uint e = tgpig.y, total = p.n_tokens * p.n_used;
    const ulong rb = moe_row_bytes(p);
    for (uint w0 = 0; w0 < total; w0 += kMoeWindow) {
        const uint entries = min((uint)kMoeWindow, total - w0);
        uint listed = 0;  // the same in every thread
        for (uint c0 = 0; c0 < entries; c0 += ntg) {
            const uint i = c0 + tiitg, r = w0 + i;
            const uint hit = i < entries && moe_expert(route, p, r / p.n_used, r % p.n_used) == (int)e ? 1u : 0u;
            const uint before = simd_prefix_exclusive_sum(hit), in_group = simd_sum(hit);
            if (tiisg == 0) counts[sgitg] = in_group;
            threadgroup_barrier(mem_flags::mem_threadgroup);
            uint at = listed;
            for (uint s = 0; s < nsg; s++) {
                if (s < sgitg) at += counts[s];
                listed += counts[s];
            }
            if (hit) list[at + before] = (ushort)i;
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        for (uint q = 0; q < kMoeSlotRows; q++) {
            const uint n = (tgpig.x * kMoeSlotRows + q) * nsg + sgitg;
            if (n >= p.N) break;  // uniform in the SIMD group; no barrier below
            device const uint8_t* wrow = W + ((ulong)e * p.N + n) * rb;
            for (uint c0 = 0; c0 < listed; c0 += kMoeChunk) {
                const uint m = min((uint)kMoeChunk, listed - c0);
                device const float* xs[kMoeChunk];
                float acc[kMoeChunk];
                for (uint i = 0; i < kMoeChunk; i++) {
                    const uint r = w0 + list[c0 + min(i, m - 1)];
                    xs[i] = moe_x(x, p, r / p.n_used, r % p.n_used);
                    acc[i] = 0.0f;
                }
                moe_dots(wrow, p.dtype, p.K, xs, m, tiisg, acc);
                moe_simd_sums(acc, m);
                for (uint i = 0; i < m; i++) {
                    const uint r = w0 + list[c0 + i], t = r / p.n_used, j = r % p.n_used;
                    if (tiisg == 0)
                        y[(ulong)t * p.y_stride + (ulong)j * p.y_slot_stride + n] = acc[i] + moe_bias(bias, p, (int)e, n);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);  // the list is rebuilt for the next window
    }
}
AK_EXPORT_KERNEL(moe_matmul_slots)

// Many tokens, weighted sum: threadgroup (row group) takes the tokens a
// window at a time (kMoeWindow route entries), sorts the window's routed rows
// by expert (counting sort: thread i counts and places the rows of experts i,
// i + threads, ..., so each expert's rows keep ascending (token, slot)
// order), then goes through the experts in ascending id: each SIMD group
// multiplies its row of W[e] with e's rows kMoeChunk at a time and adds
// weight * dot to its element of each token's output. So every output sums
// its slots in ascending (expert id, slot), the CPU's order, whatever the
// other tokens are. Lane 0 of the row's SIMD group zeroes and accumulates its
// elements (one writer, program order). Threadgroup memory: the window's
// expert ids (16-bit, 0xFFFF: none held), its sorted rows, then n_experts + 1
// starts.
kernel void moe_matmul_sum(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                           device float* y [[buffer(2)]], device const uint8_t* route [[buffer(3)]], device const float* bias [[buffer(4)]],
                           constant MoeMatmulParams& p [[buffer(AK_PARAMS)]],
                           threadgroup ushort* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    threadgroup ushort* ids = shared;
    threadgroup ushort* rows = shared + kMoeWindow;
    threadgroup ushort* starts = rows + kMoeWindow;
    const uint n = tgpig.x * nsg + sgitg;
    const ulong rb = moe_row_bytes(p);
    const uint window = max(1u, (uint)kMoeWindow / p.n_used);  // tokens a window
    for (uint t0 = 0; t0 < p.n_tokens; t0 += window) {
        const uint t1 = min(p.n_tokens, t0 + window), entries = (t1 - t0) * p.n_used;
        if (n < p.N && tiisg == 0)
            for (uint t = t0; t < t1; t++) y[(ulong)t * p.y_stride + n] = 0.0f;
        for (uint i = tiitg; i < entries; i += ntg) {
            const int e = moe_expert(route, p, t0 + i / p.n_used, i % p.n_used);
            ids[i] = moe_held(e, p) ? (ushort)e : (ushort)0xFFFF;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint e = tiitg; e < p.n_experts; e += ntg) {
            uint c = 0;
            for (uint i = 0; i < entries; i++) c += ids[i] == e ? 1u : 0u;
            starts[e + 1] = (ushort)c;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tiitg == 0) {
            starts[0] = 0;
            for (uint e = 0; e < p.n_experts; e++) starts[e + 1] += starts[e];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint e = tiitg; e < p.n_experts; e += ntg) {
            uint at = starts[e];
            for (uint i = 0; i < entries && at < starts[e + 1]; i++)
                if (ids[i] == e) rows[at++] = (ushort)i;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (n < p.N)
            for (uint e = 0; e < p.n_experts; e++) {
                const uint r0 = starts[e], r1 = starts[e + 1];
                device const uint8_t* wrow = W + ((ulong)e * p.N + n) * rb;
                for (uint c0 = r0; c0 < r1; c0 += kMoeChunk) {
                    const uint m = min((uint)kMoeChunk, r1 - c0);
                    device const float* xs[kMoeChunk];
                    float acc[kMoeChunk];
                    for (uint i = 0; i < kMoeChunk; i++) {
                        const uint r = rows[c0 + min(i, m - 1)];
                        xs[i] = moe_x(x, p, t0 + r / p.n_used, r % p.n_used);
                        acc[i] = 0.0f;
                    }
                    moe_dots(wrow, p.dtype, p.K, xs, m, tiisg, acc);
                    moe_simd_sums(acc, m);
                    for (uint i = 0; i < m; i++) {
                        const uint r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                        if (tiisg == 0)
                            y[(ulong)t * p.y_stride + n] += moe_weight(route, p, t, j) * (acc[i] + moe_bias(bias, p, (int)e, n));
                    }
                }
            }
        threadgroup_barrier(mem_flags::mem_threadgroup);  // ids, rows and starts are rebuilt for the next window
    }
}
AK_EXPORT_KERNEL(moe_matmul_sum)

// ---- moe_shared_add -------------------------------------------------------------

// y[t, i] += g(t) x[t, i]; grid (ceil(dim / threads), n_tokens)
kernel void moe_shared_add(device const float* x [[buffer(0)]], device const float* gate [[buffer(1)]],
                           device float* y [[buffer(2)]], constant MoeSharedAddParams& p [[buffer(AK_PARAMS)]],
                           AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.dim) return;
    const float g = p.gated ? 1.0f / (1.0f + exp(-gate[(ulong)t * p.gate_stride])) : 1.0f;
    y[(ulong)t * p.y_stride + i] += g * x[(ulong)t * p.x_stride + i];
}
AK_EXPORT_KERNEL(moe_shared_add)
