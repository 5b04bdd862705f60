#!/usr/bin/env bash
# The whole pipeline at toy scale on the CPU (~2 minutes): a 1024-token tokenizer on 0.4 MB of each
# source, a 0.3 M-parameter model trained for 30 s, exported with llama.cpp's converter, then
# check_tandem.py (Tandem vs PyTorch: tokenizer, greedy tokens, perplexity). Needs fetch-data.sh's
# downloads and a Tandem binary (TANDEM, default target/release/tandem); work files in $WORK.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${WORK:-/tmp/mtp-smoke}"
tandem="${TANDEM:-$here/../../target/release/tandem}"
toy='{"hidden_size": 64, "head_dim": 16, "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 8, "num_hidden_layers": 3}'
export RAYON_NUM_THREADS=2 VK_ICD_FILENAMES="${VK_ICD_FILENAMES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}" \
  WGPU_BACKEND="${WGPU_BACKEND:-vulkan}" XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/tandem-xdg}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
python3 "$here/prepare.py" --out "$work/data" --vocab 1024 --max-mb 0.4 | tail -3
python3 "$here/train.py" --data "$work/data/tokens" --out "$work/run" --budget-s 30 --threads 2 --seq 128 \
  --batch 16 --eval-tokens 50000 --log-every 5 --eval-every 15 --config "$toy" | grep -v '^config'
python3 "$here/export_gguf.py" --ckpt "$work/run/ckpt.pt" --tokens "$work/data/tokens" \
  --llama-cpp "$here/data/llama.cpp" --out "$work/toy-q8_0.gguf" --check-hf
python3 "$here/check_tandem.py" --gguf "$work/toy-q8_0.gguf" --tokens "$work/data/tokens" --tandem "$tandem" \
  --llama-cpp "$here/data/llama.cpp" --out "$work/check.json"
