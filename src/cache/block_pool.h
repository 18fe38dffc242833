// Block bookkeeping of the paged KV cache (host side): which pool blocks are
// free, which belong to which sequences (reference counts: a shared prefix is
// one set of blocks), and which hold a full block of known tokens that a new
// sequence starting with the same tokens can reuse instead of recomputing
// (prefix caching, by a hash of the whole prefix up to the block's end).
// Unreferenced blocks keep their content until they are needed again, the
// least recently used first.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace akunu {

class BlockPool {
public:
    BlockPool(int n_blocks, int block_size);

    int block_size() const { return block_size_; }
    int n_blocks() const { return (int)blocks_.size(); }
    // Blocks referenced by at least one sequence.
    int used() const { return used_; }
    // Blocks a new allocation can take now (free plus cached but unreferenced).
    int available() const { return (int)blocks_.size() - used_; }
    // Unreferenced blocks that still hold a reusable prefix.
    int cached() const { return (int)lru_.size(); }

    // A block for new content (reference count 1); -1 when every block is in use.
    int allocate();
    void retain(int block);
    void release(int block);

    // Hash of the prefix that ends with `tokens` (one block's worth) after a
    // prefix of hash `parent` (0 for the first block).
    static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int n);
    // The cached block holding exactly this block of tokens after that prefix,
    // retained for the caller; -1 when there is none.
    int lookup(uint64_t hash, uint64_t parent, const int32_t* tokens);
    // Records that `block` (referenced, full) holds `tokens` after prefix `parent`.
    void publish(int block, uint64_t hash, uint64_t parent, const int32_t* tokens);

private:
    struct Block {
        int refs = 0;
        bool published = false;
        uint64_t hash = 0, parent = 0;
        std::list<int>::iterator lru;  // valid while published and unreferenced
    };
    void forget(int block);

    int block_size_;
    int used_ = 0;
    std::vector<Block> blocks_;
    std::vector<int32_t> tokens_;  // block_size ids per block (published blocks)
    std::vector<int> free_;        // never-published or forgotten blocks
    std::list<int> lru_;           // published, unreferenced: front = least recently used
    std::unordered_map<uint64_t, int> by_hash_;
};

}  // namespace akunu
