// Named weights on the device, with their GGML dtype and shape, validated
// against the config (book: "WeightProvider"). Matmul weights are used in place
// from the mapping where the backend can; norm weights and biases are
// converted to F32 once at load.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "weight/model_file.h"

namespace akunu {

struct Weight {
    Buffer buf;
    uint32_t dtype = 0;
    std::vector<uint64_t> shape;  // GGUF order: shape[0] = input (contiguous) dim
};

class WeightProvider {
public:
    WeightProvider(std::shared_ptr<ModelFile> file, Device& device);
    ~WeightProvider();

    bool has(const std::string& name) const { return file_->tensor(name) != nullptr; }
    // A matrix used by matmul/embedding: shape must be [cols, rows] exactly.
    Weight matrix(const std::string& name, uint64_t cols, uint64_t rows);
    // Rows [row0, row0 + rows) of the [cols, total_rows] matrix `name`, as a
    // matrix of its own (a fused tensor's parts: Phi-3's attn_qkv, its
    // ffn_up holding the gate and up projections), read in place.
    Weight matrix_rows(const std::string& name, uint64_t cols, uint64_t total_rows, uint64_t row0, uint64_t rows);
    // The stacked matrices of n experts (mixture of experts): shape
    // [cols, rows, n], expert e's rows x cols matrix at e * rows * row bytes,
    // kept in the file's layout (the MoE kernels read any format in place;
    // experts never selected are never read).
    Weight experts(const std::string& name, uint64_t cols, uint64_t rows, uint64_t n);
    // A vector (norm weight, bias) of length n, converted to F32.
    Weight vector_f32(const std::string& name, uint64_t n);
    // A float tensor of exactly `shape` (GGUF order) read to host floats.
    std::vector<float> read_f32(const std::string& name, const std::vector<uint64_t>& shape) const;
    // Host floats uploaded as an F32 weight of `shape` (owned here).
    Weight upload_f32(const std::vector<float>& values, const std::vector<uint64_t>& shape);
    const ModelFile& file() const { return *file_; }
    // Every weight handed out (its buffer), for counting what a table reads.
    const std::vector<Weight>& placed() const { return placed_; }

private:
    Weight keep(Weight w) {
        placed_.push_back(w);
        return w;
    }
    const GGUFTensorInfo& require(const std::string& name) const;
    // rows x cols of type `type` at data as a device matrix (regrouped where the device asks).
    Weight place(const std::string& name, uint32_t type, const uint8_t* data, size_t bytes, uint64_t cols,
                 uint64_t rows, const std::vector<uint64_t>& shape);
    std::shared_ptr<ModelFile> file_;
    Device& device_;
    std::vector<Buffer> owned_;
    std::vector<Weight> placed_;
};

}  // namespace akunu
