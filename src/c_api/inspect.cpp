// The C API's model inspection (tensor table, memory, architecture) and the
// per-command profile of one decode step.
#include <cstring>
#include <string>

#include "core/dtype_descriptor.h"
#include "handle.h"

using namespace akunu_c;

namespace {

// Value-returning entry points: `fail` on any error, with the message set.
template <typename T, typename F>
T checked(T fail, F&& f) {
    try {
        T v = f();
        clear_error();
        return v;
    } catch (const std::exception& e) {
        set_error(e.what());
        return fail;
    } catch (...) {
        set_error("unknown error");
        return fail;
    }
}

// The tensors of either kind of model.
const std::vector<akunu::GGUFTensorInfo>& tensors_of(const akunu_model* model, const char* fn) {
    akunu_model& h = live_any(model, fn);
    return h.whisper ? whisper_file(*h.whisper).tensors() : h.m->file().tensors();
}

const akunu::GGUFTensorInfo& tensor_at(const akunu_model* model, int32_t index, const char* fn) {
    const auto& ts = tensors_of(model, fn);
    if (index < 0 || (size_t)index >= ts.size())
        throw akunu::Error(std::string(fn) + ": tensor index " + std::to_string(index) + " is outside [0, " +
                           std::to_string(ts.size()) + ")");
    return ts[(size_t)index];
}

}  // namespace

extern "C" {

int32_t akunu_tensor_count(const akunu_model* model) {
    return checked<int32_t>(-1, [&] { return (int32_t)tensors_of(model, "akunu_tensor_count").size(); });
}

const char* akunu_tensor_name(const akunu_model* model, int32_t index) {
    return checked<const char*>(nullptr, [&] { return tensor_at(model, index, "akunu_tensor_name").name.c_str(); });
}

int32_t akunu_tensor_dtype(const akunu_model* model, int32_t index) {
    return checked<int32_t>(-1, [&] { return (int32_t)tensor_at(model, index, "akunu_tensor_dtype").type; });
}

const char* akunu_tensor_raw_dtype(const akunu_model* model, int32_t index) {
    return checked<const char*>(nullptr,
                                [&] { return akunu::dtype_name(tensor_at(model, index, "akunu_tensor_raw_dtype").type); });
}

size_t akunu_model_memory(const akunu_model* model) {
    return checked<size_t>(0, [&] {
        akunu_model& h = live_any(model, "akunu_model_memory");
        return h.whisper ? whisper_memory(*h.whisper) : h.m->memory_bytes();
    });
}

int32_t akunu_is_whisper(const akunu_model* model) {
    return checked<int32_t>(-1, [&] { return (int32_t)(live_any(model, "akunu_is_whisper").whisper != nullptr); });
}

int32_t akunu_profile_decode_step(akunu_model* model, int32_t token, int32_t position, float* timing_out,
                                  int32_t max_entries) {
    return checked<int32_t>(-1, [&]() -> int32_t {
        akunu_model& h = live(model, "akunu_profile_decode_step");
        if (!timing_out || max_entries < 0) throw akunu::Error("akunu_profile_decode_step: bad argument");
        if (position != h.m->n_past())
            throw akunu::Error("akunu_profile_decode_step: position " + std::to_string(position) +
                               " is not the cached position " + std::to_string(h.m->n_past()));
        std::vector<std::pair<std::string, double>> prof = h.m->profile_decode(token);
        if (prof.size() > (size_t)max_entries)
            throw akunu::Error("akunu_profile_decode_step: " + std::to_string(prof.size()) + " entries, buffer holds " +
                               std::to_string(max_entries));
        h.profile_labels.clear();
        for (size_t i = 0; i < prof.size(); i++) {
            timing_out[i] = (float)(prof[i].second * 1000.0);
            h.profile_labels.push_back(prof[i].first);
        }
        return (int32_t)prof.size();
    });
}

const char* akunu_profile_label(const akunu_model* model, int32_t index) {
    return checked<const char*>(nullptr, [&] {
        akunu_model& h = live(model, "akunu_profile_label");
        if (index < 0 || (size_t)index >= h.profile_labels.size())
            throw akunu::Error("akunu_profile_label: index " + std::to_string(index) + " is outside the " +
                               std::to_string(h.profile_labels.size()) + " entries of the last profile");
        return h.profile_labels[(size_t)index].c_str();
    });
}

}  // extern "C"
