// Shared by the C API's translation units: the handle behind akunu_model, the
// registry of live handles and the exception-to-status guard.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "akunu/akunu.h"
#include "core/error.h"
#include "inference/model.h"
#include "inference/sampling_config.h"
#include "text/tokenizer.h"

struct akunu_model {
    std::unique_ptr<akunu::Model> m;
    std::string path;  // the file or directory it was loaded from
    // Built on first use by tokenizer_of (most C callers bring their own ids).
    std::shared_ptr<const akunu::text::Tokenizer> tokenizer;
    // Labels of the last akunu_profile_decode_step, read by akunu_profile_label.
    std::vector<std::string> profile_labels;
};

namespace akunu_c {

void set_error(const std::string& msg);
void clear_error();

// Handles are registered on load and removed on free, so a freed or foreign
// pointer is reported as an error instead of being dereferenced.
void register_handle(akunu_model* h);
bool unregister_handle(akunu_model* h);
// The live handle `h`, or throws naming `fn` (null or unknown handle).
akunu_model& live(const akunu_model* h, const char* fn);
// The model's tokenizer, loaded from h.path on first use (src/c_api/tokenize.cpp).
const akunu::text::Tokenizer& tokenizer_of(akunu_model& h);

// Runs f, turning any exception into a status and the thread's last error.
template <typename F>
akunu_status guarded(F&& f) {
    try {
        f();
        clear_error();
        return AKUNU_OK;
    } catch (const akunu::FormatError& e) {
        set_error(e.what());
        return AKUNU_ERROR_FORMAT;
    } catch (const akunu::UnsupportedError& e) {
        set_error(e.what());
        return AKUNU_ERROR_UNSUPPORTED;
    } catch (const std::exception& e) {
        set_error(e.what());
        return AKUNU_ERROR;
    } catch (...) {
        set_error("unknown error");
        return AKUNU_ERROR;
    }
}

// Core sampler settings from the C struct (NULL: greedy defaults); throws on
// inconsistent logit bias arrays. `fn` names the caller in messages.
akunu::SamplingConfig to_sampling(const AkunuSamplingConfig* s, const char* fn);

}  // namespace akunu_c
