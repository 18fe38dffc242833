// Whisper's hyperparameters (encoder and text decoder), read from whisper.*
// metadata (weight/whisper_names.h) and validated before any allocation.
#pragma once
#include "core/model_config.h"
#include "weight/model_file.h"

namespace akunu {

struct WhisperConfig {
    int n_mels = 0;
    int n_audio_ctx = 0;  // encoder positions (1500): the mel window has 2x as many frames
    int enc_dim = 0, enc_layers = 0, enc_heads = 0, enc_ffn = 0;
    int n_text_ctx = 0;  // decoder positions (448)
    int dim = 0, n_layers = 0, n_heads = 0, ffn_dim = 0;
    int vocab_size = 0;
    float eps = 1e-5f;

    int n_frames() const { return 2 * n_audio_ctx; }
    // The shapes the shared scratch buffers are sized from.
    ModelConfig encoder_shape() const;
    ModelConfig decoder_shape() const;
};

WhisperConfig whisper_config_from_file(const ModelFile& f);

}  // namespace akunu
