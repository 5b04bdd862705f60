#!/usr/bin/env python3
"""Random-weight tiny models of each family Tandem supports, as GGUF fixtures.

For each family (llama, qwen2, qwen3, gemma3): build a small transformers model from a config,
seeded, with weights drawn large enough that logit margins are clear; save_pretrained it with a
small sentencepiece tokenizer (512 tokens, trained here on the perplexity text); convert with
llama.cpp's convert_hf_to_gguf.py (--outtype f32; llama also --outtype q8_0) into tests/fixtures/;
then load every GGUF back with transformers (gguf_file=...) and check its logits against the
original torch model (this catches converter permutations / norm offsets / missing keys).

Needs the llama.cpp converter: --llama-cpp DIR (the vendor/llama.cpp folder of the PyPI source
package llama-cpp-python==0.3.36). See tests/reference/README.md.

Usage: python3 tests/reference/make_tiny_models.py --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TEXT = REPO / "tests" / "data" / "sotu_1918_wilson.txt"
TOKENIZER = FIXTURES / "tiny-tokenizer.model"
VOCAB = 512
WORK = Path(tempfile.gettempdir()) / "tandem-tiny"

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
              pad_token_id=0)


def make_tokenizer():
    """A llama-style sentencepiece BPE model (byte fallback; <unk>=0, <s>=1, </s>=2)."""
    if TOKENIZER.exists():
        return
    import sentencepiece as spm
    FIXTURES.mkdir(parents=True, exist_ok=True)
    prefix = WORK / "tiny-tokenizer"
    WORK.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=str(TEXT), model_prefix=str(prefix), vocab_size=VOCAB, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, num_threads=1, split_digits=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, normalization_rule_name="identity",
        max_sentence_length=100000, input_sentence_size=0)
    shutil.copy(f"{prefix}.model", TOKENIZER)


def configs():
    from transformers import Gemma3TextConfig, LlamaConfig, Qwen2Config, Qwen3Config
    return {
        # untied output head (output.weight present), head_dim 16, rope adjacent-pair mode after
        # the converter's Q/K permutation
        "llama": (LlamaConfig(**COMMON, num_hidden_layers=2, rms_norm_eps=1e-5, tie_word_embeddings=False,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), 11),
        # q/k/v biases, tied embeddings
        "qwen2": (Qwen2Config(**COMMON, num_hidden_layers=2, rms_norm_eps=1e-6, tie_word_embeddings=True,
                              use_sliding_window=False,
                              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 12),
        # q/k RMS norm, head_dim 32 != hidden/heads
        "qwen3": (Qwen3Config(**COMMON, num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6,
                              tie_word_embeddings=True, attention_bias=False,
                              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 13),
        # 6 layers = llama.cpp's fixed pattern: layers 0-4 sliding (window 8), layer 5 global.
        # query_pre_attn_scalar = head_dim because llama.cpp (and the GGUF) assume 1/sqrt(head_dim).
        "gemma3": (Gemma3TextConfig(**COMMON, num_hidden_layers=6, head_dim=32, query_pre_attn_scalar=32,
                                    sliding_window=8, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                    hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                                    rope_parameters={
                                        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                        "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0}}),
                   14),
    }


def build(family, config, seed):
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                if family == "gemma3":  # Gemma3RMSNorm computes x * (1 + w)
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name or "lm_head" in name:
                # gemma3 multiplies the embedding by sqrt(hidden) = 8: keep it from swamping the
                # residual stream (otherwise the tied head just echoes the last input token)
                std = 0.15 if family == "gemma3" else 0.5
                p.copy_(std * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
    return model


def save_hf(family, model):
    d = WORK / family
    if d.exists():
        shutil.rmtree(d)
    model.save_pretrained(d)
    shutil.copy(TOKENIZER, d / "tokenizer.model")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 256}, indent=1))
    return d


def convert(llama_cpp, hf_dir, out, outtype):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(llama_cpp) / "gguf-py")  # the converter's own gguf-py
    cmd = [sys.executable, str(Path(llama_cpp) / "convert_hf_to_gguf.py"), str(hf_dir),
           "--outfile", str(out), "--outtype", outtype]
    print("  $", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stdout[-4000:], res.stderr[-4000:])
        raise SystemExit(f"conversion failed: {hf_dir}")


def gguf_kv(path):
    from gguf import GGUFReader
    r = GGUFReader(str(path))
    out = {}
    for k, f in r.fields.items():
        if k.startswith("tokenizer.ggml.") and k.rsplit(".", 1)[-1] in ("tokens", "scores", "token_type", "merges"):
            continue
        try:
            out[k] = f.contents()
        except Exception:
            pass
    return out


def load_gguf_as_hf(path):
    """transformers model from a GGUF, with the gemma3 settings that transformers' GGUF loader does not
    read from the file filled in the way llama.cpp derives them (see README); head_dim from
    <arch>.attention.key_length (transformers 5.24 ignores it for qwen3);
    query_pre_attn_scalar = head_dim (llama.cpp: f_attention_scale = 1/sqrt(n_embd_head_k)) and the
    sliding-layer rope base from gemma3.rope.freq_base_swa (llama.cpp default 10000 when absent).
    The layer pattern (every 6th layer global) is transformers' and llama.cpp's common default."""
    from transformers import AutoConfig, AutoModelForCausalLM
    path = Path(path)
    kw = dict(gguf_file=path.name)
    cfg = AutoConfig.from_pretrained(path.parent, **kw)
    kv = gguf_kv(path)
    arch = kv["general.architecture"]
    if f"{arch}.attention.key_length" in kv:  # transformers' GGUF loader misses this for qwen3
        cfg.head_dim = int(kv[f"{arch}.attention.key_length"])
    if cfg.model_type.startswith("gemma3"):
        cfg.query_pre_attn_scalar = cfg.head_dim
        swa_base = float(kv.get("gemma3.rope.freq_base_swa", 10000.0))
        cfg.rope_parameters["sliding_attention"]["rope_theta"] = swa_base
        cfg.layer_types = ["full_attention" if i % 6 == 5 else "sliding_attention"
                           for i in range(cfg.num_hidden_layers)]
    return AutoModelForCausalLM.from_pretrained(path.parent, config=cfg, dtype=torch.float32, **kw).eval()


@torch.no_grad()
def compare(a, b, tag):
    g = torch.Generator().manual_seed(7)
    ids = torch.cat([torch.tensor([[1]]), torch.randint(3, VOCAB, (1, 79), generator=g)], dim=1)
    la, lb = a(ids).logits[0], b(ids).logits[0]
    err = (la - lb).abs().max().item()
    scale = la.abs().max().item()
    nmse = (((la - lb) ** 2).mean() / (la ** 2).mean()).item()
    same_argmax = bool((la.argmax(-1) == lb.argmax(-1)).all())
    print(f"  round trip {tag}: max|dlogit| = {err:.3e} (max|logit| {scale:.2f}), NMSE {nmse:.2e}, "
          f"argmax equal at all 80 positions: {same_argmax}", flush=True)
    return err, scale, nmse, same_argmax


@torch.no_grad()
def sensitivity(model, config):
    """The gemma3 fixture must exercise what is special about it: the sliding window, the local rope
    base and the attention scale each change the logits of an 80-token input."""
    import copy
    from transformers import AutoModelForCausalLM
    variants = {
        "no sliding window": dict(sliding_window=10_000),
        "local rope base = global": dict(rope_parameters={
            "full_attention": dict(config.rope_parameters["full_attention"]),
            "sliding_attention": dict(config.rope_parameters["full_attention"])}),
        "query_pre_attn_scalar 256 (transformers' GGUF default)": dict(query_pre_attn_scalar=256),
    }
    for tag, change in variants.items():
        cfg = copy.deepcopy(config)
        for k, v in change.items():
            setattr(cfg, k, v)
        other = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
        other.load_state_dict(model.state_dict())
        err, scale, nmse, same = compare(model, other, f"gemma3 vs {tag}")
        assert nmse > 1e-4, f"gemma3 fixture does not depend on: {tag}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="path to llama.cpp source (has convert_hf_to_gguf.py)")
    a = ap.parse_args()
    make_tokenizer()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    report = {}
    for family, (config, seed) in configs().items():
        print(f"== tiny-{family}", flush=True)
        model = build(family, config, seed)
        hf_dir = save_hf(family, model)
        outs = [(f"tiny-{family}", "f32")] + ([(f"tiny-{family}-q8_0", "q8_0")] if family == "llama" else [])
        for name, outtype in outs:
            out = FIXTURES / f"{name}.gguf"
            convert(a.llama_cpp, hf_dir, out, outtype)
            kv = gguf_kv(out)
            print("  " + ", ".join(f"{k}={v}" for k, v in kv.items()
                                  if k.startswith(kv["general.architecture"] + ".") or k in
                                  ("tokenizer.ggml.model", "tokenizer.ggml.add_bos_token", "general.file_type")),
                  flush=True)
            back = load_gguf_as_hf(out)
            err, scale, nmse, same = compare(model, back, f"{name} ({outtype})")
            # f32 must be exact up to float rounding; q8_0 only close (the quantization noise,
            # weight NMSE ~3e-5, is amplified by the large random weights to logit NMSE ~3e-3)
            ok = (err <= 1e-3 * max(1.0, scale) and same) if outtype == "f32" else nmse < 1e-2
            report[name] = {"max_abs_dlogit": err, "max_abs_logit": scale, "nmse": nmse, "argmax_equal": same,
                            "ok": ok}
            assert ok, f"{name}: GGUF round trip mismatch"
        if family == "gemma3":
            sensitivity(model, config)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
