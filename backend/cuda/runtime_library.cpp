#include "runtime_library.h"

#include <algorithm>
#include <cstdlib>

namespace akunu {

std::vector<std::string> runtime_library_candidates(const char* override_var, const std::string& soname) {
    std::vector<std::string> c;
    if (const char* e = std::getenv(override_var)) {
        c.push_back(e);  // an explicit choice: nothing else is tried
        return c;
    }
    c.push_back(soname);
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* root = std::getenv(var)) c.push_back(std::string(root) + "/lib64/" + soname);
    c.push_back("/usr/local/cuda/lib64/" + soname);
    // NVIDIA's pip packages (nvidia-cublas, nvidia-nccl-cu<major>, as PyTorch
    // installs them): the Python package lists their lib folders here
    // (akunu/cuda_libraries.py)
    if (const char* dirs = std::getenv("AKUNU_CUBLAS_DIRS")) {
        const std::string all = dirs;
        for (size_t at = 0; at <= all.size();) {
            const size_t end = std::min(all.find(':', at), all.size());
            if (end > at) c.push_back(all.substr(at, end - at) + "/" + soname);
            at = end + 1;
        }
    }
    return c;
}

}  // namespace akunu
