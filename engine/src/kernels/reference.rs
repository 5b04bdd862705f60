//! Plain CPU references of the attention-side kernels and greedy sampling, named like them and
//! written from the math (in f64 where it accumulates), for the kernel tests. Buffers have the
//! kernels' layouts.

use super::{Activation, Heads, RopeConfig};

/// `y[r] (+)= x[in_row0 + r] / sqrt(mean(x^2) + eps) * weight` for `rows` rows of `dim`:
/// RMSNorm, accumulating into `y` or overwriting it; `in_row0` picks the output rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rmsnorm(
    x: &[f32],
    weight: &[f32],
    y: &mut [f32],
    dim: usize,
    eps: f32,
    accumulate: bool,
    in_row0: usize,
    rows: usize,
) {
    for r in 0..rows {
        let row = &x[(in_row0 + r) * dim..(in_row0 + r + 1) * dim];
        let ms = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / dim as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for i in 0..dim {
            let v = (row[i] as f64 * inv * weight[i] as f64) as f32;
            let o = &mut y[r * dim + i];
            *o = if accumulate { *o + v } else { v };
        }
    }
}

/// RMSNorm of one head (the q/k norm).
fn head_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps as f64).sqrt();
    for (v, w) in x.iter_mut().zip(weight) {
        *v = (*v as f64 * inv * *w as f64) as f32;
    }
}

/// Rotates the first `n_rot` elements of one head at position `pos`: pair j (elements 2j and
/// 2j+1 in the normal layout, j and j + n_rot/2 in NeoX) turns by
/// `pos * freq_scale * theta_base^(-2j / n_rot)`.
pub(crate) fn rope(x: &mut [f32], pos: u32, r: &RopeConfig) {
    let half = r.n_rot as usize / 2;
    for j in 0..half {
        let inv_freq = (r.theta_base as f64).powf(-2.0 * j as f64 / r.n_rot as f64);
        let angle = pos as f64 * r.freq_scale as f64 * inv_freq;
        let (s, c) = angle.sin_cos();
        let (i0, i1) = if r.neox {
            (j, j + half)
        } else {
            (2 * j, 2 * j + 1)
        };
        let (x0, x1) = (x[i0] as f64, x[i1] as f64);
        x[i0] = (x0 * c - x1 * s) as f32;
        x[i1] = (x0 * s + x1 * c) as f32;
    }
}

/// What rope_store does to a pass of `n_tokens` tokens from `pos`: the Q heads of `qkv`
/// (`[n_tokens, (n_head + 2 n_kv_head) * head_dim]`) get the optional q norm and RoPE in place;
/// the K heads get the k norm and RoPE and go to `k_cache` `[n_kv_head, ctx, head_dim]` at their
/// positions; the V heads are copied to `v_cache`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rope_store(
    qkv: &mut [f32],
    k_cache: &mut [f32],
    v_cache: &mut [f32],
    heads: Heads,
    r: &RopeConfig,
    qk_norm: Option<(&[f32], &[f32], f32)>,
    pos: u32,
    n_tokens: u32,
) {
    let (nh, nkv, hd, ctx) = dims(&heads);
    let stride = (nh + 2 * nkv) * hd;
    for t in 0..n_tokens as usize {
        let p = pos + t as u32;
        for slot in 0..nh + 2 * nkv {
            let src = t * stride + slot * hd;
            let mut x = qkv[src..src + hd].to_vec();
            if slot < nh + nkv {
                if let Some((qn, kn, eps)) = qk_norm {
                    head_norm(&mut x, if slot < nh { qn } else { kn }, eps);
                }
                rope(&mut x, p, r);
            }
            if slot < nh {
                qkv[src..src + hd].copy_from_slice(&x);
            } else {
                let (cache, h) = if slot < nh + nkv {
                    (&mut *k_cache, slot - nh)
                } else {
                    (&mut *v_cache, slot - nh - nkv)
                };
                let dst = (h * ctx + p as usize) * hd;
                cache[dst..dst + hd].copy_from_slice(&x);
            }
        }
    }
}

/// Causal grouped-query attention of the pass's queries (the Q heads of `qkv`) over the cache:
/// `out[t, h] = softmax_s(cap(q[t, h] . k[kv(h), s] * scale)) . v[kv(h), s]` over the positions
/// s the query at `pos + t` sees: s <= pos + t and, with a window, pos + t - s < window.
/// `cap(x) = softcap * tanh(x / softcap)` when softcap > 0; kv(h) = h / (n_head / n_kv_head).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    qkv: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    heads: Heads,
    pos: u32,
    n_tokens: u32,
    scale: f32,
    window: u32,
    softcap: f32,
) -> Vec<f32> {
    let (nh, nkv, hd, ctx) = dims(&heads);
    let stride = (nh + 2 * nkv) * hd;
    let mut out = vec![0.0; n_tokens as usize * nh * hd];
    for t in 0..n_tokens as usize {
        let qp = pos as usize + t;
        let first = match window as usize {
            0 => 0,
            w => (qp + 1).saturating_sub(w),
        };
        for h in 0..nh {
            let kvh = h / (nh / nkv);
            let q = &qkv[t * stride + h * hd..t * stride + (h + 1) * hd];
            let scores: Vec<f64> = (first..=qp)
                .map(|s| {
                    let k = &k_cache[(kvh * ctx + s) * hd..(kvh * ctx + s + 1) * hd];
                    let d = q
                        .iter()
                        .zip(k)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum::<f64>()
                        * scale as f64;
                    if softcap > 0.0 {
                        softcap as f64 * (d / softcap as f64).tanh()
                    } else {
                        d
                    }
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for i in 0..hd {
                let o: f64 = (first..=qp)
                    .zip(&e)
                    .map(|(s, w)| w * v_cache[(kvh * ctx + s) * hd + i] as f64)
                    .sum();
                out[(t * nh + h) * hd + i] = (o / z) as f32;
            }
        }
    }
    out
}

/// `h[t, i] = act(gate[t, i]) * up[t, i]` from the stacked `gate_up` `[n_tokens, 2n]`; SiLU is
/// `x / (1 + e^-x)`, GELU the tanh approximation `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub(crate) fn glu(gate_up: &[f32], n: usize, n_tokens: usize, act: Activation) -> Vec<f32> {
    let mut h = Vec::with_capacity(n * n_tokens);
    for t in 0..n_tokens {
        for i in 0..n {
            let g = gate_up[t * 2 * n + i] as f64;
            let u = gate_up[t * 2 * n + n + i] as f64;
            let a = match act {
                Activation::Silu => g / (1.0 + (-g).exp()),
                Activation::GeluTanh => {
                    let c = (2.0 / std::f64::consts::PI).sqrt();
                    0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
                }
            };
            h.push((a * u) as f32);
        }
    }
    h
}

fn dims(h: &Heads) -> (usize, usize, usize, usize) {
    (
        h.n_head as usize,
        h.n_kv_head as usize,
        h.head_dim as usize,
        h.ctx as usize,
    )
}

/// argmax.wgsl + argmax_combine.wgsl: the index of the largest value, the lowest on ties. NaN
/// never wins, and a row with nothing above -3e38 (all -inf or NaN, or empty) gives 0.
pub(crate) fn argmax(row: &[f32]) -> u32 {
    let mut best = (-3.0e38f32, 0u32);
    for (i, &v) in row.iter().enumerate() {
        if v > best.0 {
            best = (v, i as u32);
        }
    }
    best.1
}
