#include "py_convert.h"

#include <pybind11/stl.h>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "weight/gguf_file.h"

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

void register_error_translator() {
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
}
