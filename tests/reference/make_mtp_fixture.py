#!/usr/bin/env python3
"""A tiny glm4moe with one random next-token-prediction (MTP) layer, as a GGUF fixture, and the
golden the engine's MTP head is checked against.

The model: hidden 64, 2 main layers (layer 0 dense, layer 1 MoE: 8 experts in 2 groups, top-2,
one shared expert, sigmoid router with score bias), and the MTP layer blk.2 (a MoE block plus
nextn.eh_proj, enorm, hnorm, shared_head_norm, shared_head_head; no nextn.embed_tokens, so the
engine falls back to token_embd as llama.cpp does). Weights are drawn like make_tiny_models.py's,
then the MTP layer is trained for a few hundred steps to predict the model's own greedy tokens
(distill()), so that its drafts are accepted part of the time; the MTP tensors are written into the saved transformers checkpoint as model.layers.2.* (the names
GLM-4.5's checkpoints use) and llama.cpp's convert_hf_to_gguf.py turns them into blk.2.nextn.*
(--outtype q8_0, so the file stays under 1 MiB).

The golden (tests/golden/mtp_tiny-glm4moe-mtp.json) is computed in torch from the GGUF's own
weights, dequantized by gguf-py: the main model (transformers' Glm4Moe with those weights) gives
the hidden states h_i after the final norm and the greedy next token b after the prompt; the MTP
layer (transformers' Glm4MoeDecoderLayer with blk.2's weights) runs over the pairs
(h_i, t_{i+1}) at positions i, i.e. the prompt shifted by one and then b, as llama.cpp pairs them
(src/models/glm4-moe.cpp graph_mtp: eh_proj(concat(enorm(embed(t)), hnorm(h))), the block, then
shared_head_norm and shared_head_head); its logits at the last pair are the first draft's. Drafts
2 and 3 chain: the next pair is (shared_head_norm of the last MTP row, the draft just made), at the
next position. forced_drafts: the MTP layer's pick at each pair along the model's greedy
continuation, which each speculative round's first draft must equal whatever was accepted before
(the MTP cache kept in step through verification and roll-back).

Usage: python3 tests/reference/make_mtp_fixture.py --llama-cpp <llama.cpp source>
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_models as tiny  # noqa: E402

NAME = "tiny-glm4moe-mtp"
OUT = tiny.FIXTURES / f"{NAME}.gguf"
GOLDEN = tiny.REPO / "tests" / "golden" / f"mtp_{NAME}.json"
SEED = 19
N_DRAFTS = 3
# Rounds of the teacher-forced check (golden forced_drafts).
N_FORCED = 10


def config(num_hidden_layers):
    from transformers import Glm4MoeConfig
    return Glm4MoeConfig(**tiny.COMMON, num_hidden_layers=num_hidden_layers, head_dim=32, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, attention_bias=True, n_routed_experts=8,
                         num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
                         first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                         moe_intermediate_size=64, num_nextn_predict_layers=1,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                          "partial_rotary_factor": 0.5})


def random_mtp(main, seed):
    """An MTP layer drawn like make_tiny_models.build (the block is a random 3-layer glm4moe's
    layer 2)."""
    full = tiny.build("glm4moe", config(3), seed)
    g = torch.Generator().manual_seed(seed + 1000)
    mtp = Mtp(main.config)
    h = main.config.hidden_size
    with torch.no_grad():
        mtp.block.load_state_dict({k[len("model.layers.2."):]: v for k, v in full.state_dict().items()
                                   if k.startswith("model.layers.2.")})
        mtp.block.mlp.gate.e_score_correction_bias.copy_(full.model.layers[2].mlp.gate.e_score_correction_bias)
        mtp.eh_proj.weight.copy_(0.25 * (64 / (2 * h)) ** 0.5 * torch.randn((h, 2 * h), generator=g))
        for norm in (mtp.enorm, mtp.hnorm, mtp.head_norm):
            norm.weight.copy_(1.0 + 0.3 * torch.randn((h,), generator=g))
        mtp.head.weight.copy_(0.5 * torch.randn((tiny.VOCAB, h), generator=g))
    return mtp


def hf_tensors(mtp):
    """The MTP layer's tensors by HF name (model.layers.2.*, the names GLM-4.5's checkpoints use)."""
    sd = mtp.state_dict()
    out = {f"model.layers.2.{k[len('block.'):]}": v for k, v in sd.items() if k.startswith("block.")}
    for ours, hf in (("eh_proj", "eh_proj"), ("enorm", "enorm"), ("hnorm", "hnorm"),
                     ("head_norm", "shared_head.norm"), ("head", "shared_head.head")):
        out[f"model.layers.2.{hf}.weight"] = sd[f"{ours}.weight"]
    return {k: v.detach().contiguous() for k, v in out.items() if "rotary" not in k}


def distill(main, mtp, seed, steps=1500, n_seqs=2048):
    """Trains the MTP layer on `main`'s greedy continuations of random prompts: at each pair
    (h_i, t_{i+1}) whose t_{i+2} the model generated, the MTP layer learns t_{i+2}. A random MTP
    layer drafts nothing the target accepts; a trained one exercises the accepted-draft paths
    (KV roll-back, the hidden state of an accepted draft) and gives an acceptance rate worth
    reporting."""
    g = torch.Generator().manual_seed(seed + 2000)
    seqs, starts = [], []
    with torch.no_grad():
        for _ in range(n_seqs):
            n = int(torch.randint(1, 17, (1,), generator=g))
            prompt = torch.cat([torch.tensor([[1]]), torch.randint(3, tiny.VOCAB, (1, n - 1), generator=g)], 1)
            out = main.generate(prompt, max_new_tokens=40 - n, min_new_tokens=40 - n, do_sample=False,
                                pad_token_id=0)
            seqs.append(out[0, :40])
            starts.append(n)
    seqs = torch.stack(seqs)
    with torch.no_grad():
        hidden = torch.cat([main.model(seqs[i:i + 32]).last_hidden_state for i in range(0, len(seqs), 32)])
    # Pair i: (h_i, t_{i+1}) -> t_{i+2}, learnt where t_{i+2} was generated.
    tokens, labels = seqs[:, 1:-1], seqs[:, 2:].clone()
    for row, n in enumerate(starts):
        labels[row, :max(n - 2, 0)] = -100
    opt = torch.optim.Adam(mtp.parameters(), lr=3e-3)
    for step in range(steps):
        idx = torch.randint(0, len(seqs), (64,), generator=g)
        logits, _ = mtp(main, tokens[idx], hidden[idx, :-2])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, tiny.VOCAB), labels[idx].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 250 == 0 or step == steps - 1:
            with torch.no_grad():
                ok = (logits.argmax(-1) == labels[idx])[labels[idx] != -100].float().mean()
            print(f"  distill step {step}: loss {loss.item():.3f}, draft accuracy {ok.item():.3f}", flush=True)


def save(model, extra):
    """The main model saved like make_tiny_models.save_hf, with the MTP tensors added (experts
    split per expert, as the converter wants them) and num_nextn_predict_layers = 1."""
    from safetensors.torch import load_file, save_file
    d = tiny.save_hf("glm4moe", model)
    f = next(d.glob("*.safetensors"))
    sd = load_file(f)
    for k, v in extra.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            base, ff = k[:-len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                sd[f"{base}{e}.gate_proj.weight"] = v[e, :ff].contiguous()
                sd[f"{base}{e}.up_proj.weight"] = v[e, ff:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            base = k[:-len("down_proj")]
            for e in range(v.shape[0]):
                sd[f"{base}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            sd[k] = v
    save_file(sd, f, metadata={"format": "pt"})
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["num_nextn_predict_layers"] == 1 and cfg["num_hidden_layers"] == 2, cfg
    return d


class Mtp(torch.nn.Module):
    """The MTP layer in torch: llama.cpp's graph_mtp."""

    def __init__(self, cfg):
        from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeDecoderLayer, Glm4MoeRMSNorm
        super().__init__()
        h = cfg.hidden_size
        self.eh_proj = torch.nn.Linear(2 * h, h, bias=False)
        self.enorm = Glm4MoeRMSNorm(h, cfg.rms_norm_eps)
        self.hnorm = Glm4MoeRMSNorm(h, cfg.rms_norm_eps)
        self.head_norm = Glm4MoeRMSNorm(h, cfg.rms_norm_eps)
        self.head = torch.nn.Linear(h, cfg.vocab_size, bias=False)
        self.block = Glm4MoeDecoderLayer(cfg, layer_idx=2)

    def forward(self, main, tokens, h):
        """Logits and head-normed rows of the pairs (h[i], tokens[i]) at positions 0.."""
        from transformers.masking_utils import create_causal_mask
        e = main.model.embed_tokens(tokens)
        x = self.eh_proj(torch.cat([self.enorm(e), self.hnorm(h)], dim=-1))
        pos = torch.arange(x.shape[1]).unsqueeze(0)
        mask = create_causal_mask(config=main.config, inputs_embeds=x, attention_mask=None, cache=None,
                                  position_ids=pos)
        x = self.block(x, attention_mask=mask, position_ids=pos,
                       position_embeddings=main.model.rotary_emb(x, pos))
        hn = self.head_norm(x)
        return self.head(hn), hn


