// Audio that cannot be read or used (missing, corrupt, empty, NaN samples):
// the C API reports it as AKUNU_ERROR with the message.
#pragma once
#include "core/error.h"

namespace akunu::whisper {

class AudioError : public Error {
public:
    explicit AudioError(const std::string& msg) : Error(msg) {}
};

}  // namespace akunu::whisper
