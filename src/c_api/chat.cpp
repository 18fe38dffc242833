// The C API's chat formatting (include/akunu/chat.h): the model's template
// chosen and rendered by src/text/chat, strings handed back in thread-local
// storage, every failure a status and a message.
#include <cstring>
#include <string>
#include <vector>

#include "common/json.h"
#include "handle.h"
#include "text/chat/messages.h"
#include "text/chat/model_facts.h"
#include "text/chat/model_template.h"
#include "text/chat/render_chat.h"
#include "text/chat/template_vars.h"
#include "text/chat/utf8_check.h"

using namespace akunu_c;
using akunu::text::ChosenTemplate;

namespace {

// What each entry point hands back, valid until its next call on this thread.
thread_local std::string t_format_chat, t_format_messages, t_template, t_info_name, t_info_source;

// An argument that must be text: non-null (unless allowed) and valid UTF-8.
std::string text_arg(const char* s, const char* fn, const std::string& what) {
    if (!s) throw akunu::Error(std::string(fn) + ": " + what + " is NULL");
    std::string out(s);
    long at = akunu::text::utf8_error_offset(out);
    if (at >= 0)
        throw akunu::Error(std::string(fn) + ": " + what + " is not valid UTF-8 (byte " + std::to_string(at) + ")");
    return out;
}

ChosenTemplate template_of(const akunu_model* model, const char* override_, const char* fn) {
    akunu_model& h = live(model, fn);
    if (h.m->is_encoder()) throw akunu::Error(std::string(fn) + ": this is an embedding model: it has no chat template");
    const akunu::ModelFile& file = h.m->file();
    akunu::text::ModelChatFacts facts = std::string(file.format()) == "gguf" ? akunu::text::gguf_chat_facts(file)
                                                                            : akunu::text::hf_chat_facts(h.path);
    std::string ov = override_ ? text_arg(override_, fn, "params->chat_template") : std::string();
    return akunu::text::choose_template(facts, ov);
}

void hand_back(std::string& store, std::string text, const char** out_text, size_t* out_len) {
    store = std::move(text);
    *out_text = store.c_str();
    if (out_len) *out_len = store.size();
}

}  // namespace

extern "C" {

AkunuChatParams akunu_default_chat_params(void) {
    AkunuChatParams p;
    p.add_generation_prompt = true;
    p.tools_json = nullptr;
    p.enable_thinking = AKUNU_THINKING_DEFAULT;
    p.template_kwargs_json = nullptr;
    p.chat_template = nullptr;
    return p;
}

akunu_status akunu_format_chat(akunu_model* model, const char* system_prompt, const char* user_message,
                               const char** out_text, size_t* out_len) {
    return guarded([&] {
        const char* fn = "akunu_format_chat";
        if (!out_text) throw akunu::Error(std::string(fn) + ": out_text is NULL");
        std::vector<akunu::text::ChatMessage> msgs;
        if (system_prompt && *system_prompt) msgs.push_back({"system", text_arg(system_prompt, fn, "system_prompt")});
        msgs.push_back({"user", text_arg(user_message, fn, "user_message")});
        ChosenTemplate t = template_of(model, nullptr, fn);
        akunu::text::ChatOptions opt;
        hand_back(t_format_chat,
                  akunu::text::render_chat(t.source, t.bos_token, t.eos_token, akunu::text::messages_to_json(msgs), opt),
                  out_text, out_len);
    });
}

akunu_status akunu_format_chat_messages(akunu_model* model, const AkunuChatMessage* messages, int32_t n_messages,
                                        const AkunuChatParams* params, const char** out_text, size_t* out_len) {
    return guarded([&] {
        const char* fn = "akunu_format_chat_messages";
        if (!out_text) throw akunu::Error(std::string(fn) + ": out_text is NULL");
        if (n_messages < 1) throw akunu::Error(std::string(fn) + ": n_messages must be at least 1");
        if (!messages) throw akunu::Error(std::string(fn) + ": messages is NULL");
        const AkunuChatParams p = params ? *params : akunu_default_chat_params();
        std::vector<akunu::text::ChatMessage> msgs;
        for (int32_t i = 0; i < n_messages; i++) {
            const std::string at = "messages[" + std::to_string(i) + "]";
            msgs.push_back({text_arg(messages[i].role, fn, at + ".role"),
                            messages[i].content ? text_arg(messages[i].content, fn, at + ".content") : ""});
        }
        akunu::text::ChatOptions opt;
        opt.add_generation_prompt = p.add_generation_prompt;
        if (p.tools_json)
            opt.tools = akunu::text::parse_json_argument(text_arg(p.tools_json, fn, "params->tools_json"),
                                                         "params->tools_json");
        if (p.template_kwargs_json) {
            opt.extra = akunu::text::parse_json_argument(
                text_arg(p.template_kwargs_json, fn, "params->template_kwargs_json"), "params->template_kwargs_json");
            if (!opt.extra.is_object()) throw akunu::Error(std::string(fn) + ": template_kwargs_json must be a JSON object");
        }
        // A C caller may store any int in the enum field: read it as one (a
        // value outside the enumeration loaded as the enum type is undefined).
        static_assert(sizeof(p.enable_thinking) == sizeof(int), "akunu_thinking is an int-sized enum");
        int thinking = 0;
        std::memcpy(&thinking, &p.enable_thinking, sizeof thinking);
        if (thinking != AKUNU_THINKING_DEFAULT) {
            if (thinking != AKUNU_THINKING_ON && thinking != AKUNU_THINKING_OFF)
                throw akunu::Error(std::string(fn) + ": enable_thinking must be AKUNU_THINKING_DEFAULT, _ON or _OFF");
            if (opt.extra.is_null()) opt.extra = common_json::object();
            opt.extra["enable_thinking"] = thinking == AKUNU_THINKING_ON;
        }
        ChosenTemplate t = template_of(model, p.chat_template, fn);
        hand_back(t_format_messages,
                  akunu::text::render_chat(t.source, t.bos_token, t.eos_token, akunu::text::messages_to_json(msgs), opt),
                  out_text, out_len);
    });
}

const char* akunu_chat_template(const akunu_model* model) {
    const char* out = nullptr;
    guarded([&] {
        ChosenTemplate t = template_of(model, nullptr, "akunu_chat_template");
        t_template = t.name == "gguf" ? t.source : t.name;
        out = t_template.c_str();
    });
    return out;
}

akunu_status akunu_chat_template_info(const akunu_model* model, const char** out_name, const char** out_source) {
    return guarded([&] {
        ChosenTemplate t = template_of(model, nullptr, "akunu_chat_template_info");
        t_info_name = t.name;
        t_info_source = t.source;
        if (out_name) *out_name = t_info_name.c_str();
        if (out_source) *out_source = t_info_source.c_str();
    });
}

}  // extern "C"
