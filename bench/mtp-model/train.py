#!/usr/bin/env python3
"""Trains the glm4moe + MTP model (model.py) on prepare.py's token ids for a fixed wall-clock budget.

Loss = CE(next token) + mtp_weight * CE(token after next, from the MTP layer), the MTP gradient
flowing into the trunk as in DeepSeek-V3. Schedule by elapsed time, not steps (the step rate on the
GPU is not known in advance): linear warm-up over the first 3%, constant, then a linear decay to
zero over the last 25% (warmup-stable-decay). AdamW, bf16 autocast on CUDA, optional torch.compile
(falls back to eager if compiling fails). Expert load balancing without an auxiliary loss, as
DeepSeek-V3 / GLM-4.5: after every step each MoE layer's e_score_correction_bias moves by
bias_rate towards the experts that got fewer tokens than the mean; and, because a run of a few
thousand steps is too short for the bias alone (the router's Adam steps are far larger than
DeepSeek's), its complementary balance loss with a larger weight (--aux-weight).

At the end: held-out loss and perplexity (next token), MTP loss, and the MTP acceptance rate under
teacher forcing: how often the MTP head's argmax for token i+2 equals the main model's argmax for
token i+2 one position later, i.e. how often a one-token greedy draft would be accepted.

Writes into --out: ckpt.pt (state dict in Hugging Face names, fp32, + config), config.json (Hugging
Face), summary.json, and prints the log (run-on-gpu.sh tees it to train.log).

Usage: python3 train.py --data data/tokens --out out [--budget-s 420] [--config '{"hidden_size": 64}']
"""
import argparse
import json
import lzma
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from model import DEFAULT_CONFIG, Glm4MoeMTP, gguf_bytes, hf_config


def load_tokens(path, max_tokens=0):
    with lzma.open(path) as f:
        a = np.frombuffer(f.read(), dtype="<u2")
    return torch.from_numpy((a[:max_tokens] if max_tokens else a).astype(np.int32))


def batch(data, n, seq, gen):
    """n random windows of seq + 2 tokens (inputs, next token, token after next)."""
    starts = torch.randint(0, len(data) - seq - 2, (n,), generator=gen, device="cpu").to(data.device)
    return data[starts[:, None] + torch.arange(seq + 2, device=data.device)].long()


def losses(model, w, mtp_weight, aux_weight):
    logits, mtp_logits, moe = model(w[:, :-2], w[:, 1:-1])
    V = logits.shape[-1]
    main = F.cross_entropy(logits.float().view(-1, V), w[:, 1:-1].reshape(-1))
    mtp = F.cross_entropy(mtp_logits.float().view(-1, V), w[:, 2:].reshape(-1))
    moe = [m for m in moe if m is not None]
    aux = sum(a for _, a in moe) / len(moe)
    return main + mtp_weight * mtp + aux_weight * aux, main, mtp, [l for l, _ in moe]


def lr_at(p, peak, warmup=0.03, decay=0.25):
    if p < warmup:
        return peak * p / warmup
    return peak * min(1.0, (1.0 - p) / decay)


