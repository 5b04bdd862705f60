"""A load test of `tandem serve` through the official `openai` client: CLIENTS concurrent
streaming clients, each sending REQUESTS requests a round (chat, or raw text with --text),
greedy; every reply must come
whole (a finish reason, then the usage chunk) and equal the reply to the same prompt sent alone;
with --pid, the server's resident memory must stay flat across the rounds.

Usage: load.py BASE_URL --clients N --requests N --rounds N --max-tokens N [--text] [--pid PID]
"""

import argparse
import asyncio
import time

import openai

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("--clients", type=int, required=True)
ap.add_argument("--requests", type=int, required=True)
ap.add_argument("--rounds", type=int, required=True)
ap.add_argument("--max-tokens", type=int, required=True)
ap.add_argument("--text", action="store_true", help="/v1/completions (a model without a chat template)")
ap.add_argument("--pid", type=int)
args = ap.parse_args()

subjects = ["France", "Japan", "Brazil", "Kenya", "Canada", "Italy", "Egypt", "India",
            "Mexico", "Norway", "Peru", "Spain", "Chile", "Ghana", "Nepal", "Chad"]
prompts = [f"Tell me one fact about {s}." for s in subjects]
client = openai.AsyncOpenAI(base_url=args.base + "/v1", api_key="none", max_retries=0, timeout=900)


async def ask(model, prompt, stream):
    """The reply's text and finish reason."""
    kw = dict(model=model, temperature=0, max_tokens=args.max_tokens)
    if args.text:
        create, kw["prompt"] = client.completions.create, prompt
        text_of = lambda c: c.text
    else:
        create, kw["messages"] = client.chat.completions.create, [{"role": "user", "content": prompt}]
        text_of = lambda c: c.message.content if not stream else c.delta.content or ""
    if not stream:
        c = (await create(**kw)).choices[0]
        return text_of(c), c.finish_reason
    text, finish, usage = "", None, None
    async for chunk in await create(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += text_of(c)
            finish = c.finish_reason or finish
    assert finish in ("stop", "length") and usage is not None, (prompt, finish, usage)
    assert usage.completion_tokens <= args.max_tokens, usage
    return text, finish


def rss_kib():
    with open(f"/proc/{args.pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


async def main():
    model = (await client.models.list()).data[0].id
    n = args.clients * args.requests
    used = prompts[: min(n, len(prompts))]
    # Each prompt alone first: the replies every concurrent one must equal.
    alone = {p: await ask(model, p, stream=False) for p in used}

    async def one_client(i):
        for j in range(args.requests):
            p = used[(i * args.requests + j) % len(used)]
            got = await ask(model, p, stream=True)
            assert got == alone[p], f"{p!r}: concurrent {got!r}, alone {alone[p]!r}"

    rss = []
    for r in range(args.rounds):
        t0 = time.time()
        await asyncio.gather(*(one_client(i) for i in range(args.clients)))
        took = time.time() - t0
        rss.append(rss_kib() if args.pid else 0)
        print(f"round {r + 1}: {n} streamed replies in {took:.1f} s, server RSS {rss[-1] / 1024:.1f} MiB", flush=True)
    if args.pid and args.rounds > 2:
        # The first round warms up (pipelines, allocator pools); after it memory must not grow.
        growth = rss[-1] - rss[1]
        assert growth < max(rss[1] // 50, 4096), f"server RSS grew by {growth} KiB after warm-up: {rss}"
    print(f"load test: {args.rounds * n} replies, all complete and equal to the prompt alone")


asyncio.run(main())
