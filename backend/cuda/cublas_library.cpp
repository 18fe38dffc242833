#include "cublas_library.h"

#include <mutex>
#include <vector>

#include "runtime_library.h"

namespace akunu {
namespace {

template <typename Fn>
bool bind(void* lib, const char* symbol, Fn* fn, std::string* why) {
    return bind_symbol(lib, "cuBLAS", symbol, fn, why);
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
        const std::string soname = "libcublas.so." + std::to_string(CUDART_VERSION / 1000);
        for (const std::string& path : runtime_library_candidates("AKUNU_CUBLAS_LIBRARY", soname)) {
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
