// akunu._core: a thin pybind11 layer. Converts types, releases the GIL around
// compute, and maps core exceptions onto akunu.AkunuError subclasses.
#include <map>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cpu/cpu_device.h"
#include "metal/emulation/emulated_metal_device.h"
#include "metal/metal_launch.h"
#include "core/device_factory.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "inference/model.h"
#include "weight/gguf_file.h"
#include "py_convert.h"

using namespace akunu;

// Strings in a model file are untrusted bytes: invalid UTF-8 is replaced, not
// allowed to raise a UnicodeDecodeError from deep inside a load.
py::str utf8(const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), (Py_ssize_t)s.size(), "replace");
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}

static py::object value_to_py(const GGUFValue& v) {
    switch (v.type) {
        case GGUFType::STRING: return utf8(v.s);
        case GGUFType::BOOL: return py::bool_(v.b);
        case GGUFType::FLOAT32: case GGUFType::FLOAT64: return py::float_(v.f);
        case GGUFType::UINT64: return py::int_(v.u);
        case GGUFType::ARRAY: {
            if (v.elem_type == GGUFType::STRING) {
                py::list l;
                for (const auto& e : v.strings) l.append(utf8(e));
                return l;
            }
            if (v.elem_type == GGUFType::FLOAT32 || v.elem_type == GGUFType::FLOAT64) return py::cast(v.floats);
            if (v.elem_type == GGUFType::ARRAY) {
                py::list l;
                for (const auto& e : v.nested) l.append(value_to_py(e));
                return l;
            }
            return py::cast(v.ints);
        }
        default: return py::int_(v.i);
    }
}

py::dict file_metadata(const ModelFile& f) {
    py::dict d;
    for (const auto& kv : f.metadata()) d[utf8(kv.first)] = value_to_py(kv.second);
    return d;
}

py::list file_tensors(const ModelFile& f, bool with_data) {
    py::list l;
    for (const auto& t : f.tensors()) {
        py::dict d;
        if (with_data) d["data"] = py::bytes((const char*)t.data, (size_t)t.n_bytes);
        d["name"] = utf8(t.name);
        d["dtype"] = dtype_name(t.type);
        d["type_id"] = t.type;
        d["shape"] = py::cast(t.shape);
        d["n_bytes"] = t.n_bytes;
        d["offset"] = t.offset;
        l.append(d);
    }
    return l;
}

py::array_t<float> to_numpy(std::vector<float>&& v, size_t rows, size_t cols) {
    auto* heap = new std::vector<float>(std::move(v));
    py::capsule owner(heap, [](void* p) { delete (std::vector<float>*)p; });
    return py::array_t<float>({rows, cols}, {cols * sizeof(float), sizeof(float)}, heap->data(), owner);
}

