// libFuzzer harness: arbitrary bytes as a CTranslate2 model.bin (next to a
// fixed config.json) through the CTranslate2 directory reader, which maps
// Whisper's variables to GGUF names. Any crash, sanitizer report or exception
// other than akunu::Error is a finding.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "weight/ct2_directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static std::string dir;
    if (dir.empty()) {
        char tmpl[] = "/tmp/ct2_fuzz_XXXXXX";
        if (!mkdtemp(tmpl)) return 0;
        dir = tmpl;
        int c = ::open((dir + "/config.json").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const char cfg[] = "{\"suppress_ids\": [1, 2], \"suppress_ids_begin\": [220]}";
        if (c < 0 || ::write(c, cfg, sizeof(cfg) - 1) < 0) return 0;
        ::close(c);
    }
    int fd = ::open((dir + "/model.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return 0;
    const bool ok = ::write(fd, data, size) == (ssize_t)size;
    ::close(fd);
    if (!ok) return 0;
    try {
        akunu::CT2Directory f(dir);
        for (const auto& t : f.tensors())
            if (t.n_bytes) (void)t.data[t.n_bytes - 1];  // every tensor's bytes are inside the mapping
    } catch (const akunu::Error&) {
    }
    return 0;
}
