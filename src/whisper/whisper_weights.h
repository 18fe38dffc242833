// Whisper's weights on the device, resolved by name and shape-checked once at load.
#pragma once
#include <vector>

#include "weight/weight_provider.h"
#include "whisper/whisper_config.h"

namespace akunu {

struct WhisperAttentionWeights {
    Weight norm, norm_b, wq, bq, wk, bk, wv, bv, wo, bo;
    bool has_bk = false;  // Whisper's key projections have no bias; CTranslate2 stores zeros
};

struct WhisperLayerWeights {
    WhisperAttentionWeights self, cross;  // cross: decoder layers only
    Weight ffn_norm, ffn_norm_b, up, b_up, down, b_down;
};

struct WhisperWeights {
    Weight conv1, conv1_b, conv2, conv2_b, enc_positions;  // positions as F32 [n_audio_ctx, enc_dim]
    std::vector<WhisperLayerWeights> enc;
    Weight enc_norm, enc_norm_b;
    Weight tok_embd, dec_positions;  // token_embd doubles as the output projection
    std::vector<WhisperLayerWeights> dec;
    Weight out_norm, out_norm_b;
};

WhisperWeights resolve_whisper_weights(WeightProvider& wp, const WhisperConfig& c);

}  // namespace akunu
