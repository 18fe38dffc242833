// Creates the Device for a name ("cpu", "cuda", "metal", "auto"). Defined in
// backend/, the only place that knows which backends this build contains.
#pragma once
#include <memory>
#include <string>

#include "core/device.h"

namespace akunu {

std::unique_ptr<Device> create_device(const std::string& name, int n_threads);

}  // namespace akunu
