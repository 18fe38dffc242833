// The emulated kernel library's C interface: the registry the .metal files
// fill at load (AK_EXPORT) and one entry point that runs a kernel by name.
// Built with clang++ into libakunu_msl_emu.so (emulation/CMakeLists.txt);
// akunu's EmulatedMetalDevice loads it with dlopen.
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "fiber_runner.h"

namespace akunu_msl_emu {

static std::map<std::string, KernelThunk>& registry() {
    static std::map<std::string, KernelThunk> r;
    return r;
}

bool register_kernel(const char* name, KernelThunk thunk) {
    registry()[name] = thunk;
    return true;
}

}  // namespace akunu_msl_emu

extern "C" {

// Names of all kernels, '\n'-separated (valid for the library's lifetime).
const char* akunu_msl_emu_kernel_names() {
    static std::string names;
    if (names.empty())
        for (auto& kv : akunu_msl_emu::registry()) names += kv.first + "\n";
    return names.c_str();
}

// Runs kernel `name` over grid[0..2] threadgroups of `threads` threads.
// Returns 0, or -1 with a message in err (err_size bytes).
int akunu_msl_emu_run(const char* name, uint8_t* const* buffers, int n_buffers, const void* params,
                      const unsigned* grid, unsigned threads, size_t tg_mem_bytes, char* err, size_t err_size) {
    try {
        auto it = akunu_msl_emu::registry().find(name);
        if (it == akunu_msl_emu::registry().end()) throw std::runtime_error(std::string("no Metal kernel '") + name + "'");
        akunu_msl_emu::Invocation inv{};
        for (int i = 0; i < n_buffers && i < 16; i++) inv.buffers[i] = buffers[i];
        inv.params = static_cast<const uint8_t*>(params);
        akunu_msl_emu::run_grid(it->second, inv, metal::uint3{grid[0], grid[1], grid[2]}, threads, tg_mem_bytes);
        return 0;
    } catch (const std::exception& e) {
        if (err_size) {
            std::strncpy(err, e.what(), err_size - 1);
            err[err_size - 1] = 0;
        }
        return -1;
    }
}

}  // extern "C"
