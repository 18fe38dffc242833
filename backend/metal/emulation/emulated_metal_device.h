// device="metal-emu": akunu's Metal kernels compiled as C++ (the emulation
// library, built by clang from the same .metal files) run on the CPU with
// the launch geometry MetalDevice uses (metal_launch.h). Buffers are host
// memory, as on the CPU backend, which it extends. For tests on machines
// without a Mac: the whole engine, and each kernel, through Metal's code.
// The device factory offers it only while library_available().
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "cpu/cpu_device.h"
#include "core/dispatch_table.h"
#include "metal/chip_config.h"
#include "metal/metal_launch.h"

namespace akunu {

class EmulatedMetalDevice : public CpuDevice {
public:
    // Loads the library named by $AKUNU_MSL_EMU_LIB (a clear error if unset or unloadable).
    EmulatedMetalDevice();

    // Whether $AKUNU_MSL_EMU_LIB names a library that loads (it stays loaded);
    // if not, library_error() says why.
    static bool library_available();
    static std::string library_error();

    const char* name() const override { return "Metal kernels (emulated on the CPU)"; }
    const char* backend_name() const override { return "metal-emu"; }

    // Decode tables with the fused kernels, as MetalDevice (metal_launch.h:
    // AKUNU_METAL_FUSED_DECODE=0 gives the plain ones).
    bool fused_decode() const override { return fused_; }
    bool fused_batch() const override { return fused_batch_; }

    Pipeline get_pipeline(const std::string& name) override;
    void set_pipeline(Pipeline pso) override { spec_ = static_cast<const MetalKernelSpec*>(pso.handle); }
    void set_buffer(Buffer buf, size_t offset, int index) override;
    void set_bytes(const void* data, int size, int index) override;
    void dispatch(Dim3 grid, Dim3 threadgroup) override;
    void encode_dispatch_table(const DispatchTable& table, const ReplayState& state) override;

    // MSL functions run so far in this process, with how often (kernel coverage).
    static std::map<std::string, uint64_t> function_counts();

private:
    void run(const MetalKernelSpec& spec, uint8_t* const* buffers, const uint8_t* params);

    using RunFn = int (*)(const char*, uint8_t* const*, int, const void*, const unsigned*, unsigned, size_t, char*,
                          size_t);
    RunFn run_fn_ = nullptr;
    // An M4 unless $AKUNU_METAL_EMU_CHIP names another (the emulation has no chip of its own).
    ChipConfig chip_ = ChipConfig::from_gpu(10, 9);
    bool fused_ = metal_fused_decode_from_env();
    bool fused_batch_ = metal_fused_batch_from_env();
    const MetalKernelSpec* spec_ = nullptr;
    uint8_t* bufs_[DispatchCmd::MAX_BUFFERS] = {};
    uint8_t params_[DispatchCmd::MAX_PARAM_BYTES] = {};
};

}  // namespace akunu
