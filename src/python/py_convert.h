// Conversions shared by the pybind11 modules akunu._core and akunu._testing
// (defined in py_convert.cpp, compiled into each).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "weight/model_file.h"

namespace py = pybind11;

// Model-file strings are untrusted bytes: decoded with replacement.
py::str utf8(const std::string& s);
py::dict file_metadata(const akunu::ModelFile& f);
py::list file_tensors(const akunu::ModelFile& f, bool with_data = false);
// Takes ownership of `v` as a rows x cols float32 array.
py::array_t<float> to_numpy(std::vector<float>&& v, size_t rows, size_t cols);
// Core exceptions -> akunu.errors classes (ModelFormatError, UnsupportedModelError,
// AkunuError); out of memory -> AkunuError.
void register_error_translator();
// The Whisper classes (whisper_module.cpp).
void bind_whisper(py::module_& m);
