// A loaded model: weights, KV cache, scratch and the two dispatch tables, all
// created at load. Generation replays the tables; nothing is allocated per token.
#pragma once
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/sampler_buffers.h"
#include "cache/scratch.h"
#include "core/arch_descriptor.h"
#include "inference/batch_engine.h"
#include "core/device.h"
#include "core/dispatch_table.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "inference/sampling_config.h"
#include "weight/model_file.h"
#include "weight/weight_provider.h"

namespace akunu {

struct LoadOptions {
    std::string device = "cpu";
    int n_ctx = 0;      // 0: min(trained context, 4096)
    int n_threads = 0;  // 0: all cores (or AKUNU_NUM_THREADS)
    int n_batch = 0;    // tokens per prefill pass; 0: the device's choice (CPU 64, CUDA 512)
    // Ranks the model is split over (tensor parallelism; parallel/): one GPU
    // a rank on "cuda", threads on "cpu". 1: one device.
    int tensor_parallel = 1;
    // KV cache element types (core/kv_layout.h KvType), K and V apart.
    uint32_t k_cache_type = 0;
    uint32_t v_cache_type = 0;
};

class Model {
public:
    Model(const std::string& path, const LoadOptions& opt);
    ~Model();

    // The model's dimensions (a tensor-parallel model's whole heads and widths).
    const ModelConfig& config() const { return model_cfg_; }
    // Ranks the model is split over (1: one device).
    int tensor_parallel() const { return cfg_.tp_ranks; }
    const ModelFile& file() const { return *file_; }
    const ArchDescriptor& arch() const { return arch_; }
    bool is_encoder() const { return arch_.encoder; }
    const Device& device() const { return *device_; }
    // Context of a generation; for an encoder, the longest sequence it embeds.
    int n_ctx() const { return arch_.encoder ? encoder_max_seq_ : kv_.n_ctx; }
    int n_past() const { return n_past_; }
    size_t memory_bytes() const;

    // Drops cached positions after `n` (n = 0 clears the context). A model
    // whose sliding-window layers keep a ring of rows can go back only as far
    // as the ring still holds the window before `n` (reusable_prefix);
    // further is an error.
    void truncate(int n);
    // The longest prefix of the first n cached positions that truncate keeps:
    // n, or 0 when the rings of the sliding-window layers no longer hold the
    // keys position n would see (re-feeding from 0 is then the only way).
    int reusable_prefix(int n) const;
    // A generation leaving the single-stream path for the batch: batch
    // sequence `seq` (context `tokens`) takes the single-stream cache's rows
    // of the first n tokens (the caller vouches they are those tokens; n at
    // most n_past) instead of computing them again. Returns the sequence's
    // length after (unchanged when a sliding-window ring has wrapped or the
    // pool lacks blocks).
    int adopt_into_batch(int seq, const std::vector<int32_t>& tokens, int n);
    // Rows of the K / V cache of each layer (n_ctx, or a sliding-window ring).
    const std::vector<int>& kv_rows() const { return kv_.rows; }
    // Logits after every token of `tokens`, from position 0: row-major n x vocab.
    std::vector<float> logits(const std::vector<int32_t>& tokens);
    // Appends tokens at n_past; returns the greedy next token (argmax on the device).
    int32_t prefill(const std::vector<int32_t>& tokens);
    // Chain decode: feeds `first`, then each argmax, for up to `count` steps;
    // stops after emitting a token in `stop`. Returns the generated ids.
    std::vector<int32_t> decode_greedy(int32_t first, int count, const std::vector<int32_t>& stop);
    // The same chain with the device sampler (set_sampling) instead of argmax.
    std::vector<int32_t> decode_sampled(int32_t first, int count, const std::vector<int32_t>& stop);
    // Samples the next token from the last logits row (after prefill or a decode step).
    int32_t sample_next();
    // Sampler settings for sample_next / decode_sampled (validated here).
    void set_sampling(const SamplingConfig& cfg);
    const SamplingConfig& sampling() const { return sampling_; }
    // Grammar mask for the sampler: one bit per token (1 = allowed); empty clears it.
    void set_mask(const std::vector<uint32_t>& words);
    // The sampler's processed logits of its last call (bias, penalties, mask).
    std::vector<float> processed_logits();
    // Appends `tokens` at n_past in one batched pass; returns the argmax after
    // each of them (speculative verification).
    std::vector<int32_t> verify(const std::vector<int32_t>& tokens);
    // One decode step for host-side sampling: feeds `token`, returns the logits.
    std::vector<float> decode_logits(int32_t token);
    // Logits row of the last token processed (after prefill or decode).
    std::vector<float> last_logits();
    // One decode step of `token` run command by command: (label, seconds) per
    // dispatch-table command. The step is undone afterwards.
    std::vector<std::pair<std::string, double>> profile_decode(int32_t token);
    // One prefill pass of `tokens` (at most a pass's worth) run command by
    // command, as prefill(): (label, seconds) per command. The tokens stay
    // in the cache, as prefill's do.
    std::vector<std::pair<std::string, double>> profile_prefill(const std::vector<int32_t>& tokens);
    // What one decode step reads of the weights, from its dispatch table's
    // bindings (model_weight_reads.cpp).
    struct WeightReads {
        uint64_t read_bytes = 0;    // a token: each bound matrix whole, the embedding's one row
        uint64_t once_bytes = 0;    // the same with every weight read once
        uint64_t weight_bytes = 0;  // every weight of the model
        int weights = 0;            // weights the model holds
        int unread = 0;             // weights no decode command reads
    };
    WeightReads decode_weight_reads() const;

