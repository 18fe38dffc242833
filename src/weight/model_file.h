// What the core reads from a model, whatever its format: metadata under
// GGUF's key names (the project's vocabulary for hyperparameters) and named
// tensors in GGUF order and GGML dtypes, pointing into mapped (or, for
// repacked formats, owned) memory. GGUF files and Hugging Face / MLX
// directories both produce one; the rest of the core sees only this.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace akunu {

enum class GGUFType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// A metadata value. Arrays of scalars are widened (ints to int64, floats to
// double) so callers need one accessor per kind; string arrays stay strings.
struct GGUFValue {
    GGUFType type = GGUFType::UINT32;
    GGUFType elem_type = GGUFType::UINT32;  // for arrays
    int64_t i = 0;
    uint64_t u = 0;
    double f = 0;
    bool b = false;
    std::string s;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    std::vector<GGUFValue> nested;  // arrays of arrays
    uint64_t array_len = 0;
};

struct GGUFTensorInfo {
    std::string name;
    std::vector<uint64_t> shape;  // GGUF order: shape[0] is the contiguous dim
    uint32_t type = 0;
    uint64_t offset = 0;  // from the start of the data section
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // into the mapping
};

// Metadata values made by the directory readers (HF, CTranslate2).
GGUFValue gguf_int(int64_t v);
GGUFValue gguf_float(double v);
GGUFValue gguf_string(const std::string& s);
GGUFValue gguf_bool(bool b);
GGUFValue gguf_int_array(const std::vector<int64_t>& v);

class MappedFile {
public:
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

class ModelFile {
public:
    virtual ~ModelFile() = default;

    // "gguf" or "safetensors"
    virtual const char* format() const = 0;
    const std::map<std::string, GGUFValue>& metadata() const { return kv_; }
    const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }

    const GGUFValue* find(const std::string& key) const;
    const GGUFTensorInfo* tensor(const std::string& name) const;

    std::string get_string(const std::string& key, const std::string& def = "") const;
    int64_t get_int(const std::string& key, int64_t def) const;
    double get_float(const std::string& key, double def) const;
    bool get_bool(const std::string& key, bool def) const;
    bool has(const std::string& key) const { return kv_.count(key) > 0; }

protected:
    void add_tensor(GGUFTensorInfo ti);
    // Tensors may not share bytes: overlapping ranges would alias one weight
    // into another. `base` is the start of the region the offsets count from.
    static void check_no_overlap(std::vector<const GGUFTensorInfo*> in_one_region);

    std::map<std::string, GGUFValue> kv_;
    std::vector<GGUFTensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

// Opens a GGUF file, or a Hugging Face / MLX model directory.
std::shared_ptr<ModelFile> open_model_file(const std::string& path);

}  // namespace akunu
