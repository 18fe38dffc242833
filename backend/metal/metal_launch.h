// How each akunu kernel runs on Metal: which MSL function, how many
// threadgroups of how many threads, and how much threadgroup memory, computed
// from the command's parameter bytes at dispatch time. Shared by MetalDevice
// (macOS) and the emulated device (Linux tests), so both launch the .metal
// kernels identically. Plain C++: no Metal headers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "chip_config.h"
#include "core/device.h"

namespace akunu {

struct MetalLaunch {
    int variant = 0;       // which of the spec's MSL functions
    Dim3 grid;             // threadgroups
    uint32_t threads = 0;  // threads per threadgroup (1-D)
    uint32_t tg_memory = 0;  // bytes at [[threadgroup(0)]]
};

// Parameters are bound at this buffer index (kernels/akunu_msl.h: AK_PARAMS).
constexpr int kMetalParamsIndex = 8;

// Everything is decided from static data and the parameter bytes: launching
// allocates nothing (the decode hot path), and the device can build every
// pipeline a spec may use when the dispatch table is built.
struct MetalKernelSpec {
    const char* name;          // akunu kernel name (the CPU registry's)
    int n_buffers;             // buffer arguments of the MSL function(s)
    const char* functions[2];  // MSL functions (host_name); [1] is nullptr when there is one
    MetalLaunch (*launch)(const uint8_t* params, const ChipConfig& chip);
};

// Whether Metal decode tables use the fused kernels (kernels/fused.metal):
// on unless $AKUNU_METAL_FUSED_DECODE is "0" (the plain tables, to compare
// results and dispatch counts). Read once, when a device is made.
bool metal_fused_decode_from_env();

// The spec of an akunu kernel, or nullptr when Metal has none.
const MetalKernelSpec* metal_kernel_spec(const std::string& name);
// Every akunu kernel Metal implements.
std::vector<std::string> metal_kernel_names();
// Every MSL function the specs may launch (for building pipelines up front).
std::vector<std::string> metal_function_names();

}  // namespace akunu
