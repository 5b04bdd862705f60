#!/usr/bin/env python3
"""Golden outputs for Tandem's whole-model tests, made with Hugging Face transformers.

Writes tests/golden/model_<name>.json. Each file holds, per prompt case: the prompt token ids,
the next 24 greedy (argmax) tokens, the top logits at the last prompt position and the top1-top2
logit margin at every greedy step; plus a llama-perplexity style perplexity over a committed text.

Models:
  real  SmolLM2-135M-Instruct.Q4_1.gguf and gemma-3-270m-Q4_K_M.gguf from the model cache
        (~/.cache/tandem/models, or --models-dir). transformers dequantizes the GGUF weights to f32,
        so the reference is "f32 math on dequant(w)".
  tiny  the random-weight fixtures in tests/fixtures/tiny-*.gguf (made by make_tiny_models.py),
        loaded the same way (gguf_file=...). Their prompts are token ids from the fixture's vocab.

Usage: python3 tests/reference/make_model_golden.py [--models real|tiny|all] [--models-dir DIR]
See tests/reference/README.md.
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(1)
torch.manual_seed(0)

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
GENERATOR = "tests/reference/make_model_golden.py"
N_GREEDY = 24
PPL_TEXT = "tests/data/sotu_1918_wilson.txt"
PPL_CTX = 128
PPL_CHUNKS = 4

SMOL_CHAT = [
    ("chat_capital_france", "What is the capital of France?"),
    ("chat_haiku_ocean", "Write a haiku about the ocean."),
    ("chat_two_plus_two", "What is 2 + 2?"),
    ("chat_primary_colors", "Name three primary colors."),
    ("chat_translate", "Translate 'good morning' into Spanish."),
]
SMOL_RAW = [
    ("raw_quick_fox", "The quick brown fox"),
    ("raw_once_upon", "Once upon a time, there was a"),
    ("raw_python_def", "def fibonacci(n):\n"),
]
GEMMA_RAW = [
    ("raw_capital_france", "The capital of France is"),
    ("raw_quick_fox", "The quick brown fox jumps over"),
    ("raw_once_upon", "Once upon a time"),
    ("raw_python_import", "import numpy as np\n"),
    ("raw_primary_colors", "The three primary colors are"),
]


def r(x):
    return round(float(x), 5)


@torch.no_grad()
def run_case(model, prompt_tokens, n_top):
    """Greedy decoding by full recomputation (no KV cache, so no cache-implementation subtleties)."""
    ids = list(prompt_tokens)
    greedy, margins, top = [], [], None
    for step in range(N_GREEDY):
        logits = model(torch.tensor([ids])).logits[0, -1].float()
        if step == 0:
            k = logits.numel() if n_top is None else n_top
            v, i = torch.topk(logits, k)
            if n_top is None:  # all logits, in id order
                top = [[t, r(logits[t])] for t in range(logits.numel())]
            else:
                top = [[int(a), r(b)] for a, b in zip(i, v)]
        v2, i2 = torch.topk(logits, 2)
        nxt = int(i2[0])
        greedy.append(nxt)
        margins.append(r(v2[0] - v2[1]))
        ids.append(nxt)
    return greedy, top, margins


@torch.no_grad()
def perplexity(model, tokens, bos_id):
    """llama-perplexity's method; see README.md ("Perplexity")."""
    assert len(tokens) >= PPL_CTX * PPL_CHUNKS, (len(tokens), PPL_CTX * PPL_CHUNKS)
    nll, n = 0.0, 0
    for c in range(PPL_CHUNKS):
        chunk = list(tokens[c * PPL_CTX:(c + 1) * PPL_CTX])
        if bos_id is not None:
            chunk[0] = bos_id
        logits = model(torch.tensor([chunk])).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        for i in range(PPL_CTX // 2, PPL_CTX - 1):
            nll -= float(logp[i, chunk[i + 1]])
            n += 1
    return math.exp(nll / n), n


def adds_bos(tok):
    a = tok("Hello", add_special_tokens=True)["input_ids"]
    b = tok("Hello", add_special_tokens=False)["input_ids"]
    return tok.bos_token_id is not None and len(a) == len(b) + 1 and a[0] == tok.bos_token_id


def write(name, model_ref, cases, ppl):
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    out = {
        "model": model_ref,
        "generator": GENERATOR,
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "cases": cases,
        "perplexity": ppl,
    }
    path = GOLDEN_DIR / f"model_{name}.json"
    # one case per line keeps diffs readable
    with open(path, "w") as f:
        f.write("{\n")
        for k in ("model", "generator", "transformers", "torch"):
            f.write(f"  {json.dumps(k)}: {json.dumps(out[k])},\n")
        f.write('  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c) for c in cases))
        f.write("\n  ],\n")
        f.write(f'  "perplexity": {json.dumps(ppl)}\n}}\n')
    json.load(open(path))  # well-formed
    print(f"wrote {path.relative_to(REPO)}", flush=True)


def ppl_block(model, tok_ids, bos):
    value, scored = perplexity(model, tok_ids, bos)
    return {"text_file": PPL_TEXT, "ctx": PPL_CTX, "chunks": PPL_CHUNKS, "bos": bos is not None,
            "value": round(value, 4), "scored_tokens": scored}


def real_models(models_dir):
    text = (REPO / PPL_TEXT).read_text()
    specs = [
        ("smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf", SMOL_CHAT, SMOL_RAW),
        ("gemma3-270m", "gemma-3-270m-Q4_K_M.gguf", [], GEMMA_RAW),
    ]
    for name, fname, chat, raw in specs:
        print(f"== {fname}", flush=True)
        tok = AutoTokenizer.from_pretrained(models_dir, gguf_file=fname)
        model = AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=fname, dtype=torch.float32).eval()
        cases = []
        for cname, prompt in chat:
            ids = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                          add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            cases.append((cname, prompt, list(map(int, ids))))
        for cname, prompt in raw:
            cases.append((cname, prompt, tok(prompt)["input_ids"]))
        out = []
        for cname, prompt, ids in cases:
            greedy, top, margins = run_case(model, ids, 16)
            text_out = tok.decode(greedy)
            print(f"  {cname}: {len(ids)} prompt tokens; min margin {min(margins):.4f}\n"
                  f"    {prompt!r} -> {text_out!r}", flush=True)
            if cname == "chat_capital_france":
                assert text_out.startswith("The capital of France is Paris."), text_out
                print("    check OK: starts with 'The capital of France is Paris.'", flush=True)
            out.append({"name": cname, "prompt": prompt, "prompt_tokens": ids, "greedy_tokens": greedy,
                        "top_logits": top, "margins": margins})
        bos = tok.bos_token_id if adds_bos(tok) else None
        ptoks = tok(text, add_special_tokens=False)["input_ids"]
        ppl = ppl_block(model, ptoks, bos)
        print(f"  perplexity {ppl}", flush=True)
        write(name, fname, out, ppl)


MIN_MARGIN_TINY = 0.01


def tiny_cases(vocab, bos, tok_ids_of):
    """(name, prompt, [candidate prompt token lists]); the first candidate whose 24 greedy steps all
    have a top1-top2 margin >= MIN_MARGIN_TINY is kept (else the one with the largest minimum)."""
    def rnd(seed, n):
        g = torch.Generator().manual_seed(seed)
        return [int(x) for x in torch.randint(3, vocab, (n,), generator=g)]
    text = "Gentlemen of the Congress: The year that has elapsed since I last stood before you"
    return [
        ("bos_only", "(BOS only)", [[bos]]),
        ("short_text", text, [[bos] + tok_ids_of(text)[:k] for k in range(14, 4, -1)]),
        ("random_17", "(BOS + 16 random ids)", [[bos] + rnd(1000 + i, 16) for i in range(30)]),
        ("random_64", "(BOS + 63 random ids; longer than the gemma3 sliding window)",
         [[bos] + rnd(2000 + i, 63) for i in range(30)]),
        ("random_100_no_bos", "(100 random ids, no BOS)", [rnd(3000 + i, 100) for i in range(30)]),
    ]


TINY = ["tiny-llama", "tiny-llama-q8_0", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3",
        "tiny-qwen3moe", "tiny-qwen3moe-q8_0", "tiny-glm4moe", "tiny-glm4moe-q8_0",
        "tiny-qwen3moe-h256-q4_k_m", "tiny-llama-h256-mixq"]


def tiny_models(only=None):
    text = (REPO / PPL_TEXT).read_text()
    fx = REPO / "tests" / "fixtures"
    names = [n for n in TINY if not only or n in only]
    sys.path.insert(0, str(Path(__file__).parent))
    from make_tiny_models import load_gguf_as_hf  # same loader the round-trip check uses
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(fx / "tiny-tokenizer.model"))
    for name in names:
        path = fx / f"{name}.gguf"
        print(f"== {path.relative_to(REPO)}", flush=True)
        model = load_gguf_as_hf(path)
        vocab = model.config.vocab_size
        bos = sp.bos_id()
        out = []
        for cname, prompt, candidates in tiny_cases(vocab, bos, lambda s: sp.encode(s)):
            best = None
            for ids in candidates:
                greedy, top, margins = run_case(model, ids, None if vocab <= 1024 else 64)
                if best is None or min(margins) > min(best[3]):
                    best = (ids, greedy, top, margins)
                if min(margins) >= MIN_MARGIN_TINY:
                    break
            ids, greedy, top, margins = best
            print(f"  {cname}: {len(ids)} prompt tokens; greedy {greedy}; min margin {min(margins):.4f}", flush=True)
            out.append({"name": cname, "prompt": prompt, "prompt_tokens": ids, "greedy_tokens": greedy,
                        "top_logits": top, "margins": margins})
        ppl = ppl_block(model, sp.encode(text), bos)
        print(f"  perplexity {ppl}", flush=True)
        write(name, str(path.relative_to(REPO)), out, ppl)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", choices=["real", "tiny", "all"], default="all")
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tandem/models"))
    ap.add_argument("--only", default=None, help="comma-separated tiny fixture names (default: all)")
    a = ap.parse_args()
    if a.models in ("tiny", "all"):
        tiny_models(a.only.split(",") if a.only else None)
    if a.models in ("real", "all"):
        real_models(a.models_dir)


if __name__ == "__main__":
    main()
