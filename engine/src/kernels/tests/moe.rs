//! moe_router, moe_sort and the routed expert kernels (decode and batched) against plain CPU
//! references: seeded random logits on a coarse grid (so ties in router scores are common),
//! random quantized expert weights (`quant::random`) dequantized on the CPU for the reference.
//! The decode expert kernels also run in their subgroup and portable variants (`runs`).

use super::{
    assert_close, gpu, matvec_shapes, random_f32, read, run_dispatches, step_buffer, upload,
};
use crate::gpu::Gpu;
use crate::kernels::moe::{self, Gating, GpuExperts, MoeBuffers, Routing};
use crate::kernels::{route_slot_words, Activation, MatvecShape, StepInfo};
use crate::quant::random::random_weights;
use crate::quant::{dequantize, gpu_bytes, GgmlType};

/// Logits on a grid of 1/4 in [-2, 2]: many exact ties.
fn grid_logits(seed: u64, n: usize) -> Vec<f32> {
    random_f32(seed, n, 1.0)
        .iter()
        .map(|v| (v * 8.0).round() / 4.0)
        .collect()
}

/// Adds `v` to expert e's limbs in a slot of router shares of `ne` experts, as
/// common/route_share.wgsl's add_share does.
pub fn add_share_ref(slot: &mut [u32], e: usize, ne: usize, v: f64) {
    let a = v.abs().min(268435456.0);
    let hi = (a / 256.0).floor();
    let r = (a - hi * 256.0) * 4096.0;
    let mid = r.floor();
    let lo = ((r - mid) * 1048576.0).floor();
    let o = if v < 0.0 { 3 * ne } else { 0 } + e;
    for (i, limb) in [lo, mid, hi].into_iter().enumerate() {
        slot[o + i * ne] = slot[o + i * ne].wrapping_add(limb as u32);
    }
}

/// The value of expert e's limbs in a slot of router shares of `ne` experts.
pub fn share_value(slot: &[u32], e: usize, ne: usize) -> f64 {
    let limbs = |o: usize| {
        slot[o] as f64 / 4294967296.0
            + slot[o + ne] as f64 / 4096.0
            + slot[o + 2 * ne] as f64 * 256.0
    };
    limbs(e) - limbs(3 * ne + e)
}

fn better(v: f32, i: usize, w: f32, j: usize) -> bool {
    v > w || (v == w && i < j)
}

/// Plain top-k routing of one token (see common/route.wgsl for the rules).
pub fn route_ref(logits: &[f32], bias: Option<&[f32]>, r: &Routing) -> Vec<(u32, f32)> {
    let n = r.n_expert as usize;
    let (prob, mut sel): (Vec<f32>, Vec<f32>) = match r.gating {
        Gating::Softmax => {
            let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = logits.iter().map(|l| (l - m).exp()).collect();
            let s: f32 = e.iter().sum();
            let p: Vec<f32> = e.iter().map(|v| v / s).collect();
            (p.clone(), p)
        }
        Gating::Sigmoid => {
            let p: Vec<f32> = logits.iter().map(|l| 1.0 / (1.0 + (-l).exp())).collect();
            let s = p
                .iter()
                .enumerate()
                .map(|(i, v)| v + bias.map_or(0.0, |b| b[i]))
                .collect();
            (p, s)
        }
    };
    if r.n_group > 1 {
        let g = r.n_group as usize;
        let gs = n / g;
        let score: Vec<f32> = (0..g)
            .map(|gi| {
                let mut v: Vec<f32> = sel[gi * gs..(gi + 1) * gs].to_vec();
                v.sort_by(|a, b| b.total_cmp(a));
                v[0] + v[1]
            })
            .collect();
        for (i, s) in sel.iter_mut().enumerate() {
            let gi = i / gs;
            let rank = (0..g)
                .filter(|&h| better(score[h], h, score[gi], gi))
                .count();
            if rank >= r.topk_group as usize {
                *s = -3.0e38;
            }
        }
    }
    let mut out = Vec::new();
    let mut taken = vec![false; n];
    for _ in 0..r.k {
        let mut best = usize::MAX;
        for i in 0..n {
            if !taken[i] && (best == usize::MAX || better(sel[i], i, sel[best], best)) {
                best = i;
            }
        }
        taken[best] = true;
        out.push((best as u32, prob[best]));
    }
    let sum: f32 = out.iter().map(|p| p.1).sum();
    let d = if r.norm {
        sum + if r.gating == Gating::Sigmoid {
            1e-20
        } else {
            0.0
        }
    } else {
        1.0
    };
    out.iter().map(|&(i, w)| (i, w / d * r.scale)).collect()
}

