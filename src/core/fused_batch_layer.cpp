// The fused layer of a batch pass (continuous batching): fewer launches a
// layer than the plain sequence, each row's result unchanged.
#include "core/table_builder_detail.h"

namespace akunu {
namespace table_detail {

bool fused_batch_supported(const Builder& b, const ArchDescriptor& arch, const ModelWeights& w) {
    (void)b;
    (void)arch;
    (void)w;
    return false;
}

void fused_batch_layer(Builder& b, const ModelConfig& c, const ArchDescriptor& arch, const ModelWeights& w,
                       const LayerWeights& L, int l, float base, float scale, float attn, bool local) {
    (void)b, (void)c, (void)arch, (void)w, (void)L, (void)l, (void)base, (void)scale, (void)attn, (void)local;
}

}  // namespace table_detail
}  // namespace akunu
