// validate_messages of python/akunu/chat_template.py, on JSON values.
#include "text/chat/messages.h"

#include "core/error.h"

namespace akunu::text {

common_json normalize_messages(const common_json& messages) {
    if (!messages.is_array() || messages.empty())
        throw Error("messages must be a non-empty list of {'role': ..., 'content': ...} dicts");
    common_json out = common_json::array();
    for (size_t i = 0; i < messages.size(); i++) {
        const common_json& m = messages.at(i);
        const std::string at = "message " + std::to_string(i);
        if (!m.is_object() || !m.contains("role")) throw Error(at + " must be a dict with 'role' and 'content'");
        if (!m.at("role").is_string()) throw Error(at + ": role must be a string");
        common_json msg = m;
        std::string content;
        const common_json* c = m.contains("content") ? &m.at("content") : nullptr;
        if (c && c->is_array()) {
            for (size_t k = 0; k < c->size(); k++) {
                const common_json& part = c->at(k);
                if (!(part.is_object() && part.contains("type") && part.at("type").is_string() &&
                      part.at("type").get<std::string>() == "text" && part.contains("text") &&
                      part.at("text").is_string()))
                    throw Error(at + ": only text content parts are supported");
                content += part.at("text").get<std::string>();
            }
        } else if (c && c->is_string()) {
            content = c->get<std::string>();
        } else if (c && !c->is_null()) {
            throw Error(at + ": content must be a string or a list of text parts");
        }
        msg["content"] = content;  // in place when present, else last (as {**m, "content": ...})
        out.push_back(msg);
    }
    return out;
}

common_json messages_to_json(const std::vector<ChatMessage>& messages) {
    common_json out = common_json::array();
    for (const ChatMessage& m : messages) {
        common_json msg = common_json::object();
        msg["role"] = m.role;
        msg["content"] = m.content;
        out.push_back(msg);
    }
    return out;
}

}  // namespace akunu::text