async fn read_route(gpu: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<(u32, f32)> {
    let w = read(gpu, b, 2 * n).await;
    w.chunks(2).map(|p| (p[0].to_bits(), p[1])).collect()
}

fn routings() -> Vec<(&'static str, Routing, bool)> {
    let soft = |n_expert, k, norm| Routing {
        n_expert,
        k,
        gating: Gating::Softmax,
        norm,
        scale: 1.0,
        n_group: 1,
        topk_group: 1,
    };
    let sig = |n_expert, k, norm, scale, n_group, topk_group| Routing {
        n_expert,
        k,
        gating: Gating::Sigmoid,
        norm,
        scale,
        n_group,
        topk_group,
    };
    vec![
        ("softmax top-2 norm", soft(8, 2, true), false),
        ("softmax k=1", soft(8, 1, false), false),
        ("softmax all selected", soft(8, 8, false), false),
        ("softmax 128 top-8", soft(128, 8, true), false),
        ("softmax 300 top-5", soft(300, 5, false), false),
        ("softmax 1024 top-16", soft(1024, 16, true), false),
        ("sigmoid bias groups", sig(16, 4, true, 2.5, 4, 2), true),
        ("sigmoid no bias", sig(8, 3, false, 1.0, 1, 1), false),
        ("sigmoid all selected", sig(8, 8, true, 1.0, 2, 2), true),
        (
            "sigmoid 256 groups 8/4 top-8",
            sig(256, 8, true, 2.5, 8, 4),
            true,
        ),
        ("sigmoid 64 groups k=1", sig(64, 1, false, 1.0, 8, 1), true),
    ]
}

async fn moe_router_against_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    for (ci, (name, r, with_bias)) in routings().into_iter().enumerate() {
        for n_tokens in [1usize, 3, 16, 40] {
            let ne = r.n_expert as usize;
            let logits = grid_logits(ci as u64 * 100 + n_tokens as u64, n_tokens * ne);
            let bias: Vec<f32> = grid_logits(ci as u64 + 7, ne)
                .iter()
                .map(|v| v / 4.0)
                .collect();
            let lb = upload(&gpu, "logits", &logits);
            let bb = upload(&gpu, "bias", &bias);
            let route = gpu
                .storage("route", (n_tokens * r.k as usize * 8) as u64)
                .unwrap();
            let d = moe::router(
                &gpu,
                &lb,
                with_bias.then_some(&bb),
                &route,
                &step,
                &dummy,
                &r,
            )
            .unwrap();
            let s = StepInfo::new(n_tokens as u32, 0, 1);
            run_dispatches(&gpu, &[&d], s, &step).await;
            let got = read_route(&gpu, &route, n_tokens * r.k as usize).await;
            for t in 0..n_tokens {
                let want = route_ref(
                    &logits[t * ne..(t + 1) * ne],
                    with_bias.then_some(&bias[..]),
                    &r,
                );
                let g = &got[t * r.k as usize..(t + 1) * r.k as usize];
                let ids: Vec<u32> = g.iter().map(|p| p.0).collect();
                let want_ids: Vec<u32> = want.iter().map(|p| p.0).collect();
                assert_eq!(
                    ids, want_ids,
                    "moe_router {name} n_tokens {n_tokens} token {t}: ids"
                );
                for (a, b) in g.iter().zip(&want) {
                    assert!(
                        (a.1 - b.1).abs() <= 1e-5 * b.1.abs().max(1.0),
                        "moe_router {name} n_tokens {n_tokens} token {t}: weight {} vs {}",
                        a.1,
                        b.1
                    );
                }
            }
        }
    }
}

/// Dequantized `[n_expert, rows, cols]` weights and their GGUF bytes.
fn expert_weights(ty: GgmlType, n: usize, seed: u64, amp: f32) -> (Vec<u8>, Vec<f32>) {
    let bytes = random_weights(ty, n as u64, amp, seed).unwrap();
    let mut vals = vec![0.0; n];
    dequantize(ty, &bytes, &mut vals).unwrap();
    (bytes, vals)
}

fn matvec(w: &[f32], x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows)
        .map(|r| (0..cols).map(|k| w[r * cols + k] * x[k]).sum())
        .collect()
}

