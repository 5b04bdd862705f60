//! attention (split and combined), rope_store, rmsnorm and glu against plain CPU references.

use super::{assert_close, gpu, random_f32, read, run_dispatches, step_buffer};
use crate::kernels::{
    self, Activation, AttnOpts, Heads, KvBuffers, NormOpts, RopeConfig, Rows, StepInfo, When,
};

/// CPU attention: for each token t and head h, softmax over visible positions of q . k * scale.
#[allow(clippy::too_many_arguments)]
fn attention_ref(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    heads: Heads,
    pos: u32,
    n_tokens: u32,
    scale: f32,
    window: u32,
    softcap: f32,
) -> Vec<f32> {
    let (nh, nkv, hd, ctx) = (
        heads.n_head as usize,
        heads.n_kv_head as usize,
        heads.head_dim as usize,
        heads.ctx as usize,
    );
    let stride = (nh + 2 * nkv) * hd;
    let mut out = vec![0.0; n_tokens as usize * nh * hd];
    for t in 0..n_tokens as usize {
        let qp = pos as usize + t;
        for h in 0..nh {
            let kvh = h / (nh / nkv);
            let first = if window > 0 && qp + 1 > window as usize {
                qp + 1 - window as usize
            } else {
                0
            };
            let scores: Vec<f32> = (first..=qp)
                .map(|s| {
                    let mut d: f32 = (0..hd)
                        .map(|i| q[t * stride + h * hd + i] * scale * k[(kvh * ctx + s) * hd + i])
                        .sum();
                    if softcap > 0.0 {
                        d = softcap * (d / softcap).tanh();
                    }
                    d
                })
                .collect();
            let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f32 = e.iter().sum();
            for i in 0..hd {
                out[(t * nh + h) * hd + i] = (first..=qp)
                    .zip(&e)
                    .map(|(s, w)| w * v[(kvh * ctx + s) * hd + i])
                    .sum::<f32>()
                    / z;
            }
        }
    }
    out
}

async fn attention_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let ctx = 512u32;
    for (nh, nkv, hd) in [
        (1u32, 1u32, 64u32),
        (4, 1, 256),
        (9, 3, 64),
        (8, 8, 128),
        (6, 2, 96),
    ] {
        for (pos, n_tokens, window, softcap) in [
            (0u32, 1u32, 0u32, 0.0f32),
            (37, 1, 0, 0.0),
            (300, 1, 0, 0.0),
            (300, 1, 8, 0.0),
            (0, 5, 0, 0.0),
            (20, 77, 0, 0.0),
            (20, 16, 8, 30.0),
        ] {
            let heads = Heads {
                n_head: nh,
                n_kv_head: nkv,
                head_dim: hd,
                ctx,
            };
            let stride = (nh + 2 * nkv) * hd;
            let seed = (nh * 1000 + hd + pos * 7 + n_tokens) as u64;
            let q = random_f32(seed, (n_tokens * stride) as usize, 1.0);
            let k = random_f32(seed + 1, (nkv * ctx * hd) as usize, 1.0);
            let v = random_f32(seed + 2, (nkv * ctx * hd) as usize, 1.0);
            let qb = gpu.storage_init("q", bytemuck::cast_slice(&q)).unwrap();
            let kb = gpu.storage_init("k", bytemuck::cast_slice(&k)).unwrap();
            let vb = gpu.storage_init("v", bytemuck::cast_slice(&v)).unwrap();
            let ob = gpu.storage("out", (n_tokens * nh * hd) as u64 * 4).unwrap();
            let pb = gpu
                .storage("partial", kernels::attention_partial_len(&heads) * 4)
                .unwrap();
            let scale = 1.0 / (hd as f32).sqrt();
            let d = kernels::attention(
                &gpu,
                &qb,
                &kb,
                &vb,
                &ob,
                &pb,
                &step,
                heads,
                AttnOpts {
                    scale,
                    window,
                    softcap,
                },
            )
            .unwrap();
            let s = StepInfo {
                n_tokens,
                pos,
                n_out: 1,
            };
            run_dispatches(&gpu, &[&d[0], &d[1]], s, &step).await;
            let want = attention_ref(&q, &k, &v, heads, pos, n_tokens, scale, window, softcap);
            let shape = format!(
                "heads {nh}/{nkv} of {hd}, pos {pos}, tokens {n_tokens}, window {window}, softcap {softcap}, splits {}",
                kernels::attention_splits(&s)
            );
            assert_close(
                "attention",
                &shape,
                &read(&gpu, &ob, want.len()).await,
                &want,
                1e-10,
                1e-4,
            );
        }
    }
}

