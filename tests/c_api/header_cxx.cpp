// The public header must compile as strict C++17 (see test_c_api.py).
#include "akunu/akunu.h"

int main() {
    AkunuSamplingConfig s = akunu_default_sampling();
    AkunuGenerationStats st{};
    akunu_token_callback cb = nullptr;
    (void)cb;
    return static_cast<int>(s.top_k + st.prompt_tokens);
}