fn silu(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

struct Case {
    ty_gate_up: GgmlType,
    ty_down: GgmlType,
    n_embd: usize,
    n_ff: usize,
    /// Experts per chunk (splits the expert tensors like a browser's binding limit would).
    per_chunk: Option<u32>,
}

async fn run_moe(
    case: &Case,
    name: &str,
    r: &Routing,
    with_bias: bool,
    n_tokens: usize,
    shape: Option<MatvecShape>,
    seed: u64,
) {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 4).unwrap();
    let (ne, ff, emb) = (r.n_expert as usize, case.n_ff, case.n_embd);
    let k = r.k as usize;
    let amp_in = 1.0 / (emb as f32).sqrt();
    let (gb, gw) = expert_weights(case.ty_gate_up, ne * ff * emb, seed, 2.0 * amp_in);
    let (ub, uw) = expert_weights(case.ty_gate_up, ne * ff * emb, seed + 1, 2.0 * amp_in);
    let (db, dw) = expert_weights(
        case.ty_down,
        ne * emb * ff,
        seed + 2,
        2.0 / (ff as f32).sqrt(),
    );
    let budget = |ty: GgmlType, rows: usize, cols: usize| match case.per_chunk {
        Some(n) => gpu_bytes(ty, n as u64 * (rows * cols) as u64).unwrap(),
        None => u64::MAX,
    };
    let gate_up = GpuExperts::upload(
        &gpu,
        "ffn_gate_up_exps",
        case.ty_gate_up,
        &[&gb, &ub],
        ne as u32,
        ff as u32,
        emb as u32,
        budget(case.ty_gate_up, 2 * ff, emb),
    )
    .unwrap();
    let down = GpuExperts::upload(
        &gpu,
        "ffn_down_exps",
        case.ty_down,
        &[&db],
        ne as u32,
        emb as u32,
        ff as u32,
        budget(case.ty_down, emb, ff),
    )
    .unwrap();
    if let Some(n) = case.per_chunk {
        assert_eq!(
            gate_up.chunks.len(),
            ne.div_ceil(n as usize),
            "{name}: chunks"
        );
    }
    let x = random_f32(seed + 3, n_tokens * emb, 1.0);
    let norm_w = random_f32(seed + 4, emb, 1.0);
    let eps = 1e-5;
    let xn: Vec<f32> = x
        .chunks(emb)
        .flat_map(|row| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / emb as f32 + eps).sqrt();
            row.iter()
                .zip(&norm_w)
                .map(|(v, g)| v * inv * g)
                .collect::<Vec<_>>()
        })
        .collect();
    let logits = grid_logits(seed + 5, n_tokens * ne);
    let bias: Vec<f32> = grid_logits(seed + 6, ne).iter().map(|v| v / 4.0).collect();
    let resid0 = random_f32(seed + 7, n_tokens * emb, 1.0);

    // Decode steps also route from the router's shares (kernels::RouteShare): the logits
    // over the norm's scale, encoded in slot 1 as the attention output would have summed them.
    let words = route_slot_words(r.n_expert) as usize;
    let b = MoeBuffers::new(&gpu, r, emb as u32, ff as u32, n_tokens as u32, 2).unwrap();
    gpu.queue
        .write_buffer(&b.logits, 0, bytemuck::cast_slice(&logits));
    let (xb, xnb, nwb, bb) = (
        upload(&gpu, "x", &x),
        upload(&gpu, "xn", &xn),
        upload(&gpu, "norm", &norm_w),
        upload(&gpu, "bias", &bias),
    );
    let from_shares = n_tokens == 1 && r.routes_in_gate_up();
    if from_shares {
        let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f32>() / emb as f32 + eps).sqrt();
        let mut slots = vec![0u32; 2 * words];
        slots[..words].fill(0xdead); // another layer's slot, not read
        for (e, l) in logits.iter().enumerate() {
            add_share_ref(&mut slots[words..], e, ne, (l / inv) as f64);
        }
        gpu.queue
            .write_buffer(&b.shares, 0, bytemuck::cast_slice(&slots));
    }
    let resid = upload(&gpu, "resid", &resid0);
    let mut got = Vec::new();
    for shares in [None, Some(words as u32)] {
        if shares.is_some() && !from_shares {
            continue;
        }
        gpu.queue
            .write_buffer(&resid, 0, bytemuck::cast_slice(&resid0));
        let d = moe::routed(
            &gpu,
            r,
            with_bias.then_some(&bb),
            &gate_up,
            &down,
            &xb,
            Some((&nwb, eps)),
            &xnb,
            &resid,
            &b,
            shares,
            &step,
            &dummy,
            Activation::Silu,
            shape,
        )
        .unwrap();
        let s = StepInfo::new(n_tokens as u32, 0, 1);
        run_dispatches(&gpu, &d.iter().collect::<Vec<_>>(), s, &step).await;
        got.push(read(&gpu, &resid, n_tokens * emb).await);
    }

    let mut want = resid0.clone();
    for t in 0..n_tokens {
        let routes = route_ref(
            &logits[t * ne..(t + 1) * ne],
            with_bias.then_some(&bias[..]),
            r,
        );
        let xt = &xn[t * emb..(t + 1) * emb];
        for &(e, wt) in &routes {
            let e = e as usize;
            let g = matvec(&gw[e * ff * emb..(e + 1) * ff * emb], xt, ff, emb);
            let u = matvec(&uw[e * ff * emb..(e + 1) * ff * emb], xt, ff, emb);
            let h: Vec<f32> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
            let y = matvec(&dw[e * emb * ff..(e + 1) * emb * ff], &h, emb, ff);
            for i in 0..emb {
                want[t * emb + i] += wt * y[i];
            }
        }
    }
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let decode = shape.map_or("the adapter's choice".into(), |s| {
        format!("rows/wg {} subgroups {}", s.rows, s.uses_subgroups(&gpu))
    });
    let shape = format!(
        "{name} {}/{} n_embd {emb} n_ff {ff} n_expert {ne} k {k} n_tokens {n_tokens} chunks {:?} decode {decode}",
        case.ty_gate_up, case.ty_down, case.per_chunk,
    );
    // The matrix-unit kernels of long passes round x, the weights and h to f16 (2^-11 relative).
    let (nmse, rel) = if gpu.features.coop && n_tokens > crate::kernels::mat::MATVEC_BATCH as usize
    {
        (1e-5, 3e-3)
    } else {
        (1e-9, 2e-4)
    };
    for (got, from) in got.iter().zip(["logits", "shares"]) {
        let shape = format!("{shape} from {from}");
        assert_close("moe", &shape, got, &want, nmse, rel * scale.max(1.0));
    }
    if n_tokens > moe::PER_ROUTE_MAX as usize {
        // The token lists: every route slot once, grouped by expert, tokens ascending.
        let lists = read(
            &gpu,
            &b.lists,
            moe::lists_len(r.n_expert, r.k, n_tokens as u32) as usize,
        )
        .await;
        let lists: Vec<u32> = lists.iter().map(|v| v.to_bits()).collect();
        let route = read_route(&gpu, &b.route, n_tokens * k).await;
        let head = ne + 1;
        assert_eq!(lists[ne] as usize, n_tokens * k, "{shape}: lists total");
        for e in 0..ne {
            let slots = &lists[head + lists[e] as usize..head + lists[e + 1] as usize];
            assert!(
                slots.windows(2).all(|w| w[0] < w[1]),
                "{shape}: expert {e} order"
            );
            assert!(
                slots.iter().all(|&s| route[s as usize].0 == e as u32),
                "{shape}: expert {e}"
            );
        }
    }
}