fn rmsnorm_ref(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32 + eps).sqrt();
    x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
}

/// CPU RoPE of one head at `pos` (GGML normal: adjacent pairs; NeoX: halves).
fn rope_ref(x: &mut [f32], pos: u32, r: &RopeConfig) {
    let half = r.n_rot as usize / 2;
    for j in 0..half {
        let inv_freq = r.theta_base.powf(-2.0 * j as f32 / r.n_rot as f32);
        let a = pos as f32 * r.freq_scale * inv_freq;
        let (s, c) = a.sin_cos();
        let (i0, i1) = if r.neox {
            (j, j + half)
        } else {
            (2 * j, 2 * j + 1)
        };
        let (x0, x1) = (x[i0], x[i1]);
        x[i0] = x0 * c - x1 * s;
        x[i1] = x0 * s + x1 * c;
    }
}

async fn rope_store_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 16).unwrap();
    let ctx = 64u32;
    for (nh, nkv, hd, n_rot, neox, qk_norm) in [
        (4u32, 2u32, 64u32, 64u32, false, false),
        (4, 2, 64, 64, true, true),
        (2, 1, 256, 256, true, true),
        (3, 1, 128, 64, true, false),
        (2, 2, 96, 32, false, true),
    ] {
        let (pos, n_tokens) = (13u32, 5u32);
        let heads = Heads {
            n_head: nh,
            n_kv_head: nkv,
            head_dim: hd,
            ctx,
        };
        let rope = RopeConfig {
            n_rot,
            neox,
            theta_base: 10000.0,
            freq_scale: 0.5,
        };
        let stride = ((nh + 2 * nkv) * hd) as usize;
        let qkv = random_f32(hd as u64 + nh as u64, n_tokens as usize * stride, 2.0);
        let qn = random_f32(3, hd as usize, 1.5);
        let kn = random_f32(4, hd as usize, 1.5);
        let qkvb = gpu.storage_init("qkv", bytemuck::cast_slice(&qkv)).unwrap();
        let kc = gpu.storage("kc", (nkv * ctx * hd) as u64 * 4).unwrap();
        let vc = gpu.storage("vc", (nkv * ctx * hd) as u64 * 4).unwrap();
        let qnb = gpu.storage_init("qn", bytemuck::cast_slice(&qn)).unwrap();
        let knb = gpu.storage_init("kn", bytemuck::cast_slice(&kn)).unwrap();
        let d = kernels::rope_store(
            &gpu,
            &KvBuffers {
                qkv: &qkvb,
                k_cache: &kc,
                v_cache: &vc,
            },
            &step,
            heads,
            rope,
            qk_norm.then_some((&qnb, &knb, 1e-6)),
            &dummy,
        )
        .unwrap();
        run_dispatches(
            &gpu,
            &[&d],
            StepInfo {
                n_tokens,
                pos,
                n_out: 1,
            },
            &step,
        )
        .await;
        let got_qkv = read(&gpu, &qkvb, qkv.len()).await;
        let got_k = read(&gpu, &kc, (nkv * ctx * hd) as usize).await;
        let got_v = read(&gpu, &vc, (nkv * ctx * hd) as usize).await;
        let hd = hd as usize;
        let (mut want_q, mut got_q, mut want_k, mut got_kk, mut want_v, mut got_vv) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for t in 0..n_tokens as usize {
            let p = pos + t as u32;
            for h in 0..(nh + 2 * nkv) as usize {
                let mut x = qkv[t * stride + h * hd..t * stride + (h + 1) * hd].to_vec();
                if h < nh as usize {
                    if qk_norm {
                        x = rmsnorm_ref(&x, &qn, 1e-6);
                    }
                    rope_ref(&mut x, p, &rope);
                    want_q.extend(x);
                    got_q.extend_from_slice(
                        &got_qkv[t * stride + h * hd..t * stride + (h + 1) * hd],
                    );
                } else if h < (nh + nkv) as usize {
                    if qk_norm {
                        x = rmsnorm_ref(&x, &kn, 1e-6);
                    }
                    rope_ref(&mut x, p, &rope);
                    want_k.extend(x);
                    let kh = h - nh as usize;
                    let o = (kh * ctx as usize + p as usize) * hd;
                    got_kk.extend_from_slice(&got_k[o..o + hd]);
                } else {
                    want_v.extend(x);
                    let vh = h - (nh + nkv) as usize;
                    let o = (vh * ctx as usize + p as usize) * hd;
                    got_vv.extend_from_slice(&got_v[o..o + hd]);
                }
            }
        }
        let shape =
            format!("heads {nh}/{nkv} of {hd}, n_rot {n_rot}, neox {neox}, qk_norm {qk_norm}");
        assert_close("rope_store (q)", &shape, &got_q, &want_q, 1e-10, 1e-4);
        assert_close("rope_store (k)", &shape, &got_kk, &want_k, 1e-10, 1e-4);
        assert_close("rope_store (v)", &shape, &got_vv, &want_v, 0.0, 0.0);
    }
}

