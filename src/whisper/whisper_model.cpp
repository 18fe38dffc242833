#include "whisper/whisper_model.h"

#include <algorithm>

#include "core/device_factory.h"
#include "core/error.h"

namespace akunu {

namespace {
class Busy {
public:
    explicit Busy(std::mutex& m) : lock_(m, std::try_to_lock) {
        if (!lock_.owns_lock()) throw Error("this Whisper model is busy in another thread; use one model per thread");
    }

private:
    std::unique_lock<std::mutex> lock_;
};
}  // namespace

WhisperModel::WhisperModel(const std::string& path, const LoadOptions& opt, int n_slots) {
    if (n_slots < 1 || n_slots > 64) throw Error("n_slots must be in [1, 64]");
    file_ = open_model_file(path);
    if (file_->get_string("general.architecture") != "whisper")
        throw Error("'" + path + "' is not a Whisper model (architecture '" +
                    file_->get_string("general.architecture") + "')");
    cfg_ = whisper_config_from_file(*file_);
    device_ = create_device(opt.device, opt.n_threads);
    size_t weights = 0;
    for (const auto& t : file_->tensors()) weights += t.n_bytes;
    const size_t total = device_->total_memory();
    if (total && weights > total) throw Error("the Whisper weights do not fit in the device's memory");
    weights_ = std::make_unique<WeightProvider>(file_, *device_);
    w_ = resolve_whisper_weights(*weights_, cfg_);

    const int n = cfg_.n_audio_ctx, frames = cfg_.n_frames();
    enc_scratch_.allocate(*device_, cfg_.encoder_shape(), n, 1, 1);
    dec_scratch_.allocate(*device_, cfg_.decoder_shape(), cfg_.n_text_ctx, 1, 1);
    audio_.mel = audio_owned_.allocate(*device_, (size_t)frames * cfg_.n_mels * 4);
    audio_.col = audio_owned_.allocate(
        *device_, std::max((size_t)frames * 3 * cfg_.n_mels, (size_t)n * 3 * cfg_.enc_dim) * 4);
    audio_.conv = audio_owned_.allocate(*device_, (size_t)frames * cfg_.enc_dim * 4);
    enc_kv_.allocate(*device_, 1, n, cfg_.enc_dim);
    cross_kv_.allocate(*device_, cfg_.n_layers, n, cfg_.dim);
    encoder_table_ = build_whisper_encoder_table(*device_, cfg_, w_, enc_scratch_, audio_, enc_kv_, cross_kv_);
    slots_.resize((size_t)n_slots);
    for (Slot& s : slots_) {
        s.kv.allocate(*device_, cfg_.n_layers, cfg_.n_text_ctx, cfg_.dim);
        s.prompt = build_whisper_decoder_table(*device_, cfg_, w_, dec_scratch_, s.kv, cross_kv_, false);
        s.step = build_whisper_decoder_table(*device_, cfg_, w_, dec_scratch_, s.kv, cross_kv_, true);
    }
}

WhisperModel::~WhisperModel() {
    for (Slot& s : slots_) s.kv.release(*device_);
    enc_kv_.release(*device_);
    cross_kv_.release(*device_);
    audio_owned_.release(*device_);
    enc_scratch_.release(*device_);
    dec_scratch_.release(*device_);
    weights_.reset();
}

size_t WhisperModel::memory_bytes() const {
    size_t b = 0;
    for (const auto& t : file_->tensors()) b += t.n_bytes;
    b += enc_scratch_.bytes() + dec_scratch_.bytes() + audio_owned_.bytes() + enc_kv_.bytes() + cross_kv_.bytes();
    for (const Slot& s : slots_) b += s.kv.bytes();
    return b;
}

void WhisperModel::encode(const float* mel, size_t n_floats) {
    Busy busy(busy_);
    const size_t want = (size_t)cfg_.n_frames() * cfg_.n_mels;
    if (n_floats != want)
        throw Error("a Whisper window is " + std::to_string(cfg_.n_frames()) + " frames x " +
                    std::to_string(cfg_.n_mels) + " mel bins = " + std::to_string(want) + " values, got " +
                    std::to_string(n_floats));
    device_->write_buffer(audio_.mel, mel, want * 4);
    ReplayState st;
    st.n_tokens = (uint32_t)cfg_.n_audio_ctx;
    device_->encode_dispatch_table(encoder_table_, st);
    encoded_ = true;
}

std::vector<float> WhisperModel::encoder_output() {
    Busy busy(busy_);
    if (!encoded_) throw Error("encoder_output() before encode()");
    std::vector<float> out((size_t)cfg_.n_audio_ctx * cfg_.enc_dim);
    device_->read_buffer(out.data(), enc_scratch_.xn, out.size() * 4);
    return out;
}

void WhisperModel::check_slot(int slot) const {
    if (slot < 0 || slot >= (int)slots_.size())
        throw Error("slot " + std::to_string(slot) + " is outside [0, " + std::to_string(slots_.size()) + ")");
}

std::vector<float> WhisperModel::decode(int slot, const std::vector<int32_t>& tokens, int pos0) {
    Busy busy(busy_);
    check_slot(slot);
    if (!encoded_) throw Error("decode() before encode(): there is no audio to attend to");
    if (tokens.empty()) throw Error("decode() needs at least one token");
    if (pos0 < 0 || (size_t)pos0 + tokens.size() > (size_t)cfg_.n_text_ctx)
        throw Error("positions " + std::to_string(pos0) + "..+" + std::to_string(tokens.size()) +
                    " exceed the Whisper decoder's " + std::to_string(cfg_.n_text_ctx) + "-token context");
    for (int32_t t : tokens)
        if (t < 0 || t >= cfg_.vocab_size)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                        std::to_string(cfg_.vocab_size) + ")");
    device_->write_buffer(dec_scratch_.prompt_ids, tokens.data(), tokens.size() * 4);
    ReplayState st;
    st.pos0 = (uint32_t)pos0;
    st.n_tokens = (uint32_t)tokens.size();
    st.last_row_only = true;
    const Slot& s = slots_[(size_t)slot];
    device_->encode_dispatch_table(tokens.size() == 1 ? s.step : s.prompt, st);
    std::vector<float> logits((size_t)cfg_.vocab_size);
    device_->read_buffer(logits.data(), dec_scratch_.logits, logits.size() * 4);
    return logits;
}

