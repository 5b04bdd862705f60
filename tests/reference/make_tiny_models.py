#!/usr/bin/env python3
"""Random-weight tiny models of each family Tandem supports, as GGUF fixtures.

For each family (llama, qwen2, qwen3, gemma3, qwen3moe, glm4moe): build a small transformers model from a config,
seeded, with weights drawn large enough that logit margins are clear; save_pretrained it with a
small sentencepiece tokenizer (512 tokens, trained here on the perplexity text); convert with
llama.cpp's convert_hf_to_gguf.py (--outtype f32; llama also --outtype q8_0) into tests/fixtures/;
then load every GGUF back with transformers (gguf_file=...) and check its logits against the
original torch model (this catches converter permutations / norm offsets / missing keys).
The MoE families (qwen3moe, glm4moe) also get a q8_0 GGUF; transformers cannot load their GGUFs, so
they are read back with gguf-py into the transformers model by name (load_moe_gguf).
qwen3moe-h256 is a wider qwen3moe (hidden 256, expert FFN 256: every row a whole number of 256-weight
K-quant super-blocks) committed only as Q4_K_M: converted to f32 in a temporary folder, then quantized
by llama.cpp's llama-quantize (gguf-py cannot make K-quants). llama-h256 is a wider llama made the
same way, its matrices quantized to Q2_K, Q3_K, IQ4_NL and IQ4_XS by llama-quantize's per-tensor
overrides (tiny-llama-h256-mixq: each of the four types in two or three roles, see MIXQ). transformers 5
stores experts fused (experts.gate_up_proj [E, 2F, H], experts.down_proj [E, H, F]); the glm4moe
converter wants them per expert, so they are split before conversion; the converter's GLM vocab
(which wants GLM's own BPE tokenizer) is replaced by the sentencepiece one (convert()).

Needs the llama.cpp converter: --llama-cpp DIR (the vendor/llama.cpp folder of the PyPI source
package llama-cpp-python==0.3.36). See tests/reference/README.md.

Needs llama-quantize for qwen3moe-h256: --llama-quantize PATH (default <llama-cpp>/build/bin/llama-quantize;
build it with `cmake -B build && cmake --build build --target llama-quantize` in that folder).

Usage: python3 tests/reference/make_tiny_models.py --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
       [--families qwen3moe-h256]   (a comma-separated subset; default: all)
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


MOE_FAMILIES = ("qwen3moe", "glm4moe", "qwen3moe-h256")
# Families committed only as a llama-quantize output (type given here), made from a temporary f32 GGUF.
LLAMA_QUANTIZE = {"qwen3moe-h256": "Q4_K_M", "llama-h256": "MIXQ"}
# Families wider than 64 whose matrices are drawn with std scaled by sqrt(64 / fan_in) (see build()).
FAN_IN_SCALED = ("qwen3moe-h256", "llama-h256")
# tiny-llama-h256-mixq: llama-quantize's per-tensor types (--tensor-type regex=type, first match
# wins; the embedding and output through their own options), so that each of Q2_K, Q3_K, IQ4_NL and
# IQ4_XS is read by the embedding or the fused gate/up matvec or a stacked QKV, and by a plain matrix.
MIXQ = {
    "token_embd.weight": "IQ4_NL", "output.weight": "Q3_K",
    "blk.0.attn_q.weight": "Q3_K", "blk.0.attn_k.weight": "Q3_K", "blk.0.attn_v.weight": "Q3_K",
    "blk.0.attn_output.weight": "IQ4_XS", "blk.0.ffn_gate.weight": "Q2_K", "blk.0.ffn_up.weight": "Q2_K",
    "blk.0.ffn_down.weight": "IQ4_NL",
    "blk.1.attn_q.weight": "IQ4_NL", "blk.1.attn_k.weight": "IQ4_NL", "blk.1.attn_v.weight": "IQ4_NL",
    "blk.1.attn_output.weight": "Q2_K", "blk.1.ffn_gate.weight": "IQ4_XS", "blk.1.ffn_up.weight": "IQ4_XS",
    "blk.1.ffn_down.weight": "Q3_K",
}


def configs():
    from transformers import (Gemma3TextConfig, Glm4MoeConfig, LlamaConfig, Qwen2Config, Qwen3Config,
                              Qwen3MoeConfig)
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
        # softmax router, 8 experts, top-2, renormalised weights; q/k norm; expert FFN 64
        "qwen3moe": (Qwen3MoeConfig(**COMMON, num_hidden_layers=2, head_dim=32, rms_norm_eps=1e-6,
                                    tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2,
                                    moe_intermediate_size=64, norm_topk_prob=True,
                                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 15),
        # sigmoid router with score bias, 8 experts in 2 groups (1 kept), top-2, routed scaling 2.5,
        # one shared expert, layer 0 dense, partial rotary (0.5 of head 32), q/k/v bias
        "glm4moe": (Glm4MoeConfig(**COMMON, num_hidden_layers=3, head_dim=32, rms_norm_eps=1e-5,
                                  tie_word_embeddings=False, attention_bias=True, n_routed_experts=8,
                                  num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                                  first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                  moe_intermediate_size=64,
                                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                   "partial_rotary_factor": 0.5}), 16),
        # llama as above, but every row a multiple of 256 weights (hidden 256, FFN 256, 4 heads x 64,
        # 2 KV heads), for llama-quantize's K-quants and IQ4_XS (MIXQ)
        "llama-h256": (LlamaConfig(**{**COMMON, "hidden_size": 256, "intermediate_size": 256},
                                   num_hidden_layers=2, head_dim=64, rms_norm_eps=1e-5,
                                   tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), 18),
        # qwen3moe as above, but every row a multiple of 256 weights (hidden 256, 4 heads x 64 = 256,
        # expert FFN 256), so llama-quantize's Q4_K_M mix needs no fallback types; 8 experts, top-2
        "qwen3moe-h256": (Qwen3MoeConfig(**{**COMMON, "hidden_size": 256, "intermediate_size": 256},
                                         num_hidden_layers=2, head_dim=64, rms_norm_eps=1e-6,
                                         tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2,
                                         moe_intermediate_size=256, norm_topk_prob=True,
                                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
                          17),
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
                if family in FAN_IN_SCALED and "lm_head" in name:
                    std *= (64 / p.shape[-1]) ** 0.5
                p.copy_(std * torch.randn(p.shape, generator=g))
            else:
                # wider models: std * sqrt(64 / fan_in), so that every projection's output has the
                # statistics it has in the hidden-64 models (in_features is the last dimension,
                # fused experts included)
                std = 0.25 * ((64 / p.shape[-1]) ** 0.5 if family in FAN_IN_SCALED else 1.0)
                p.copy_(std * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # glm4moe's selection bias
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
    return model


def save_hf(family, model):
    d = WORK / family
    if d.exists():
        shutil.rmtree(d)
    model.save_pretrained(d)
    if family == "glm4moe":
        split_experts(d)
    shutil.copy(TOKENIZER, d / "tokenizer.model")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 256}, indent=1))
    return d


def split_experts(d):
    """transformers 5's fused experts -> the per-expert tensors the glm4moe converter expects."""
    from safetensors.torch import load_file, save_file
    files = list(d.glob("*.safetensors"))
    assert len(files) == 1, files
    sd = load_file(files[0])
    out = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            base = k[:-len("gate_up_proj")]
            f = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{base}{e}.gate_proj.weight"] = v[e, :f].contiguous()
                out[f"{base}{e}.up_proj.weight"] = v[e, f:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            base = k[:-len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{base}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v
    save_file(out, files[0], metadata={"format": "pt"})


# Runs the converter with the MoE models' vocab taken from tokenizer.model (sentencepiece): the
# glm4moe converter otherwise insists on GLM's BPE tokenizer and its special tokens.
CONVERT_SHIM = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.glm, conversion.qwen
for cls in (conversion.glm.Glm4MoeModel, conversion.qwen.Qwen2MoeModel):
    cls.set_vocab = lambda self: self._set_vocab_sentencepiece()
script = sys.argv[1] + "/convert_hf_to_gguf.py"
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def convert(llama_cpp, hf_dir, out, outtype):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(llama_cpp) / "gguf-py")  # the converter's own gguf-py
    cmd = [sys.executable, str(Path(llama_cpp) / "convert_hf_to_gguf.py"), str(hf_dir),
           "--outfile", str(out), "--outtype", outtype]
    if any(f in Path(hf_dir).name for f in MOE_FAMILIES):
        cmd = [sys.executable, "-c", CONVERT_SHIM, str(llama_cpp)] + cmd[2:]
    print("  $", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stdout[-4000:], res.stderr[-4000:])
        raise SystemExit(f"conversion failed: {hf_dir}")


def quantize(llama_quantize, src, out, qtype):
    """llama.cpp's llama-quantize, one thread (K-quants without an imatrix are deterministic).
    qtype MIXQ: the types of MIXQ, tensor by tensor."""
    opts = []
    if qtype == "MIXQ":
        for name, ty in MIXQ.items():
            if name == "token_embd.weight":
                opts += ["--token-embedding-type", ty.lower()]
            elif name == "output.weight":
                opts += ["--output-tensor-type", ty.lower()]
            else:
                opts += ["--tensor-type", name.replace(".", r"\.").removesuffix(r"\.weight") + "=" + ty.lower()]
        qtype = "Q4_K_M"  # overridden for every matrix
    cmd = [str(llama_quantize)] + opts + [str(src), str(out), qtype, "1"]
    print("  $", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stdout[-4000:], res.stderr[-4000:])
        raise SystemExit(f"llama-quantize failed: {src}")
    assert "fallback" not in res.stdout + res.stderr, (res.stdout + res.stderr)[-4000:]


def tensor_types(path):
    """{tensor name: GGML type name} of a GGUF."""
    from gguf import GGUFReader
    return {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}


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


GGUF_TO_HF = {
    "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",  # glm4moe names its FFN norm so
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
    "ffn_down_exps.weight": "mlp.experts.down_proj",
}


def load_moe_gguf(path, family):
    """The transformers model of a MoE fixture with every weight read from the GGUF (dequantized by
    gguf-py): transformers 5.24 has no GGUF loader for qwen3moe/glm4moe. Neither converter permutes
    Q/K (both are NeoX-rope models), so the mapping is by name only."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from transformers import AutoModelForCausalLM
    config, _ = configs()[family]
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    sd = {}
    exps = {}
    for t in GGUFReader(str(path)).tensors:
        a = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))
        a = a.reshape([int(x) for x in reversed(t.shape.tolist())])
        n = t.name
        if n == "token_embd.weight":
            sd["model.embed_tokens.weight"] = a
        elif n == "output_norm.weight":
            sd["model.norm.weight"] = a
        elif n == "output.weight":
            sd["lm_head.weight"] = a
        else:
            _, il, rest = n.split(".", 2)
            if rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
                exps.setdefault(il, {})[rest] = a
                continue
            sd[f"model.layers.{il}.{GGUF_TO_HF[rest]}"] = a
    for il, e in exps.items():
        sd[f"model.layers.{il}.mlp.experts.gate_up_proj"] = torch.cat(
            [e["ffn_gate_exps.weight"], e["ffn_up_exps.weight"]], dim=1)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)
    return model


def load_gguf_as_hf(path):
    """transformers model from a GGUF, with the gemma3 settings that transformers' GGUF loader does not
    read from the file filled in the way llama.cpp derives them (see README); head_dim from
    <arch>.attention.key_length (transformers 5.24 ignores it for qwen3);
    query_pre_attn_scalar = head_dim (llama.cpp: f_attention_scale = 1/sqrt(n_embd_head_k)) and the
    sliding-layer rope base from gemma3.rope.freq_base_swa (llama.cpp default 10000 when absent).
    The layer pattern (every 6th layer global) is transformers' and llama.cpp's common default."""
    from transformers import AutoConfig, AutoModelForCausalLM
    path = Path(path)
    for family in sorted(MOE_FAMILIES, key=len, reverse=True):  # tiny-qwen3moe-h256 before tiny-qwen3moe
        if path.name.startswith(f"tiny-{family}"):
            return load_moe_gguf(path, family)
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


QTOL_K = 0.5
QTOL_MIXQ = 1.0


def q4_k_dequant(raw, bug=None):
    """ggml's dequantize_row_q4_K in numpy (144-byte blocks: d, dmin (f16), 12 bytes of 6-bit
    scales/mins, 128 bytes of nibbles), optionally with a plausible kernel bug."""
    import numpy as np
    b = np.asarray(raw).reshape(-1, 144)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float32)
    sc, qs = b[:, 4:16].astype(np.int32), b[:, 16:144].astype(np.int32)

    def scale_min(j):  # get_scale_min_k4
        if j < 4:
            return sc[:, j] & 63, sc[:, j + 4] & 63
        if bug == "scale high bits dropped":
            return sc[:, j + 4] & 0xF, sc[:, j + 4] >> 4
        return (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4), (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    out = np.empty((b.shape[0], 256), np.float32)
    for j in range(8):  # sub-block j: nibbles low (j even) / high (j odd) of qs[32*(j//2) ..][:32]
        q = qs[:, 32 * (j // 2):32 * (j // 2) + 32]
        q = (q >> 4) if (j % 2) != (bug == "nibbles swapped") else (q & 0xF)
        s_, m_ = scale_min(6 if bug == "last sub-block uses the previous scale" and j == 7 else j)
        out[:, 32 * j:32 * j + 32] = d * s_[:, None] * q - (0 if bug == "min ignored" else dmin * m_[:, None])
    return out


@torch.no_grad()
def k_quant_sensitivity(path, family, back):
    """The Q4_K fixture must catch a wrong Q4_K expert decode: the same model with the routed
    experts' Q4_K tensors decoded with a plausible bug differs clearly (max |dlogit| far above the
    Rust test's 2e-3) from the correct decode, which is checked equal to gguf-py's first."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    exps = [t for t in GGUFReader(str(path)).tensors if t.tensor_type.name == "Q4_K" and "_exps" in t.name]
    assert exps
    for t in exps:
        assert np.array_equal(q4_k_dequant(t.data).reshape(-1),
                              np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(-1)), t.name
    for bug in ("min ignored", "nibbles swapped", "scale high bits dropped", "last sub-block uses the previous scale"):
        other = load_moe_gguf(path, family)
        for t in exps:
            a = torch.from_numpy(q4_k_dequant(t.data, bug)).reshape([int(x) for x in reversed(t.shape.tolist())])
            ex = other.model.layers[int(t.name.split(".")[1])].mlp.experts
            f = ex.gate_up_proj.shape[1] // 2
            {"ffn_gate_exps.weight": lambda: ex.gate_up_proj[:, :f].copy_(a),
             "ffn_up_exps.weight": lambda: ex.gate_up_proj[:, f:].copy_(a),
             "ffn_down_exps.weight": lambda: ex.down_proj.copy_(a)}[t.name.split(".", 2)[2]]()
        err, scale, nmse, same = compare(back, other, f"{path.name} vs Q4_K experts with '{bug}'")
        assert err > 1.0, f"{path.name} does not catch a Q4_K expert decode with '{bug}'"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="path to llama.cpp source (has convert_hf_to_gguf.py)")
    ap.add_argument("--llama-quantize", default=None,
                    help="llama-quantize binary (default: <llama-cpp>/build/bin/llama-quantize)")
    ap.add_argument("--families", default=None, help="comma-separated subset (default: all)")
    a = ap.parse_args()
    llama_quantize = Path(a.llama_quantize or Path(a.llama_cpp) / "build" / "bin" / "llama-quantize")
    make_tokenizer()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    report = {}
    for family, (config, seed) in configs().items():
        if a.families and family not in a.families.split(","):
            continue
        print(f"== tiny-{family}", flush=True)
        model = build(family, config, seed)
        hf_dir = save_hf(family, model)
        if family in LLAMA_QUANTIZE:  # f32 GGUF in the work folder only, then llama-quantize
            qtype = LLAMA_QUANTIZE[family]
            outs = [(f"tiny-{family}", "f32", WORK / f"tiny-{family}.gguf"),
                    (f"tiny-{family}-{qtype.lower()}", qtype, FIXTURES / f"tiny-{family}-{qtype.lower()}.gguf")]
        else:
            outs = [(f"tiny-{family}", "f32")] + (
                [(f"tiny-{family}-q8_0", "q8_0")] if family in ("llama", "qwen3moe", "glm4moe") else [])
            outs = [(name, outtype, FIXTURES / f"{name}.gguf") for name, outtype in outs]
        for name, outtype, out in outs:
            if outtype in ("f32", "q8_0"):
                convert(a.llama_cpp, hf_dir, out, outtype)
            else:
                quantize(llama_quantize, outs[0][2], out, outtype)
                types = tensor_types(out)
                print(f"  {out.name}: {out.stat().st_size} bytes; tensor types:", flush=True)
                for t, ty in types.items():
                    print(f"    {t:32s} {ty}", flush=True)
                counts = {}
                for ty in types.values():
                    counts[ty] = counts.get(ty, 0) + 1
                print(f"  counts: {counts}", flush=True)
                # the point of the fixture: the routed experts' gate/up really are Q4_K
                assert all(ty == "Q4_K" for t, ty in types.items() if t.endswith(("ffn_gate_exps.weight",
                                                                                   "ffn_up_exps.weight"))), types
                if outtype == "MIXQ":  # every matrix has the type asked for, the rest is F32
                    assert all(types[t] == MIXQ.get(t, "F32") for t in types), types
            kv = gguf_kv(out)
            print("  " + ", ".join(f"{k}={v}" for k, v in kv.items()
                                  if k.startswith(kv["general.architecture"] + ".") or k in
                                  ("tokenizer.ggml.model", "tokenizer.ggml.add_bos_token", "general.file_type")),
                  flush=True)
            back = load_gguf_as_hf(out)
            err, scale, nmse, same = compare(model, back, f"{name} ({outtype})")
            # f32 must be exact up to float rounding; q8_0 only close (the quantization noise,
            # weight NMSE ~3e-5, is amplified by the large random weights to logit NMSE ~3e-3)
            # MoE q8_0: the noise also flips a few routing choices (a discontinuity), NMSE ~2e-2;
            # the goldens are made from the q8_0 GGUF itself, so this only bounds the damage
            q8_tol = 5e-2 if family in MOE_FAMILIES else 1e-2
            # Q4_K_M (weight NMSE ~3e-3, 100x Q8_0's): QTOL_K bounds the damage the same way
            q_tol = QTOL_K if outtype in LLAMA_QUANTIZE.values() else q8_tol
            # MIXQ: 2- and 3-bit matrices without an importance matrix (NMSE 0.73 against the f32
            # model); the golden is made from the quantized file, so this only bounds the damage
            q_tol = QTOL_MIXQ if outtype == "MIXQ" else q_tol
            ok = (err <= 1e-3 * max(1.0, scale) and same) if outtype == "f32" else nmse < q_tol
            report[name] = {"max_abs_dlogit": err, "max_abs_logit": scale, "nmse": nmse, "argmax_equal": same,
                            "ok": ok}
            assert ok, f"{name}: GGUF round trip mismatch"
            if outtype == "Q4_K_M":
                k_quant_sensitivity(out, family, back)
        if family == "gemma3":
            sensitivity(model, config)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
