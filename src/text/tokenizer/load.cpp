// load_tokenizer: a model directory's tokenizer.json, else a GGUF file's metadata.
#include <sys/stat.h>

#include "text/tokenizer/text_tokenizer.h"
#include "weight/gguf_file.h"

namespace akunu::text {

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return tok::tokenizer_from_hf_directory(path);
    GGUFFile f(path);
    return tok::tokenizer_from_gguf(f.metadata());
}

std::shared_ptr<const Tokenizer> load_tokenizer(const ModelFile& file, const std::string& path) {
    if (std::string(file.format()) == "gguf") return tok::tokenizer_from_gguf(file.metadata());
    return tok::tokenizer_from_hf_directory(path);
}

}  // namespace akunu::text
