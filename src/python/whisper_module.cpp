// akunu._core.WhisperModel: the passes of a Whisper model; akunu/whisper/ drives them.
#include <pybind11/stl.h>

#include "py_convert.h"
#include "whisper/whisper_model.h"

using namespace akunu;

void bind_whisper(py::module_& m) {
    py::class_<WhisperModel>(m, "WhisperModel")
        .def(py::init([](const std::string& path, const std::string& device, int n_threads, int n_slots) {
                 LoadOptions o;
                 o.device = device;
                 o.n_threads = n_threads;
                 py::gil_scoped_release release;
                 return std::make_unique<WhisperModel>(path, o, n_slots);
             }),
             py::arg("path"), py::arg("device") = "cpu", py::arg("n_threads") = 0, py::arg("n_slots") = 5)
        .def_property_readonly("metadata", [](const WhisperModel& w) { return file_metadata(w.file()); })
        .def_property_readonly("format", [](const WhisperModel& w) { return std::string(w.file().format()); })
        .def_property_readonly("device_name",
                               [](const WhisperModel& w) { return std::string(w.device().backend_name()); })
        .def_property_readonly("n_slots", &WhisperModel::n_slots)
        .def_property_readonly("memory_bytes", &WhisperModel::memory_bytes)
        .def_property_readonly("config", [](const WhisperModel& w) {
            const WhisperConfig& c = w.config();
            py::dict d;
            d["n_mels"] = c.n_mels;
            d["n_audio_ctx"] = c.n_audio_ctx;
            d["n_frames"] = c.n_frames();
            d["enc_dim"] = c.enc_dim;
            d["enc_layers"] = c.enc_layers;
            d["enc_heads"] = c.enc_heads;
            d["n_text_ctx"] = c.n_text_ctx;
            d["dim"] = c.dim;
            d["n_layers"] = c.n_layers;
            d["n_heads"] = c.n_heads;
            d["vocab_size"] = c.vocab_size;
            return d;
        })
        .def("encode", [](WhisperModel& w, py::array_t<float, py::array::c_style | py::array::forcecast> mel) {
            const float* p = mel.data();
            const size_t n = (size_t)mel.size();
            py::gil_scoped_release r;
            w.encode(p, n);
        }, "Encode one log-mel window given frame-major (n_frames, n_mels); fills the cross-attention cache.")
        .def("encoder_output", [](WhisperModel& w) {
            std::vector<float> out;
            {
                py::gil_scoped_release r;
                out = w.encoder_output();
            }
            return to_numpy(std::move(out), (size_t)w.config().n_audio_ctx, (size_t)w.config().enc_dim);
        })
        .def("decode", [](WhisperModel& w, int slot, const std::vector<int32_t>& tokens, int pos0) {
            std::vector<float> l;
            {
                py::gil_scoped_release r;
                l = w.decode(slot, tokens, pos0);
            }
            return to_numpy(std::move(l), 1, (size_t)w.config().vocab_size).attr("reshape")(-1);
        }, py::arg("slot"), py::arg("tokens"), py::arg("pos0"),
           "Feed tokens at positions pos0.. of a slot's cache; the logits after the last one (vocab,).")
        .def("copy_slot", &WhisperModel::copy_slot, py::call_guard<py::gil_scoped_release>())
        .def("profile_decode", &WhisperModel::profile_decode, py::call_guard<py::gil_scoped_release>())
        .def("profile_encode", &WhisperModel::profile_encode, py::call_guard<py::gil_scoped_release>());
}
