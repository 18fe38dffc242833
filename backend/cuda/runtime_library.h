// The search that the CUDA backend's run-time loaded libraries (cuBLAS,
// NCCL) share: where a shared library of NVIDIA's may be, and binding its
// entry points. Loading at run time keeps the backend buildable wherever
// nvcc is, with or without those libraries.
#pragma once
#include <string>
#include <vector>

#ifndef _WIN32
#include <dlfcn.h>
#endif

namespace akunu {

// The paths to try for `soname`: only $<override_var> when it is set (an
// explicit choice), else the loader's search path, $CUDA_HOME / $CUDA_PATH,
// /usr/local/cuda and the folders in AKUNU_CUBLAS_DIRS (colon-separated;
// the Python package fills it with NVIDIA's pip packages' lib folders).
std::vector<std::string> runtime_library_candidates(const char* override_var, const std::string& soname);

// Binds `symbol` of `lib` to *fn; false (and, with `why`, what is missing,
// named after `library`) when the library lacks it.
template <typename Fn>
bool bind_symbol(void* lib, const char* library, const char* symbol, Fn* fn, std::string* why) {
#ifndef _WIN32
    *fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
#endif
    if (!*fn && why) *why = std::string(library) + " has no symbol " + symbol;
    return *fn != nullptr;
}

}  // namespace akunu
