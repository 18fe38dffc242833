/* The public header must compile as strict C99 (see test_c_api.py). */
#include "akunu/akunu.h"

int main(void) {
    AkunuSamplingConfig s = akunu_default_sampling();
    AkunuGenerationStats st = {0, 0, 0.0f, 0.0f, 0.0f, 0.0f};
    akunu_token_callback cb = 0;
    (void)cb;
    return (int)(s.top_k + st.prompt_tokens);
}