PYBIND11_MODULE(_core, m) {
    m.doc() = "akunu native core";
    // Messages quote names from model files: untrusted bytes, decoded with
    // replacement so a bad name cannot turn the error into a UnicodeDecodeError.
    py::register_exception_translator([](std::exception_ptr p) {
        py::module_ errors = py::module_::import("akunu.errors");
        auto raise = [&](const char* cls, const char* msg) {
            PyErr_SetObject(errors.attr(cls).ptr(), utf8(msg).ptr());
        };
        try {
            if (p) std::rethrow_exception(p);
        } catch (const FormatError& e) {
            raise("ModelFormatError", e.what());
        } catch (const UnsupportedError& e) {
            raise("UnsupportedModelError", e.what());
        } catch (const Error& e) {
            raise("AkunuError", e.what());
        } catch (const std::bad_alloc&) {
            PyErr_SetString(errors.attr("AkunuError").ptr(), "out of memory");
        }
    });

    m.def("cpu_features", [] {
        py::dict d;
#if defined(__AVX2__) && defined(__FMA__)
        d["avx2"] = true;
#else
        d["avx2"] = false;
#endif
        return d;
    }, "Instruction-set features the CPU kernels were compiled for.");

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

    // Test hook: the loader's regrouping of rows into a GPU layout (and back).
    m.def("_regroup_x8", [](py::bytes data, uint32_t dtype, int64_t rows, int64_t cols, bool back) {
        const DTypeDescriptor* dt = dtype_lookup(kX8Base + dtype);
        std::string s = data;
        if (!dt || !is_x8_dtype(kX8Base + dtype) || rows < 0 || cols <= 0 || cols % dt->block_elems != 0 ||
            (uint64_t)s.size() != (uint64_t)rows * (cols / dt->block_elems) * dt->block_bytes)
            throw Error("_regroup_x8: no x8 layout for this type, or the sizes do not match");
        std::string out(s.size(), '\0');
        (back ? blocks::ungroup_x8 : blocks::regroup_x8)(dtype, (const uint8_t*)s.data(), (uint8_t*)out.data(), rows,
                                                        cols);
        return py::bytes(out);
    }, py::arg("data"), py::arg("dtype"), py::arg("rows"), py::arg("cols"), py::arg("back") = false);

    // Test hook: run one CPU kernel by name on numpy buffers (C-contiguous,
    // writable) with packed parameter bytes. The tests check every kernel
    // against numpy through this; it is not part of the public API.
    // Test hook: run one kernel by name on numpy buffers (C-contiguous,
    // writable) with packed parameter bytes, on any device: host-memory devices
    // ("cpu", "metal-emu") use the arrays in place, GPU devices get copies in
    // and every buffer copied back. The tests check every kernel against numpy
    // and the CPU backend through this; it is not part of the public API.
    m.def("_run_cpu_kernel", [](const std::string& name, py::list buffers, py::bytes params, int n_threads,
                                const std::string& device) {
        static std::unique_ptr<CpuDevice> cpu;
        static std::map<std::string, std::unique_ptr<Device>> others;
        Device* dev;
        if (device == "cpu") {
            if (!cpu || cpu->n_threads() != n_threads) cpu = std::make_unique<CpuDevice>(n_threads);
            dev = cpu.get();
        } else {
            std::unique_ptr<Device>& d = others[device];
            if (!d) d = create_device(device, n_threads);
            dev = d.get();
        }
        const bool host = dynamic_cast<CpuDevice*>(dev) != nullptr;
        std::string pb = params;
        if (pb.size() > 64) throw Error("params larger than 64 bytes");
        if (buffers.size() > 8) throw Error("more than 8 buffers");
        Pipeline pso = dev->get_pipeline(name);
        std::vector<py::buffer_info> infos;
        std::vector<Buffer> bufs;
        for (size_t i = 0; i < buffers.size(); i++) {
            py::array a = py::reinterpret_borrow<py::array>(buffers[i]);
            if (!(a.flags() & py::array::c_style)) throw Error("buffer " + std::to_string(i) + " is not C-contiguous");
            infos.push_back(a.request(true));
            const size_t bytes = (size_t)infos.back().size * infos.back().itemsize;
            if (host) {
                bufs.push_back(Buffer{nullptr, bytes, infos.back().ptr});
            } else {
                bufs.push_back(dev->allocate(bytes));
                dev->write_buffer(bufs.back(), infos.back().ptr, bytes);
            }
        }
        py::gil_scoped_release r;
        dev->begin_encoding();
        dev->set_pipeline(pso);
        for (int i = 0; i < 8; i++) dev->set_buffer(i < (int)bufs.size() ? bufs[i] : Buffer{}, 0, i);
        dev->set_bytes(pb.data(), (int)pb.size(), (int)buffers.size());
        dev->dispatch(Dim3(), Dim3());
        if (!host)
            for (size_t i = 0; i < bufs.size(); i++) {
                dev->read_buffer(infos[i].ptr, bufs[i], bufs[i].size);
                dev->free_buffer(bufs[i]);
            }
    }, py::arg("name"), py::arg("buffers"), py::arg("params"), py::arg("n_threads") = 2, py::arg("device") = "cpu");

    // Metal backend introspection (plain C++ parts, testable anywhere).
    m.def("_cpu_kernel_names", &cpu_kernel_names, "Every kernel of the CPU backend (the reference set).");
    m.def("_metal_kernel_names", &metal_kernel_names, "akunu kernels the Metal backend implements.");
    m.def("_metal_function_names", &metal_function_names, "MSL functions the Metal launch specs may use.");
    m.def("_metal_emu_function_counts", &EmulatedMetalDevice::function_counts,
          "MSL functions run by device 'metal-emu' in this process, with counts.");
    m.def("_metal_launch", [](const std::string& name, py::bytes params, int cores, int family) {
        const MetalKernelSpec* spec = metal_kernel_spec(name);
        if (!spec) throw Error("Metal backend has no kernel named '" + name + "'");
        std::string pb = params;
        pb.resize(DispatchCmd::MAX_PARAM_BYTES);
        MetalLaunch l = spec->launch((const uint8_t*)pb.data(), ChipConfig::from_gpu(cores, family));
        py::dict d;
        d["function"] = spec->functions[l.variant];
        d["grid"] = py::make_tuple(l.grid.x, l.grid.y, l.grid.z);
        d["threads"] = l.threads;
        d["tg_memory"] = l.tg_memory;
        return d;
    });
    m.def("_metal_chip_config", [](int cores, int family) {
        ChipConfig c = ChipConfig::from_gpu(cores, family);
        py::dict d;
        d["slc_bytes"] = c.slc_bytes;
        d["should_fuse_weights"] = c.should_fuse_weights;
        d["q4_small_k_threshold"] = c.q4_small_k_threshold;
        d["gemv_wide_standard"] = c.gemv_wide_standard;
        d["chain_decode_chunk"] = c.chain_decode_chunk;
        d["norm_tg_size"] = c.norm_tg_size;
        return d;
    });

    py::class_<Model>(m, "Model")
        .def(py::init([](const std::string& path, const std::string& device, int n_ctx, int n_threads, int n_batch) {
                 LoadOptions o;
                 o.device = device;
                 o.n_ctx = n_ctx;
                 o.n_threads = n_threads;
                 o.n_batch = n_batch;
                 py::gil_scoped_release release;
                 return std::make_unique<Model>(path, o);
             }),
             py::arg("path"), py::arg("device") = "cpu", py::arg("n_ctx") = 0, py::arg("n_threads") = 0,
             py::arg("n_batch") = 0)
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
            d["ffn_dim"] = c.ffn_dim;
            d["vocab_size"] = c.vocab_size;
            d["context_length"] = c.context_length;
            d["n_ctx"] = m.n_ctx();
            d["norm_eps"] = c.norm_eps;
            d["rope_base"] = c.rope_base;
            d["sliding_window"] = c.sliding_window;
            d["is_encoder"] = m.is_encoder();
            if (m.is_encoder()) {
                d["pooling"] = c.pooling == 1 ? "mean" : c.pooling == 2 ? "cls" : "last";
                d["normalize_embeddings"] = c.normalize_embeddings;
            }
            return d;
        })
        .def_property_readonly("device_name", [](const Model& m) { return std::string(m.device().backend_name()); })
        .def_property_readonly("n_past", &Model::n_past)
        .def_property_readonly("memory_bytes", &Model::memory_bytes)
        .def("truncate", &Model::truncate, py::call_guard<py::gil_scoped_release>())
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
        .def("processed_logits", [](Model& m) {
            return to_numpy(m.processed_logits(), 1, (size_t)m.config().vocab_size);
        });
    bind_whisper(m);
}