@torch.no_grad()
def evaluate(model, data, seq, bsz, amp, max_tokens):
    """Sums over non-overlapping windows of the held-out tokens."""
    model.eval()
    n_win = min((len(data) - 2) // seq, max(1, max_tokens // seq))
    s = dict(main_nll=0.0, mtp_nll=0.0, n=0, main_top1=0, mtp_top1=0, accept=0, n_accept=0)
    for i in range(0, n_win, bsz):
        starts = torch.arange(i, min(i + bsz, n_win), device=data.device) * seq
        w = data[starts[:, None] + torch.arange(seq + 2, device=data.device)].long()
        with amp():
            logits, mtp_logits, _ = model(w[:, :-2], w[:, 1:-1])
        logits, mtp_logits = logits.float(), mtp_logits.float()
        V = logits.shape[-1]
        s["main_nll"] += F.cross_entropy(logits.view(-1, V), w[:, 1:-1].reshape(-1), reduction="sum").item()
        s["mtp_nll"] += F.cross_entropy(mtp_logits.view(-1, V), w[:, 2:].reshape(-1), reduction="sum").item()
        s["n"] += w[:, 1:-1].numel()
        main_arg, mtp_arg = logits.argmax(-1), mtp_logits.argmax(-1)
        s["main_top1"] += (main_arg == w[:, 1:-1]).sum().item()
        s["mtp_top1"] += (mtp_arg == w[:, 2:]).sum().item()
        # draft for position i+2 made at i vs the main model's choice at i+1
        s["accept"] += (mtp_arg[:, :-1] == main_arg[:, 1:]).sum().item()
        s["n_accept"] += main_arg[:, 1:].numel()
    model.train()
    return {"heldout_tokens_scored": s["n"], "heldout_loss": s["main_nll"] / s["n"],
            "heldout_ppl": math.exp(s["main_nll"] / s["n"]), "heldout_mtp_loss": s["mtp_nll"] / s["n"],
            "heldout_top1": s["main_top1"] / s["n"], "heldout_mtp_top1": s["mtp_top1"] / s["n"],
            "mtp_acceptance_teacher_forced": s["accept"] / s["n_accept"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="prepare.py's tokens/ folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall-clock seconds of training (compile included)")
    ap.add_argument("--config", default="{}", help="JSON overrides of model.DEFAULT_CONFIG")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=256, help="sequences a step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--dropout", type=float, default=0.1,
                    help="training-only dropout: the corpus is seen dozens of times")
    ap.add_argument("--eval-every", type=float, default=60.0, help="seconds between held-out evaluations")
    ap.add_argument("--bias-rate", type=float, default=1e-3, help="router bias step a training step")
    ap.add_argument("--aux-weight", type=float, default=1e-2, help="weight of the balance loss")
    ap.add_argument("--compile", choices=("auto", "on", "off"), default="auto", help="auto: on with CUDA")
    ap.add_argument("--max-train-tokens", type=int, default=0, help="toy runs: use only the first N")
    ap.add_argument("--eval-tokens", type=int, default=2_000_000)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=float, default=10.0, help="seconds between log lines")
    args = ap.parse_args()

    t_start = time.time()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if dev.type == "cuda" else \
        (lambda: torch.autocast("cpu", enabled=False))

    meta = json.loads((args.data / "meta.json").read_text())
    cfg = {**DEFAULT_CONFIG, "vocab_size": meta["vocab_size"], "bos_token_id": meta["bos_id"],
           "eos_token_id": meta["eos_id"], "pad_token_id": meta["eos_id"], **json.loads(args.config)}
    train = load_tokens(args.data / "train.u16.xz", args.max_train_tokens).to(dev)
    held = load_tokens(args.data / "heldout.u16.xz").to(dev)
    print(f"device {dev} ({torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}), torch {torch.__version__}; "
          f"train {len(train):,} tokens, held-out {len(held):,}; loaded in {time.time() - t_start:.1f} s", flush=True)

    model = Glm4MoeMTP(cfg).to(dev)
    model.dropout = args.dropout
    n_params = sum(p.numel() for p in model.parameters())
    print(f"config {json.dumps(cfg)}\nparams {n_params:,}; Q8_0 GGUF ~{gguf_bytes(cfg) / 2**20:.2f} MiB", flush=True)

    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed_tokens" not in name and not name.endswith("gate.weight") else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    routers = [l.mlp.gate for l in model.model.layers if hasattr(l.mlp, "gate")]

    use_compile = args.compile == "on" or (args.compile == "auto" and dev.type == "cuda")
    step_fn = torch.compile(model) if use_compile else model
    gen = torch.Generator().manual_seed(args.seed)

    step, tokens_seen, t0, last_log, last_eval, curve, evals = 0, 0, time.time(), 0.0, 0.0, [], []
    logged_tokens = 0
    while True:
        elapsed = time.time() - t0
        if elapsed >= args.budget_s:
            break
        lr = lr_at(elapsed / args.budget_s, args.lr)
        for g in opt.param_groups:
            g["lr"] = lr
        w = batch(train, args.batch, args.seq, gen)
        try:
            with amp():
                loss, main_l, mtp_l, loads = losses(step_fn, w, args.mtp_weight, args.aux_weight)
            loss.backward()
        except Exception as e:  # a compiler failure: go on in eager mode
            if step_fn is model:
                raise
            print(f"torch.compile failed ({type(e).__name__}: {str(e)[:300]}); continuing in eager mode", flush=True)
            opt.zero_grad(set_to_none=True)
            step_fn = model
            continue
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for r, load in zip(routers, loads):
                load = load.float()
                r.e_score_correction_bias += args.bias_rate * torch.sign(load.mean() - load)
        step += 1
        tokens_seen += w[:, :-2].numel()
        if time.time() - last_log >= args.log_every or step == 1:
            rate = (tokens_seen - logged_tokens) / max(time.time() - last_log, 1e-9) if step > 1 else 0.0
            last_log, logged_tokens = time.time(), tokens_seen
            el = last_log - t0
            imb = max((l.max() / l.float().mean()).item() for l in loads)
            row = {"step": step, "s": round(el, 1), "tokens": tokens_seen, "lr": lr, "loss": round(main_l.item(), 4),
                   "mtp_loss": round(mtp_l.item(), 4), "grad_norm": round(gnorm.item(), 3),
                   "max_expert_load_over_mean": round(imb, 2)}
            curve.append(row)
            print(f"step {step:6d}  {el:6.1f}s  lr {lr:.2e}  loss {row['loss']:.4f}  mtp {row['mtp_loss']:.4f}  "
                  f"|g| {row['grad_norm']:.2f}  load max/mean {imb:.2f}  {rate:,.0f} tok/s",
                  flush=True)
        if time.time() - t0 - last_eval >= args.eval_every:
            # a quick held-out check (not used for any choice), to see over-fitting as it starts
            last_eval = time.time() - t0
            ev = evaluate(model, held, args.seq, 32, amp, 500_000)
            evals.append({"step": step, "s": round(last_eval, 1), "train_loss": round(main_l.item(), 4),
                          "heldout_loss": round(ev["heldout_loss"], 4), "heldout_mtp_loss": round(ev["heldout_mtp_loss"], 4)})
            print(f"  eval at {last_eval:.0f}s: held-out loss {ev['heldout_loss']:.4f} (ppl {ev['heldout_ppl']:.1f}), "
                  f"mtp {ev['heldout_mtp_loss']:.4f}", flush=True)
    train_s = time.time() - t0
    print(f"trained {step} steps, {tokens_seen:,} tokens ({tokens_seen / len(train):.2f} epochs) in {train_s:.1f} s",
          flush=True)

    t_eval = time.time()
    ev = evaluate(model, held, args.seq, 32, amp, args.eval_tokens)
    print(f"held-out: loss {ev['heldout_loss']:.4f}  ppl {ev['heldout_ppl']:.2f}  mtp loss {ev['heldout_mtp_loss']:.4f}  "
          f"top1 {ev['heldout_top1']:.3f}  mtp top1 {ev['heldout_mtp_top1']:.3f}  "
          f"MTP acceptance (teacher forced) {ev['mtp_acceptance_teacher_forced']:.3f}  "
          f"({ev['heldout_tokens_scored']:,} tokens, {time.time() - t_eval:.1f} s)", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items() if k != "lm_head.weight" or not cfg["tie_word_embeddings"]}
    torch.save({"config": cfg, "state_dict": sd}, args.out / "ckpt.pt")
    (args.out / "config.json").write_text(json.dumps(hf_config(cfg), indent=1))
    summary = {"config": cfg, "params": n_params, "steps": step, "train_tokens_seen": tokens_seen,
               "epochs": tokens_seen / len(train), "train_seconds": train_s, "tokens_per_second": tokens_seen / train_s,
               "final_train_loss": curve[-1]["loss"] if curve else None, **ev,
               "args": {k: str(v) for k, v in vars(args).items()}, "device": str(dev), "torch": torch.__version__,
               "compiled": step_fn is not model, "data": meta, "curve": curve, "evals": evals,
               "total_seconds": time.time() - t_start}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.out}/ckpt.pt, config.json, summary.json ({time.time() - t_start:.1f} s in all)", flush=True)


if __name__ == "__main__":
    main()
