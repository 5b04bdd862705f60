"""glm4moe with one multi-token-prediction (MTP) layer, in plain PyTorch (the GPU machine needs nothing else).

The main model is transformers' Glm4MoeForCausalLM, operation for operation (export_gguf.py checks the
logits against transformers); parameter names are its state-dict names, so the checkpoint is a
Hugging Face checkpoint. The MTP layer is stored as GLM-4.5 stores it, as layer `num_hidden_layers`:
a full MoE decoder layer plus `eh_proj`, `enorm`, `hnorm` and `shared_head.norm`; it shares the
embedding and the output head with the main model (llama.cpp falls back to `token_embd` / `output`
when `nextn.embed_tokens` / `nextn.shared_head_head` are absent). Its input is what llama.cpp's
glm4moe MTP graph feeds it: the main model's final hidden state after `model.norm` (`h_nextn`) and the
embedding of the next token:
    x = eh_proj(concat(enorm(embed(t[i+1])), hnorm(norm(h[i]))));  x = block(x)
    logits(t[i+2]) = lm_head(shared_head.norm(x))

Routed experts are computed densely (every expert for every token, weighted by the router's combine
weights, which are zero outside the top-k): the same outputs and gradients as a sparse dispatch,
and two large matrix products instead of a loop over experts, static shapes for torch.compile. At
this model's size (16 experts of width 128 or so) that is the faster choice on a GPU.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Defaults sized so the Q8_0 GGUF stays under 16 MiB (see README.md); train.py can override them.
DEFAULT_CONFIG = dict(
    vocab_size=8192, hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
    head_dim=64, partial_rotary_factor=0.5, rope_theta=10000.0, intermediate_size=768,
    first_k_dense_replace=1, n_routed_experts=16, num_experts_per_tok=2, n_shared_experts=1,
    moe_intermediate_size=128, n_group=1, topk_group=1, routed_scaling_factor=2.5, norm_topk_prob=True,
    rms_norm_eps=1e-5, attention_bias=True, use_qk_norm=False, tie_word_embeddings=True,
    max_position_embeddings=2048, num_nextn_predict_layers=1, bos_token_id=0, eos_token_id=0,
    pad_token_id=0)


def hf_config(c):
    """config.json of the Hugging Face checkpoint (Glm4MoeForCausalLM)."""
    keys = [k for k in DEFAULT_CONFIG if k not in ("partial_rotary_factor", "rope_theta")]
    return {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_act": "silu",
            "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True, "dtype": "float32",
            "rope_parameters": {"rope_type": "default", "rope_theta": c["rope_theta"],
                                "partial_rotary_factor": c["partial_rotary_factor"]},
            **{k: c[k] for k in keys}}


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    """GQA with q/k/v biases and NeoX RoPE on the first rotary_dim dimensions of each head."""

    def __init__(self, c):
        super().__init__()
        h, nh, nkv, hd, b = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                             c["head_dim"], c["attention_bias"])
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(h, nh * hd, bias=b)
        self.k_proj = nn.Linear(h, nkv * hd, bias=b)
        self.v_proj = nn.Linear(h, nkv * hd, bias=b)
        self.o_proj = nn.Linear(nh * hd, h, bias=False)
        if c["use_qk_norm"]:
            self.q_norm = RMSNorm(hd, c["rms_norm_eps"])
            self.k_norm = RMSNorm(hd, c["rms_norm_eps"])

    def forward(self, x, cos, sin, p=0.0):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.hd)
        k = self.k_proj(x).view(B, T, self.nkv, self.hd)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        rd = cos.shape[-1]
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = torch.cat((q[..., :rd] * cos + rotate_half(q[..., :rd]) * sin, q[..., rd:]), dim=-1)
        k = torch.cat((k[..., :rd] * cos + rotate_half(k[..., :rd]) * sin, k[..., rd:]), dim=-1)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    """glm4moe's router: sigmoid scores; top-k chosen on score + e_score_correction_bias (a buffer,
    moved by train.py's load balancing, not by gradients); weights = the chosen unbiased scores,
    renormalised, times routed_scaling_factor."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.weight = nn.Parameter(torch.zeros(c["n_routed_experts"], c["hidden_size"]))
        self.register_buffer("e_score_correction_bias", torch.zeros(c["n_routed_experts"]))

    def forward(self, x):
        c, E = self.c, self.c["n_routed_experts"]
        scores = F.linear(x.float(), self.weight.float()).sigmoid()
        choice = scores.detach() + self.e_score_correction_bias
        if c["n_group"] > 1:
            g = choice.view(-1, c["n_group"], E // c["n_group"]).topk(2, dim=-1)[0].sum(-1)
            keep = torch.zeros_like(g).scatter_(1, g.topk(c["topk_group"], dim=-1)[1], 1.0)
            keep = keep.unsqueeze(-1).expand(-1, -1, E // c["n_group"]).reshape(-1, E)
            choice = choice.masked_fill(keep == 0, float("-inf"))
        idx = choice.topk(c["num_experts_per_tok"], dim=-1)[1]
        w = scores.gather(1, idx)
        if c["norm_topk_prob"]:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * c["routed_scaling_factor"], scores


class Experts(nn.Module):
    """Stacked experts as transformers 5 stores them: gate_up_proj [E, 2F, H] (gate rows first),
    down_proj [E, H, F]."""

    def __init__(self, c):
        super().__init__()
        E, H, Fd = c["n_routed_experts"], c["hidden_size"], c["moe_intermediate_size"]
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * Fd, H))
        self.down_proj = nn.Parameter(torch.empty(E, H, Fd))

    def forward(self, x, combine):
        """x [N, H], combine [N, E] (zero outside each token's top-k) -> [N, H]."""
        E, F2, H = self.gate_up_proj.shape
        gu = (x @ self.gate_up_proj.reshape(E * F2, H).t()).view(-1, E, F2)
        g, u = gu.split(F2 // 2, dim=-1)
        a = F.silu(g) * u * combine.unsqueeze(-1).to(gu.dtype)
        return a.reshape(-1, E * F2 // 2) @ self.down_proj.transpose(1, 2).reshape(E * F2 // 2, H)


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = Router(c)
        self.experts = Experts(c)
        self.shared_experts = MLP(c["hidden_size"], c["moe_intermediate_size"] * c["n_shared_experts"])

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        idx, w, scores = self.gate(x2)
        E = self.gate.c["n_routed_experts"]
        combine = torch.zeros(x2.shape[0], E, device=x.device, dtype=w.dtype).scatter(1, idx, w)
        load = torch.bincount(idx.flatten(), minlength=E)
        # DeepSeek-V3's complementary balance loss: E * sum_e f_e * P_e, f_e the fraction of routing
        # slots that went to expert e, P_e its mean normalized score; 1 when balanced
        f = load.float() / idx.numel()
        p = (scores / scores.sum(-1, keepdim=True)).mean(0)
        return self.experts(x2, combine).view_as(x) + self.shared_experts(x), (load, E * (f * p).sum())


class DecoderLayer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MoE(c) if i >= c["first_k_dense_replace"] else MLP(c["hidden_size"], c["intermediate_size"])

    def forward(self, x, cos, sin, p=0.0):
        """p: dropout on the attention weights and on each branch's output (training only)."""
        x = x + F.dropout(self.self_attn(self.input_layernorm(x), cos, sin, p), p)
        y = self.mlp(self.post_attention_layernorm(x))
        y, load = y if isinstance(y, tuple) else (y, None)
        return x + F.dropout(y, p), load


class MTPLayer(DecoderLayer):
    """A decoder layer with GLM-4.5's nextn parts (their checkpoint names)."""

    def __init__(self, c, i):
        super().__init__(c, i)
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.eh_proj = nn.Linear(2 * h, h, bias=False)
        self.enorm = RMSNorm(h, eps)
        self.hnorm = RMSNorm(h, eps)
        self.shared_head = nn.Module()
        self.shared_head.norm = RMSNorm(h, eps)


class Glm4MoeMTP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.dropout = 0.0  # set by train.py; not part of the architecture (used only in training)
        L = c["num_hidden_layers"]
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.model.layers = nn.ModuleList(
            [DecoderLayer(c, i) for i in range(L)] + [MTPLayer(c, L + j) for j in range(c["num_nextn_predict_layers"])])
        self.model.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight
        rd = int(c["head_dim"] * c["partial_rotary_factor"])
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, rd, 2).float() / rd)),
                             persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        """transformers' init (normal 0.02, norms 1, biases and router bias 0), except the output
        projections of each residual branch, scaled by 1/sqrt(2 * layers) as in GPT-2."""
        n = len(self.model.layers)
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                std = 0.02 / math.sqrt(2 * n) if name.endswith(("o_proj.weight", "down_proj.weight", "down_proj")) else 0.02
                nn.init.normal_(p, std=std)
        for b in self.buffers():
            if b is not self.inv_freq:
                b.zero_()

    def rope(self, T, device):
        f = torch.arange(T, device=device, dtype=torch.float32)[:, None] * self.inv_freq.to(device)
        emb = torch.cat((f, f), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, ids, next_ids=None):
        """ids [B, T]: main logits [B, T, V] (token i+1 from tokens <= i). With next_ids [B, T]
        (ids shifted by one: t[i+1]) also the MTP logits [B, T, V] (token i+2). Plus, for each MoE
        layer, (expert load [E] (tokens routed to each expert), balance loss), or None for a dense one."""
        L, p = self.c["num_hidden_layers"], self.dropout if self.training else 0.0
        cos, sin = self.rope(ids.shape[1], ids.device)
        h = F.dropout(self.model.embed_tokens(ids), p)
        loads = []
        for layer in self.model.layers[:L]:
            h, load = layer(h, cos, sin, p)
            loads.append(load)
        hn = self.model.norm(h)
        logits = self.lm_head(hn)
        if next_ids is None:
            return logits, None, loads
        m = self.model.layers[L]
        e = F.dropout(self.model.embed_tokens(next_ids), p)
        x = m.eh_proj(torch.cat((m.enorm(e), m.hnorm(hn)), dim=-1))
        x, load = m(x, cos, sin, p)
        loads.append(load)
        return logits, self.lm_head(m.shared_head.norm(x)), loads


def gguf_bytes(c):
    """Estimated size of the Q8_0 GGUF: matrices 34 bytes per 32 weights, vectors and the router
    (which the converter keeps in F32) 4 bytes a value; the tokenizer's strings (~0.2 MB) not counted."""
    m = Glm4MoeMTP(c)
    n = 0
    for name, p in m.named_parameters():
        n += p.numel() * (4 if p.dim() == 1 or name.endswith("gate.weight") else 34 / 32)
    return int(n + 4 * sum(b.numel() for b in m.buffers()))
