#!/usr/bin/env bash
# The browser tests (see web/README.md): builds the wasm engine and the npm package, then runs
#   1. the engine's kernel and speculative-decoding tests as wasm-bindgen tests in headless
#      Chromium (SwiftShader WebGPU),
#   2. the npm package's API in Node on Dawn (npm `webgpu`),
#   3. the chat page end to end in Chromium driven by playwright-core.
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
# (954 s on 2 cores with the `_q8` and subgroup variants, 2026-12-01).
(cd engine && env -u VK_ICD_FILENAMES -u WGPU_BACKEND WASM_BINDGEN_TEST_TIMEOUT=1800 \
  cargo test --release --target wasm32-unknown-unknown --lib -- kernels::tests --skip sample::)

echo "== speculative decoding in headless Chromium (draft model and MTP: identity, goldens)"
(cd engine && env -u VK_ICD_FILENAMES -u WGPU_BACKEND WASM_BINDGEN_TEST_TIMEOUT=900 \
  cargo test --release --target wasm32-unknown-unknown --lib -- speculative::tests)

echo "== npm API in Node (Dawn)"
VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node web/tests/node-api.mjs

echo "== chat page end to end (playwright-core + Chromium)"
env -u VK_ICD_FILENAMES node web/tests/e2e.mjs
