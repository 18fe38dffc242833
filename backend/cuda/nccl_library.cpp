#include "nccl_library.h"

#include <mutex>
#include <vector>

#include "runtime_library.h"

namespace akunu {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

template <typename Fn>
bool bind(void* lib, const char* symbol, Fn* fn, std::string* why) {
    return bind_symbol(lib, "NCCL", symbol, fn, why);
}

}  // namespace

std::string NcclLibrary::version_string(int code) {
    // 2.9 and later: major * 10000 + minor * 100 + patch; before: * 1000 + * 100 + patch
    const bool wide = code >= 10000;
    const int major = wide ? code / 10000 : code / 1000;
    const int minor = wide ? code % 10000 / 100 : code % 1000 / 100;
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

const NcclLibrary* NcclLibrary::get(std::string* why) {
    static std::once_flag once;
    static NcclLibrary lib;
    static const NcclLibrary* loaded = nullptr;
    static std::string failure;
    std::call_once(once, [] {
#ifdef _WIN32
        failure = "NCCL loading is not implemented on Windows";
#else
        failure = "NCCL not found (tried";
        for (const std::string& path : runtime_library_candidates("AKUNU_NCCL_LIBRARY", kSoname)) {
            void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            failure += " " + path;
            if (!h) continue;
            std::string missing;
            if (bind(h, "ncclCommInitAll", &lib.comm_init_all, &missing) &&
                bind(h, "ncclCommDestroy", &lib.comm_destroy, &missing) &&
                bind(h, "ncclCommAbort", &lib.comm_abort, &missing) &&
                bind(h, "ncclAllReduce", &lib.all_reduce, &missing) &&
                bind(h, "ncclAllGather", &lib.all_gather, &missing) &&
                bind(h, "ncclGetErrorString", &lib.get_error_string, &missing) &&
                bind(h, "ncclGetVersion", &lib.get_version, &missing)) {
                bind(h, "ncclGetLastError", &lib.get_last_error, nullptr);  // optional
                int code = 0;
                if (lib.get_version(&code) != kSuccess || code < kMinVersion) {
                    failure = "NCCL " + version_string(code) + " (" + path + ") is too old: tensor parallelism needs " +
                              version_string(kMinVersion) + " or newer";
                    dlclose(h);
                    return;
                }
                lib.version = code;
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