    // Continuous batching: creates (or replaces) the batch engine with its
    // paged KV cache beside the single-stream cache; its steps and the calls
    // above take turns on the device.
    BatchEngine& enable_batching(const BatchOptions& opt);
    BatchEngine* batching() { return batch_.get(); }

    // Encoder models: one pooled (and, per the model, L2-normalized) embedding
    // per sequence, row-major n_seqs x dim (embedding.cpp).
    std::vector<float> embed(const std::vector<std::vector<int32_t>>& seqs);
    int embedding_dim() const { return cfg_.dim; }
    // One encoder pass over `tokens` run command by command: (label, seconds) per command.
    std::vector<std::pair<std::string, double>> profile_embed(const std::vector<int32_t>& tokens);

private:
    void require_decoder(const char* what) const;
    void load_encoder(const LoadOptions& opt);
    void check_tokens(const std::vector<int32_t>& tokens) const;
    void check_room(size_t n) const;
    void check_memory(int n_ctx, const std::vector<int>& rows) const;
    std::vector<int> layer_kv_rows(int n_ctx) const;
    // After a pass wrote positions up to `end` (exclusive): positions a ring
    // may have overwritten are those below end - ring rows.
    void note_written(int end) {
        if (ring_rows_) ring_floor_ = std::max(ring_floor_, end - ring_rows_);
    }
    void set_cache_types(const LoadOptions& opt);
    enum class PrefillOutput { LastRow, AllLogits, RowArgmax };
    // Runs `tokens` at n_past in chunks; AllLogits fills `logits`, RowArgmax fills `ids`.
    void run_prefill_chunks(const std::vector<int32_t>& tokens, PrefillOutput mode, std::vector<float>* logits,
                            std::vector<int32_t>* ids);
    std::vector<int32_t> decode_chain(const DispatchTable& table, int32_t first, int count,
                                      const std::vector<int32_t>& stop);
    void record_history(const int32_t* ids, size_t n, int pos);
    void apply_sample_params();

    void load_tensor_parallel(const LoadOptions& opt);

    std::shared_ptr<ModelFile> file_;
    std::unique_ptr<Device> host_device_;  // tensor parallelism: reads weights before they are split
    std::unique_ptr<Device> device_;
    ModelConfig model_cfg_;  // as the file gives it
    ModelConfig cfg_;        // what this device computes (one rank's share when split)
    ArchDescriptor arch_;
    std::unique_ptr<WeightProvider> weights_;
    ModelWeights w_;
    // Tensor parallelism: the weights' composed buffers, freed through the
    // device (declared after it: freed first, also when loading fails).
    struct OwnedShards {
        Device* device = nullptr;
        std::vector<Buffer> buffers;
        ~OwnedShards() {
            for (Buffer b : buffers) device->free_buffer(b);
        }
    } shards_;
    KVCache kv_;
    ScratchBuffers scratch_;
    int chain_length_ = 16;           // decode steps per submission (the device's choice)
    int prefill_chunk_ = 64;          // tokens per prefill pass (the device's choice)
    std::vector<int32_t> chain_out_;  // chain results, read back per submission
    SamplerBuffers sampler_;
    DispatchTable prefill_table_, decode_table_;
    DispatchTable encoder_table_;  // encoder models only
    int encoder_max_seq_ = 0;      // longest sequence (learned positions, n_ctx)
    DispatchTable sample_first_table_, decode_sampled_table_;  // sample after a prefill; chain with sampling
    SamplingConfig sampling_;
    bool mask_on_ = false;
    int n_past_ = 0;
    // Sliding-window rings (kv_rows): the fewest rows of a ring layer (0: no
    // ring) and the lowest position every ring still holds (positions below
    // it may have been overwritten by a later one at the same row).
    int ring_rows_ = 0;
    int ring_floor_ = 0;
    std::mutex busy_;
    // Set (for good) when a batch engine is first asked for, before it is built:
    // from then on callers wait for the device instead of getting the
    // one-caller error, even while the engine is still being built.
    std::atomic<bool> shared_{false};
    std::unique_ptr<BatchEngine> batch_;
};

}  // namespace akunu
