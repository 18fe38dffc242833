// libFuzzer harness: arbitrary bytes as a GGUF file through the parser and
// the model-config validation. Any crash, sanitizer report or exception other
// than akunu::Error is a finding. Build and run with tools/fuzz.sh.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/arch_descriptor.h"
#include "core/error.h"
#include "core/model_config.h"
#include "weight/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // The parser maps files: hand it the bytes as an in-memory file.
    static int fd = memfd_create("gguf_fuzz", 0);
    if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return 0;
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        akunu::GGUFFile f(path);
        for (const auto& t : f.tensors())
            if (t.n_bytes) (void)t.data[t.n_bytes - 1];  // every tensor's bytes are inside the mapping
        std::string arch = f.get_string("general.architecture");
        if (!arch.empty()) {
            akunu::ArchDescriptor a = akunu::arch_from_name(arch);
            (void)akunu::config_from_file(f, a);
        }
    } catch (const akunu::Error&) {
    }
    return 0;
}
