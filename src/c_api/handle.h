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

namespace akunu_c {
struct WhisperHandle;  // src/c_api/whisper.cpp
}

struct akunu_model {
    std::unique_ptr<akunu::Model> m;
    std::string path;  // the file or directory it was loaded from
    // Built on first use by tokenizer_of (most C callers bring their own ids).
    std::shared_ptr<const akunu::text::Tokenizer> tokenizer;
    // akunu_set_speculation: greedy generation verifies n-gram drafts.
    bool speculation = false;
    int32_t drafted = 0, accepted = 0;  // of the last generation (akunu_speculation_stats)
    // The model's continuous-batching engine, made by the first akunu_generate_batch.
    akunu::BatchEngine* batch = nullptr;
    // Labels of the last akunu_profile_decode_step, read by akunu_profile_label.
    std::vector<std::string> profile_labels;
    // Set instead of `m` for a Whisper (speech-to-text) model.
    std::shared_ptr<akunu_c::WhisperHandle> whisper;
};

namespace akunu_c {

void set_error(const std::string& msg);
void clear_error();

// Handles are registered on load and removed on free, so a freed or foreign
// pointer is reported as an error instead of being dereferenced.
void register_handle(akunu_model* h);
bool unregister_handle(akunu_model* h);
// The live handle `h` of a text model, or throws naming `fn` (null or unknown
// handle, or a Whisper model: text-model calls would find no `m`).
akunu_model& live(const akunu_model* h, const char* fn);
// The live handle `h` of either kind.
akunu_model& live_any(const akunu_model* h, const char* fn);
// The live handle `h` of a Whisper model, or throws naming `fn`.
akunu_model& live_whisper(const akunu_model* h, const char* fn);

// Whisper models behind the handle (src/c_api/whisper.cpp): whether the model
// at `path` is one, loading it, and what inspection reads of it.
bool is_whisper_model(const std::string& path);
std::shared_ptr<WhisperHandle> load_whisper(const std::string& path, const akunu::LoadOptions& opt);
const akunu::ModelFile& whisper_file(const WhisperHandle& w);
size_t whisper_memory(const WhisperHandle& w);
AkunuModelConfig whisper_config(const WhisperHandle& w);
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
