// A Hugging Face or MLX model directory: config.json, one or more
// .safetensors files (sharded through model.safetensors.index.json), and for
// sentence-transformers models modules.json and 1_Pooling/config.json.
// config.json becomes GGUF-named metadata and HF tensor names become GGUF
// tensor names, so the rest of the core reads it like a GGUF file. MLX
// quantized weights (uint32 packed + scales + biases) are repacked into
// one-group blocks (dtype_descriptor.h); float tensors stay in the mapping.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "weight/json.h"
#include "weight/model_file.h"
#include "weight/safetensors_file.h"

namespace akunu {

class HFDirectory : public ModelFile {
public:
    explicit HFDirectory(const std::string& dir);
    const char* format() const override { return "safetensors"; }

private:
    void open_shards();
    void read_config();
    void read_experts(const std::string& what);
    void read_family_keys(const std::string& what);
    void read_pooling();
    void map_tensors();
    void map_fused_experts();  // gpt-oss's experts and sinks (hf_fused_experts.cpp)
    void map_packed_experts(const std::string& blk, const std::string& part, const SafeTensor& blocks,
                            const SafeTensor& scales);
    void add_rope_freqs(const JsonValue& scaling, double base);
    uint8_t* own(size_t bytes);

    std::string dir_;
    JsonValue config_;      // the text model's config (text_config when nested)
    JsonValue quant_;       // config.json "quantization" (null when not quantized)
    std::string arch_;
    std::vector<std::unique_ptr<SafeTensorsFile>> shards_;
    std::vector<std::unique_ptr<uint8_t[]>> owned_;  // repacked weights, computed tensors
};

}  // namespace akunu
