#!/usr/bin/env bash
# Runs every test: fetches the test models into the model cache (once), makes the venv with the
# `openai` client that the `tandem serve` tests drive it with (once), then cargo test.
# Needs a Vulkan adapter; without a GPU, Mesa's lavapipe (apt-get install mesa-vulkan-drivers);
# python3 with venv, and nginx for the test that puts two servers behind it (apt-get install nginx).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh --all >/dev/null
venv="${CARGO_TARGET_DIR:-target}/test-venv"
openai_version=3.57.0
if ! "$venv/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$openai_version')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai==$openai_version"
fi
export TANDEM_TEST_PYTHON="$(cd "$venv" && pwd)/bin/python"
cargo test --release --workspace "$@"