/// Token counts (the decode kernels' one and a few, up to `PER_ROUTE_MAX`; the batched kernels'
/// 64-token tiles: partly filled, and with 70 tokens where every expert is selected, one full
/// tile and a second one), and for decode the shapes of its expert kernels: 4 rows per workgroup
/// (64 threads a row: 8 subgroups on lavapipe) and 1 row (the whole workgroup), with subgroups
/// where the adapter has them and without, 2 and 4 rows a thread group (moe_gate_up's `RPT`),
/// and the adapter's choice.
fn runs(gpu: &Gpu) -> Vec<(usize, Option<MatvecShape>)> {
    let decode = matvec_shapes(gpu, &[4, 1])
        .into_iter()
        .map(|s| (1, Some(s)));
    let passes = [3, moe::PER_ROUTE_MAX as usize, 16, 40, 70];
    decode.chain(passes.map(|n| (n, None))).collect()
}

async fn moe_experts_f32_q8_0() {
    let routings = routings();
    for (i, (ty_gu, ty_d, per_chunk)) in [
        (GgmlType::F32, GgmlType::F32, None),
        (GgmlType::Q8_0, GgmlType::Q8_0, None),
        (GgmlType::Q8_0, GgmlType::F32, Some(3)),
        (GgmlType::Q4_1, GgmlType::Q8_0, None),
        (GgmlType::IQ4NL, GgmlType::Q8_0, None),
    ]
    .into_iter()
    .enumerate()
    {
        let case = Case {
            ty_gate_up: ty_gu,
            ty_down: ty_d,
            n_embd: 160,
            n_ff: 96,
            per_chunk,
        };
        for (name, r, bias) in routings.iter().filter(|(_, r, _)| r.n_expert <= 16) {
            for (n_tokens, shape) in runs(&*gpu().await) {
                run_moe(
                    &case,
                    name,
                    r,
                    *bias,
                    n_tokens,
                    shape,
                    1000 * i as u64 + n_tokens as u64,
                )
                .await;
            }
        }
    }
}

