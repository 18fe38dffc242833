// One .safetensors file on mmap: an 8-byte header length, a JSON header of
// {name: {dtype, shape, data_offsets}}, then the data. Every offset is checked
// against the file, sizes against dtype x shape, and tensors may not overlap.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "weight/model_file.h"

namespace akunu {

struct SafeTensor {
    std::string name;
    std::string dtype;            // "F32", "F16", "BF16", "U32", "I64", ...
    std::vector<uint64_t> shape;  // row-major, outermost first (as stored)
    const uint8_t* data = nullptr;
    uint64_t n_bytes = 0;
};

class SafeTensorsFile {
public:
    explicit SafeTensorsFile(const std::string& path);
    const std::string& path() const { return path_; }
    const std::vector<SafeTensor>& tensors() const { return tensors_; }
    const SafeTensor* find(const std::string& name) const;

private:
    std::string path_;
    std::shared_ptr<MappedFile> file_;
    std::vector<SafeTensor> tensors_;
    std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
};

// Bytes per element of a safetensors dtype, 0 if unknown.
size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace akunu
