#!/usr/bin/env bash
# The cross-platform comparison on a GPU machine without Node or network: unpacks the payload
# (payload.sh), generates the synthetic models (tandem-gen), and runs compare.mjs on each, the
# native arm, the browser-engine arm (wasm on Dawn) and the native arm with --portable,
# interleaved A B C C B A. Writes the tables to stdout and cross-<shape>.{json,svg} to $OUT.
# The shape `mtp-demo` is the trained MoE+MTP demo model (tests/fixtures) on its test's 20 text
# prompts with --mtp-arms: each engine without MTP, with it on every step, and guarded.
#
#   bench/cross/device.sh PAYLOAD_DIR [SHAPE...]    (shapes: smollm2-135m qwen3-8b qwen3-30b-a3b mtp-demo)
#
# Environment: OUT (default $WORK/out), WORK (unpacked tools and models, default
# /tmp/tandem-cross; models already there are reused), PROMPTS (20), PROMPT_TOKENS (512),
# GEN_TOKENS (128), ROUNDS (2), ARM_TIMEOUT (s per arm run, 240), LARGE_PROMPTS (prompts for the
# 8B and 30B shapes, default PROMPTS).
set -uo pipefail
cd "$(dirname "$0")/../.."
payload=$(realpath "${1:?usage: device.sh PAYLOAD_DIR [SHAPE...]}")
shift
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(smollm2-135m qwen3-8b qwen3-30b-a3b)
WORK=${WORK:-/tmp/tandem-cross}
OUT=${OUT:-$WORK/out}
mkdir -p "$WORK/bin" "$WORK/models" "$OUT"
t0=$(date +%s)
say() { echo "[device.sh $(($(date +%s) - t0)) s] $*"; }
# xz where the machine has it, else Python's lzma.
unxz_to() { if command -v xz >/dev/null; then xz -dc "$1"; else python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$1"; fi; }

for b in node tandem tandem-gen; do
  unxz_to "$payload/$b.xz" > "$WORK/bin/$b" && chmod +x "$WORK/bin/$b"
done
mkdir -p web/node_modules web/npm
rm -rf web/node_modules/webgpu web/npm/dist
unxz_to "$payload/webgpu.tar.xz" | tar -C web/node_modules -x
unxz_to "$payload/npm-dist.tar.xz" | tar -C web/npm -x
export PATH="$WORK/bin:$PATH"
say "payload of commit $(cat "$payload/commit" 2>/dev/null) unpacked: node $(node --version), $(tandem --version 2>&1 | head -1)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# The models, all at once (tandem-gen is CPU and disk work; nothing is measured meanwhile).
for s in "${shapes[@]}"; do
  m="$WORK/models/$s.gguf"
  if [ "$s" != mtp-demo ] && [ ! -s "$m" ]; then
    (timeout 400 tandem-gen --preset "$s" --out "$m.part" > "$WORK/gen-$s.log" 2>&1 && mv "$m.part" "$m") &
  fi
done
wait
say "models: $(cd "$WORK/models" && ls -la --block-size=M *.gguf 2>/dev/null | awk '{print $NF, $5}' | tr '\n' ' ')"

status=0
for s in "${shapes[@]}"; do
  if [ "$s" = mtp-demo ]; then
    say "$s: compare (--mtp-arms)"
    node bench/cross/compare.mjs tests/fixtures/glm4moe-mtp-demo-q8_0.gguf --tandem "$WORK/bin/tandem" \
      --prompt-file tests/data/mtp-prompts.txt -n "${GEN_TOKENS:-128}" --rounds "${ROUNDS:-2}" --mtp-arms \
      --timeout "${ARM_TIMEOUT:-240}" --out "$OUT" --name "$s" || status=1
    continue
  fi
  m="$WORK/models/$s.gguf"
  if [ ! -s "$m" ]; then
    say "$s: no model ($(tail -3 "$WORK/gen-$s.log"))"
    status=1
    continue
  fi
  prompts=${PROMPTS:-20}
  case $s in qwen3-8b | qwen3-30b-a3b) prompts=${LARGE_PROMPTS:-$prompts} ;; esac
  say "$s: compare ($prompts prompts)"
  node bench/cross/compare.mjs "$m" --tandem "$WORK/bin/tandem" --prompts "$prompts" \
    -p "${PROMPT_TOKENS:-512}" -n "${GEN_TOKENS:-128}" --rounds "${ROUNDS:-2}" --portable \
    --timeout "${ARM_TIMEOUT:-240}" --out "$OUT" --name "$s" || status=1
done
say "done (status $status); outputs in $OUT"
exit $status
