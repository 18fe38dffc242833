// libFuzzer harness: arbitrary bytes as a .safetensors file (8-byte header
// length, JSON header, data) through the safetensors reader, and the same
// bytes through the JSON reader that also reads config.json. Any crash,
// sanitizer report or exception other than akunu::Error is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "weight/json.h"
#include "weight/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static int fd = memfd_create("safetensors_fuzz", 0);
    if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return 0;
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        akunu::SafeTensorsFile f(path);
        for (const auto& t : f.tensors())
            if (t.n_bytes) (void)t.data[t.n_bytes - 1];  // every tensor's bytes are inside the mapping
    } catch (const akunu::Error&) {
    }
    try {
        (void)akunu::parse_json(reinterpret_cast<const char*>(data), size, "fuzz input");
    } catch (const akunu::Error&) {
    }
    return 0;
}
