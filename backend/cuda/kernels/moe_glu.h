// A decode token's expert gate and up matmuls as one kernel, and with the
// gated activation after them (moe_glu.cu). The decode table keeps its
// commands (gate_exps, up_exps, the activation: the CPU's meaning); on CUDA
// the up command absorbs the gate's (CudaKernelEntry::absorbs) and the
// activation absorbs both, so one kernel reads x once for both matrices and
// writes the activation, rounded to 8 bits for the down projection as it
// goes (a Q8Link gate writer). The same products, activation and rounding as
// the separate kernels: the same bits.
#pragma once
#include "cuda_kernel.h"

namespace akunu {

enum class GluAct { kSilu, kGelu, kSwigluOai };

// moe_matmul's absorbs: a one-token per-slot expert matmul (up) right after
// one over the same input, route and shape (gate) on the 8-bit decode path.
bool moe_pair_absorbs(const CudaArgs& up, const char* prev, const CudaArgs& gate);
// moe_matmul's launch when it absorbed its gate: both products, each to its own rows.
void launch_moe_pair(const CudaArgs& up);

// The gated activations' absorbs: the activation of exactly the slots' rows
// that an up command which absorbed its gate wrote.
bool moe_glu_absorbs(const CudaArgs& act, const char* prev, const CudaArgs& up);
// The gated activation's Q8Link output when it absorbed gate and up: its n
// values, rounded a 32-row block of one slot at a time.
bool moe_glu_q8_output(const CudaArgs& act, Q8Link* link);
// The gated activation's launch when it absorbed gate and up.
void launch_moe_glu(const CudaArgs& act, GluAct kind);

}  // namespace akunu
