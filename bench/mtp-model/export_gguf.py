#!/usr/bin/env python3
"""train.py's checkpoint -> GGUF in llama.cpp's glm4moe + nextn layout, written by llama.cpp's own
converter (convert_hf_to_gguf.py, class Glm4MoeModel), so the layout is llama.cpp's by construction.

Steps:
 1. Hugging Face checkpoint folder: config.json (Glm4MoeForCausalLM, num_nextn_predict_layers = 1),
    the weights with the experts split per expert (the glm4moe converter stacks them itself, as it
    does for GLM-4.5's checkpoints) and the MTP layer as model.layers.{num_hidden_layers}, as GLM-4.5
    stores it; tokenizer.json + tokenizer_config.json.
 2. The converter, through a small shim: its glm4moe vocab code wants GLM's own special tokens, and
    its pre-tokenizer detection knows only published tokenizers (by the hash of a test string's ids),
    so the shim uses its plain GPT-2-style BPE vocab code (_set_vocab_gpt2) and names the
    pre-tokenizer "qwen2", whose regex prepare.py trained with. Everything else is the converter's.
 3. Checks the result with gguf-py: architecture, block count = layers + 1, nextn_predict_layers = 1,
    the blk.N.nextn.* tensors, the size.
With --check-hf (needs transformers) it first checks that model.py's main model gives the same logits
as transformers' Glm4MoeForCausalLM with the same weights.

Needs: torch, numpy, transformers, tokenizers (AutoTokenizer), safetensors, and the converter with
its gguf-py: --llama-cpp DIR, a llama.cpp source folder (the PyPI source package
llama-cpp-python==0.3.36's vendor/llama.cpp; fetch-data.sh copies the three parts needed into
data/llama.cpp).

Usage: python3 export_gguf.py --ckpt out/ckpt.pt --tokens data/tokens --llama-cpp data/llama.cpp
                              --out out/model.gguf [--outtype q8_0] [--check-hf]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import Glm4MoeMTP, hf_config  # noqa: E402

PRE = "qwen2"
SHIM = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base, conversion.glm
conversion.glm.Glm4MoeModel.set_vocab = lambda self: self._set_vocab_gpt2()
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: %r
script = sys.argv[1] + "/convert_hf_to_gguf.py"
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
""" % PRE


def hf_folder(ckpt, tokens, d):
    """Writes the Hugging Face checkpoint folder d from train.py's ckpt."""
    cfg, sd = ckpt["config"], ckpt["state_dict"]
    out = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            base, f = k[:-len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{base}{e}.gate_proj.weight"] = v[e, :f].contiguous()
                out[f"{base}{e}.up_proj.weight"] = v[e, f:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            for e in range(v.shape[0]):
                out[f"{k[:-len('down_proj')]}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v.contiguous()
    d.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file
    save_file(out, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(hf_config(cfg), indent=1))
    shutil.copy(tokens / "tokenizer.json", d / "tokenizer.json")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": None,
        "pad_token": "<|endoftext|>", "model_max_length": cfg["max_position_embeddings"]}, indent=1))


def check_hf(ckpt):
    """model.py's main model against transformers' Glm4MoeForCausalLM on the same weights."""
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM
    cfg = ckpt["config"]
    hc = {k: v for k, v in hf_config(cfg).items() if k not in ("architectures", "model_type", "dtype")}
    ref = Glm4MoeForCausalLM(Glm4MoeConfig(**hc)).eval()
    ours = Glm4MoeMTP(cfg).eval()
    ours.load_state_dict(ckpt["state_dict"], strict=False)
    L = cfg["num_hidden_layers"]
    main_sd = {k: v for k, v in ckpt["state_dict"].items() if not k.startswith(f"model.layers.{L}.")}
    missing, unexpected = ref.load_state_dict(main_sd, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg["tie_word_embeddings"])]
    assert not missing and not unexpected, (missing, unexpected)
    ids = torch.randint(0, cfg["vocab_size"], (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = ref(ids).logits
        b = ours(ids)[0]
    err = ((a - b).abs().max() / a.abs().max()).item()
    print(f"check-hf: model.py vs transformers Glm4MoeForCausalLM, max |dlogit| / max |logit| = {err:.2e}")
    assert err < 1e-4, err


def check_gguf(path, cfg):
    from gguf import GGUFReader
    r = GGUFReader(str(path))
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.ggml.") or
          k.rsplit(".", 1)[-1] not in ("tokens", "token_type", "merges")}
    L = cfg["num_hidden_layers"]
    assert kv["general.architecture"] == "glm4moe", kv["general.architecture"]
    assert kv["glm4moe.block_count"] == L + 1 and kv["glm4moe.nextn_predict_layers"] == 1
    assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == PRE
    names = {t.name: t.tensor_type.name for t in r.tensors}
    nextn = sorted(n for n in names if n.startswith(f"blk.{L}.nextn."))
    assert {f"blk.{L}.nextn.{n}.weight" for n in ("eh_proj", "enorm", "hnorm", "shared_head_norm")} <= set(nextn), nextn
    types = {}
    for t in names.values():
        types[t] = types.get(t, 0) + 1
    keys = {k: v for k, v in kv.items() if k.startswith(("glm4moe.", "tokenizer.ggml.")) and k != "tokenizer.ggml.chat_template"}
    print(f"GGUF {path}: {path.stat().st_size / 2**20:.2f} MiB, {len(names)} tensors {types}\n"
          f"  MTP tensors: {nextn}\n  keys: {json.dumps(keys, default=str)}")
    return {"gguf_bytes": path.stat().st_size, "tensor_types": types, "nextn_tensors": nextn, "keys": keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", type=Path, required=True)
    ap.add_argument("--tokens", type=Path, required=True, help="prepare.py's tokens/ folder (tokenizer.json)")
    ap.add_argument("--llama-cpp", type=Path, required=True, help="folder with convert_hf_to_gguf.py, conversion/, gguf-py/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--outtype", default="q8_0", help="the converter's --outtype (f32, f16, bf16, q8_0)")
    ap.add_argument("--model-name", default="Tandem glm4moe MTP demo", help="general.name")
    ap.add_argument("--hf-dir", type=Path, help="keep the Hugging Face folder here (default: a temporary one)")
    ap.add_argument("--check-hf", action="store_true")
    args = ap.parse_args()

    gguf_py = args.llama_cpp.resolve() / "gguf-py"  # the converter's own gguf-py, here and in the converter
    sys.path.insert(0, str(gguf_py))
    ckpt = torch.load(args.ckpt, map_location="cpu", weights_only=True)
    if args.check_hf:
        check_hf(ckpt)
    with tempfile.TemporaryDirectory() as tmp:
        d = args.hf_dir or Path(tmp) / "hf"
        hf_folder(ckpt, args.tokens, d)
        env = {**os.environ, "PYTHONPATH": str(gguf_py)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-c", SHIM, str(args.llama_cpp.resolve()), str(d), "--outfile", str(args.out),
               "--outtype", args.outtype, "--model-name", args.model_name]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if res.returncode != 0:
            print(res.stdout[-4000:], res.stderr[-6000:])
            raise SystemExit("convert_hf_to_gguf.py failed")
    info = check_gguf(args.out, ckpt["config"])
    args.out.with_suffix(".export.json").write_text(json.dumps(info, indent=1, default=str))


if __name__ == "__main__":
    main()
