// Errors in the core are C++ exceptions of one type; the C API turns them into
// status codes plus a thread-local message, pybind11 into akunu.AkunuError.
// Nothing in the core calls abort(): a bad model file is bad input, not a bug.
#pragma once
#include <stdexcept>
#include <string>

namespace akunu {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A model file that is malformed, truncated or inconsistent.
class FormatError : public Error {
public:
    explicit FormatError(const std::string& msg) : Error(msg) {}
};

// A well-formed file that asks for something we do not implement.
class UnsupportedError : public Error {
public:
    explicit UnsupportedError(const std::string& msg) : Error(msg) {}
};

}  // namespace akunu
