#include "whisper/transcription/compression_ratio.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "core/error.h"

namespace akunu::whisper {

namespace {

// zlib's compress2 and compressBound (zlib.h): uLong is unsigned long, Bytef unsigned char.
using Compress2 = int (*)(unsigned char* dest, unsigned long* dest_len, const unsigned char* src,
                          unsigned long src_len, int level);
using CompressBound = unsigned long (*)(unsigned long src_len);

struct Zlib {
    Compress2 compress2 = nullptr;
    CompressBound bound = nullptr;
};

const Zlib& zlib() {
    static Zlib z;
    static std::once_flag once;
    std::call_once(once, [] {
        for (const char* name : {"libz.so.1", "libz.so", "libz.1.dylib", "libz.dylib"}) {
            void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (!h) continue;
            auto c = (Compress2)dlsym(h, "compress2");
            auto b = (CompressBound)dlsym(h, "compressBound");
            if (c && b) {
                z.compress2 = c;
                z.bound = b;
                return;
            }
        }
    });
    return z;
}

}  // namespace

double compression_ratio(const std::string& text) {
    if (text.empty()) return 0.0;
    const Zlib& z = zlib();
    if (!z.compress2)
        throw Error("Whisper transcription needs zlib (libz.so.1) for its compression-ratio check; none could be loaded");
    unsigned long len = z.bound((unsigned long)text.size());
    std::vector<unsigned char> out(len);
    // level -1 = Z_DEFAULT_COMPRESSION (6), as zlib.compress's default
    if (z.compress2(out.data(), &len, (const unsigned char*)text.data(), (unsigned long)text.size(), -1) != 0)
        throw Error("zlib could not compress the transcript");
    return (double)text.size() / (double)len;
}

}  // namespace akunu::whisper
