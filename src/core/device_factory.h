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

class TensorParallelDevice;

// A tensor-parallel device (parallel/tensor_parallel_device.h) of n ranks:
// "cuda" one GPU a rank (GPUs 0..n-1 of those visible, NCCL between them),
// "cpu" threads over host memory (n_threads shared out among the ranks),
// "auto" cuda where this build has it and a GPU is visible, else cpu.
std::unique_ptr<TensorParallelDevice> create_tensor_parallel_device(const std::string& name, int n, int n_threads);

// A device over host memory for reading weights before they are split
// between ranks (the CPU backend with one thread).
std::unique_ptr<Device> create_host_device();

// The device names this build contains: "auto", "cpu", then "cuda" and "metal"
// where built, and "metal-emu" (the Metal kernels emulated on the CPU, for
// tests) only while its library, named by $AKUNU_MSL_EMU_LIB, loads.
std::vector<std::string> device_names();

// The CPU backend's thread count where a caller gives none (n_threads 0):
// AKUNU_NUM_THREADS, else one per physical core this process may run on
// (backend/cpu/cpu_topology.h).
int default_cpu_threads();

}  // namespace akunu