/// A layer of more experts than moe_gate_up routes itself (`ROUTE_IN_GATE_UP_MAX`): passes of a
/// few tokens take moe_router's routes, as longer ones do.
async fn moe_experts_routed_by_moe_router() {
    let (name, r, bias) = routings()
        .into_iter()
        .find(|(_, r, _)| r.n_expert > moe::ROUTE_IN_GATE_UP_MAX)
        .expect("a routing past ROUTE_IN_GATE_UP_MAX");
    let case = Case {
        ty_gate_up: GgmlType::Q8_0,
        ty_down: GgmlType::Q8_0,
        n_embd: 64,
        n_ff: 32,
        per_chunk: None,
    };
    for n_tokens in [1, 3, moe::PER_ROUTE_MAX as usize, 16] {
        run_moe(
            &case,
            name,
            &r,
            bias,
            n_tokens,
            None,
            9000 + n_tokens as u64,
        )
        .await;
    }
}

async fn moe_experts_k_quants() {
    let routings = routings();
    for (i, (ty_gu, ty_d, per_chunk)) in [
        (GgmlType::Q4K, GgmlType::Q6K, None),
        (GgmlType::Q4K, GgmlType::Q4K, Some(3)),
        (GgmlType::Q5K, GgmlType::Q6K, None),
        (GgmlType::Q3K, GgmlType::IQ4XS, None),
    ]
    .into_iter()
    .enumerate()
    {
        let case = Case {
            ty_gate_up: ty_gu,
            ty_down: ty_d,
            n_embd: 256,
            n_ff: 256,
            per_chunk,
        };
        for (name, r, bias) in routings.iter().filter(|(_, r, _)| r.n_expert <= 16).take(6) {
            for (n_tokens, shape) in runs(&*gpu().await) {
                run_moe(
                    &case,
                    name,
                    r,
                    *bias,
                    n_tokens,
                    shape,
                    5000 + 1000 * i as u64 + n_tokens as u64,
                )
                .await;
            }
        }
    }
}

/// moe_sort alone, on passes of many of its 32-token chunks, one that is not whole, and chunks
/// of more routes than it has threads (k 10): every route slot once, grouped by expert, slots
/// ascending, the offsets their prefix sums. A token's k experts are distinct (as the router's
/// top k are), from a fixed pseudo-random start, some experts unused.
async fn moe_sort_lists_every_route_in_order() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for (n_expert, k, n_tokens) in [
        (128u32, 8u32, 600u32),
        (300, 5, 819),
        (64, 10, 70),
        (8, 2, 9),
    ] {
        let n = (n_tokens * k) as usize;
        let used = n_expert - n_expert / 8;
        let ids: Vec<u32> = (0..n as u32)
            .map(|s| {
                let start = (s / k).wrapping_mul(2_654_435_761) % used;
                (start + s % k * (used / k)) % used
            })
            .collect();
        let route: Vec<u32> = ids.iter().flat_map(|&e| [e, 0]).collect();
        let rb = upload(&gpu, "route", &route);
        let lists_len = moe::lists_len(n_expert, k, n_tokens) as usize;
        let lb = gpu.storage("lists", lists_len as u64 * 4).unwrap();
        let r = Routing {
            n_expert,
            k,
            gating: Gating::Softmax,
            norm: false,
            scale: 1.0,
            n_group: 1,
            topk_group: 1,
        };
        let d = moe::sort(&gpu, &rb, &lb, &step, &r).unwrap();
        run_dispatches(&gpu, &[&d], StepInfo::new(n_tokens, 0, 1), &step).await;
        let got: Vec<u32> = read(&gpu, &lb, lists_len)
            .await
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let mut want = vec![0u32; n_expert as usize + 1];
        for &e in &ids {
            want[e as usize + 1] += 1;
        }
        for e in 0..n_expert as usize {
            want[e + 1] += want[e];
        }
        for e in 0..n_expert {
            want.extend((0..n as u32).filter(|&s| ids[s as usize] == e));
        }
        assert_eq!(
            got, want,
            "moe_sort: {n_expert} experts, k {k}, {n_tokens} tokens"
        );
    }
}

super::gpu_tests!(
    moe_sort_lists_every_route_in_order,
    moe_router_against_reference,
    moe_experts_f32_q8_0,
    moe_experts_routed_by_moe_router,
    moe_experts_k_quants
);
