#include "cublas_library.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#ifndef _WIN32
#include <dlfcn.h>
#endif

namespace akunu {
namespace {

std::vector<std::string> candidates() {
    const std::string so = "libcublas.so." + std::to_string(CUDART_VERSION / 1000);
    std::vector<std::string> c;
    if (const char* e = std::getenv("AKUNU_CUBLAS_LIBRARY")) {
        c.push_back(e);  // an explicit choice: nothing else is tried
        return c;
    }
    c.push_back(so);
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* root = std::getenv(var)) c.push_back(std::string(root) + "/lib64/" + so);
    c.push_back("/usr/local/cuda/lib64/" + so);
    // NVIDIA's pip packages (nvidia-cublas, as PyTorch installs it): the
    // Python package lists their lib folders here (akunu/cuda_libraries.py)
    if (const char* dirs = std::getenv("AKUNU_CUBLAS_DIRS")) {
        std::string all = dirs;
        for (size_t at = 0; at <= all.size();) {
            const size_t end = std::min(all.find(':', at), all.size());
            if (end > at) c.push_back(all.substr(at, end - at) + "/" + so);
            at = end + 1;
        }
    }
    return c;
}

template <typename Fn>
bool bind(void* lib, const char* symbol, Fn* fn, std::string* why) {
#ifndef _WIN32
    *fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
#endif
    if (!*fn) *why = std::string("cuBLAS has no symbol ") + symbol;
    return *fn != nullptr;
}

}  // namespace

const CublasLibrary* CublasLibrary::get(std::string* why) {
    static std::once_flag once;
    static CublasLibrary lib;
    static const CublasLibrary* loaded = nullptr;
    static std::string failure;
    std::call_once(once, [] {
#ifdef _WIN32
        failure = "cuBLAS loading is not implemented on Windows";
#else
        failure = "cuBLAS not found (tried";
        for (const std::string& path : candidates()) {
            void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            failure += " " + path;
            if (!h) continue;
            std::string missing;
            if (bind(h, "cublasCreate_v2", &lib.create, &missing) && bind(h, "cublasDestroy_v2", &lib.destroy, &missing) &&
                bind(h, "cublasSetStream_v2", &lib.set_stream, &missing) &&
                bind(h, "cublasGemmEx", &lib.gemm_ex, &missing)) {
                lib.path = path;
                loaded = &lib;
                return;
            }
            failure = missing + " (" + path + ")";
            dlclose(h);
            return;
        }
        failure += ")";
#endif
    });
    if (!loaded && why) *why = failure;
    return loaded;
}

}  // namespace akunu
