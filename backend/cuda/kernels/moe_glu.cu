// A decode token's expert gate and up matmuls in one kernel, with the gated
// activation after them (moe_glu.h): block (rows, slot j), a warp an output
// row, whose gate and up rows are read in the same steps against the
// token's input rounded to 8 bits once (gemv_q8::row_dot_pair: each step
// loads both rows, then both dots read the same activations). With the
// activation, a block holds 32 rows of one slot, one 32-value block of the
// activation's rounding for the down projection (a Q8Link gate writer,
// round_block32_warp): no block waits on another.
#include <cstring>

#include "act_q8.cuh"
#include "core/error.h"
#include "device_math.cuh"
#include "moe_glu.h"
#include "moe_gemv_q8.cuh"

namespace akunu {
namespace {

struct GluArgs {
    MoeMatmulParams p;  // the gate's (the up's differs only in its weights and biases)
    moe_q8::Experts gate, up;
    ActQ8 xq;                     // the token's input rounded to 8 bits
    const int32_t* ids;           // the route
    float *y_gate, *y_up;         // the products, slot j at j * p.y_slot_stride
    float* y_act;                 // the activation, slot j at j * p.N (nullptr: none)
    ActQ8 out;                    // the activation rounded (out.q == nullptr: not)
};

constexpr int kPairWarps = moe_q8::kSlotWarps;  // rows a block without the activation
constexpr int kGluWarps = kQ8Block;             // with it: a block of the rounding
constexpr int kNoAct = -1;

template <int Act>
__device__ inline float gated(float g, float u) {
    if (Act == (int)GluAct::kSwigluOai) return swiglu_oai(g, u);
    return (Act == (int)GluAct::kGelu ? gelu(g) : silu(g)) * u;
}

// Slots whose expert the tensor does not hold (a tensor-parallel rank's)
// leave their rows unwritten, as the per-slot kernel does; their rounding
// block holds zeros, which the weighted sum never reads.
template <class Q, int Act, int Warps>
__global__ void __launch_bounds__(Warps * 32) glu_kernel(GluArgs g) {
    __shared__ float act[Warps];
    pdl_wait();
    pdl_launch_dependents();
    const MoeMatmulParams& p = g.p;
    const uint32_t j = blockIdx.y, warp = threadIdx.x / 32, n = blockIdx.x * Warps + warp;
    const int32_t e = moe_q8::held_expert(p, g.ids, j);
    float y = 0.0f;
    if (e >= 0 && n < p.N) {
        const size_t row = (size_t)n * g.gate.row_bytes;
        float v = 0.0f, u = 0.0f;
        gemv_q8::row_dot_pair<Q>(g.gate.W + (size_t)e * g.gate.expert_bytes + row,
                                 g.up.W + (size_t)e * g.up.expert_bytes + row, (int)p.K, g.xq.q, g.xq.ds, &v, &u);
        v = gemv_formats::warp_sum(v);
        u = gemv_formats::warp_sum(u);
        if (g.gate.bias) v += g.gate.bias[(size_t)e * p.N + n];
        if (g.up.bias) u += g.up.bias[(size_t)e * p.N + n];
        if (Act != kNoAct) y = gated<Act>(v, u);
        if (threadIdx.x % 32 == 0) {
            g.y_gate[(size_t)j * p.y_slot_stride + n] = v;
            g.y_up[(size_t)j * p.y_slot_stride + n] = u;
            if (Act != kNoAct) g.y_act[(size_t)j * p.N + n] = y;
        }
    }
    if (Act == kNoAct || !g.out.q) return;  // (the same in every thread)
    if (threadIdx.x % 32 == 0) act[warp] = y;
    __syncthreads();
    const size_t first = (size_t)j * p.N + (size_t)blockIdx.x * kQ8Block;
    if (warp == 0) round_block32_warp(act[threadIdx.x], g.out.q + first, g.out.ds + first / kQ8Block);
}

moe_q8::Experts experts_of(const CommandBytes& c, const MoeMatmulParams& p, size_t row_bytes) {
    return {c.b<uint8_t>(0), row_bytes, row_bytes * p.N, p.bias ? c.b<float>(4) : nullptr};
}

// Gate and up (the commands gate and up, as moe_pair_absorbs matched them),
// with the activation Act (kNoAct: none), rounded into out where out.q.
template <int Act, int Warps>
void launch_glu(const CudaArgs& a, const CommandBytes& gate, const CommandBytes& up, float* y_act, ActQ8 out) {
    const MoeMatmulParams p = gate.p<MoeMatmulParams>();
    const size_t row_bytes = moe_q8::row_bytes_of(p);
    GluArgs g{p, experts_of(gate, p, row_bytes), experts_of(up, p, row_bytes), ActQ8{}, gate.b<int32_t>(3),
              gate.b<float>(2), up.b<float>(2), y_act, out};
    const bool launched = moe_q8::with_format(p, g.gate.W, row_bytes, [&](auto q) {
        if (!quantize_activations(a, gate.b<float>(1), 0, 1, p.K, ActQ8Norm{}, &g.xq)) return false;
        launch_pdl(glu_kernel<decltype(q), Act, Warps>, dim3(blocks_for(p.N, Warps), p.n_used), Warps * 32, 0, a, g);
        return true;
    });
    if (!launched) throw Error("moe_matmul: the joined gate and up found no 8-bit decode path");
}

}  // namespace

bool moe_pair_absorbs(const CudaArgs& up, const char* prev, const CudaArgs& gate) {
    if (std::strcmp(prev, "moe_matmul") != 0 || gate.absorbed.set || !up.tuning->moe_int8_decode ||
        !up.tuning->moe_fuse_decode)
        return false;
    const MoeMatmulParams u = up.p<MoeMatmulParams>(), g = gate.p<MoeMatmulParams>();
    const bool same = u.N == g.N && u.K == g.K && u.n_tokens == 1 && g.n_tokens == 1 && u.dtype == g.dtype &&
                      u.n_experts == g.n_experts && u.n_used == g.n_used && !u.weighted && !g.weighted &&
                      u.x_slot_stride == 0 && g.x_slot_stride == 0 && u.y_slot_stride == g.y_slot_stride &&
                      u.route_stride == g.route_stride && u.first_expert == g.first_expert && u.bias == g.bias &&
                      up.buf[1] == gate.buf[1] && up.buf[3] == gate.buf[3] && u.N && u.n_used &&
                      reinterpret_cast<uintptr_t>(up.buf[1]) % 16 == 0;  // (quantize_activations' alignment)
    ActQ8 room;
    return same && moe_q8::takes(up, u) && moe_q8::takes(gate, g) && act_q8_layout(up, 1, u.K, 0, &room);
}

void launch_moe_pair(const CudaArgs& up) { launch_glu<kNoAct, kPairWarps>(up, up.absorbed, up, nullptr, ActQ8{}); }

bool moe_glu_absorbs(const CudaArgs& act, const char* prev, const CudaArgs& up) {
    if (std::strcmp(prev, "moe_matmul") != 0 || !up.absorbed.set) return false;
    const GatedActParams q = act.p<GatedActParams>();
    const MoeMatmulParams u = up.p<MoeMatmulParams>();
    // the activation of the slots' rows that gate and up wrote, and nothing else
    return q.n_tokens == 1 && q.n == u.n_used * u.N && u.y_slot_stride == u.N && act.buf[0] == up.absorbed.buf[2] &&
           act.buf[1] == up.buf[2];
}

bool moe_glu_q8_output(const CudaArgs& act, Q8Link* link) {
    if (!act.absorbed.set || !act.absorbed_before.set || act.absorbed.p<MoeMatmulParams>().N % kQ8Block) return false;
    *link = Q8Link{act.b<float>(2), act.p<GatedActParams>().n, 1};
    link->kind = kQ8LinkGate;
    return true;
}

void launch_moe_glu(const CudaArgs& act, GluAct kind) {
    const CommandBytes &gate = act.absorbed_before, &up = act.absorbed;
    float* y = act.b<float>(2);
    switch (kind) {
        case GluAct::kSilu: return launch_glu<(int)GluAct::kSilu, kGluWarps>(act, gate, up, y, act.q8_out);
        case GluAct::kGelu: return launch_glu<(int)GluAct::kGelu, kGluWarps>(act, gate, up, y, act.q8_out);
        case GluAct::kSwigluOai: return launch_glu<(int)GluAct::kSwigluOai, kGluWarps>(act, gate, up, y, act.q8_out);
    }
}

}  // namespace akunu
