#!/usr/bin/env bash
# Tandem builds timed against each other on one GPU, interleaved in one device call, beside
# llama.cpp's llama-bench on the same files (shared/MEASURE.md: every comparison within one
# call). Each build decodes each model in the order ORDER (default A B B A over the builds, so a
# drift of the GPU's clocks shows as a difference between the two runs of one build), then each
# build's greedy text is hashed (identical across builds unless the change alters the
# numerics; a second hash after a 4,200-token prompt covers the kernels only long contexts take).
# Models come from `tandem-gen --preset P` and are kept in $WORK for later calls while the machine
# stays warm.
#
#   bench/ab/device.sh NAME=BINARY [NAME=BINARY ...]     (BINARY: a `tandem` binary, or one as .xz)
#
# Environment: PRESETS (qwen3-30b-a3b qwen3-8b), ORDER (the names, e.g. "M F F M"), GEN (a
# tandem-gen binary or .xz; needed where a model is missing), LLAMA (llama-bench, or .xz: run
# once per model after the builds), BENCH_ARGS ("-c 1024 --prompts 3 -p 512 -n 128"), LLAMA_ARGS
# ("-ngl 99 -fa 1 -p 0 -n 128 -d 512 -r 3": decode at the depth Tandem's runs decode at), WORK
# (/tmp/tandem-ab), BUDGET (seconds the script may take; runs that would start past it are
# skipped, 540), PROFILES (`tandem bench` argument sets separated by ';', each run once per build
# and model after its hashes, e.g. "-c 1024 --prompts 1 -p 512 -n 16 --profile; -c 1024 --prompts
# 1 -p 512 -n 16 --profile --profile-tokens 4 --pass-tokens 2,4,8": each output goes whole to
# $WORK/profile-BUILD-PRESET-I.txt, and to $OUT where the device call sets it). Prints each run's
# decode line and a summary table; the log is $WORK/ab.log.
set -uo pipefail
WORK=${WORK:-/tmp/tandem-ab}
mkdir -p "$WORK/bin" "$WORK/models"
exec > >(tee "$WORK/ab.log") 2>&1
t0=$(date +%s)
say() { echo "[ab $(($(date +%s) - t0)) s] $*"; }
left() { echo $((${BUDGET:-540} - ($(date +%s) - t0))); }
# A binary into $WORK/bin/NAME: unpacked where it ends in .xz.
unpack() {
  if [[ "$2" == *.xz ]]; then xz -dc "$2" > "$WORK/bin/$1"; else cp "$2" "$WORK/bin/$1"; fi \
    || { echo "device.sh: cannot unpack $2" >&2; exit 1; }
  chmod +x "$WORK/bin/$1"
}
names=()
for arg in "$@"; do
  [[ "$arg" == *=* ]] || { echo "usage: device.sh NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
  unpack "${arg%%=*}" "${arg#*=}"
  names+=("${arg%%=*}")
done
[ ${#names[@]} -gt 0 ] || { echo "usage: device.sh NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
read -r -a order <<< "${ORDER:-${names[0]} ${names[*]:1} ${names[*]:1} ${names[0]}}"
read -r -a presets <<< "${PRESETS:-qwen3-30b-a3b qwen3-8b}"
read -r -a bench_args <<< "${BENCH_ARGS:--c 1024 --prompts 3 -p 512 -n 128}"
read -r -a llama_args <<< "${LLAMA_ARGS:--ngl 99 -fa 1 -p 0 -n 128 -d 512 -r 3}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# The missing models, all at once; only these jobs are waited for (a bare `wait` would also wait
# for the log's tee above).
[ -n "${GEN:-}" ] && unpack tandem-gen "$GEN"
pids=()
for p in "${presets[@]}"; do
  m="$WORK/models/$p.gguf"
  [ -s "$m" ] && continue
  [ -x "$WORK/bin/tandem-gen" ] || { say "no model $p and no GEN"; exit 1; }
  ("$WORK/bin/tandem-gen" --preset "$p" --out "$m.part" > "$WORK/gen-$p.log" 2>&1 && mv "$m.part" "$m") &
  pids+=($!)
done
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
say "models: $(cd "$WORK/models" && ls -l --block-size=M -- *.gguf | awk '{print $NF, $5}' | tr '\n' ' ')"

declare -A runs
for p in "${presets[@]}"; do
  m="$WORK/models/$p.gguf"
  [ -s "$m" ] || { say "$p: no model ($(tail -2 "$WORK/gen-$p.log" 2>/dev/null))"; continue; }
  for b in "${order[@]}"; do
    [ "$(left)" -gt 30 ] || { say "budget spent: $b on $p skipped"; continue; }
    line=$(timeout "$(left)" "$WORK/bin/$b" bench -m "$m" "${bench_args[@]}" 2>&1 | grep '^decode' | tail -1)
    say "$b $p: ${line:-failed}"
    tok=$(sed -n 's/.*median \([0-9.]*\) tok\/s.*/\1/p' <<< "$line")
    runs[$b,$p]="${runs[$b,$p]:-}${runs[$b,$p]:+, }${tok:-failed}"
  done
done
# The first 8 hex digits of the md5 of build $1's greedy text on model $2 (then `run`'s prompt
# arguments), or "failed" where it printed nothing.
greedy_md5() {
  local out
  out=$(timeout 60 "$WORK/bin/$1" run -q -m "$WORK/models/$2.gguf" "${@:3}" -n 40 --temperature 0 \
    --ignore-eos 2>/dev/null)
  if [ -n "$out" ]; then md5sum <<< "$out" | cut -c1-8; else echo failed; fi
}
# About 4,200 tokens of the synthetic models' vocabulary: decode after it takes the grouped attention.
long=$(for _ in $(seq 70); do printf 'the city grew along the river and its people built bridges, '; done)
IFS=';' read -r -a profiles <<< "${PROFILES:-}"
for p in "${presets[@]}"; do
  [ -s "$WORK/models/$p.gguf" ] || continue
  for b in "${names[@]}"; do
    [ "$(left)" -gt 30 ] || break
    md5=$(greedy_md5 "$b" "$p" -p "The history of the city")
    md5_long=$(greedy_md5 "$b" "$p" -c 8192 -p "$long")
    say "greedy md5 $b $p: $md5, after 4k: $md5_long"
    for i in "${!profiles[@]}"; do
      read -r -a args <<< "${profiles[$i]}"
      [ ${#args[@]} -gt 0 ] || continue
      [ "$(left)" -gt 40 ] || { say "budget spent: profile $i of $b on $p skipped"; continue; }
      f="$WORK/profile-$b-$p-$i.txt"
      timeout "$(left)" "$WORK/bin/$b" bench -m "$WORK/models/$p.gguf" "${args[@]}" > "$f" 2>&1
      say "profile $i $b $p: $(grep -E '^decode' "$f" | tail -1)"
      [ -n "${OUT:-}" ] && cp "$f" "$OUT/"
    done
  done
done
if [ -n "${LLAMA:-}" ]; then
  unpack llama-bench "$LLAMA"
  for p in "${presets[@]}"; do
    [ -s "$WORK/models/$p.gguf" ] || continue
    [ "$(left)" -gt 40 ] || { say "budget spent: llama-bench on $p skipped"; continue; }
    t=$(timeout "$(left)" "$WORK/bin/llama-bench" -m "$WORK/models/$p.gguf" "${llama_args[@]}" 2>&1 \
      | grep -E '^\| .*(tg|pp)[0-9]' | awk -F'|' '{gsub(/^ +| +$/, "", $8); gsub(/^ +| +$/, "", $9); print $8 ": " $9}' \
      | tr '\n' ';')
    say "llama.cpp $p: ${t:-failed}"
    runs[llama.cpp,$p]="$t"
  done
fi
echo
echo "| build |$(printf ' %s |' "${presets[@]}")"
echo "|$(printf ' --- |%.0s' $(seq 0 ${#presets[@]}))"
for b in "${names[@]}" ${LLAMA:+llama.cpp}; do
  row="| $b |"
  for p in "${presets[@]}"; do row="$row ${runs[$b,$p]:-} |"; done
  echo "$row"
done
say done
