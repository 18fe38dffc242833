// Prelude of every akunu .metal file. With Apple's compiler it is the Metal
// standard library; with clang++ on Linux it is the emulation header
// (../emulation/msl_emulation.h), so the same source runs in both places.
// It also pulls in the project's shared definitions: the parameter structs
// (core/kernel_params.h), the GGML type codes (core/dtype_descriptor.h) and
// the block decoders (core/quant_blocks.h), which define what each weight
// format means on every backend.
//
// Kernel signature convention (the emulation binds arguments by position):
//   device buffers [[buffer(0)]], [[buffer(1)]], ... in order, then
//   constant XParams& p [[buffer(AK_PARAMS)]], then optionally
//   threadgroup T* name AK_THREADGROUP_MEMORY (= [[threadgroup(0)]]: the
//   emulation's `threadgroup` macro would eat the attribute), then AK_THREAD_ARGS.
#pragma once

#if defined(__METAL_VERSION__)
#include <metal_stdlib>
using namespace metal;
#define AK_THREAD_ARGS                                                                            \
    uint3 tgpig [[threadgroup_position_in_grid]], uint3 tgpg [[threadgroups_per_grid]],            \
        uint tiitg [[thread_index_in_threadgroup]], uint ntg [[threads_per_threadgroup]],          \
        uint tiisg [[thread_index_in_simdgroup]], uint sgitg [[simdgroup_index_in_threadgroup]], \
        uint nsg [[simdgroups_per_threadgroup]]
#define AK_THREADGROUP_MEMORY [[threadgroup(0)]]
// A template instance under the name the device looks up; a plain kernel is
// found by its own name (AK_EXPORT_KERNEL only registers it for the emulation).
#define AK_EXPORT(name, ...) template [[host_name(name)]] kernel decltype(__VA_ARGS__) __VA_ARGS__;
#define AK_EXPORT_KERNEL(fn)
#else
#include "../emulation/msl_emulation.h"
#define AK_THREAD_ARGS AK_EMU_THREAD_ARGS
#define AK_THREADGROUP_MEMORY
#define AK_EXPORT(name, ...) AK_EMU_EXPORT(name, __VA_ARGS__)
#define AK_EXPORT_KERNEL(fn) AK_EMU_EXPORT(#fn, fn)
#endif

// Parameters always travel at this buffer index: a kernel's buffers 0-7 at
// their own index, its buffers 8 and 9 (kernels of 10) at 9 and 10
// (metal_launch.h metal_buffer_index).
#define AK_PARAMS 8

#define AKUNU_MSL 1
#define AKUNU_GLOBAL device
#define AKUNU_PRIVATE thread

inline float f16_to_f32(ushort h) { return float(as_type<half>(h)); }
inline float bf16_to_f32(ushort h) { return as_type<float>(uint(h) << 16); }
inline float f32_from_bits(uint b) { return as_type<float>(b); }
// Round to F16 and back (nearest even), as the CPU's f16_to_f32(f32_to_f16(x)).
inline float round_f16(float x) { return float(half(x)); }

#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"

using namespace akunu;

// ---- threadgroup reductions ----------------------------------------------------
// Every thread of the threadgroup calls these with its value and gets the
// result. `scratch` holds one float per SIMD group; the trailing barrier lets
// the caller reuse it at once.
inline float tg_sum(float v, threadgroup float* scratch, uint lane, uint sg, uint n_sg) {
    v = simd_sum(v);
    if (lane == 0) scratch[sg] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0f;
    for (uint i = 0; i < n_sg; i++) s += scratch[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return s;
}

inline float tg_max(float v, threadgroup float* scratch, uint lane, uint sg, uint n_sg) {
    v = simd_max(v);
    if (lane == 0) scratch[sg] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float m = scratch[0];
    for (uint i = 1; i < n_sg; i++) m = max(m, scratch[i]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return m;
}
