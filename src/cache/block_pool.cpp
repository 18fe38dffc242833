#include "cache/block_pool.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace akunu {

BlockPool::BlockPool(int n_blocks, int block_size)
    : block_size_(block_size), blocks_((size_t)n_blocks), tokens_((size_t)n_blocks * block_size) {
    free_.reserve((size_t)n_blocks);
    for (int b = n_blocks - 1; b >= 0; b--) free_.push_back(b);  // hand out block 0 first
}

int BlockPool::allocate() {
    int b;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
    } else if (!lru_.empty()) {  // reuse the least recently used cached prefix
        b = lru_.front();
        forget(b);
        free_.pop_back();  // forget() returned it to the free list
    } else {
        return -1;
    }
    blocks_[(size_t)b].refs = 1;
    used_++;
    return b;
}

void BlockPool::retain(int block) {
    Block& b = blocks_[(size_t)block];
    if (b.refs == 0) {
        if (b.published) lru_.erase(b.lru);
        used_++;
    }
    b.refs++;
}

void BlockPool::release(int block) {
    Block& b = blocks_[(size_t)block];
    if (b.refs <= 0) throw Error("internal error: KV block released more often than taken");
    if (--b.refs > 0) return;
    used_--;
    if (b.published) {
        b.lru = lru_.insert(lru_.end(), block);
    } else {
        free_.push_back(block);
    }
}

void BlockPool::forget(int block) {
    Block& b = blocks_[(size_t)block];
    if (b.published) {
        lru_.erase(b.lru);
        auto it = by_hash_.find(b.hash);
        if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
        b.published = false;
    }
    free_.push_back(block);
}

uint64_t BlockPool::chain_hash(uint64_t parent, const int32_t* tokens, int n) {
    // splitmix64 over the parent hash and each token: a prefix's hash depends
    // on every token before it, so equal hashes mean equal prefixes (up to
    // 64-bit collisions, which lookup() guards against by comparing the block).
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        h += (uint64_t)(uint32_t)tokens[i] + 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h ? h : 1;  // 0 is "no parent"
}

int BlockPool::lookup(uint64_t hash, uint64_t parent, const int32_t* tokens) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return -1;
    const int b = it->second;
    const Block& blk = blocks_[(size_t)b];
    if (blk.parent != parent ||
        std::memcmp(&tokens_[(size_t)b * block_size_], tokens, (size_t)block_size_ * 4) != 0)
        return -1;
    retain(b);
    return b;
}

void BlockPool::publish(int block, uint64_t hash, uint64_t parent, const int32_t* tokens) {
    Block& b = blocks_[(size_t)block];
    if (b.published || by_hash_.count(hash)) return;  // the same prefix is cached already
    b.published = true;
    b.hash = hash;
    b.parent = parent;
    std::memcpy(&tokens_[(size_t)block * block_size_], tokens, (size_t)block_size_ * 4);
    by_hash_[hash] = block;
}

}  // namespace akunu
