#!/usr/bin/env python3
"""Check the README's engine conventions with a second, independent implementation.

A plain numpy forward pass that reads the GGUF directly (gguf-py; quantized tensors dequantized with
gguf.quants.dequantize) and follows llama.cpp's conventions as written in README.md ("Conventions
for the engine"): GGML tensor layout, RoPE NORM (adjacent pairs) for llama on the converter-permuted
Q/K, NEOX (halves) for qwen2/qwen3/gemma3, gemma3 norms used as stored (+1 already applied), etc.
It is compared with the transformers goldens in tests/golden/ (last-position logits and greedy
tokens). If this passes, an engine that implements the README the same way will match the goldens.

Usage: python3 tests/reference/ggml_convention_check.py [--real]   (--real adds the two real models)
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

REPO = Path(__file__).resolve().parents[2]


class Gguf:
    def __init__(self, path):
        self.r = GGUFReader(str(path))
        self.kv = {}
        for k, f in self.r.fields.items():
            try:
                self.kv[k] = f.contents()
            except Exception:
                pass
        self.t = {t.name: t for t in self.r.tensors}
        self.arch = self.kv["general.architecture"]

    def get(self, key, default=None):
        return self.kv.get(f"{self.arch}.{key}", default)

    def w(self, name):
        """numpy array in row-major [ne1, ne0] order, i.e. [out_features, in_features] for matrices."""
        t = self.t.get(name)
        if t is None:
            return None
        return dequantize(t.data, t.tensor_type).astype(np.float32).reshape(tuple(reversed(t.shape.tolist())))


def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w).astype(np.float32)


def rope(x, pos, base, neox):
    """x: [T, H, D]. GGML_ROPE_TYPE_NORMAL rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i+D/2]).
    theta = pos * base^(-2i/D), i in [0, D/2)."""
    T, H, D = x.shape
    inv = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = pos[:, None].astype(np.float64) * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x = x.astype(np.float64)
    if neox:
        a, b = x[..., :D // 2], x[..., D // 2:]
        out = np.concatenate([a * c - b * s, a * s + b * c], -1)
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
    return out.astype(np.float32)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


class Model:
    def __init__(self, path):
        g = self.g = Gguf(path)
        self.arch = g.arch
        assert self.arch in ("llama", "qwen2", "qwen3", "gemma3"), self.arch
        self.n_layer = g.get("block_count")
        self.n_embd = g.get("embedding_length")
        self.n_head = g.get("attention.head_count")
        self.n_head_kv = g.get("attention.head_count_kv")
        self.head_dim = g.get("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = g.get("rope.dimension_count", self.head_dim)
        self.eps = g.get("attention.layer_norm_rms_epsilon")
        self.base = g.get("rope.freq_base", 10000.0)
        self.neox = self.arch != "llama"
        self.gemma = self.arch == "gemma3"
        if self.gemma:
            self.swa = g.get("attention.sliding_window")
            self.base_swa = g.get("rope.freq_base_swa", 10000.0)  # llama-hparams.h default
            self.is_swa = [il % 6 < 5 for il in range(self.n_layer)]  # load_swa_pattern(ml, 6)
            self.scale = 1.0 / math.sqrt(self.head_dim)  # f_attention_scale (non-27B)
        else:
            self.scale = 1.0 / math.sqrt(self.head_dim)
        self.tok_embd = g.w("token_embd.weight")
        self.output = g.w("output.weight")
        if self.output is None:
            self.output = self.tok_embd  # tied
        self.out_norm = g.w("output_norm.weight")
        self.L = []
        for i in range(self.n_layer):
            p = f"blk.{i}."
            self.L.append({k: g.w(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm")})
            for b in ("attn_q", "attn_k", "attn_v"):
                self.L[-1][b + ".bias"] = g.w(p + b + ".bias")

    def forward(self, ids):
        T, hd = len(ids), self.head_dim
        pos = np.arange(T)
        x = self.tok_embd[np.array(ids)].astype(np.float32)
        if self.gemma:
            x = x * np.float32(math.sqrt(self.n_embd))
        for il, l in enumerate(self.L):
            h = rms_norm(x, l["attn_norm"], self.eps)
            q, k, v = h @ l["attn_q"].T, h @ l["attn_k"].T, h @ l["attn_v"].T
            if l["attn_q.bias"] is not None:
                q, k, v = q + l["attn_q.bias"], k + l["attn_k.bias"], v + l["attn_v.bias"]
            q = q.reshape(T, self.n_head, hd)
            k = k.reshape(T, self.n_head_kv, hd)
            v = v.reshape(T, self.n_head_kv, hd)
            if l["attn_q_norm"] is not None:  # qwen3, gemma3: per-head RMS norm before RoPE
                q, k = rms_norm(q, l["attn_q_norm"], self.eps), rms_norm(k, l["attn_k_norm"], self.eps)
            swa = self.gemma and self.is_swa[il]
            base = self.base_swa if swa else self.base
            q, k = rope(q, pos, base, self.neox), rope(k, pos, base, self.neox)
            mask = np.tril(np.ones((T, T), bool))
            if swa:  # masked when p1 - p0 >= n_swa (llama-hparams.h, LLAMA_SWA_TYPE_STANDARD)
                mask &= (pos[:, None] - pos[None, :]) < self.swa
            grp = self.n_head // self.n_head_kv
            att = np.empty((T, self.n_head, hd), np.float32)
            for hh in range(self.n_head):
                s = (q[:, hh] @ k[:, hh // grp].T).astype(np.float64) * self.scale
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                att[:, hh] = (s @ v[:, hh // grp]).astype(np.float32)
            o = att.reshape(T, -1) @ l["attn_output"].T
            if self.gemma:
                o = rms_norm(o, l["post_attention_norm"], self.eps)
            x = x + o
            h = rms_norm(x, l["ffn_norm"], self.eps)
            act = gelu_tanh if self.gemma else silu
            f = (act(h @ l["ffn_gate"].T) * (h @ l["ffn_up"].T)) @ l["ffn_down"].T
            if self.gemma:
                f = rms_norm(f, l["post_ffw_norm"], self.eps)
            x = x + f
        x = rms_norm(x, self.out_norm, self.eps)
        return x @ self.output.T


def check(golden_path, models_dir):
    gold = json.load(open(golden_path))
    ref = gold["model"]
    path = REPO / ref if ref.startswith("tests/") else Path(models_dir) / ref
    m = Model(path)
    worst_rel, ok_greedy, n_greedy = 0.0, 0, 0
    for case in gold["cases"]:
        ids = list(case["prompt_tokens"])
        logits = m.forward(ids)[-1]
        top = case["top_logits"]
        gid = np.array([t[0] for t in top])
        gval = np.array([t[1] for t in top])
        err = np.abs(logits[gid] - gval).max()
        rel = err / max(1.0, np.abs(gval).max())
        worst_rel = max(worst_rel, rel)
        # greedy: recompute with the golden tokens, compare argmax while margins are clear
        seq = ids + case["greedy_tokens"]
        lg = m.forward(seq[:-1])[len(ids) - 1:]
        for step, (tok, margin) in enumerate(zip(case["greedy_tokens"], case["margins"])):
            if margin < 1e-3:
                break
            n_greedy += 1
            ok_greedy += int(np.argmax(lg[step]) == tok)
        print(f"    {case['name']}: max|dlogit| {err:.2e} (rel {rel:.1e})", flush=True)
    print(f"  {golden_path.name}: worst rel logit err {worst_rel:.1e}; greedy {ok_greedy}/{n_greedy} match", flush=True)
    return worst_rel, ok_greedy == n_greedy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/tandem/models"))
    a = ap.parse_args()
    names = ["tiny-llama", "tiny-llama-q8_0", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"]
    if a.real:
        names += ["smollm2-135m-instruct", "gemma3-270m"]
    bad = []
    for n in names:
        gp = REPO / "tests" / "golden" / f"model_{n}.json"
        print(f"== {gp.relative_to(REPO)}", flush=True)
        rel, greedy_ok = check(gp, a.models_dir)
        if rel > 1e-3 or not greedy_ok:
            bad.append(n)
    print("FAILED: " + ", ".join(bad) if bad else "all conventions check out")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