NEXTN_TO_MTP = {"eh_proj.weight": "eh_proj.weight", "enorm.weight": "enorm.weight",
                "hnorm.weight": "hnorm.weight", "shared_head_norm.weight": "head_norm.weight",
                "shared_head_head.weight": "head.weight"}


def load_from_gguf(path):
    """The main model and the MTP layer with every weight from the GGUF (gguf-py's dequantization)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from transformers import AutoModelForCausalLM
    cfg = config(2)
    cfg._attn_implementation = "eager"
    main = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    mtp = Mtp(cfg).eval()
    sd, msd, exps = {}, {}, {}
    for t in GGUFReader(str(path)).tensors:
        a = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))
        a = a.reshape([int(x) for x in reversed(t.shape.tolist())])
        n = t.name
        if n in ("token_embd.weight", "output_norm.weight", "output.weight"):
            sd[{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}[n]] = a
            continue
        _, il, rest = n.split(".", 2)
        if rest.startswith("nextn."):
            msd[NEXTN_TO_MTP[rest[len("nextn."):]]] = a
            continue
        if rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
            exps.setdefault(il, {})[rest] = a
            continue
        if il == "2":
            msd[f"block.{tiny.GGUF_TO_HF[rest]}"] = a
        else:
            sd[f"model.layers.{il}.{tiny.GGUF_TO_HF[rest]}"] = a
    for il, e in exps.items():
        fused = torch.cat([e["ffn_gate_exps.weight"], e["ffn_up_exps.weight"]], dim=1)
        if il == "2":
            msd["block.mlp.experts.gate_up_proj"] = fused
        else:
            sd[f"model.layers.{il}.mlp.experts.gate_up_proj"] = fused
    for module, state in ((main, sd), (mtp, msd)):
        missing, unexpected = module.load_state_dict(state, strict=False)
        assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)
    return main, mtp


def prompts():
    g = torch.Generator().manual_seed(23)
    return [[1] + torch.randint(3, tiny.VOCAB, (n - 1,), generator=g).tolist() for n in (1, 2, 5, 9, 16, 31)]


@torch.no_grad()
def golden(main, mtp):
    cases = []
    for prompt in prompts():
        ids = torch.tensor([prompt])
        out = main.model(ids)
        h = out.last_hidden_state
        b = int(main.lm_head(h[0, -1]).argmax())
        tokens = prompt[1:] + [b]
        drafts, margins, first_logits = [], [], None
        for _ in range(N_DRAFTS):
            logits, hn = mtp(main, torch.tensor([tokens]), h)
            last = logits[0, -1]
            top = torch.topk(last, 2).values
            d = int(last.argmax())
            if first_logits is None:
                first_logits = [round(float(v), 6) for v in last]
            drafts.append(d)
            margins.append(round(float(top[0] - top[1]), 6))
            h = torch.cat([h, hn[:, -1:]], dim=1)
            tokens = tokens + [d]
        # Teacher-forced along the greedy continuation: the MTP layer's pick at each pair
        # (h_i, t_{i+1}) from the last prompt position on, as each round's first draft.
        seq = ids
        for _ in range(N_FORCED + 1):  # plain argmax (generate's min_new_tokens would mask EOS)
            seq = torch.cat([seq, main(seq).logits[:, -1:].argmax(-1)], dim=1)
        h = main.model(seq).last_hidden_state
        logits, _ = mtp(main, seq[:, 1:], h[:, :-1])
        forced = logits[0, len(prompt) - 1:len(prompt) - 1 + N_FORCED]
        top = torch.topk(forced, 2, dim=-1).values
        cases.append({"prompt_tokens": prompt, "next_token": b, "mtp_logits": first_logits,
                      "drafts": drafts, "margins": margins,
                      "continuation": seq[0, len(prompt):].tolist(),
                      "forced_drafts": forced.argmax(-1).tolist(),
                      "forced_margins": [round(float(m), 6) for m in top[:, 0] - top[:, 1]]})
    return cases


def main_():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source (has convert_hf_to_gguf.py)")
    a = ap.parse_args()
    tiny.make_tokenizer()
    model = tiny.build("glm4moe", config(2), SEED)
    # The MTP layer learns from the q8_0 model, the one the engine runs (q8_0 changes some of
    # the MoE routing, and so the greedy tokens): convert once, distill, convert again.
    mtp = random_mtp(model, SEED)
    tiny.convert(a.llama_cpp, save(model, hf_tensors(mtp)), OUT, "q8_0")
    quantized, _ = load_from_gguf(OUT)
    distill(quantized, mtp, SEED)
    hf_dir = save(model, hf_tensors(mtp))
    tiny.convert(a.llama_cpp, hf_dir, OUT, "q8_0")
    kv = tiny.gguf_kv(OUT)
    assert kv["glm4moe.block_count"] == 3 and kv["glm4moe.nextn_predict_layers"] == 1, kv
    types = tiny.tensor_types(OUT)
    nextn = sorted(t for t in types if ".nextn." in t)
    print(f"  {OUT.name}: {OUT.stat().st_size} bytes; MTP tensors: {nextn}", flush=True)
    assert OUT.stat().st_size <= 1 << 20
    main, mtp = load_from_gguf(OUT)
    # The main model read back matches the torch model up to q8_0's noise.
    tiny.compare(model, main, f"{NAME} (q8_0)")
    cases = golden(main, mtp)
    GOLDEN.write_text(json.dumps({"model": f"tests/fixtures/{NAME}.gguf", "cases": cases}, indent=1) + "\n")
    for c in cases:
        print(f"  prompt of {len(c['prompt_tokens'])}: next {c['next_token']}, drafts {c['drafts']}, "
              f"margins {c['margins']}", flush=True)
    print(f"wrote {OUT} and {GOLDEN}")


if __name__ == "__main__":
    main_()
