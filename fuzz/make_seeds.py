#!/usr/bin/env python3
"""Writes the seed inputs of the three fuzz targets to fuzz/seeds/<target>/ (not committed; the
minimized corpora under fuzz/corpus/ are). Run from the repository root:

    python3 fuzz/make_seeds.py [MODEL_DIR]

Sources: the GGUF fixtures under tests/fixtures, and, when MODEL_DIR (default the model cache,
~/.cache/tandem/models) has them, SmolLM2-135M-Instruct and gemma-3-270m, whose vocabularies are
cut to their first tokens (seeds stay a few KiB) and whose chat templates seed `chat_template`.
Needs the `gguf` Python package.
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "fuzz" / "seeds"
MODELS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.home() / ".cache/tandem/models"
VOCAB_CUT = 600


def fields(r: GGUFReader):
    """(key, value, type, array element type) of every metadata field but the writer's own and
    nested arrays (the gguf package's writer cannot write those back; tiny.gguf, which has one, is
    kept whole)."""
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0]
        sub = f.types[1] if t == GGUFValueType.ARRAY and len(f.types) > 1 else None
        if sub == GGUFValueType.ARRAY:
            continue
        yield f.name, f.contents(), t, sub


def write(path: Path, kvs, tensors=()):
    path.parent.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(path), arch=None)
    for k, v, t, sub in kvs:
        if t == GGUFValueType.ARRAY and sub is None:
            sub = GGUFValueType.STRING
        w.add_key_value(k, v, t, sub)
    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cut_vocab(kvs, n):
    """The tokenizer keys with the vocabulary cut to n tokens, merges to those it can still apply,
    special ids outside the cut dropped."""
    d = {k: (v, t, s) for k, v, t, s in kvs}
    tokens = d["tokenizer.ggml.tokens"][0][:n]
    vocab = set(tokens)
    out = []
    for k, (v, t, s) in d.items():
        if not k.startswith("tokenizer.") and k != "general.architecture":
            continue
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            v = v[:n]
        elif k == "tokenizer.ggml.merges":
            keep = []
            for m in v:
                a, _, b = m.partition(" ")
                if a in vocab and b in vocab and a + b in vocab:
                    keep.append(m)
            v = keep
        elif k.endswith("_token_id") and v >= n:
            continue
        out.append((k, v, t, s))
    return out


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    # gguf: each fixture rewritten with the same metadata and tensor names but 8-element tensors
    # (the real ones are up to 15 MB), plus the two small fixtures whole and one header cut short.
    for f in sorted(FIX.glob("*.gguf")):
        r = GGUFReader(str(f))
        small = [(t.name, np.arange(8, dtype=np.float32)) for t in r.tensors]
        write(OUT / "gguf" / f"{f.stem}-small.gguf", list(fields(r)), small)
        if f.stat().st_size < 64 * 1024:
            (OUT / "gguf" / f.name).write_bytes(f.read_bytes())
    data = (FIX / "tiny-llama.gguf").read_bytes()
    (OUT / "gguf" / "tiny-llama-header-cut.gguf").write_bytes(data[:4096])

    # tokenizer: only the tokenizer keys, no tensors.
    templates = {}
    sources = [(f, None) for f in sorted(FIX.glob("tiny-*.gguf"))[:2]]
    sources.append((FIX / "glm4moe-mtp-demo-q8_0.gguf", VOCAB_CUT))
    for name in ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-Q4_K_M.gguf"]:
        if (MODELS / name).exists():
            sources.append((MODELS / name, VOCAB_CUT))
    for f, n in sources:
        r = GGUFReader(str(f))
        kvs = list(fields(r))
        d = {k: v for k, v, _, _ in kvs}
        if "tokenizer.ggml.tokens" not in d:
            continue
        if "tokenizer.chat_template" in d:
            templates[f.stem] = d["tokenizer.chat_template"]
        cut = cut_vocab(kvs, n or len(d["tokenizer.ggml.tokens"]))
        write(OUT / "tokenizer" / f"{f.stem}.gguf", cut)
        # The other pre-tokenizers on the same byte-level vocabulary.
        if d.get("tokenizer.ggml.model") == "gpt2":
            for pre in ["default", "llama-bpe", "gpt2", "smollm", "qwen2"]:
                v = [kv if kv[0] != "tokenizer.ggml.pre" else (kv[0], pre, kv[2], kv[3]) for kv in cut]
                write(OUT / "tokenizer" / f"{f.stem}-pre-{pre}.gguf", v)

    # chat_template: each template with a conversation (system, user, assistant, user): the
    # templates found above, gemma3's from the tokenizer golden file (its GGUF has none), and the
    # engine tests' templates that use the Python-compatible methods and filters.
    import json
    for g in sorted((ROOT / "tests" / "golden").glob("tokenizer_*.json")):
        src = json.loads(g.read_text()).get("chat_template")
        if src:
            templates[g.stem] = src
    templates["test-python-compat"] = (
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
        "{{ m.content.strip() | upper if m.content.startswith(' ') else m.content }}|{% endfor %}"
        "{{ {'b': 1, 'a': [1, 'é<']} | tojson }}{% if add_generation_prompt %}>{% endif %}"
    )
    templates["test-strftime"] = "{{ strftime_now('%d %b %Y %A %j %%') }}{{ messages | tojson(indent=2) }}"
    conv = ["system\x01You are a helpful assistant.", "user\x01Hi! What is 2+2?", "assistant\x01 4.", "user\x01Thanks"]
    for name, src in templates.items():
        body = "\0".join([src] + conv).encode()
        (OUT / "chat_template").mkdir(parents=True, exist_ok=True)
        (OUT / "chat_template" / f"{name}.txt").write_bytes(body)

    for t in sorted(OUT.iterdir()):
        files = list(t.iterdir())
        print(f"{t.name}: {len(files)} seeds, {sum(x.stat().st_size for x in files)} bytes")


if __name__ == "__main__":
    main()
