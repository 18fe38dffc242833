#include "emulated_metal_device.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/dispatch_table.h"
#include "core/error.h"

namespace akunu {
namespace {

std::mutex counts_mutex;
std::map<std::string, uint64_t>& counts() {
    static std::map<std::string, uint64_t> c;
    return c;
}

using RunFn = int (*)(const char*, uint8_t* const*, int, const void*, const unsigned*, unsigned, size_t, char*,
                      size_t);

// The entry point of the library named by $AKUNU_MSL_EMU_LIB, or nullptr with
// the reason in *err. Each library is loaded once per process and never
// closed: its kernels register themselves at load.
RunFn load_library(std::string* err) {
    static std::mutex m;
    static std::map<std::string, RunFn> loaded;
    const char* path = std::getenv("AKUNU_MSL_EMU_LIB");
    if (!path || !*path) {
        *err = "device 'metal-emu' needs AKUNU_MSL_EMU_LIB: the path of libakunu_msl_emu.so "
               "(build it with tools/build_msl_emulation.sh)";
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(m);
    auto it = loaded.find(path);
    if (it != loaded.end()) return it->second;
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *err = std::string("device 'metal-emu': cannot load ") + path + ": " + dlerror();
        return nullptr;
    }
    RunFn fn = reinterpret_cast<RunFn>(dlsym(lib, "akunu_msl_emu_run"));
    if (!fn) {
        *err = std::string("device 'metal-emu': ") + path + " has no akunu_msl_emu_run";
        return nullptr;
    }
    return loaded[path] = fn;
}

}  // namespace

bool EmulatedMetalDevice::library_available() {
    std::string err;
    return load_library(&err) != nullptr;
}

std::string EmulatedMetalDevice::library_error() {
    std::string err;
    load_library(&err);
    return err;
}

EmulatedMetalDevice::EmulatedMetalDevice() : CpuDevice(1) {
    std::string err;
    run_fn_ = load_library(&err);
    if (!run_fn_) throw Error(err);
    // $AKUNU_METAL_EMU_CHIP = "cores,family": the chip whose choices (GEMV
    // variants, threadgroup sizes) the emulation makes; an M4 otherwise.
    if (const char* chip = std::getenv("AKUNU_METAL_EMU_CHIP")) {
        int cores = 0, family = 0;
        char tail = 0;
        if (std::sscanf(chip, "%d,%d%c", &cores, &family, &tail) != 2 || cores < 1 || family < 1)
            throw Error(std::string("AKUNU_METAL_EMU_CHIP must be \"cores,family\" (e.g. \"16,7\"), not \"") + chip +
                        "\"");
        chip_ = ChipConfig::from_gpu(cores, family);
    }
}

Pipeline EmulatedMetalDevice::get_pipeline(const std::string& name) {
    const MetalKernelSpec* spec = metal_kernel_spec(name);
    if (!spec) throw Error("Metal backend has no kernel named '" + name + "'");
    return Pipeline{const_cast<MetalKernelSpec*>(spec)};
}

void EmulatedMetalDevice::set_buffer(Buffer buf, size_t offset, int index) {
    bufs_[index] = buf.contents ? static_cast<uint8_t*>(buf.contents) + offset : nullptr;
}

void EmulatedMetalDevice::set_bytes(const void* data, int size, int) { std::memcpy(params_, data, (size_t)size); }

void EmulatedMetalDevice::dispatch(Dim3, Dim3) { run(*spec_, bufs_, params_); }

void EmulatedMetalDevice::run(const MetalKernelSpec& spec, uint8_t* const* buffers, const uint8_t* params) {
    const MetalLaunch l = spec.launch(params, chip_);
    if (l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0) return;
    const char* function = spec.functions[l.variant];
    const unsigned grid[3] = {l.grid.x, l.grid.y, l.grid.z};
    char err[512] = {};
    if (run_fn_(function, buffers, DispatchCmd::MAX_BUFFERS, params, grid, l.threads, l.tg_memory, err,
                sizeof err) != 0)
        throw Error(std::string("metal-emu: ") + err);
    std::lock_guard<std::mutex> lock(counts_mutex);
    counts()[function]++;
}

void EmulatedMetalDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    for (const DispatchCmd& cmd : table.commands) {
        uint8_t* bufs[DispatchCmd::MAX_BUFFERS] = {};
        for (int i = 0; i < cmd.buffer_count; i++) bufs[i] = replay_address(cmd, i, st, cmd.buffers[i].contents);
        patch_params(cmd, st, params);
        run(*static_cast<const MetalKernelSpec*>(cmd.pso.handle), bufs, params);
    }
}

std::map<std::string, uint64_t> EmulatedMetalDevice::function_counts() {
    std::lock_guard<std::mutex> lock(counts_mutex);
    return counts();
}

}  // namespace akunu
