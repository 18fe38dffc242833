// Runs a function on a helper thread with a large stack. The vendored Jinja
// engine parses, executes and frees templates recursively (one stack level
// per AST level), and templates come from model files, so they are rendered
// where a deep template cannot overflow the caller's stack.
#pragma once
#include <functional>

namespace akunu::text {

// Runs fn on a thread whose stack is `stack_bytes` of address space
// (committed only as it is used) and waits for it; an exception thrown by fn
// is rethrown here.
void run_with_deep_stack(const std::function<void()>& fn, size_t stack_bytes);

}  // namespace akunu::text
