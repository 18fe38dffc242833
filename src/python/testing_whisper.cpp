// Test hooks of the C++ Whisper transcription (akunu._testing): its token
// tables, token text and audio reading, to compare piece by piece with the
// Python path (akunu/whisper/tokens.py, model.py, audio.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "weight/model_file.h"
#include "whisper/transcription/audio_input.h"
#include "whisper/transcription/whisper_tokens.h"
#include "whisper/whisper_config.h"

namespace py = pybind11;

namespace {

akunu::whisper::WhisperTokens tokens_of(const std::string& path) {
    auto file = akunu::open_model_file(path);
    return akunu::whisper::WhisperTokens(path, *file, akunu::whisper_config_from_file(*file).vocab_size);
}

py::array_t<float> to_array(const std::vector<float>& v) {
    py::array_t<float> a((py::ssize_t)v.size());
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
}

}  // namespace

void register_whisper_testing(py::module_& m) {
    m.def("whisper_token_info", [](const std::string& path) {
        const akunu::whisper::WhisperTokens t = tokens_of(path);
        py::dict d;
        d["eot"] = t.eot;
        d["sot"] = t.sot;
        d["transcribe"] = t.transcribe;
        d["translate"] = t.translate;
        d["no_timestamps"] = t.no_timestamps;
        d["sot_prev"] = t.sot_prev;
        d["no_speech"] = t.no_speech;
        d["timestamp_begin"] = t.timestamp_begin;
        d["multilingual"] = t.multilingual;
        d["languages"] = t.languages;
        d["space"] = t.space;
        d["suppress"] = t.suppress;
        return d;
    }, "The C++ Whisper tokenizer's special ids, languages, encode(' ') and suppression list.");
    m.def("whisper_decode", [](const std::string& path, const std::vector<std::vector<int32_t>>& seqs) {
        const akunu::whisper::WhisperTokens t = tokens_of(path);
        py::list out;
        for (const auto& ids : seqs) out.append(py::bytes(t.decode(ids)));
        return out;
    }, "Text of each sequence of token ids as the C++ transcription decodes it (UTF-8 bytes).");
    m.def("whisper_load_audio", [](const std::string& wav_path) {
        return to_array(akunu::whisper::load_audio_file(wav_path));
    }, "16 kHz mono samples of a WAV file as the C API reads and resamples it.");
}
