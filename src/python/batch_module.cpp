// akunu._core.BatchEngine: the continuous-batching engine of a Model
// (inference/batch_engine.h). Python's scheduler (akunu/batching.py) drives
// it; every call releases the GIL.
#include <pybind11/stl.h>

#include "inference/batch_engine.h"
#include "inference/model.h"
#include "py_convert.h"

using namespace akunu;

SamplingConfig sampling_config(float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                               float presence_penalty, float frequency_penalty, int penalty_window, uint64_t seed,
                               const std::vector<std::pair<int32_t, float>>& bias) {
    SamplingConfig c;
    c.temperature = temperature;
    c.top_k = top_k;
    c.top_p = top_p;
    c.min_p = min_p;
    c.repeat_penalty = repeat_penalty;
    c.presence_penalty = presence_penalty;
    c.frequency_penalty = frequency_penalty;
    c.penalty_window = penalty_window;
    c.seed = seed;
    c.logit_bias = bias;
    return c;
}

void bind_batching(py::module_& m) {
    using Entry = std::tuple<int, std::vector<int32_t>, bool, bool>;
    py::class_<BatchEngine>(m, "BatchEngine")
        .def_property_readonly("max_seqs", &BatchEngine::max_seqs)
        .def_property_readonly("max_pass_tokens", &BatchEngine::max_pass_tokens)
        .def_property_readonly("n_ctx", &BatchEngine::n_ctx)
        .def_property_readonly("block_size", &BatchEngine::block_size)
        .def_property_readonly("memory_bytes", &BatchEngine::memory_bytes)
        .def("open", [](BatchEngine& e, const std::vector<int32_t>& prompt) {
            int cached = 0;
            int seq;
            {
                py::gil_scoped_release r;
                seq = e.open(prompt, &cached);
            }
            return py::make_tuple(seq, cached);
        }, "A sequence for `prompt`: (id or -1 when no slot is free, prompt tokens already cached).")
        .def("close", &BatchEngine::close, py::call_guard<py::gil_scoped_release>())
        .def("length", &BatchEngine::length, py::call_guard<py::gil_scoped_release>())
        .def("blocks_needed", &BatchEngine::blocks_needed, py::call_guard<py::gil_scoped_release>())
        .def("blocks_available", &BatchEngine::blocks_available, py::call_guard<py::gil_scoped_release>())
        .def("pass_shortfall", &BatchEngine::pass_shortfall, py::call_guard<py::gil_scoped_release>(),
             "New blocks a pass of [(sequence, tokens)] needs beyond those free (0: it fits).")
        .def("set_sampling", [](BatchEngine& e, int seq, float temperature, int top_k, float top_p, float min_p,
                                float repeat_penalty, float presence_penalty, float frequency_penalty,
                                int penalty_window, uint64_t seed, const std::vector<std::pair<int32_t, float>>& bias) {
            SamplingConfig c = sampling_config(temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                                               frequency_penalty, penalty_window, seed, bias);
            py::gil_scoped_release r;
            e.set_sampling(seq, c);
        }, py::arg("seq"), py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("min_p") = 0.0f, py::arg("repeat_penalty") = 1.0f, py::arg("presence_penalty") = 0.0f,
           py::arg("frequency_penalty") = 0.0f, py::arg("penalty_window") = 64, py::arg("seed") = 0,
           py::arg("logit_bias") = std::vector<std::pair<int32_t, float>>{})
        .def("set_mask", [](BatchEngine& e, int seq,
                            py::array_t<uint32_t, py::array::c_style | py::array::forcecast> words) {
            std::vector<uint32_t> w(words.data(), words.data() + words.size());
            py::gil_scoped_release r;
            e.set_mask(seq, w);
        })
        .def("step", [](BatchEngine& e, const std::vector<Entry>& entries) {
            std::vector<BatchEntry> es;
            es.reserve(entries.size());
            for (const Entry& t : entries)
                es.push_back(BatchEntry{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)});
            py::gil_scoped_release r;
            return e.step(es);
        }, "One ragged pass over (sequence, tokens, sample, generated) entries; the drawn token of each "
           "sampling entry, in entry order.")
        .def("profile_step", [](BatchEngine& e, const std::vector<Entry>& entries) {
            std::vector<BatchEntry> es;
            for (const Entry& t : entries)
                es.push_back(BatchEntry{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)});
            std::vector<int32_t> drawn;
            std::vector<std::pair<std::string, double>> prof;
            {
                py::gil_scoped_release r;
                prof = e.profile_step(es, &drawn);
            }
            return py::make_tuple(drawn, prof);
        }, "step() run command by command: (drawn tokens, [(label, seconds) per command]).")
        .def("last_logits", [](BatchEngine& e, int n_rows) {
            std::vector<float> l;
            {
                py::gil_scoped_release r;
                l = e.last_logits(n_rows);
            }
            return to_numpy(std::move(l), (size_t)n_rows, l.size() / std::max(n_rows, 1));
        })
        .def("stats", [](BatchEngine& e) {
            BatchStats s;
            {
                py::gil_scoped_release r;
                s = e.stats();
            }
            py::dict d;
            d["blocks_total"] = s.blocks_total;
            d["blocks_used"] = s.blocks_used;
            d["blocks_cached"] = s.blocks_cached;
            d["block_size"] = s.block_size;
            d["sequences"] = s.sequences;
            d["prefix_lookup_tokens"] = s.prefix_lookup_tokens;
            d["prefix_hit_tokens"] = s.prefix_hit_tokens;
            d["computed_tokens"] = s.computed_tokens;
            return d;
        });
}
