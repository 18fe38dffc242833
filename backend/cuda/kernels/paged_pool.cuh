// Where a position of a sequence lives in the paged KV pool (the layout of
// PagedKVWriteParams, core/kernel_params.h), for every kernel that reads or
// writes it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace akunu {

// Pool row of position `pos` of the sequence whose block table is `table`.
__device__ __forceinline__ size_t pool_row(const int32_t* table, uint32_t block_size, uint32_t pos) {
    return (size_t)(uint32_t)table[pos / block_size] * block_size + pos % block_size;
}

}  // namespace akunu
