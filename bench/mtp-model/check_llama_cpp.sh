#!/usr/bin/env bash
# llama.cpp reads the GGUF: its loader, perplexity on tests/data/sotu_1918_wilson.txt (the method of
# `tandem perplexity -c 128 --chunks 4`) and MTP speculative decoding (--spec-type draft-mtp) with its
# acceptance counts, from the llama.cpp sources of the PyPI package llama-cpp-python==0.3.36.
# Builds llama-perplexity (cmake target) and speculative-simple (an example, off in that build, so
# compiled here against the build's shared libraries), CPU only.
# Usage: check_llama_cpp.sh MODEL.gguf LLAMA_CPP_SRC BUILD_DIR   (BUILD_DIR configured with cmake -B)
set -euo pipefail
gguf="$1" src="$2" build="$3"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cmake --build "$build" --target llama-perplexity llama-common -j2 >/dev/null
spec="$build/bin/llama-speculative-simple"
g++ -O1 -std=c++17 "$src/examples/speculative-simple/speculative-simple.cpp" -I "$src/common" -I "$src/include" \
  -I "$src/ggml/include" -I "$src/vendor" -L "$build/bin" -lllama-common -lllama -lggml -lggml-base \
  -Wl,-rpath,"$build/bin" -o "$spec"
"$build/bin/llama-perplexity" -m "$gguf" -f "$repo/tests/data/sotu_1918_wilson.txt" -c 128 --chunks 4 -t 2 2>&1 \
  | grep -E "Final estimate|error"
for p in "The" "Fellow-Citizens of the Senate and House of Representatives:" "In the year 1861, the war" \
         "And God said, Let there be" "Love, n."; do
  echo "== $p"
  "$spec" -m "$gguf" --spec-type draft-mtp --spec-draft-n-max 4 -p "$p" -n 64 -t 2 --temp 0 2>&1 \
    | grep -E "n_predict|n_drafted|n_accept|accept +=|error"
done
