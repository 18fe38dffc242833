// Batched decode over a paged KV cache (continuous batching). The engine
// holds up to max_seqs sequences, each a list of KV blocks; one step runs a
// ragged pass in which every entry feeds its own tokens at its own positions
// (a decode row, or a chunk of a prompt), reading every weight once for the
// whole pass, then draws each sampling entry's next token on the device with
// that sequence's own settings. Full blocks of known tokens are published for
// prefix reuse: a sequence that starts with the same tokens shares them.
//
// Batch invariance: every kernel of the pass computes a row from that row
// alone (backend/*/README.md), and a sequence's draws are keyed by (seed,
// position), so a sequence's tokens are the same whatever else is in the batch.
// The scheduling policy (who joins, chunk sizes, preemption) is the caller's.
#pragma once
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "cache/block_pool.h"
#include "cache/kv_cache.h"
#include "cache/owned_buffers.h"
#include "cache/paged_kv_cache.h"
#include "cache/sampler_buffers.h"
#include "cache/scratch.h"
#include "core/arch_descriptor.h"
#include "core/device.h"
#include "core/dispatch_table.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "core/table_builder.h"
#include "inference/sampling_config.h"

namespace akunu {

struct BatchOptions {
    int max_seqs = 8;        // sequences held at once
    int kv_tokens = 0;       // KV pool size in tokens (0: max_seqs * n_ctx)
    int block_size = 16;     // tokens per KV block
    int max_pass_tokens = 0; // rows per pass (0: max(prefill chunk, max_seqs))
};

struct BatchEntry {
    int seq = 0;
    std::vector<int32_t> tokens;  // fed at the sequence's current length
    bool sample = true;           // draw the next token after the last of them
    // The tokens were generated (drawn earlier), not given in the prompt. A
    // row's arithmetic follows its kind alone (MatmulParams::invariant), so a
    // sequence's tokens do not depend on its company in the batch.
    bool generated = false;
};

struct BatchStats {
    int blocks_total = 0, blocks_used = 0, blocks_cached = 0, block_size = 0;
    int sequences = 0;
    long long prefix_lookup_tokens = 0, prefix_hit_tokens = 0;  // prompt tokens asked / found cached
    long long computed_tokens = 0;                               // rows run through the model
};

class BatchEngine {
public:
    BatchEngine(Device& dev, const ModelConfig& cfg, const ArchDescriptor& arch, const ModelWeights& w, int n_ctx,
                int prefill_chunk, const BatchOptions& opt, std::mutex& device_lock);
    ~BatchEngine();
    BatchEngine(const BatchEngine&) = delete;
    BatchEngine& operator=(const BatchEngine&) = delete;

    int max_seqs() const { return kv_.max_seqs; }
    int max_pass_tokens() const { return scratch_.max_tokens; }
    int n_ctx() const { return n_ctx_; }
    int block_size() const { return kv_.block_size; }

    // A new sequence for `prompt` (nothing is computed yet): its id, or -1
    // when every sequence slot is taken. Blocks of a cached prefix are shared
    // (`cached_tokens` of the prompt need no computing; at least the last
    // prompt token is always left to feed, for its logits).
    int open(const std::vector<int32_t>& prompt, int* cached_tokens);
    // Takes positions [length(seq), n) of `tokens` (the sequence's context)
    // from the single-stream cache `src`, which holds them at rows 0..n-1 in
    // the pool's element types, instead of computing them again: a generation
    // that began on the single-stream path joins the batch. Copies only while
    // free blocks allow; returns the sequence's length after. The caller
    // holds the device lock and vouches for the rows.
    int adopt_locked(int seq, const std::vector<int32_t>& tokens, int n, const KVCache& src);
    // Frees the sequence's blocks (published ones stay cached for reuse).
    void close(int seq);
    // Tokens of `seq` whose K/V are in the cache.
    int length(int seq) const;
    // New blocks `seq` needs to take `n` more tokens.
    int blocks_needed(int seq, int n) const;
    // New blocks a pass of (sequence, tokens) entries needs beyond those free
    // (0: it fits); one call, one lock for a whole pass.
    int pass_shortfall(const std::vector<std::pair<int, int>>& entries) const;
    int blocks_available() const {
        std::lock_guard<std::mutex> lock(device_lock_);
        return pool_.available();
    }

    void set_sampling(int seq, const SamplingConfig& cfg);
    // Grammar mask of `seq` (one bit per token, 1 = allowed); empty clears it.
    void set_mask(int seq, const std::vector<uint32_t>& words);

    // One ragged pass: each entry's tokens at its sequence's length (an
    // entry's tokens must fit its sequence's n_ctx and the pool: Error if
    // not, before anything runs). Returns the drawn token of each sampling
    // entry, in entry order.
    std::vector<int32_t> step(const std::vector<BatchEntry>& entries);
    // The logits rows of the last step's draws (row-major), in pass order:
    // generated entries' first, then the others, each group in entry order.
    std::vector<float> last_logits(int n_rows) const;

    BatchStats stats() const;
    // The pass of step(entries) run command by command: (label, seconds) per
    // command of the table, then one "draws" entry. The step happens (its
    // tokens are fed); profiling only times it.
    std::vector<std::pair<std::string, double>> profile_step(const std::vector<BatchEntry>& entries,
                                                             std::vector<int32_t>* drawn);
    size_t memory_bytes() const { return kv_.bytes() + scratch_.bytes() + owned_.bytes(); }

private:
    struct Sequence {
        bool open = false;
        std::vector<int32_t> tokens;  // tokens with KV, position by position
        std::vector<int> blocks;
        std::vector<uint64_t> hashes;  // prefix hash after each published-or-full block
        SamplingConfig sampling;
        bool mask_on = false;
        bool greedy = true;  // argmax is its draw (no temperature, bias, penalties, mask)
    };
    void check_seq(int seq) const;
    int new_blocks(int seq, int n) const;
    void grow(int seq, int n);
    void publish_full_blocks(Sequence& s);
    void write_table_row(int seq);
    std::vector<int32_t> run_step(const std::vector<BatchEntry>& entries,
                                  std::vector<std::pair<std::string, double>>* profile);

    Device& dev_;
    std::mutex& device_lock_;  // the model's: single-stream calls and batch steps take turns on the device
    const ModelConfig& cfg_;
    int n_ctx_;
    PagedKVCache kv_;
    BlockPool pool_;
    ScratchBuffers scratch_;
    OwnedBuffers owned_;
    Buffer rows_, out_rows_, out_ids_, history_, bias_, mask_, work_;
    KVCache unused_kv_;  // the builder's contiguous-cache argument (batch tables read the paged one)
    DispatchTable table_;
    DispatchTable body_;  // table_ without its output head: passes that draw nothing (a launch of 0 rows is an error on a GPU)
    DispatchTable draws_;  // per step: one argmax or sample command per sampling entry
    DispatchCmd argmax_cmd_, sample_cmd_;
    std::vector<Sequence> seqs_;
    // per-step host staging, sized once
    std::vector<int32_t> ids_, rows_host_, out_idx_, out_host_, table_row_;
    std::vector<int> order_;  // entries in pass order: generated ones first
    std::vector<int> out_of_entry_;  // entry -> its logits row (-1: no draw)
    int last_out_rows_ = 0;
    long long lookup_tokens_ = 0, hit_tokens_ = 0, computed_tokens_ = 0;
};

}  // namespace akunu
