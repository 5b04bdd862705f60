#!/usr/bin/env python3
"""Checks the exported GGUF in Tandem against PyTorch (model.py with the GGUF's own weights,
dequantized by gguf-py, so both compute on the same numbers), and measures the MTP head:

 1. tokenizer: Tandem's prompt ids (`tandem run --json`) == Hugging Face tokenizers' (tokenizer.json),
    BOS included, on prompts with digits, punctuation, newlines, apostrophes and non-ASCII text;
 2. greedy decoding: Tandem's tokens (--temperature 0) == PyTorch's (full recomputation, f32);
 3. perplexity, llama-perplexity's method (tests/reference/README.md), Tandem vs PyTorch;
 4. MTP in PyTorch on the greedy continuations: how often the MTP head's draft for the token after
    next equals the greedy token there (the acceptance of a one-token draft), and the same with the
    draft chained n times (feeding the MTP layer its own shared_head_norm output as h, as llama.cpp
    does), i.e. the mean number of tokens a verify pass would accept with --draft-max n.

Usage: python3 check_tandem.py --gguf M.gguf --tokens data/tokens --tandem target/release/tandem
       [--text tests/data/sotu_1918_wilson.txt] [--llama-cpp data/llama.cpp (for gguf-py)]
Set VK_ICD_FILENAMES etc. for a software Vulkan adapter as the repository README says.
"""
import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import DEFAULT_CONFIG, Glm4MoeMTP  # noqa: E402

PROMPTS = ["The", "Fellow-Citizens of the Senate and House of Representatives:",
           "In the year 1861, the war", "And God said, Let there be", "Love, n.",
           "It's 3:45 p.m.; we'll see -- \"maybe\".\nNext line:  two  spaces", "Café déjà vu — naïve"]
N_GREEDY = 32
GGUF_TO_HF = {
    "attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight", "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight", "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight", "ffn_down_exps.weight": "mlp.experts.down_proj",
    "nextn.eh_proj.weight": "eh_proj.weight", "nextn.enorm.weight": "enorm.weight", "nextn.hnorm.weight": "hnorm.weight",
    "nextn.shared_head_norm.weight": "shared_head.norm.weight",
}


