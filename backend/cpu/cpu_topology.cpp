#include "cpu_topology.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace akunu {

namespace {

// A sysfs file's leading decimal number, read with C stdio: this runs in
// every process that makes a CPU device, and a Python 3.12 process on an
// H200 host (akunu built there by GCC 13.3) crashed in this function when it
// read these files through std::ifstream >> long, whose formatted input goes
// through the C++ locale machinery.
bool read_int(const std::string& path, long& value) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return false;
    char text[32] = {};
    const size_t n = std::fread(text, 1, sizeof(text) - 1, f);
    std::fclose(f);
    text[n] = '\0';
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text, &end, 10);
    if (end == text || errno != 0) return false;
    value = v;
    return true;
}

int logical_cpus() {
    const unsigned n = std::thread::hardware_concurrency();
    return n ? (int)n : 1;
}

}  // namespace

int count_physical_cores(const std::vector<int>& cpus, const std::string& sysfs_cpu_root) {
    std::set<std::pair<long, long>> cores;
    int unknown = 0;
    for (int cpu : cpus) {
        const std::string dir = sysfs_cpu_root + "/cpu" + std::to_string(cpu) + "/topology/";
        long package = 0, core = 0;
        if (read_int(dir + "physical_package_id", package) && read_int(dir + "core_id", core))
            cores.insert({package, core});
        else
            unknown++;
    }
    return (int)cores.size() + unknown;
}

int physical_cores_available() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        std::vector<int> cpus;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
        if (!cpus.empty()) return std::max(1, count_physical_cores(cpus, "/sys/devices/system/cpu"));
    }
    return logical_cpus();
#elif defined(__APPLE__)
    // Apple Silicon: the performance cores (perflevel0); Intel Macs: all physical cores.
    for (const char* name : {"hw.perflevel0.physicalcpu", "hw.physicalcpu"}) {
        int n = 0;
        size_t size = sizeof(n);
        if (sysctlbyname(name, &n, &size, nullptr, 0) == 0 && n > 0) return n;
    }
    return logical_cpus();
#else
    return logical_cpus();
#endif
}

int default_cpu_threads() {
    if (const char* env = std::getenv("AKUNU_NUM_THREADS")) {
        const int n = std::atoi(env);
        if (n > 0) return n;
    }
    return physical_cores_available();
}

}  // namespace akunu
