"""Concurrent streaming clients against `tandem serve` (or any OpenAI-compatible server), with
nothing but Python's standard library (the GPU machine has no package index): each of N
threads sends one streamed /v1/completions request of --tokens tokens (ignore_eos) and records
when each piece of text arrived, and the token count of the usage chunk. Prints aggregate tok/s
(all tokens over the wall time from the first request to the last piece) and per-stream decode
tok/s (tokens after the first over the time from the first piece to the last), one JSON line
per N.

Usage: streams.py BASE_URL --streams 1,4,8,32 [--tokens 128] [--prompt-words 64]
                  [--temperature T]   (0: greedy; above 0 each request samples with its own seed)
"""

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("--streams", default="1,4,8,32")
ap.add_argument("--tokens", type=int, default=128)
ap.add_argument("--prompt-words", type=int, default=64)
ap.add_argument("--temperature", type=float, default=0.0)
args = ap.parse_args()
url = urllib.parse.urlparse(args.base)


def one(i, out):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=3600)
    # Distinct prompts, so no slot reuses another's cached prefix.
    prompt = f"Stream {i}: " + " ".join(f"word{(i * 7 + k) % 997}" for k in range(args.prompt_words))
    body = json.dumps({"prompt": prompt, "max_tokens": args.tokens, "temperature": args.temperature,
                       "seed": i,
                       "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.time()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read())
    times, tokens = [], 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if "error" in chunk:
            raise RuntimeError(chunk["error"])
        if chunk["choices"] and chunk["choices"][0]["text"]:
            times.append(time.time())
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
    out[i] = (t0, times, tokens)


for n in [int(x) for x in args.streams.split(",")]:
    out = [None] * n
    threads = [threading.Thread(target=one, args=(i, out)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = min(t0 for t0, _, _ in out)
    end = max(ts[-1] for _, ts, _ in out)
    total = sum(n for _, _, n in out)
    per = [(n - 1) / (ts[-1] - ts[0]) for _, ts, n in out if ts[-1] > ts[0]]
    ttft = [ts[0] - t0 for t0, ts, _ in out]
    print(json.dumps({
        "streams": n,
        "tokens": total,
        "aggregate_tokens_per_second": round(total / (end - start), 1),
        "per_stream_tokens_per_second_median": round(statistics.median(per), 1),
        "per_stream_tokens_per_second_min": round(min(per), 1),
        "time_to_first_token_median_s": round(statistics.median(ttft), 3),
    }), flush=True)
