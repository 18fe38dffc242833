// ChatTemplate.for_model in C++.
#include "text/chat/model_template.h"

#include "text/chat/builtin_templates.h"
#include "text/chat/template_error.h"
#include "text/chat/utf8_check.h"

namespace akunu::text {
namespace {

// Python's str.isspace() for one code point.
bool is_python_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// src.strip() == "" in Python, for valid UTF-8.
bool blank(const std::string& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
        uint32_t c = p[i];
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + len > s.size()) return false;
        if (len == 2) c = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
        if (len == 3) c = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
        if (len == 4) c = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
        if (!is_python_space(c)) return false;
        i += len;
    }
    return true;
}

void check_utf8(const std::string& s, const char* what) {
    long at = utf8_error_offset(s);
    if (at >= 0) throw TemplateError(std::string(what) + " is not valid UTF-8 (byte " + std::to_string(at) + ")");
}

}  // namespace

ChosenTemplate choose_template(const ModelChatFacts& facts, const std::string& override_) {
    check_utf8(facts.bos_token, "the model's BOS token");
    check_utf8(facts.eos_token, "the model's EOS token");
    ChosenTemplate t{"", "", facts.bos_token, facts.eos_token};
    if (!override_.empty()) {
        check_utf8(override_, "the chat template override");
        const char* builtin = builtin_chat_template(override_);
        t.source = builtin ? builtin : override_;
        t.name = builtin ? override_ : "custom";
        return t;
    }
    if (facts.chat_template) {
        check_utf8(*facts.chat_template, "the model's chat template");
        if (!blank(*facts.chat_template)) {
            t.source = *facts.chat_template;
            t.name = "gguf";
            return t;
        }
    }
    auto has = [&](const char* t) { return facts.has_token && facts.has_token(t); };
    t.name = has("<start_of_turn>") ? "gemma" : has("<|start_header_id|>") ? "llama3" : "chatml";
    t.source = builtin_chat_template(t.name);
    return t;
}

}  // namespace akunu::text
