// The conversation a chat template receives, checked and normalized as
// python/akunu/chat_template.py's validate_messages does: a non-empty array of
// objects with a string role; content a string, null (-> "") or a list of
// {"type": "text", "text": ...} parts (joined); other keys kept in place.
#pragma once
#include <string>
#include <vector>

#include "common/json.h"

namespace akunu::text {

struct ChatMessage {
    std::string role;
    std::string content;
};

// Throws akunu::Error with Python's message for a malformed conversation.
common_json normalize_messages(const common_json& messages);
// The JSON array of plain {role, content} messages.
common_json messages_to_json(const std::vector<ChatMessage>& messages);

}  // namespace akunu::text
