#!/usr/bin/env bash
# The GPU step, run from the repository root on the CUDA machine: trains the model for BUDGET_S
# seconds (default 420) and exports the Q8_0 GGUF with llama.cpp's converter, about 8 minutes in all.
#
# Needs there: python3 with torch (CUDA), numpy, transformers, tokenizers and safetensors (the
# export's converter and its check use them; the H200 image has them), and, carried from here:
#   bench/mtp-model/data/tokens     prepare.py's token ids and tokenizer (~9 MB)
#   bench/mtp-model/data/llama.cpp  llama.cpp's converter and gguf-py (fetch-data.sh, ~2 MB)
# Writes into $OUT (default bench/mtp-model/out): the GGUF, train.log, export.log, summary.json,
# config.json and the GGUF's export.json (6 files, the largest the GGUF, < 16 MiB). The fp32
# checkpoint (~57 MB) stays in $CKPT_DIR (default /tmp/mtp-run).
# Extra arguments go to train.py (e.g. --batch 128, --compile off).
set -euo pipefail
here=bench/mtp-model
out="${OUT:-$here/out}"
ckpt="${CKPT_DIR:-/tmp/mtp-run}"
name=glm4moe-mtp-demo
mkdir -p "$out" "$ckpt"
export PYTHONUNBUFFERED=1
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python3 "$here/train.py" --data "$here/data/tokens" --out "$ckpt" --budget-s "${BUDGET_S:-420}" "$@" \
  2>&1 | tee "$out/train.log"
python3 "$here/export_gguf.py" --ckpt "$ckpt/ckpt.pt" --tokens "$here/data/tokens" \
  --llama-cpp "$here/data/llama.cpp" --out "$out/$name-q8_0.gguf" --check-hf 2>&1 | tee "$out/export.log"
cp "$ckpt/summary.json" "$ckpt/config.json" "$out/"
ls -l "$out"
