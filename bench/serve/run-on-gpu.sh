#!/usr/bin/env bash
# The concurrency table of issue 14: aggregate and per-stream tok/s of `tandem serve` at 1, 4, 8
# and 32 concurrent streams, each 128 tokens after a ~100-token prompt.
#   bench/serve/run-on-gpu.sh TANDEM_BINARY MODEL.gguf [STREAMS] [TEMPERATURE]
# (STREAMS: default 1,4,8,32; TEMPERATURE: default 0, greedy; above 0 each request samples)
# Needs python3 (standard library only). Prints one JSON line per stream count.
set -euo pipefail
bin=$1 model=$2 streams=${3:-1,4,8,32} temp=${4:-0}
max=$(tr ',' '\n' <<<"$streams" | sort -n | tail -1)
log=$(mktemp)
"$bin" serve -q -m "$model" -c 1024 --parallel "$max" --queue "$max" --port 0 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do
  base=$(grep -o 'http://[0-9.:]*' "$log" || true)
  [ -n "$base" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.5
done
[ -n "$base" ] || { echo "the server did not start" >&2; cat "$log"; exit 1; }
"$bin" --version
python3 "$(dirname "$0")/streams.py" "$base" --streams 1 --tokens 16 >/dev/null  # warm-up
python3 "$(dirname "$0")/streams.py" "$base" --streams "$streams" --temperature "$temp"
