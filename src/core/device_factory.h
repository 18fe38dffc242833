// Creates the Device for a name ("cpu", "cuda", "metal", "auto"). Defined in
// backend/, the only place that knows which backends this build contains.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace akunu {

// An unknown name, or a backend this build or machine lacks, is an Error that
// names the devices there are.
std::unique_ptr<Device> create_device(const std::string& name, int n_threads);

// The device names this build contains: "auto", "cpu", then "cuda" and "metal"
// where built, and "metal-emu" (the Metal kernels emulated on the CPU, for
// tests) only while its library, named by $AKUNU_MSL_EMU_LIB, loads.
std::vector<std::string> device_names();

}  // namespace akunu
