#!/usr/bin/env bash
# The browser tests (see web/README.md): builds the wasm engine and the npm package, then runs
#   1. the engine's kernel and speculative-decoding tests as wasm-bindgen tests in headless
#      Chromium (SwiftShader WebGPU),
#   2. the npm package's API in Node on Dawn (npm `webgpu`),
#   3. the chat page end to end in Chromium driven by playwright-core,
#   4. the cross-platform comparison (bench/cross/compare.mjs) on the tiny fixtures, every kind of
#      arm, and its JSON rendered again to the same table and plot.
# Needs: chromium + chromium-driver (apt), the wasm32 target, wasm-bindgen-cli at the version in
# Cargo.lock, node 20 + npm, and the default model (scripts/fetch-models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/tandem-xdg}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

scripts/fetch-models.sh >/dev/null
[ -d web/node_modules ] || npm --prefix web ci --no-audit --no-fund

echo "== build: wasm engine + npm package"
npm --prefix web run build

echo "== kernel tests in headless Chromium (wasm-bindgen-test)"
# The same test bodies as natively, all but the sampling tests (6+ minutes on SwiftShader: a
# 262144-token vocabulary and hundreds of draws). WASM_BINDGEN_TEST_TIMEOUT: the whole run, in s
# (944 s on an idle 2-core machine, 2026-12-02, testing the decode shapes GPUs and CPU adapters
# start from; 1,632 s with every shape the native suite tests).
(cd engine && env -u VK_ICD_FILENAMES -u WGPU_BACKEND WASM_BINDGEN_TEST_TIMEOUT=2700 \
  cargo test --release --target wasm32-unknown-unknown --lib -- kernels::tests --skip sample::)

echo "== speculative decoding in headless Chromium (draft model and MTP: identity, goldens)"
(cd engine && env -u VK_ICD_FILENAMES -u WGPU_BACKEND WASM_BINDGEN_TEST_TIMEOUT=1200 \
  cargo test --release --target wasm32-unknown-unknown --lib -- speculative::tests)

echo "== npm API in Node (Dawn)"
VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node web/tests/node-api.mjs

echo "== chat page end to end (playwright-core + Chromium)"
env -u VK_ICD_FILENAMES node web/tests/e2e.mjs

echo "== the cross-platform comparison: native on lavapipe, the browser engine on SwiftShader"
cargo build --release -q -p tandem-cli
cross=$(mktemp -d)
TANDEM_CROSS_NATIVE_ICD=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
  TANDEM_CROSS_BROWSER_ICD=/usr/lib/chromium/vk_swiftshader_icd.json \
  node bench/cross/compare.mjs tests/fixtures/tiny-llama.gguf --tandem "${CARGO_TARGET_DIR:-target}/release/tandem" \
  --prompts 2 -p 8 -n 4 --rounds 2 --portable --dawn enable-dawn-features=disable_robustness \
  --timeout 300 --out "$cross" > "$cross/table.txt"
node bench/cross/compare.mjs --render "$cross/cross-tiny-llama.json" --out "$cross/again" > "$cross/again.txt"
diff <(grep -v "wrote " "$cross/table.txt") <(grep -v "wrote " "$cross/again.txt")
cmp "$cross/cross-tiny-llama.svg" "$cross/again/cross-tiny-llama.svg"
grep -q "browser disable_robustness/native" "$cross/table.txt"
echo "comparison: 4 arms, rendered again identically"
# Each engine with and without multi-token prediction, on text prompts.
head -3 tests/data/mtp-prompts.txt > "$cross/prompts.txt"
TANDEM_CROSS_NATIVE_ICD=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
  TANDEM_CROSS_BROWSER_ICD=/usr/lib/chromium/vk_swiftshader_icd.json \
  node bench/cross/compare.mjs tests/fixtures/tiny-glm4moe-mtp.gguf --tandem "${CARGO_TARGET_DIR:-target}/release/tandem" \
  --prompt-file "$cross/prompts.txt" -n 6 --rounds 1 --mtp-arms --timeout 300 --out "$cross" > "$cross/mtp.txt"
grep -q "browser mtp/native" "$cross/mtp.txt"
grep -q "MTP acceptance" "$cross/mtp.txt"
grep -q "browser guarded/native" "$cross/mtp.txt"
echo "comparison with --mtp-arms: 6 arms, each engine without MTP, with it on every step, and guarded"
