// Test hooks of the C++ chat code (akunu._testing): templates rendered by the
// vendored Jinja engine without a model, and the built-in templates' sources.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "text/chat/builtin_templates.h"
#include "text/chat/render_chat.h"
#include "text/chat/template_error.h"
#include "text/chat/template_vars.h"

namespace py = pybind11;

namespace {

std::string render_chat_template(const std::string& source, const std::string& messages_json,
                                 const std::string& bos_token, const std::string& eos_token,
                                 bool add_generation_prompt, const std::optional<std::string>& tools_json,
                                 const std::optional<std::string>& extra_json) {
    using namespace akunu::text;
    ChatOptions opt;
    opt.add_generation_prompt = add_generation_prompt;
    if (tools_json) opt.tools = parse_json_argument(*tools_json, "tools_json");
    if (extra_json) opt.extra = parse_json_argument(*extra_json, "extra_json");
    common_json messages = parse_json_argument(messages_json, "messages_json");
    try {
        py::gil_scoped_release unlocked;
        return render_chat(source, bos_token, eos_token, messages, opt);
    } catch (const TemplateError& e) {
        py::object cls = py::module_::import("akunu.chat_template").attr("TemplateError");
        PyErr_SetString(cls.ptr(), e.what());
        throw py::error_already_set();
    }
}

}  // namespace

void register_chat_testing(py::module_& m) {
    m.def("render_chat_template", &render_chat_template, py::arg("template"), py::arg("messages_json"),
          py::arg("bos_token") = "", py::arg("eos_token") = "", py::arg("add_generation_prompt") = true,
          py::arg("tools_json") = py::none(), py::arg("extra_json") = py::none(),
          "A chat rendered by the C++ path (src/text/chat, the vendored llama.cpp Jinja engine) as "
          "akunu.chat_template.ChatTemplate(template, 't', bos, eos).render(messages, add_generation_prompt, "
          "tools=..., **extra) renders it. Raises akunu.chat_template.TemplateError for template failures.");
    m.def("builtin_chat_template", [](const std::string& name) -> py::object {
        const char* src = akunu::text::builtin_chat_template(name);
        return src ? py::object(py::str(src)) : py::object(py::none());
    }, py::arg("name"), "The C++ source of a built-in chat template ('chatml', 'llama3', 'gemma'), or None.");
}
