// A CTranslate2 model directory (the format faster-whisper uses): model.bin,
// config.json and tokenizer.json / vocabulary. model.bin is a flat list of
// named variables (shape, dtype, bytes) after a small header; every length and
// offset is checked against the file size. Whisper's variables are renamed to
// akunu's GGUF names (weight/whisper_names.h): fused Q/K/V and K/V projections
// are split into row ranges of the mapping (no copy), int8 weights are
// dequantized with their per-row scales at load, hyperparameters come from the
// variable shapes, suppression lists from config.json.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "weight/model_file.h"

namespace akunu {

class CT2Directory : public ModelFile {
public:
    explicit CT2Directory(const std::string& dir);
    const char* format() const override { return "ctranslate2"; }

    // Whether `dir` looks like a CTranslate2 model (has model.bin and config.json).
    static bool is_ct2_directory(const std::string& dir);

private:
    struct Variable {
        std::string name;
        std::vector<uint64_t> dims;  // row-major, as stored
        uint8_t dtype = 0;           // CTranslate2 DataType: 0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16
        const uint8_t* data = nullptr;
        uint64_t n_bytes = 0;
    };
    void parse_model_bin();
    void map_whisper();
    void read_config();
    const Variable& var(const std::string& name) const;
    int64_t scalar(const std::string& name) const;
    // Adds GGUF tensor `gguf` from rows [row0, row0 + rows) of variable `name`
    // (all rows when rows == 0); 1-D variables are split by elements.
    void add_rows(const std::string& name, const std::string& gguf, uint64_t row0 = 0, uint64_t rows = 0);

    std::string dir_;
    std::unique_ptr<MappedFile> file_;
    std::map<std::string, Variable> vars_;
    std::vector<std::unique_ptr<uint8_t[]>> owned_;  // dequantized int8 weights
};

}  // namespace akunu
