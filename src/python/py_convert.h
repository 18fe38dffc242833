// Conversions shared by the pybind11 modules akunu._core and akunu._testing
// (defined in py_convert.cpp, compiled into each).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "inference/sampling_config.h"
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
// A SamplingConfig from the keyword arguments both set_sampling bindings take.
akunu::SamplingConfig sampling_config(float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                                      float presence_penalty, float frequency_penalty, int penalty_window,
                                      uint64_t seed, const std::vector<std::pair<int32_t, float>>& bias);
// The continuous-batching engine (batch_module.cpp).
void bind_batching(py::module_& m);
