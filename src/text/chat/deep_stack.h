// Runs a function on a helper thread with a large stack. The vendored Jinja
// engine parses, executes and frees templates recursively (one stack level
// per AST level), and templates come from model files, so they are rendered
// where a deep template cannot overflow the caller's stack.
#pragma once
#include <functional>

namespace akunu::text {

// Runs fn on a thread whose stack is `stack_bytes` of address space
// (committed only as it is used) and waits for it; an exception thrown by fn
// is rethrown here. Where the address space is limited (ulimit -v) and that
// much cannot be reserved, a quarter of it is tried, down to 16 MiB.
void run_with_deep_stack(const std::function<void()>& fn, size_t stack_bytes);

// The stack size of the thread running inside run_with_deep_stack; 0 elsewhere.
size_t deep_stack_size();

}  // namespace akunu::text