def load_gguf(path):
    """model.py's model with every weight read from the GGUF (dequantized) and the config from its keys."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(str(path))
    kv = {k: f.contents() for k, f in r.fields.items() if k.startswith("glm4moe.")}
    g = lambda k: kv[f"glm4moe.{k}"]
    L = g("block_count") - g("nextn_predict_layers")
    tied = not any(t.name == "output.weight" for t in r.tensors)
    cfg = {**DEFAULT_CONFIG, "vocab_size": len(r.fields["tokenizer.ggml.tokens"].contents()),
           "hidden_size": g("embedding_length"), "num_hidden_layers": L, "num_attention_heads": g("attention.head_count"),
           "num_key_value_heads": g("attention.head_count_kv"), "head_dim": g("attention.key_length"),
           "partial_rotary_factor": g("rope.dimension_count") / g("attention.key_length"),
           "rope_theta": g("rope.freq_base"), "intermediate_size": g("feed_forward_length"),
           "first_k_dense_replace": g("leading_dense_block_count"), "n_routed_experts": g("expert_count"),
           "num_experts_per_tok": g("expert_used_count"), "n_shared_experts": g("expert_shared_count"),
           "moe_intermediate_size": g("expert_feed_forward_length"), "n_group": g("expert_group_count"),
           "topk_group": g("expert_group_used_count"), "routed_scaling_factor": g("expert_weights_scale"),
           "norm_topk_prob": g("expert_weights_norm"), "rms_norm_eps": g("attention.layer_norm_rms_epsilon"),
           "tie_word_embeddings": tied, "num_nextn_predict_layers": g("nextn_predict_layers")}
    sd, exps = {}, {}
    for t in r.tensors:
        a = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))
        a = a.reshape([int(x) for x in reversed(t.shape.tolist())])
        if t.name == "token_embd.weight":
            sd["model.embed_tokens.weight"] = a
        elif t.name == "output_norm.weight":
            sd["model.norm.weight"] = a
        elif t.name == "output.weight":
            sd["lm_head.weight"] = a
        else:
            _, il, rest = t.name.split(".", 2)
            if rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
                exps.setdefault(il, {})[rest] = a
            else:
                sd[f"model.layers.{il}.{GGUF_TO_HF[rest]}"] = a
    for il, e in exps.items():
        sd[f"model.layers.{il}.mlp.experts.gate_up_proj"] = torch.cat([e["ffn_gate_exps.weight"], e["ffn_up_exps.weight"]], 1)
    m = Glm4MoeMTP(cfg).eval()
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and not [k for k in missing if not (k == "lm_head.weight" and tied)], (missing, unexpected)
    return m, cfg


def tandem(exe, *args):
    res = subprocess.run([str(exe), *map(str, args), "--json", "-q"], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"tandem {' '.join(map(str, args))} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


@torch.no_grad()
def greedy(model, ids, n):
    ids = list(ids)
    for _ in range(n):
        ids.append(int(model(torch.tensor([ids]))[0][0, -1].argmax()))
    return ids


@torch.no_grad()
def mtp_acceptance(model, seq, n_prompt, draft_max):
    """On a greedy sequence: for each position i in the continuation, chain the MTP head up to
    draft_max times from the main model's h at i-1 and the token at i, and count how many drafts in
    a row equal the greedy tokens. Returns (one-token acceptance rate, mean accepted per pass)."""
    L = model.c["num_hidden_layers"]
    m = model.model.layers[L]
    ids = torch.tensor([seq])
    cos, sin = model.rope(len(seq) + draft_max, ids.device)
    h = model.model.embed_tokens(ids)
    for layer in model.model.layers[:L]:
        h, _ = layer(h, cos[:len(seq)], sin[:len(seq)])
    hn = model.model.norm(h)[0]
    first, accepted = [], []
    for i in range(n_prompt, len(seq) - 1):
        # state of the MTP layer's KV cache: its inputs at every earlier position, as in decoding
        e = model.model.embed_tokens(ids[0, 1:i + 1])
        xs = m.eh_proj(torch.cat((m.enorm(e), m.hnorm(hn[:i])), -1))
        tok, hprev, run = seq[i], None, 0
        for d in range(draft_max):
            if d > 0:
                x_new = m.eh_proj(torch.cat((m.enorm(model.model.embed_tokens(torch.tensor([tok]))), m.hnorm(hprev)), -1))
                xs = torch.cat((xs, x_new), 0)
            n = xs.shape[0]
            y, _ = m(xs[None], cos[:n], sin[:n])
            hprev = m.shared_head.norm(y[0, -1:])
            tok = int(model.lm_head(hprev)[0].argmax())
            pos = i + 1 + d
            if pos >= len(seq) or tok != seq[pos]:
                break
            run += 1
        first.append(run > 0)
        accepted.append(run)
    return sum(first) / len(first), sum(accepted) / len(accepted)


@torch.no_grad()
def perplexity(model, tokens, bos, ctx=128, chunks=4):
    nll, n = 0.0, 0
    for c in range(chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        chunk[0] = bos
        logp = torch.log_softmax(model(torch.tensor([chunk]))[0][0].double(), -1)
        for i in range(ctx // 2, ctx - 1):
            nll -= float(logp[i, chunk[i + 1]])
            n += 1
    return math.exp(nll / n), n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--tokens", type=Path, required=True, help="prepare.py's tokens/ folder (tokenizer.json)")
    ap.add_argument("--tandem", type=Path, required=True)
    ap.add_argument("--text", type=Path, default=HERE.parents[1] / "tests/data/sotu_1918_wilson.txt")
    ap.add_argument("--llama-cpp", type=Path, default=HERE / "data/llama.cpp", help="for its gguf-py")
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()
    sys.path.insert(0, str(args.llama_cpp / "gguf-py"))
    torch.set_num_threads(1)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(args.tokens / "tokenizer.json"))
    model, cfg = load_gguf(args.gguf)
    bos = cfg["bos_token_id"]
    res = {"cases": []}
    ok = True
    for p in PROMPTS:
        want = [bos] + tok.encode(p, add_special_tokens=False).ids
        t = tandem(args.tandem, "run", "-m", args.gguf, "-p", p, "-n", N_GREEDY, "--temperature", 0, "--ignore-eos")
        ref = greedy(model, want, N_GREEDY)[len(want):]
        same_ids = t["prompt_tokens"] == want
        agree = next((i for i, (a, b) in enumerate(zip(t["tokens"], ref)) if a != b), len(ref))
        acc1, per_pass = mtp_acceptance(model, want + ref, len(want), args.draft_max)
        ok &= same_ids and agree == len(ref)
        res["cases"].append({"prompt": p, "tokenizer_same": same_ids, "greedy_agree": agree, "n": len(ref),
                             "mtp_accept_1": acc1, f"mtp_accepted_per_pass_{args.draft_max}": per_pass,
                             "text": tok.decode(ref)})
        print(f"{p[:40]!r:44} ids {'same' if same_ids else 'DIFFER'}  greedy {agree}/{len(ref)}  "
              f"MTP accept {acc1:.2f}, {per_pass:.2f} a pass (draft-max {args.draft_max})  -> {tok.decode(ref)[:70]!r}")
        if not same_ids:
            print(f"   tandem {t['prompt_tokens']}\n   hf     {want}")
    text = args.text.read_text(encoding="utf-8")
    ppl, n = perplexity(model, tok.encode(text, add_special_tokens=False).ids, bos)
    t = tandem(args.tandem, "perplexity", "-m", args.gguf, "-f", args.text, "-c", 128, "--chunks", 4)
    res["perplexity"] = {"text": str(args.text.name), "torch": ppl, "tandem": t["perplexity"], "scored_tokens": n}
    rel = abs(t["perplexity"] - ppl) / ppl
    ok &= rel < 0.02
    cs = res["cases"]
    res["mtp_accept_1_mean"] = sum(c["mtp_accept_1"] for c in cs) / len(cs)
    res[f"mtp_accepted_per_pass_{args.draft_max}_mean"] = sum(c[f"mtp_accepted_per_pass_{args.draft_max}"] for c in cs) / len(cs)
    print(f"perplexity ({args.text.name}, ctx 128, 4 chunks): torch {ppl:.4f}, tandem {t['perplexity']:.4f} ({rel:.2%})")
    print(f"MTP (PyTorch, greedy continuations): one-token acceptance {res['mtp_accept_1_mean']:.3f}, "
          f"accepted a verify pass with draft-max {args.draft_max}: {res[f'mtp_accepted_per_pass_{args.draft_max}_mean']:.2f}")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))
    print("all checks passed" if ok else "CHECKS FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
