// The CPU backend's kernel ABI: a pipeline is a function pointer; the device
// hands it the bound buffers (already offset) and the patched parameter bytes.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"

namespace akunu {

class ThreadPool;
class Collective;

struct CpuArgs {
    uint8_t* buf[10];  // DispatchCmd::MAX_BUFFERS
    const uint8_t* params;
    ThreadPool* pool;
    // The device's collective (a tensor-parallel rank), else nullptr.
    Collective* collective = nullptr;

    template <typename T>
    T p() const {
        T v;
        std::memcpy(&v, params, sizeof(T));
        return v;
    }
    template <typename T>
    T* b(int i) const { return reinterpret_cast<T*>(buf[i]); }
};

using CpuKernel = void (*)(const CpuArgs&);

struct CpuKernelEntry {
    const char* name;
    CpuKernel fn;
};

// Names of all CPU kernels (the set every backend implements, but for the
// fused decode kernels, which only backends with fused_decode() need).
std::vector<std::string> cpu_kernel_names();
// The kernel of that name, or nullptr (fused kernels are defined by composing others).
const CpuKernelEntry* find_cpu_kernel(const std::string& name);

// Runs the CPU kernel `name` on the given buffers and parameter struct: the
// fused kernels are defined by composing the plain ones this way.
template <typename P>
void run_cpu_kernel(const char* name, std::initializer_list<void*> bufs, const P& p, ThreadPool* pool) {
    const CpuKernelEntry* e = find_cpu_kernel(name);
    if (!e) throw Error(std::string("CPU kernel ") + name + " is missing");
    CpuArgs a{};
    int i = 0;
    for (void* b : bufs) a.buf[i++] = static_cast<uint8_t*>(b);
    a.params = reinterpret_cast<const uint8_t*>(&p);
    a.pool = pool;
    e->fn(a);
}

// Sum of a[i] * b[i] with 8 independent accumulators so the compiler
// vectorizes it without -ffast-math.
inline float dot_f32(const float* a, const float* b, int n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

}  // namespace akunu
