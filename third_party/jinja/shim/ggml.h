// Shim for llama.cpp's "ggml.h", which the vendored common/json.cpp includes
// only for GGML_ASSERT (it defines nlohmann's JSON_ASSERT as GGML_ASSERT).
// llama.cpp's GGML_ASSERT aborts the process; here a failed assertion throws,
// so the C API's exception guards turn it into an error status.
#pragma once
#include <stdexcept>

#define GGML_ASSERT(x)                                                   \
    do {                                                                 \
        if (!(x)) throw std::logic_error("json assertion failed: " #x); \
    } while (0)
