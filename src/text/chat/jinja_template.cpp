// Lexing, parsing and running a template with the vendored Jinja engine, on a
// deep stack, with the engine's exceptions turned into TemplateError.
#include "text/chat/jinja_template.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <typeinfo>

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"
#include "text/chat/deep_stack.h"
#include "text/chat/template_error.h"

namespace akunu::text {
namespace {

// Address space of the rendering thread's stack (committed only as used):
// parsing, running and freeing a template recurse once per AST level, and a
// template of kMaxTemplateBytes cannot nest deeper than this holds.
constexpr size_t kRenderStackBytes = size_t(1) << 30;
// What recursion at run time (macros calling themselves) may use of it (at
// most a quarter of the stack there is) before the render fails, as jinja2
// fails with RecursionError.
constexpr size_t kScopeStackBudget = size_t(32) << 20;

// Where the rendering thread's stack starts (the address of a local of its
// first frame).
thread_local const char* t_stack_base = nullptr;

// A key planted in the template's global variables. The engine opens a scope
// (a macro call, a loop body) by copying every variable into a new context,
// and checks each key with is_hashable() as it inserts it: the one place it
// calls us at every level of a recursion, so the stack depth is checked here.
// Its hash and type match no variable name, so no lookup finds it.
struct StackGuardKey : jinja::value_t {
    std::string type() const override { return "StackGuard"; }
    bool is_hashable() const override {
        char here;
        const uintptr_t base = reinterpret_cast<uintptr_t>(t_stack_base), now = reinterpret_cast<uintptr_t>(&here);
        const size_t budget = std::min(kScopeStackBudget, deep_stack_size() / 4);
        if (base && base > now && base - now > budget)  // stacks grow down on every target we build for
            throw std::runtime_error("the template recurses too deep (a macro calling itself without end?)");
        return true;
    }
    jinja::hasher unique_hash() const noexcept override { return jinja::hasher(typeid(*this)); }
    jinja::string as_string() const override { return jinja::string(std::string("<stack guard>")); }

protected:
    bool equivalent(const jinja::value_t& other) const override {
        return dynamic_cast<const StackGuardKey*>(&other) != nullptr;
    }
};

// Thrown by the template's raise_exception. Deliberately not a
// std::exception: the engine wraps those with source excerpts on their way
// out, and Python reports the template's message as it is.
struct RaisedByTemplate {
    std::string message;
};

// The engine reads \r\n and \r as \n and drops a trailing \n, as jinja2
// does (keep_trailing_newline=False), but it looks for that last newline
// before normalizing: a source ending in a lone \r would keep it.
std::string as_jinja2_reads(const std::string& src) {
    if (!src.empty() && src.back() == '\r') return src.substr(0, src.size() - 1);
    return src;
}

jinja::value raise_exception_function() {
    return jinja::mk_val<jinja::value_func>("raise_exception", [](const jinja::func_args& args) -> jinja::value {
        std::string msg;
        if (args.count() > 0) {
            const jinja::value& v = args.get_pos(0);
            msg = jinja::is_val<jinja::value_string>(v) ? v->as_string().str() : v->as_repr();
        }
        throw RaisedByTemplate{msg};
    });
}

std::string render_here(const std::string& source, const common_json& variables) {
    char base;
    t_stack_base = &base;
    const std::string src = as_jinja2_reads(source);
    jinja::program prog;
    try {
        jinja::lexer lexer;
        jinja::lexer_result tokens = lexer.tokenize(src);
        prog = jinja::parse_from_tokens(tokens);
    } catch (const std::exception& e) {
        throw TemplateError(std::string("the chat template does not parse: ") + e.what());
    } catch (...) {
        throw TemplateError("the chat template does not parse: unknown error");
    }
    try {
        jinja::context ctx(src);
        jinja::global_from_json(ctx, variables, false);
        ctx.set_val("raise_exception", raise_exception_function());
        ctx.set_val(jinja::value(std::make_shared<StackGuardKey>()), jinja::mk_val<jinja::value_none>());
        jinja::runtime runtime(ctx);
        const jinja::value results = runtime.execute(prog);
        return jinja::runtime::gather_string_parts(results)->as_string().str();
    } catch (const RaisedByTemplate& r) {
        throw TemplateError(r.message);
    } catch (const std::exception& e) {
        std::string what = e.what();
        while (!what.empty() && what.front() == '\n') what.erase(what.begin());
        throw TemplateError("the chat template failed to render: " + what);
    } catch (...) {
        throw TemplateError("the chat template failed to render: unknown error");
    }
}

}  // namespace

std::string render_jinja(const std::string& source, const common_json& variables) {
    if (source.size() > kMaxTemplateBytes)
        throw TemplateError("the chat template is " + std::to_string(source.size()) + " bytes, more than the " +
                            std::to_string(kMaxTemplateBytes) + " accepted");
    std::string out;
    // The program, its context and its values are made, used and freed on the deep stack.
    run_with_deep_stack([&] { out = render_here(source, variables); }, kRenderStackBytes);
    return out;
}

}  // namespace akunu::text
