// Runs a grid of Metal threadgroups on the CPU. The threads of one threadgroup
// are fibers (user-level stacks) switched cooperatively on one OS thread, so a
// threadgroup barrier or a SIMD-group operation simply suspends a thread until
// its partners arrive: the same synchronisation the GPU gives, with no data
// races. Threadgroups run in parallel on a small pool of OS threads, each with
// its own fibers and its own threadgroup memory.
//
// Like the GPU, threads that returned do not hold up a barrier. Threads that
// reach different barriers (divergent control flow, undefined on the GPU)
// stop the dispatch with an error.
// What the emulation does not model: the GPU's scheduling (threads here run in
// a fixed order, one at a time, between barriers, so a missing barrier can go
// unnoticed when the order happens to suit it), memory-ordering effects
// between threadgroups, lanes of a SIMD group executing in lock-step (a
// divergent lane simply waits at its next collective operation), and limits
// the GPU enforces (registers, threadgroup memory size: the runner checks the
// 32 KiB of threadgroup memory and 1024 threads per threadgroup).
#pragma once
#include <cstddef>
#include <cstdint>

#include "msl_types.h"

namespace akunu_msl_emu {

using metal::uint;
using metal::uint3;

constexpr int kSimdWidth = 32;
constexpr uint kMaxThreadsPerThreadgroup = 1024;
constexpr size_t kMaxThreadgroupMemory = 32768;

// What the attributes [[threadgroup_position_in_grid]] & co. give a thread.
struct ThreadPosition {
    uint3 tgpig;  // threadgroup position in the grid
    uint3 tgpg;   // threadgroups per grid
    uint tiitg;   // thread index in the threadgroup
    uint ntg;     // threads per threadgroup (1-D threadgroups)
    uint tiisg;   // lane in the SIMD group
    uint sgitg;   // SIMD group in the threadgroup
    uint nsg;     // SIMD groups per threadgroup
};

// One dispatch's bound resources: device buffers by [[buffer(i)]] index, the
// parameter block, and (per threadgroup) the [[threadgroup(0)]] memory.
struct Invocation {
    uint8_t* buffers[16];
    const uint8_t* params;
    uint8_t* tg_mem;
};

using KernelThunk = void (*)(const Invocation&, const ThreadPosition&);

// Runs `kernel` over grid (threadgroups) x threads_per_tg (1-D). Throws
// std::runtime_error on a barrier deadlock or an invalid geometry.
void run_grid(KernelThunk kernel, const Invocation& inv, uint3 grid, uint threads_per_tg, size_t tg_mem_bytes);

// Collective primitives for the current fiber (the emulation header's
// threadgroup_barrier, simd_* and friends are built on these).
// file / line: the barrier's place in the source (the MSL wrappers pass their
// caller's), so threads waiting at different barriers are caught.
void threadgroup_barrier_wait(const char* file, int line);
void simd_barrier_wait(const char* file, int line);
const ThreadPosition& current_position();
// The 64-byte exchange slot of `lane` in the current SIMD group, and whether
// that lane is still running (a lane that returned takes no part).
uint8_t* simd_slot(uint lane);
bool simd_lane_active(uint lane);
uint simd_width();

}  // namespace akunu_msl_emu
