// How many threads the CPU backend runs by default: one per physical core
// this process may run on (as llama.cpp), not one per logical CPU of the
// machine. Two hyperthreads of one core share its load ports and FMA units,
// which bound every kernel here, and contend for its caches; and a container
// limited to a few CPUs (cpuset) still sees all of the host's through
// std::thread::hardware_concurrency().
#pragma once
#include <string>
#include <vector>

namespace akunu {

// AKUNU_NUM_THREADS when set (> 0), else physical_cores_available().
int default_cpu_threads();

// The physical cores among the CPUs in this process's affinity mask (Linux),
// the performance cores (macOS), else std::thread::hardware_concurrency();
// at least 1.
int physical_cores_available();

// The number of distinct cores among `cpus` (logical CPU numbers), each
// CPU's core named by <sysfs_cpu_root>/cpuN/topology/{physical_package_id,
// core_id}; a CPU whose files cannot be read counts as a core of its own.
int count_physical_cores(const std::vector<int>& cpus, const std::string& sysfs_cpu_root);

}  // namespace akunu
