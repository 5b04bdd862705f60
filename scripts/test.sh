#!/usr/bin/env bash
# Runs every test: fetches the test models into the model cache (once), then cargo test.
# Needs a Vulkan adapter; without a GPU, Mesa's lavapipe (apt-get install mesa-vulkan-drivers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh --all >/dev/null
cargo test --release --workspace "$@"
