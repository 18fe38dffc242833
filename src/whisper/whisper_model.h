// A loaded Whisper model (book Part VIII): weights, the encoder table, the
// cross-attention K/V cache filled once per 30-second window, and self-attention
// caches in `n_slots` slots (one per beam) with their decoder tables. Decoding
// policy (prompts, timestamps, suppression, beams, fallback) lives in Python;
// this class runs the passes. Nothing is allocated per token.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/owned_buffers.h"
#include "cache/scratch.h"
#include "core/dispatch_table.h"
#include "inference/model.h"
#include "weight/model_file.h"
#include "weight/weight_provider.h"
#include "whisper/whisper_config.h"
#include "whisper/whisper_tables.h"
#include "whisper/whisper_weights.h"

namespace akunu {

class WhisperModel {
public:
    WhisperModel(const std::string& path, const LoadOptions& opt, int n_slots);
    ~WhisperModel();

    const WhisperConfig& config() const { return cfg_; }
    const ModelFile& file() const { return *file_; }
    const Device& device() const { return *device_; }
    int n_slots() const { return (int)slots_.size(); }
    size_t memory_bytes() const;

    // Runs the encoder over one log-mel window (n_frames x n_mels floats,
    // frame-major) and fills the cross-attention cache for the decoder.
    void encode(const float* mel, size_t n_floats);
    // The encoder output of the last encode(): n_audio_ctx x enc_dim.
    std::vector<float> encoder_output();
    // Feeds `tokens` at positions [pos0, pos0 + n) of `slot`'s self-attention
    // cache; returns the logits after the last one (vocab floats).
    std::vector<float> decode(int slot, const std::vector<int32_t>& tokens, int pos0);
    // Copies positions [0, n) of one slot's self-attention cache into another
    // (beam search: a beam continues another beam's prefix).
    void copy_slot(int src, int dst, int n);
    // One decoder step run command by command: (label, seconds) per command.
    std::vector<std::pair<std::string, double>> profile_decode(int slot, int32_t token, int pos0);
    // The encoder pass of the last encode() run again command by command.
    std::vector<std::pair<std::string, double>> profile_encode();

private:
    struct Slot {
        KVCache kv;
        DispatchTable prompt, step;
    };
    void check_slot(int slot) const;
    std::vector<std::pair<std::string, double>> labelled(const DispatchTable& t, const ReplayState& st);

    std::shared_ptr<ModelFile> file_;
    std::unique_ptr<Device> device_;
    WhisperConfig cfg_;
    std::unique_ptr<WeightProvider> weights_;
    WhisperWeights w_;
    ScratchBuffers enc_scratch_, dec_scratch_;
    WhisperAudioBuffers audio_;
    OwnedBuffers audio_owned_;
    KVCache enc_kv_, cross_kv_;
    std::vector<Slot> slots_;
    DispatchTable encoder_table_;
    bool encoded_ = false;
    std::mutex busy_;
};

}  // namespace akunu
