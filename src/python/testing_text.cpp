// Test hooks of the C++ text code (akunu._testing): the C++ tokenizer of a
// model file or directory, to compare token for token with the Python package.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

namespace py = pybind11;

namespace {

struct CppTokenizer {
    std::shared_ptr<const akunu::text::Tokenizer> t;

    void check(int32_t id) const {
        if (id < 0 || id >= t->vocab_size())
            throw akunu::Error("token id " + std::to_string(id) + " is outside the vocabulary");
    }
};

}  // namespace

void register_text_testing(py::module_& m) {
    py::class_<CppTokenizer>(m, "CppTokenizer")
        .def_property_readonly("vocab_size", [](const CppTokenizer& c) { return c.t->vocab_size(); })
        .def_property_readonly("bos_id", [](const CppTokenizer& c) { return c.t->bos_id(); })
        .def_property_readonly("eos_id", [](const CppTokenizer& c) { return c.t->eos_id(); })
        .def_property_readonly("kind", [](const CppTokenizer& c) { return c.t->kind(); })
        .def("encode",
             [](const CppTokenizer& c, const std::string& text, bool add_special) {
                 py::gil_scoped_release unlocked;
                 return c.t->encode(text, add_special);
             },
             py::arg("text"), py::arg("add_special") = true)
        .def("encode_bytes",
             [](const CppTokenizer& c, const py::bytes& text, bool add_special) {
                 std::string s = text;
                 py::gil_scoped_release unlocked;
                 return c.t->encode(s, add_special);
             },
             py::arg("text"), py::arg("add_special") = true)
        .def("decode",
             [](const CppTokenizer& c, const std::vector<int32_t>& ids, bool skip_special) {
                 for (int32_t id : ids) c.check(id);
                 std::string s;
                 {
                     py::gil_scoped_release unlocked;
                     s = c.t->decode(ids, skip_special);
                 }
                 return py::str(s);
             },
             py::arg("ids"), py::arg("skip_special") = true)
        .def("token_bytes",
             [](const CppTokenizer& c, int32_t id) {
                 c.check(id);
                 return py::bytes(c.t->token_bytes(id));
             })
        .def("is_text_token", [](const CppTokenizer& c, int32_t id) { return c.t->is_text_token(id); })
        .def("token_text", [](const CppTokenizer& c, int32_t id) {
            c.check(id);
            return py::str(c.t->token_text(id));
        });
    m.def("cpp_tokenizer",
          [](const std::string& path) {
              py::gil_scoped_release unlocked;
              return CppTokenizer{akunu::text::load_tokenizer(path)};
          },
          py::arg("path"), "The C++ tokenizer of a .gguf file or a model directory.");
}