async fn rmsnorm_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for (dim, n_tokens, n_out, accumulate, rows) in [
        (1u32, 1u32, 1u32, false, Rows::Tokens),
        (576, 7, 1, false, Rows::Tokens),
        (640, 5, 1, true, Rows::Tokens),
        (1000, 9, 3, false, Rows::Out),
    ] {
        let x = random_f32(dim as u64, (n_tokens * dim) as usize, 3.0);
        let w = random_f32(dim as u64 + 1, dim as usize, 1.0);
        let y0 = random_f32(dim as u64 + 2, (n_tokens * dim) as usize, 1.0);
        let xb = gpu.storage_init("x", bytemuck::cast_slice(&x)).unwrap();
        let wb = gpu.storage_init("w", bytemuck::cast_slice(&w)).unwrap();
        let yb = gpu.storage_init("y", bytemuck::cast_slice(&y0)).unwrap();
        let d = kernels::rmsnorm(
            &gpu,
            &xb,
            &wb,
            &yb,
            &step,
            dim,
            1e-5,
            NormOpts {
                accumulate,
                rows,
                when: When::Always,
            },
        )
        .unwrap();
        run_dispatches(
            &gpu,
            &[&d],
            StepInfo {
                n_tokens,
                pos: 0,
                n_out,
            },
            &step,
        )
        .await;
        let (first, count) = match rows {
            Rows::Tokens => (0, n_tokens),
            Rows::Out => (n_tokens - n_out, n_out),
        };
        let mut want = y0.clone();
        for r in 0..count as usize {
            let src = (first as usize + r) * dim as usize;
            let n = rmsnorm_ref(&x[src..src + dim as usize], &w, 1e-5);
            for (i, v) in n.into_iter().enumerate() {
                let o = r * dim as usize + i;
                want[o] = if accumulate { want[o] + v } else { v };
            }
        }
        let shape =
            format!("dim {dim}, tokens {n_tokens}, out {n_out}, accumulate {accumulate}, {rows:?}");
        assert_close(
            "rmsnorm",
            &shape,
            &read(&gpu, &yb, want.len()).await,
            &want,
            1e-12,
            1e-5,
        );
    }
}

async fn glu_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    for (n, n_tokens, act) in [
        (1u32, 1u32, Activation::Silu),
        (1536, 3, Activation::Silu),
        (2048, 5, Activation::GeluTanh),
        (333, 300, Activation::GeluTanh),
    ] {
        let gu = random_f32(n as u64, (n_tokens * 2 * n) as usize, 6.0);
        let gub = gpu.storage_init("gu", bytemuck::cast_slice(&gu)).unwrap();
        let hb = gpu.storage("h", (n_tokens * n) as u64 * 4).unwrap();
        let d = kernels::glu(&gpu, &gub, &hb, &step, n, act, When::Always).unwrap();
        run_dispatches(
            &gpu,
            &[&d],
            StepInfo {
                n_tokens,
                pos: 0,
                n_out: 1,
            },
            &step,
        )
        .await;
        let want: Vec<f32> = (0..(n_tokens * n) as usize)
            .map(|i| {
                let (t, c) = (i / n as usize, i % n as usize);
                let g = gu[t * 2 * n as usize + c];
                let u = gu[t * 2 * n as usize + n as usize + c];
                let a = match act {
                    Activation::Silu => g / (1.0 + (-g).exp()),
                    Activation::GeluTanh => {
                        0.5 * g * (1.0 + (0.797_884_6 * (g + 0.044715 * g * g * g)).tanh())
                    }
                };
                a * u
            })
            .collect();
        let shape = format!("n {n}, tokens {n_tokens}, {act:?}");
        assert_close(
            "glu",
            &shape,
            &read(&gpu, &hb, want.len()).await,
            &want,
            1e-12,
            1e-4,
        );
    }
}

super::gpu_tests!(
    attention_matches_the_reference,
    rope_store_matches_the_reference,
    rmsnorm_matches_the_reference,
    glu_matches_the_reference
);
