// akunu._core: a thin pybind11 layer. Converts types, releases the GIL around
// compute, and maps core exceptions onto akunu.AkunuError subclasses.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/device_factory.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "inference/model.h"
#include "weight/gguf_file.h"
#include "py_convert.h"

using namespace akunu;

PYBIND11_MODULE(_core, m) {
    m.doc() = "akunu native core";
    register_error_translator();

    m.def("cpu_features", [] {
        py::dict d;
#if defined(__AVX2__) && defined(__FMA__)
        d["avx2"] = true;
#else
        d["avx2"] = false;
#endif
        return d;
    }, "Instruction-set features the CPU kernels were compiled for.");

    m.def("default_threads", &default_cpu_threads,
          "Threads the CPU backend runs when n_threads is 0: AKUNU_NUM_THREADS, else one per physical core "
          "this process may run on.");

    m.def("read_gguf", [](const std::string& path) {
        GGUFFile f(path);
        py::dict d;
        d["version"] = f.version();
        d["alignment"] = f.alignment();
        d["file_size"] = f.file_size();
        d["metadata"] = file_metadata(f);
        d["tensors"] = file_tensors(f);
        return d;
    }, "Parse a GGUF file: version, metadata and tensor table.");

    m.def("read_model", [](const std::string& path, bool with_data) {
        std::shared_ptr<ModelFile> f = open_model_file(path);
        py::dict d;
        d["format"] = f->format();
        d["metadata"] = file_metadata(*f);
        d["tensors"] = file_tensors(*f, with_data);
        return d;
    }, py::arg("path"), py::arg("with_data") = false,
       "Parse a GGUF file or a Hugging Face / MLX directory: metadata and tensors under GGUF names "
       "(with_data: each tensor's bytes too, as loaded).");

    m.def("model_architecture", [](const std::string& path) {
        return open_model_file(path)->get_string("general.architecture");
    }, "general.architecture of a model file or directory.");

    m.def("dequantize", [](py::bytes data, uint32_t dtype, int64_t n) {
        const DTypeDescriptor* dt = dtype_lookup(dtype);
        if (!dt || !dt->supported) throw UnsupportedError(std::string("cannot dequantize ") + dtype_name(dtype));
        std::string s = data;
        if (n < 0 || n % dt->block_elems != 0 || (uint64_t)s.size() < (uint64_t)n / dt->block_elems * dt->block_bytes)
            throw Error("dequantize: data too short or length not a multiple of the block size");
        std::vector<float> out((size_t)n);
        blocks::dequantize_row(dtype, (const uint8_t*)s.data(), out.data(), n);
        return to_numpy(std::move(out), 1, (size_t)n);
    }, "Decode n elements of a GGML-typed buffer to float32 (the CPU reference meaning).");

    m.def("device_names", &device_names,
          "Devices this build contains: 'auto', 'cpu', then 'cuda' and 'metal' where built, and 'metal-emu' "
          "(the Metal kernels emulated on the CPU, for tests) while $AKUNU_MSL_EMU_LIB names its library.");

    bind_batching(m);
    py::class_<Model>(m, "Model")
        .def(py::init([](const std::string& path, const std::string& device, int n_ctx, int n_threads, int n_batch,
                         int tensor_parallel, uint32_t k_cache_type, uint32_t v_cache_type) {
                 LoadOptions o;
                 o.k_cache_type = k_cache_type;
                 o.v_cache_type = v_cache_type;
                 o.device = device;
                 o.n_ctx = n_ctx;
                 o.n_threads = n_threads;
                 o.n_batch = n_batch;
                 o.tensor_parallel = tensor_parallel;
                 py::gil_scoped_release release;
                 return std::make_unique<Model>(path, o);
             }),
             py::arg("path"), py::arg("device") = "cpu", py::arg("n_ctx") = 0, py::arg("n_threads") = 0,
             py::arg("n_batch") = 0, py::arg("tensor_parallel") = 1, py::arg("k_cache_type") = 0,
             py::arg("v_cache_type") = 0)
        .def_property_readonly("metadata", [](const Model& m) { return file_metadata(m.file()); })
        .def_property_readonly("tensors", [](const Model& m) { return file_tensors(m.file()); })
        .def_property_readonly("format", [](const Model& m) { return std::string(m.file().format()); })
        .def_property_readonly("is_encoder", &Model::is_encoder)
        .def_property_readonly("config", [](const Model& m) {
            const ModelConfig& c = m.config();
            py::dict d;
            d["architecture"] = c.architecture;
            d["name"] = c.name;
            d["dim"] = c.dim;
            d["n_layers"] = c.n_layers;
            d["n_heads"] = c.n_heads;
            d["n_kv_heads"] = c.n_kv_heads;
            d["head_dim"] = c.head_dim;
            d["ffn_dim"] = c.ffn_dim;  // feed_forward_length (unused by MoE layers; see expert_ffn_dim)
            d["n_experts"] = c.n_experts;  // 0: a dense model
            d["n_experts_used"] = c.n_experts_used;
            d["expert_ffn_dim"] = c.expert_ffn_dim;
            d["shared_expert_ffn_dim"] = c.shared_expert_ffn_dim;
            d["vocab_size"] = c.vocab_size;
            d["context_length"] = c.context_length;
            d["n_ctx"] = m.n_ctx();
            d["norm_eps"] = c.norm_eps;
            d["rope_base"] = c.rope_base;
            d["sliding_window"] = c.sliding_window;
            d["is_encoder"] = m.is_encoder();
            if (!m.is_encoder()) {  // the KV cache: element types (KvType) and bytes a token takes, all layers
                d["k_cache_type"] = c.k_cache_type;
                d["v_cache_type"] = c.v_cache_type;
                d["kv_bytes_per_token"] =
                    (size_t)c.n_layers * (kv_row_bytes(c.k_cache_type, (uint32_t)c.kv_dim()) +
                                          kv_row_bytes(c.v_cache_type, (uint32_t)c.kv_dim()));
            }
            if (m.is_encoder()) {
                d["pooling"] = c.pooling == 1 ? "mean" : c.pooling == 2 ? "cls" : "last";
                d["normalize_embeddings"] = c.normalize_embeddings;
            }
            return d;
        })
        .def_property_readonly("device_name", [](const Model& m) { return std::string(m.device().backend_name()); })
        .def_property_readonly("tensor_parallel", &Model::tensor_parallel)
        .def_property_readonly("n_past", &Model::n_past)
        .def_property_readonly("memory_bytes", &Model::memory_bytes)
        .def("truncate", &Model::truncate, py::call_guard<py::gil_scoped_release>())
        .def("reusable_prefix", &Model::reusable_prefix)
        .def("adopt_into_batch", &Model::adopt_into_batch, py::call_guard<py::gil_scoped_release>(),
             py::arg("seq"), py::arg("tokens"), py::arg("n"),
             "Batch sequence `seq` takes the single-stream cache's rows of its first n tokens; "
             "returns its length after.")
        .def_property_readonly("kv_rows", &Model::kv_rows)
        .def("logits", [](Model& m, const std::vector<int32_t>& tokens) {
            std::vector<float> l;
            {
                py::gil_scoped_release r;
                l = m.logits(tokens);
            }
            return to_numpy(std::move(l), tokens.size(), (size_t)m.config().vocab_size);
        })
        .def("prefill", &Model::prefill, py::call_guard<py::gil_scoped_release>())
        .def("decode_greedy", &Model::decode_greedy, py::call_guard<py::gil_scoped_release>())
        .def("decode_logits", [](Model& m, int32_t token) {
            std::vector<float> l;
            {
                py::gil_scoped_release r;
                l = m.decode_logits(token);
            }
            return to_numpy(std::move(l), 1, (size_t)m.config().vocab_size);
        })
        .def("last_logits", [](Model& m) {
            return to_numpy(m.last_logits(), 1, (size_t)m.config().vocab_size);
        })
        .def("set_sampling", [](Model& m, float temperature, int top_k, float top_p, float min_p,
                                float repeat_penalty, float presence_penalty, float frequency_penalty,
                                int penalty_window, uint64_t seed, const std::vector<std::pair<int32_t, float>>& bias) {
            SamplingConfig c = sampling_config(temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                                               frequency_penalty, penalty_window, seed, bias);
            m.set_sampling(c);
        }, py::arg("temperature") = 0.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f,
           py::arg("repeat_penalty") = 1.0f, py::arg("presence_penalty") = 0.0f,
           py::arg("frequency_penalty") = 0.0f, py::arg("penalty_window") = 64, py::arg("seed") = 0,
           py::arg("logit_bias") = std::vector<std::pair<int32_t, float>>{})
        .def("set_mask", [](Model& m, py::array_t<uint32_t, py::array::c_style | py::array::forcecast> words) {
            std::vector<uint32_t> w(words.data(), words.data() + words.size());
            py::gil_scoped_release r;
            m.set_mask(w);
        }, "One bit per token (1 = allowed), as uint32 words; an empty array clears the mask.")
        .def("profile_decode", &Model::profile_decode, py::call_guard<py::gil_scoped_release>())
        .def("decode_weight_reads", [](const Model& m) {
            const Model::WeightReads r = m.decode_weight_reads();
            py::dict d;
            d["read_bytes"] = r.read_bytes;
            d["once_bytes"] = r.once_bytes;
            d["weight_bytes"] = r.weight_bytes;
            d["weights"] = r.weights;
            d["unread"] = r.unread;
            return d;
        }, "What one decode step reads of the weights, from its table's bindings: bytes a token (read_bytes), "
           "the same with each weight read once (once_bytes: the embedding's one row), the model's weight bytes "
           "and how many weights no decode command reads.")
        .def("profile_prefill", &Model::profile_prefill, py::call_guard<py::gil_scoped_release>())
        .def("profile_embed", &Model::profile_embed, py::call_guard<py::gil_scoped_release>())
        .def("sample_next", &Model::sample_next, py::call_guard<py::gil_scoped_release>())
        .def("decode_sampled", &Model::decode_sampled, py::call_guard<py::gil_scoped_release>())
        .def("verify", &Model::verify, py::call_guard<py::gil_scoped_release>())
        .def("embed", [](Model& m, const std::vector<std::vector<int32_t>>& seqs) {
            std::vector<float> e;
            {
                py::gil_scoped_release r;
                e = m.embed(seqs);
            }
            return to_numpy(std::move(e), seqs.size(), (size_t)m.embedding_dim());
        }, "Pooled embeddings of token sequences, float32 (n_seqs, dim).")
        .def("enable_batching", [](Model& m, int max_seqs, int kv_tokens, int block_size) {
            BatchOptions o;
            o.max_seqs = max_seqs;
            o.kv_tokens = kv_tokens;
            o.block_size = block_size;
            py::gil_scoped_release r;
            return &m.enable_batching(o);
        }, py::arg("max_seqs"), py::arg("kv_tokens") = 0, py::arg("block_size") = 16,
           py::return_value_policy::reference_internal,
           "The model's continuous-batching engine (a paged KV cache for max_seqs sequences, kv_tokens in all).")
        .def("processed_logits", [](Model& m) {
            return to_numpy(m.processed_logits(), 1, (size_t)m.config().vocab_size);
        });
    bind_whisper(m);
}
