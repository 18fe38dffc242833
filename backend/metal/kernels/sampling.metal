// Token selection on the GPU: argmax (greedy) and the sampler (CPU twin, which
// defines the knobs: backend/cpu/kernels/sampling.cpp).
//
// The sampler runs in one threadgroup. Instead of sorting, it finds the
// cut-offs of top_k and top_p by bisection: over the order-preserving bit
// pattern of the logit (the k-th largest value, the nucleus boundary), then
// over token ids for ties at the boundary, so the kept set is exactly the
// CPU's (z descending, id ascending) prefix. Differences from the CPU, which
// make the draws equal in distribution rather than token for token: weights
// and sums are float (Metal has no double), the uniform number has 24 bits,
// and the inverse-CDF walk goes in id order.
#include "akunu_msl.h"

struct Best {
    float v;
    uint i;
};

// Larger value wins; equal values: the smaller index (the CPU's first maximum).
inline bool better(Best a, Best b) { return a.v > b.v || (a.v == b.v && a.i < b.i); }

// Argmax over z[0, n) of the threadgroup; scratch holds 2 * ntg words.
inline uint tg_argmax(device const float* z, uint n, threadgroup float* sv, threadgroup uint* si, uint tid, uint nt) {
    Best b = {-INFINITY, 0xFFFFFFFFu};
    for (uint i = tid; i < n; i += nt) {
        const Best c = {z[i], i};
        if (b.i == 0xFFFFFFFFu || better(c, b)) b = c;
    }
    sv[tid] = b.v;
    si[tid] = b.i;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = nt / 2; s > 0; s /= 2) {
        if (tid < s) {
            const Best o = {sv[tid + s], si[tid + s]};
            const Best m = {sv[tid], si[tid]};
            if (o.i != 0xFFFFFFFFu && (m.i == 0xFFFFFFFFu || better(o, m))) {
                sv[tid] = o.v;
                si[tid] = o.i;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    const uint r = si[0];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return r == 0xFFFFFFFFu ? 0 : r;
}

// out[r] = argmax of logits row (row + r); grid (n_rows), threads a power of two.
kernel void argmax(device const float* logits [[buffer(0)]], device int* out [[buffer(1)]],
                   constant ArgmaxParams& p [[buffer(AK_PARAMS)]], threadgroup float* shared AK_THREADGROUP_MEMORY,
                   AK_THREAD_ARGS) {
    const uint r = tgpig.x;
    out[r] = (int)tg_argmax(logits + (ulong)(p.row + r) * p.vocab, p.vocab, shared,
                            (threadgroup uint*)(shared + ntg), tiitg, ntg);
}
AK_EXPORT_KERNEL(argmax)

inline ulong splitmix64(ulong x) {
    x += 0x9E3779B97F4A7C15ul;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ul;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBul;
    return x ^ (x >> 31);
}

// The CPU's counter-based draw for (seed, pos), to 24 bits.
inline float uniform_at(ulong seed, uint pos) {
    const ulong x = splitmix64(seed ^ splitmix64(0xA0761D6478BD642Ful + pos));
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

// Monotone map of a float to uint: a < b  <=>  key(a) < key(b).
inline uint order_key(float f) {
    const uint b = as_type<uint>(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
inline float key_value(uint k) { return as_type<float>((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k); }

struct SampleState {
    device const float* z;
    uint vocab;
    float zmax, inv_t;
    // top_k cut: keep z > kval, or z == kval with id < kid
    float kval;
    uint kid;
    // top_p cut, the same shape
    float pval;
    uint pid;
    float min_p;
};

inline bool finite_candidate(float v) { return v > -INFINITY; }
inline bool kept_by_k(thread const SampleState& s, uint i) {
    const float v = s.z[i];
    return finite_candidate(v) && (v > s.kval || (v == s.kval && i < s.kid));
}
inline float weight(thread const SampleState& s, uint i) { return exp((s.z[i] - s.zmax) * s.inv_t); }
inline bool kept(thread const SampleState& s, uint i) {
    if (!kept_by_k(s, i)) return false;
    const float v = s.z[i];
    if (!(v > s.pval || (v == s.pval && i < s.pid))) return false;
    return weight(s, i) >= s.min_p;
}

// Number (as float) of top_k survivors with z >= value and id < id_cut.
inline float count_at_least(thread const SampleState& s, float value, bool equal_only, uint id_cut,
                            threadgroup float* scratch, uint tid, uint nt, uint lane, uint sg, uint n_sg) {
    float c = 0.0f;
    for (uint i = tid; i < s.vocab; i += nt) {
        const float v = s.z[i];
        if (!finite_candidate(v)) continue;
        if (equal_only ? (v == value && i < id_cut) : v >= value) c += 1.0f;
    }
    return tg_sum(c, scratch, lane, sg, n_sg);
}

// Weight of top_k survivors with z >= value (or == value and id < id_cut).
inline float weight_at_least(thread const SampleState& s, float value, bool equal_only, uint id_cut,
                             threadgroup float* scratch, uint tid, uint nt, uint lane, uint sg, uint n_sg) {
    float c = 0.0f;
    for (uint i = tid; i < s.vocab; i += nt) {
        if (!kept_by_k(s, i)) continue;
        const float v = s.z[i];
        if (equal_only ? (v == value && i < id_cut) : v >= value) c += weight(s, i);
    }
    return tg_sum(c, scratch, lane, sg, n_sg);
}

// One token from logits row 0 (SampleParams); one threadgroup, threads a
// power of two. Buffers as the CPU's: logits, out id, history, bias pairs,
// mask bits, work (vocab floats, then vocab int32 counts).
kernel void sample(device const float* logits [[buffer(0)]], device int* out [[buffer(1)]],
                   device int* history [[buffer(2)]], device const int* bias [[buffer(3)]],
                   device const uint* mask [[buffer(4)]], device float* work [[buffer(5)]],
                   constant SampleParams& p [[buffer(AK_PARAMS)]], threadgroup float* shared AK_THREADGROUP_MEMORY,
                   AK_THREAD_ARGS) {
    const uint V = p.vocab, tid = tiitg, nt = ntg;
    device float* z = work;
    device int* counts = (device int*)(work + V);
    threadgroup float* scratch = shared;  // 32 floats; argmax and the scan use the rest
    // 1. processed logits: copy, bias, penalties (serial: they are few), mask
    for (uint i = tid; i < V; i += nt) z[i] = logits[i];
    threadgroup_barrier(mem_flags::mem_device);
    if (tid == 0) {
        for (uint i = 0; i < p.n_bias; i++) {
            const int id = bias[2 * i];
            if ((uint)id < V) z[id] += as_type<float>(bias[2 * i + 1]);
        }
        const bool penalize = p.penalty_window > 0 &&
                              (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
        if (penalize) {
            const uint n = min(p.penalty_window, p.pos0 + 1);
            device const int* h = history + (p.pos0 + 1 - n);
            for (uint i = 0; i < n; i++)
                if ((uint)h[i] < V) counts[h[i]] = 0;
            for (uint i = 0; i < n; i++)
                if ((uint)h[i] < V) counts[h[i]]++;
            for (uint i = 0; i < n; i++) {
                const int tk = h[i];
                if ((uint)tk >= V || counts[tk] == 0) continue;
                const float c = (float)counts[tk];
                float v = z[tk];
                v = v <= 0.0f ? v * p.repeat_penalty : v / p.repeat_penalty;
                z[tk] = v - (c * p.frequency_penalty + p.presence_penalty);
                counts[tk] = 0;
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_device);
    if (p.use_mask)
        for (uint i = tid; i < V; i += nt)
            if (!((mask[i >> 5] >> (i & 31)) & 1u)) z[i] = -INFINITY;
    threadgroup_barrier(mem_flags::mem_device);

    uint tok;
    const uint best = tg_argmax(z, V, shared + 32, (threadgroup uint*)(shared + 32 + nt), tid, nt);
    if (p.temperature <= 0.0f || !finite_candidate(z[best])) {
        tok = best;  // greedy, or everything masked
    } else {
        SampleState s;
        s.z = z;
        s.vocab = V;
        s.zmax = z[best];
        s.inv_t = 1.0f / p.temperature;
        s.kval = -INFINITY;
        s.kid = 0;
        s.pval = -INFINITY;
        s.pid = 0;
        s.min_p = p.min_p;
        // 2. top_k: the k-th largest value by bisection over order keys, then the id cut among equals
        const float n_finite = count_at_least(s, -INFINITY, false, 0, scratch, tid, nt, tiisg, sgitg, nsg);
        if (p.top_k > 0 && (float)p.top_k < n_finite) {
            const float k = (float)p.top_k;
            uint lo = order_key(-INFINITY), hi = order_key(s.zmax);  // count(>= key_value(lo)) >= k
            while (lo < hi) {
                const uint mid = lo + (hi - lo + 1) / 2;
                if (count_at_least(s, key_value(mid), false, 0, scratch, tid, nt, tiisg, sgitg, nsg) >= k) lo = mid;
                else hi = mid - 1;
            }
            s.kval = key_value(lo);
            const float above = count_at_least(s, s.kval, false, 0, scratch, tid, nt, tiisg, sgitg, nsg) -
                                count_at_least(s, s.kval, true, V, scratch, tid, nt, tiisg, sgitg, nsg);
            uint a = 1, b = V;  // smallest id cut with `above + equal below it` >= k
            while (a < b) {
                const uint mid = (a + b) / 2;
                if (above + count_at_least(s, s.kval, true, mid, scratch, tid, nt, tiisg, sgitg, nsg) >= k) b = mid;
                else a = mid + 1;
            }
            s.kid = a;
        }
        // 3. top_p: the shortest (z desc, id asc) prefix holding top_p of the weight
        if (p.top_p < 1.0f) {
            const float target = p.top_p * weight_at_least(s, -INFINITY, false, 0, scratch, tid, nt, tiisg, sgitg, nsg);
            uint lo = order_key(-INFINITY), hi = order_key(s.zmax);  // weight(>= key_value(lo)) >= target
            while (lo < hi) {
                const uint mid = lo + (hi - lo + 1) / 2;
                if (weight_at_least(s, key_value(mid), false, 0, scratch, tid, nt, tiisg, sgitg, nsg) >= target) lo = mid;
                else hi = mid - 1;
            }
            s.pval = key_value(lo);
            const float above = weight_at_least(s, s.pval, false, 0, scratch, tid, nt, tiisg, sgitg, nsg) -
                                weight_at_least(s, s.pval, true, V, scratch, tid, nt, tiisg, sgitg, nsg);
            uint a = 1, b = V;
            while (a < b) {
                const uint mid = (a + b) / 2;
                if (above + weight_at_least(s, s.pval, true, mid, scratch, tid, nt, tiisg, sgitg, nsg) >= target) b = mid;
                else a = mid + 1;
            }
            s.pid = a;
        }
        // 4. min_p is a per-token test (kept()); 5. inverse CDF over kept tokens in id order
        const uint chunk = (V + nt - 1) / nt, c0 = min(tid * chunk, V), c1 = min(c0 + chunk, V);
        float part = 0.0f;
        for (uint i = c0; i < c1; i++)
            if (kept(s, i)) part += weight(s, i);
        threadgroup float* sums = shared + 32;
        sums[tid] = part;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float total = 0.0f;
        for (uint i = 0; i < nt; i++) total += sums[i];
        const float r = uniform_at(((ulong)p.seed_hi << 32) | p.seed_lo, p.pos0) * total;
        float before = 0.0f;
        for (uint i = 0; i < tid; i++) before += sums[i];
        threadgroup uint* pick = (threadgroup uint*)(shared + 32 + nt);
        if (tid == 0) pick[0] = best;  // rounding fallback: the most likely token
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (r >= before && r < before + part) {
            float acc = before;
            for (uint i = c0; i < c1; i++) {
                if (!kept(s, i)) continue;
                acc += weight(s, i);
                if (r < acc) {
                    pick[0] = i;
                    break;
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        tok = pick[0];
    }
    if (tid == 0) {
        out[0] = (int)tok;
        history[p.pos0 + 1] = (int)tok;
    }
}
AK_EXPORT_KERNEL(sample)