void WhisperModel::copy_slot(int src, int dst, int n) {
    Busy busy(busy_);
    check_slot(src);
    check_slot(dst);
    if (n < 0 || n > cfg_.n_text_ctx) throw Error("copy_slot: bad position count " + std::to_string(n));
    if (src == dst || n == 0) return;
    const size_t bytes = (size_t)n * cfg_.dim * 2;  // F16 rows
    for (int l = 0; l < cfg_.n_layers; l++) {
        device_->copy_buffer(slots_[(size_t)dst].kv.k[(size_t)l], 0, slots_[(size_t)src].kv.k[(size_t)l], 0, bytes);
        device_->copy_buffer(slots_[(size_t)dst].kv.v[(size_t)l], 0, slots_[(size_t)src].kv.v[(size_t)l], 0, bytes);
    }
}

std::vector<std::pair<std::string, double>> WhisperModel::profile_decode(int slot, int32_t token, int pos0) {
    Busy busy(busy_);
    check_slot(slot);
    if (!encoded_) throw Error("profile_decode() before encode()");
    if (token < 0 || token >= cfg_.vocab_size || pos0 < 0 || pos0 >= cfg_.n_text_ctx)
        throw Error("profile_decode: bad token or position");
    device_->write_buffer(dec_scratch_.prompt_ids, &token, 4);
    ReplayState st;
    st.pos0 = (uint32_t)pos0;
    st.last_row_only = true;
    return labelled(slots_[(size_t)slot].step, st);
}

std::vector<std::pair<std::string, double>> WhisperModel::profile_encode() {
    Busy busy(busy_);
    if (!encoded_) throw Error("profile_encode() before encode()");
    ReplayState st;
    st.n_tokens = (uint32_t)cfg_.n_audio_ctx;
    return labelled(encoder_table_, st);
}

std::vector<std::pair<std::string, double>> WhisperModel::labelled(const DispatchTable& t, const ReplayState& st) {
    std::vector<double> secs = device_->time_commands(t, st);
    std::vector<std::pair<std::string, double>> out;
    for (size_t i = 0; i < secs.size(); i++) out.emplace_back(t.labels[i], secs[i]);
    return out;
}

}  // namespace akunu
