// ChatTemplate.render: variables, messages, then the Jinja engine.
#include "text/chat/render_chat.h"

#include "text/chat/jinja_template.h"
#include "text/chat/messages.h"
#include "text/chat/template_vars.h"

namespace akunu::text {

std::string render_chat(const std::string& source, const std::string& bos_token, const std::string& eos_token,
                        const common_json& messages, const ChatOptions& opt) {
    ChatRenderInput in;
    in.add_generation_prompt = opt.add_generation_prompt;
    in.bos_token = bos_token;
    in.eos_token = eos_token;
    in.tools = opt.tools;
    in.extra = opt.extra;
    in.messages = common_json::array();
    template_variables(in);  // refused variables first, as Python checks them first
    in.messages = normalize_messages(messages);
    return render_jinja(source, template_variables(in));
}

}  // namespace akunu::text
