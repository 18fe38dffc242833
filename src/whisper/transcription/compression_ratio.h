// Whisper's repetition test: bytes of the text over bytes of its zlib stream
// (Python's zlib.compress at the default level). zlib is loaded at run time,
// as the CUDA backend loads cuBLAS, so libakunu links no extra library.
#pragma once
#include <string>

namespace akunu::whisper {

// len(text) / len(zlib.compress(text)); 0 for empty text. Throws when no zlib
// (libz.so.1 / libz.1.dylib) can be loaded.
double compression_ratio(const std::string& text);

}  // namespace akunu::whisper
