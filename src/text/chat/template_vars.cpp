// ChatTemplate.render's keyword arguments as one JSON object.
#include "text/chat/template_vars.h"

#include <set>

#include "core/error.h"
#include "text/chat/template_error.h"

namespace akunu::text {

common_json template_variables(const ChatRenderInput& in) {
    static const std::set<std::string> reserved = {"messages",  "add_generation_prompt", "bos_token",
                                                   "eos_token", "raise_exception",       "strftime_now"};
    common_json vars = common_json::object();
    vars["messages"] = in.messages;
    vars["add_generation_prompt"] = in.add_generation_prompt;
    vars["bos_token"] = in.bos_token;
    vars["eos_token"] = in.eos_token;
    vars["documents"] = nullptr;  // as transformers passes it when absent
    if (!in.extra.is_null()) {
        if (!in.extra.is_object()) throw TemplateError("the extra template variables must be a JSON object");
        std::string taken;  // sorted, as Python lists them
        for (const std::string& name : reserved)
            if (in.extra.contains(name)) taken += (taken.empty() ? "" : ", ") + name;
        if (!taken.empty()) throw TemplateError("template variable(s) " + taken + " cannot be set by the request");
        if (in.extra.contains("tools"))
            throw TemplateError("the extra template variables cannot set tools: give the tools argument");
        for (const auto& [key, value] : in.extra.items()) vars[key] = value;
    }
    vars["tools"] = in.tools;
    return vars;
}

common_json parse_json_argument(const std::string& text, const char* what) {
    // The engine converts JSON to its values recursively: bound the nesting first.
    constexpr int kMaxDepth = 256;
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); i++) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxDepth)
                throw Error(std::string(what) + " is nested deeper than " + std::to_string(kMaxDepth) + " levels");
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    try {
        return common_json::parse(text);
    } catch (const std::exception& e) {
        throw Error(std::string(what) + " is not valid JSON: " + e.what());
    }
}

}  // namespace akunu::text
