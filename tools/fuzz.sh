#!/usr/bin/env bash
# Coverage-guided fuzzing of the GGUF parser and model-config validation, and of
# the safetensors / JSON and CTranslate2 model.bin readers, with
# libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer (needs clang).
#   tools/fuzz.sh [SECONDS]      default 60; CI runs a short bounded session
# Seeds: the regression corpus (fuzz/corpus, replayed by the test suite too)
# and small real models. Findings land in fuzz/findings/; add each to
# fuzz/corpus with a name saying what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-60}"
CXX="${CXX_FUZZ:-clang++}"
BUILD=build-fuzz
mkdir -p "$BUILD" fuzz/findings
SRC="src/weight/gguf_file.cpp src/weight/model_file.cpp src/weight/hf_directory.cpp src/weight/hf_fused_experts.cpp \
     src/weight/safetensors_file.cpp \
     src/weight/ct2_directory.cpp src/weight/whisper_names.cpp src/weight/json.cpp src/core/arch_descriptor.cpp src/core/dtype_descriptor.cpp src/core/model_config.cpp"
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Isrc -Iinclude fuzz/gguf_fuzz.cpp $SRC -o "$BUILD/gguf_fuzz"
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Isrc -Iinclude fuzz/safetensors_fuzz.cpp $SRC -o "$BUILD/safetensors_fuzz"
"$CXX" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Isrc -Iinclude fuzz/ct2_fuzz.cpp $SRC -o "$BUILD/ct2_fuzz"
SEEDS="$BUILD/seeds"
rm -rf "$SEEDS" && mkdir -p "$SEEDS"
cp fuzz/corpus/* "$SEEDS"/ 2>/dev/null || true
find tests/models -name '*.gguf' -size -600k -exec cp {} "$SEEDS"/ \; 2>/dev/null || true
HALF=$(( (SECONDS_TO_RUN + 2) / 3 ))  # a third of the time for each harness
"$BUILD/gguf_fuzz" "$SEEDS" -max_total_time="$HALF" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz/findings/ -print_final_stats=1
# safetensors headers and JSON: seeds from fuzz/corpus_safetensors
ST_SEEDS="$BUILD/st_seeds"
rm -rf "$ST_SEEDS" && mkdir -p "$ST_SEEDS"
cp fuzz/corpus_safetensors/* "$ST_SEEDS"/ 2>/dev/null || true
"$BUILD/safetensors_fuzz" "$ST_SEEDS" -max_total_time="$HALF" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz/findings/ -print_final_stats=1
# CTranslate2 model.bin (Whisper): seeds from fuzz/corpus_ct2
CT2_SEEDS="$BUILD/ct2_seeds"
rm -rf "$CT2_SEEDS" && mkdir -p "$CT2_SEEDS"
cp fuzz/corpus_ct2/* "$CT2_SEEDS"/ 2>/dev/null || true
"$BUILD/ct2_fuzz" "$CT2_SEEDS" -max_total_time="$HALF" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz/findings/ -print_final_stats=1
