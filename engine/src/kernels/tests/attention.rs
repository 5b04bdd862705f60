//! attention (split and combined), rope_store, rmsnorm and glu against the CPU references in
//! `kernels::reference`.

use super::{
    assert_close, assert_same_bytes, gpu, random_f32, read, run_attention_dispatches,
    run_dispatches, step_buffer, upload, ROPE_TOL,
};
use crate::kernels::{
    self, reference, Activation, AttnOpts, DecodeRope, Heads, KvBuffers, KvType, NormOpts, Q8From,
    RopeConfig, Row, Rows, Seqs, StepInfo, When,
};

/// `v` as a cache of type `kv` holds it (wgsl/common/kv_f16.wgsl rounds to f16).
fn kv_round(v: &[f32], kv: KvType) -> Vec<f32> {
    match kv {
        KvType::F16 => v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
        KvType::F32 => v.to_vec(),
    }
}

/// A KV cache of type `kv` holding `v`.
fn upload_kv(gpu: &crate::gpu::Gpu, label: &str, v: &[f32], kv: KvType) -> wgpu::Buffer {
    match kv {
        KvType::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            upload(gpu, label, &h)
        }
        KvType::F32 => upload(gpu, label, v),
    }
}

/// The `n` values of a KV cache of type `kv`.
async fn read_kv(gpu: &crate::gpu::Gpu, b: &wgpu::Buffer, n: usize, kv: KvType) -> Vec<f32> {
    match kv {
        KvType::F16 => bytemuck::cast_slice::<f32, half::f16>(&read(gpu, b, n / 2).await)
            .iter()
            .map(|h| h.to_f32())
            .collect(),
        KvType::F32 => read(gpu, b, n).await,
    }
}

/// A cache element computed on the GPU and on the CPU may round to neighbouring f16 values: one
/// f16 step at |x| < 4 is 2^-9. An f32 cache is compared as ROPE_TOL.
fn kv_tol(kv: KvType) -> (f64, f32) {
    match kv {
        KvType::F16 => (1e-6, 4e-3),
        KvType::F32 => ROPE_TOL,
    }
}

/// The matrix-unit attention (attention_coop.wgsl) rounds q and the probabilities to f16 (2^-11
/// relative each).
const COOP_TOL: (f64, f32) = (1e-5, 4e-3);

/// Whether `kernels::attention` runs pass `s` on the matrix units on this adapter.
fn takes_coop(gpu: &crate::gpu::Gpu, heads: &Heads, kv: KvType, s: &StepInfo) -> bool {
    kernels::attention::coop_fits(gpu, heads, kv) && kernels::attention::coop_takes(s)
}

/// Head shapes: one head, 4/1 (Gemma-3-270M: GQA with heads of 256), 9/3 (SmolLM2), 8/8 (MHA),
/// and heads of 96 and 80, whose vec4 chunks do not divide a workgroup evenly.
const HEAD_SHAPES: &[(u32, u32, u32)] = &[
    (1, 1, 64),
    (4, 1, 256),
    (9, 3, 64),
    (8, 8, 128),
    (6, 2, 96),
    (2, 1, 80),
    (2, 2, 32),
    // Four query heads a workgroup (kernels::heads_per_workgroup), once and twice per KV head.
    (8, 2, 128),
    (16, 2, 64),
    // Heads enough that a decode step's parts take two tiles (kernels::attention_splits: 1024
    // workgroups' worth of parts, four for 256 heads, over the 512-key cache's eight tiles).
    (256, 64, 32),
];

/// (pos, n_tokens, window, softcap): decode at 0, 37, 300 and at the end of a 512 cache; a
/// verification-sized pass (split); prompts of 5 and 77 tokens from 0 and onto a cache from 20;
/// sliding windows of 8 in decode and prefill; soft-capping.
const PASSES: &[(u32, u32, u32, f32)] = &[
    (0, 1, 0, 0.0),
    (37, 1, 0, 0.0),
    (300, 1, 0, 0.0),
    (511, 1, 0, 0.0),
    (300, 1, 8, 0.0),
    (70, 1, 0, 5.0),
    (100, 16, 0, 0.0),
    (0, 5, 0, 0.0),
    (20, 5, 0, 0.0),
    (0, 77, 0, 0.0),
    (20, 77, 0, 0.0),
    (20, 77, 8, 0.0),
    (20, 16, 8, 5.0),
    (300, 100, 0, 5.0),
];

/// A 2,048-position cache, decode near its end: more parts than the merge's threads load ahead
/// (common/attn_merge.wgsl: four each, 16 in all for heads of 256), for one query head a
/// workgroup (merged by its last part's workgroup) and for two (the combine dispatch).
const LONG_SHAPES: &[(u32, u32, u32)] = &[(2, 2, 256), (4, 1, 256)];
const LONG_PASSES: &[(u32, u32, u32, f32)] = &[(1900, 1, 0, 0.0)];

async fn attention_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    // The row table: unread by passes over one sequence.
    let dummy = gpu.storage("rows", 16).unwrap();
    for &(ctx, shapes, passes) in &[
        (512u32, HEAD_SHAPES, PASSES),
        (2048, LONG_SHAPES, LONG_PASSES),
    ] {
        for &(nh, nkv, hd) in shapes {
            let heads = Heads {
                n_head: nh,
                n_kv_head: nkv,
                head_dim: hd,
                ctx,
            };
            let pb = gpu
                .storage("partial", kernels::attention_partial_len(&heads) * 4)
                .unwrap();
            for (&(pos, n_tokens, window, softcap), kv) in passes
                .iter()
                .flat_map(|p| [(p, KvType::F16), (p, KvType::F32)])
            {
                // The many-head shape is for the decode split; its long passes only cost time.
                if nh > 64 && n_tokens > 1 {
                    continue;
                }
                let stride = (nh + 2 * nkv) * hd;
                let seed = (nh * 1000 + hd + pos * 7 + n_tokens) as u64;
                let q = random_f32(seed, (n_tokens * stride) as usize, 1.0);
                let mut k = random_f32(seed + 1, (nkv * ctx * hd) as usize, 1.0);
                let mut v = random_f32(seed + 2, (nkv * ctx * hd) as usize, 1.0);
                // Positions past the last query are not visible: NaN there shows any leak.
                let (last, row) = ((pos + n_tokens) as usize, (ctx * hd) as usize);
                for kvh in 0..nkv as usize {
                    k[kvh * row + last * hd as usize..(kvh + 1) * row].fill(f32::NAN);
                    v[kvh * row + last * hd as usize..(kvh + 1) * row].fill(f32::NAN);
                }
                let (k, v) = (kv_round(&k, kv), kv_round(&v, kv));
                let qb = upload(&gpu, "q", &q);
                let kb = upload_kv(&gpu, "k", &k, kv);
                let vb = upload_kv(&gpu, "v", &v, kv);
                let ob = gpu.storage("out", (n_tokens * nh * hd) as u64 * 4).unwrap();
                // Twice the usual scale: scores spread over a few units, so the softmax is neither
                // flat nor one-hot.
                let scale = 2.0 / (hd as f32).sqrt();
                let d = kernels::attention(
                    &gpu,
                    &qb,
                    &kb,
                    &vb,
                    &ob,
                    &pb,
                    &step,
                    &dummy,
                    heads,
                    AttnOpts {
                        scale,
                        window,
                        softcap,
                        decode_rope: None,
                        subgroups: true,
                        kv,
                        // Every pass on the shared-head workgroups wherever heads share a KV head.
                        min_grouped_workgroups: 0,
                        out_q8: None,
                    },
                )
                .unwrap();
                let s = StepInfo::new(n_tokens, pos, 1);
                run_attention_dispatches(&gpu, &[&d[0], &d[1]], s, &step, nh).await;
                let want =
                    reference::attention(&q, &k, &v, heads, pos, n_tokens, scale, window, softcap);
                let shape = format!(
                "heads {nh}/{nkv} of {hd}, pos {pos}, tokens {n_tokens}, window {window}, softcap {softcap}, {kv:?} cache, splits {}",
                kernels::attention_splits(&s, nh)
            );
                let (kernel, (nmse, max_abs)) = if takes_coop(&gpu, &heads, kv, &s) {
                    ("attention_coop", COOP_TOL)
                } else {
                    ("attention", (1e-10, 2e-5))
                };
                assert_close(
                    kernel,
                    &shape,
                    &read(&gpu, &ob, want.len()).await,
                    &want,
                    nmse,
                    max_abs,
                );
            }
        }
    }
}

/// The forward pass's attention block: rope_store for batched passes, attention with its decode
/// prologue (q/k norm, RoPE and the cache store of a one-token pass), the combine; against
/// reference::rope_store then reference::attention, output and caches.
async fn attention_with_decode_prologue_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 16).unwrap();
    let ctx = 512u32;
    // (heads, kv heads, head size, rotated, NeoX, q/k norm eps, theta base, freq scale)
    for (nh, nkv, hd, n_rot, neox, qk_eps, theta_base, freq_scale) in [
        (9u32, 3u32, 64u32, 64u32, true, None, 100000.0f32, 1.0f32),
        (4, 1, 256, 256, true, Some(1e-6f32), 1_000_000.0, 0.125),
        (8, 8, 128, 64, false, Some(1e-5), 10000.0, 1.0),
        (6, 2, 96, 32, true, Some(1e-6), 10000.0, 0.5),
        (2, 1, 80, 40, false, None, 500000.0, 0.25),
        (16, 2, 128, 128, true, Some(1e-6), 1_000_000.0, 1.0),
    ] {
        let heads = Heads {
            n_head: nh,
            n_kv_head: nkv,
            head_dim: hd,
            ctx,
        };
        let rope = RopeConfig {
            n_rot,
            neox,
            theta_base,
            freq_scale,
        };
        let pb = gpu
            .storage("partial", kernels::attention_partial_len(&heads) * 4)
            .unwrap();
        let runs = [
            (0u32, 1u32, 0u32),
            (37, 1, 0),
            (130, 1, 0),
            (300, 1, 8),
            (511, 1, 0),
            (20, 5, 0),
            (100, 16, 8),
        ];
        // The variants differ in the q/k norm of the prologue: decode passes with it run in both
        // where the subgroup one runs.
        let variants = runs.into_iter().flat_map(|r| {
            let both = r.1 == 1 && qk_eps.is_some() && kernels::subgroups_fit(&gpu, 256);
            [(r, true)].into_iter().chain(both.then_some((r, false)))
        });
        for ((pos, n_tokens, window), subgroups) in variants {
            let stride = ((nh + 2 * nkv) * hd) as usize;
            let seed = (nh * 100 + hd + pos) as u64;
            let qkv = random_f32(seed, n_tokens as usize * stride, 1.5);
            let qn = random_f32(seed + 1, hd as usize, 1.5);
            let kn = random_f32(seed + 2, hd as usize, 1.5);
            let cache_len = (nkv * ctx * hd) as usize;
            let mut k = random_f32(seed + 3, cache_len, 1.0);
            let mut v = random_f32(seed + 4, cache_len, 1.0);
            // The pass writes positions pos.. itself; past them nothing may be read.
            let (last, row) = ((pos + n_tokens) as usize, (ctx * hd) as usize);
            for kvh in 0..nkv as usize {
                k[kvh * row + pos as usize * hd as usize..(kvh + 1) * row].fill(f32::NAN);
                v[kvh * row + pos as usize * hd as usize..(kvh + 1) * row].fill(f32::NAN);
            }
            let qkvb = upload(&gpu, "qkv", &qkv);
            let qnb = upload(&gpu, "qn", &qn);
            let knb = upload(&gpu, "kn", &kn);
            let kv = KvType::F16;
            let kb = upload_kv(&gpu, "k", &k, kv);
            let vb = upload_kv(&gpu, "v", &v, kv);
            let ob = gpu.storage("out", (n_tokens * nh * hd) as u64 * 4).unwrap();
            let qk_norm = qk_eps.map(|e| (&qnb, &knb, e));
            let rs = kernels::rope_store(
                &gpu,
                &KvBuffers {
                    qkv: &qkvb,
                    k_cache: &kb,
                    v_cache: &vb,
                    kv,
                },
                &step,
                &dummy,
                heads,
                rope,
                qk_norm,
                &dummy,
            )
            .unwrap()
            .only(When::Batch);
            let scale = 1.0 / (hd as f32).sqrt();
            let d = kernels::attention(
                &gpu,
                &qkvb,
                &kb,
                &vb,
                &ob,
                &pb,
                &step,
                &dummy,
                heads,
                AttnOpts {
                    scale,
                    window,
                    softcap: 0.0,
                    decode_rope: Some(DecodeRope { rope, qk_norm }),
                    subgroups,
                    kv,
                    // Every pass on the shared-head workgroups wherever heads share a KV head.
                    min_grouped_workgroups: 0,
                    out_q8: None,
                },
            )
            .unwrap();
            let s = StepInfo::new(n_tokens, pos, 1);
            run_attention_dispatches(&gpu, &[&rs, &d[0], &d[1]], s, &step, nh).await;
            let (mut want_qkv, mut want_k, mut want_v) = (qkv.clone(), k.clone(), v.clone());
            reference::rope_store(
                &mut want_qkv,
                &mut want_k,
                &mut want_v,
                heads,
                &rope,
                qk_eps.map(|e| (&qn[..], &kn[..], e)),
                pos,
                n_tokens,
            );
            let (want_k, want_v) = (kv_round(&want_k, kv), kv_round(&want_v, kv));
            let want = reference::attention(
                &want_qkv, &want_k, &want_v, heads, pos, n_tokens, scale, window, 0.0,
            );
            let shape = format!(
                "heads {nh}/{nkv} of {hd}, n_rot {n_rot}, neox {neox}, qk_norm {qk_eps:?}, pos {pos}, tokens {n_tokens}, window {window}, subgroups {}",
                subgroups && kernels::subgroups_fit(&gpu, 256)
            );
            assert_close(
                "attention (decode prologue)",
                &shape,
                &read(&gpu, &ob, want.len()).await,
                &want,
                ROPE_TOL.0,
                ROPE_TOL.1,
            );
            // The caches up to the last position written.
            let written = |c: &[f32]| -> Vec<f32> {
                c.chunks(row)
                    .flat_map(|r| r[..last * hd as usize].to_vec())
                    .collect()
            };
            assert_close(
                "attention (decode prologue, k cache)",
                &shape,
                &written(&read_kv(&gpu, &kb, cache_len, kv).await),
                &written(&want_k),
                kv_tol(kv).0,
                kv_tol(kv).1,
            );
            assert_close(
                "attention (decode prologue, v cache)",
                &shape,
                &written(&read_kv(&gpu, &vb, cache_len, kv).await),
                &written(&want_v),
                kv_tol(kv).0,
                kv_tol(kv).1,
            );
        }
    }
}

/// The attention block (rope_store for passes of several rows, attention with its decode
/// prologue, the combine) over KV caches of several sequences `[n_seq, n_kv_head, ctx, head_dim]`:
/// a batched step whose row table puts rows of different sequences at unrelated positions (one
/// row: the decode prologue reads the table too), and a prompt chunk into one sequence of them
/// (`Seqs::One`). Each row must equal reference::rope_store then reference::attention on its own
/// sequence's cache alone, and only its own sequence's cache may change.
async fn attention_over_a_row_table_matches_each_row_alone() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 16).unwrap();
    // A cache of whole 64-key tiles, so that a long chunk takes the matrix-unit kernel where
    // the adapter has one.
    let (ctx, n_seq) = (320u32, 4u32);
    // Per case: the rows (sequence, position), or a chunk of n tokens of one sequence from a
    // position (Seqs::One). Lengths differ, so with the longest row's splits the short rows'
    // last parts are empty.
    enum Pass {
        Table(&'static [(u32, u32)]),
        Chunk { seq: u32, pos: u32, n: u32 },
    }
    let passes = [
        Pass::Table(&[(2, 130)]),
        Pass::Table(&[(2, 130), (0, 0), (3, 299), (1, 37)]),
        Pass::Table(&[(1, 5), (3, 64), (0, 200)]),
        Pass::Chunk {
            seq: 2,
            pos: 20,
            n: 5,
        },
        Pass::Chunk {
            seq: 2,
            pos: 20,
            n: 40,
        },
    ];
    // (heads, kv heads, head size, rotated, NeoX, q/k norm eps, window)
    for (nh, nkv, hd, n_rot, neox, qk_eps, window) in [
        (9u32, 3u32, 64u32, 64u32, true, None, 0u32),
        (4, 1, 256, 256, true, Some(1e-6f32), 0),
        (6, 2, 96, 32, false, Some(1e-5), 8),
    ] {
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
            freq_scale: 1.0,
        };
        let pb = gpu
            .storage("partial", kernels::attention_partial_len(&heads) * 4)
            .unwrap();
        let both = qk_eps.is_some() && kernels::subgroups_fit(&gpu, 256);
        let variants = passes.iter().enumerate().flat_map(|(i, p)| {
            [KvType::F16, KvType::F32].into_iter().flat_map(move |kv| {
                [(i, p, kv, true)]
                    .into_iter()
                    .chain(both.then_some((i, p, kv, false)))
            })
        });
        for (case, pass, kv, subgroups) in variants {
            // The rows of the pass, (sequence, position) each.
            let rows: Vec<(u32, u32)> = match pass {
                Pass::Table(r) => r.to_vec(),
                Pass::Chunk { seq, pos, n } => (0..*n).map(|t| (*seq, pos + t)).collect(),
            };
            let n_tokens = rows.len() as u32;
            let stride = ((nh + 2 * nkv) * hd) as usize;
            let seed = (nh * 100 + hd + case as u32) as u64;
            let qkv = random_f32(seed, n_tokens as usize * stride, 1.5);
            let qn = random_f32(seed + 1, hd as usize, 1.5);
            let kn = random_f32(seed + 2, hd as usize, 1.5);
            let seq_len = (nkv * ctx * hd) as usize;
            let mut k = random_f32(seed + 3, n_seq as usize * seq_len, 1.0);
            let mut v = random_f32(seed + 4, n_seq as usize * seq_len, 1.0);
            // Each sequence holds keys below its first row's position; past that nothing may
            // be read (NaN shows a leak, from another sequence too).
            let (hd_u, row_len) = (hd as usize, (ctx * hd) as usize);
            let held = |s: u32| rows.iter().find(|r| r.0 == s).map(|r| r.1);
            for s in 0..n_seq {
                let from = held(s).unwrap_or(0) as usize;
                for kvh in 0..nkv as usize {
                    let head = s as usize * seq_len + kvh * row_len;
                    k[head + from * hd_u..head + row_len].fill(f32::NAN);
                    v[head + from * hd_u..head + row_len].fill(f32::NAN);
                }
            }
            let (k, v) = (kv_round(&k, kv), kv_round(&v, kv));
            let qkvb = upload(&gpu, "qkv", &qkv);
            let qnb = upload(&gpu, "qn", &qn);
            let knb = upload(&gpu, "kn", &kn);
            let kb = upload_kv(&gpu, "k", &k, kv);
            let vb = upload_kv(&gpu, "v", &v, kv);
            let table: Vec<Row> = rows.iter().map(|&(seq, pos)| Row { seq, pos }).collect();
            let rowsb = upload(&gpu, "rows", &table);
            let ob = gpu.storage("out", (n_tokens * nh * hd) as u64 * 4).unwrap();
            let qk_norm = qk_eps.map(|e| (&qnb, &knb, e));
            let kvbufs = KvBuffers {
                qkv: &qkvb,
                k_cache: &kb,
                v_cache: &vb,
                kv,
            };
            let rs =
                kernels::rope_store(&gpu, &kvbufs, &step, &rowsb, heads, rope, qk_norm, &dummy)
                    .unwrap()
                    .only(When::Batch);
            let scale = 1.0 / (hd as f32).sqrt();
            let d = kernels::attention(
                &gpu,
                &qkvb,
                &kb,
                &vb,
                &ob,
                &pb,
                &step,
                &rowsb,
                heads,
                AttnOpts {
                    scale,
                    window,
                    softcap: 0.0,
                    decode_rope: Some(DecodeRope { rope, qk_norm }),
                    subgroups,
                    kv,
                    // The model's rule: shared-head workgroups where a pass has enough of them.
                    min_grouped_workgroups: kernels::ATTN_MIN_WORKGROUPS,
                    out_q8: None,
                },
            )
            .unwrap();
            let s = match pass {
                Pass::Table(_) => StepInfo {
                    seqs: Seqs::Table {
                        keys: rows.iter().map(|r| r.1 + 1).max().unwrap(),
                    },
                    ..StepInfo::new(n_tokens, 0, n_tokens)
                },
                Pass::Chunk { seq, pos, n } => StepInfo {
                    seqs: Seqs::One(*seq),
                    ..StepInfo::new(*n, *pos, 1)
                },
            };
            run_attention_dispatches(&gpu, &[&rs, &d[0], &d[1]], s, &step, nh).await;
            // The reference: each sequence's rows alone on its own cache.
            let (mut want_k, mut want_v) = (k.clone(), v.clone());
            let mut want = vec![0.0; (n_tokens * nh * hd) as usize];
            let out_len = (nh * hd) as usize;
            for seq in 0..n_seq {
                let ts: Vec<usize> = (0..rows.len()).filter(|&t| rows[t].0 == seq).collect();
                let Some(&t0) = ts.first() else { continue };
                let span = s_range(seq as usize, seq_len);
                let mut q: Vec<f32> = ts
                    .iter()
                    .flat_map(|&t| qkv[t * stride..(t + 1) * stride].to_vec())
                    .collect();
                let pos = rows[t0].1;
                reference::rope_store(
                    &mut q,
                    &mut want_k[span.clone()],
                    &mut want_v[span.clone()],
                    heads,
                    &rope,
                    qk_eps.map(|e| (&qn[..], &kn[..], e)),
                    pos,
                    ts.len() as u32,
                );
                let (rk, rv) = (
                    kv_round(&want_k[span.clone()], kv),
                    kv_round(&want_v[span.clone()], kv),
                );
                let o = reference::attention(
                    &q,
                    &rk,
                    &rv,
                    heads,
                    pos,
                    ts.len() as u32,
                    scale,
                    window,
                    0.0,
                );
                for (j, &t) in ts.iter().enumerate() {
                    want[t * out_len..(t + 1) * out_len]
                        .copy_from_slice(&o[j * out_len..(j + 1) * out_len]);
                }
            }
            let shape = format!(
                "heads {nh}/{nkv} of {hd}, n_rot {n_rot}, neox {neox}, qk_norm {qk_eps:?}, window {window}, rows (seq, pos) {rows:?}, {s:?}, {kv:?} cache, subgroups {}",
                subgroups && kernels::subgroups_fit(&gpu, 256)
            );
            let (nmse, max_abs) = if takes_coop(&gpu, &heads, kv, &s) {
                COOP_TOL
            } else {
                ROPE_TOL
            };
            assert_close(
                "attention (row table)",
                &shape,
                &read(&gpu, &ob, want.len()).await,
                &want,
                nmse,
                max_abs,
            );
            // Every sequence's cache below its last row (NaN past it): the rows' keys and
            // values written, the rest as it was.
            let written = |c: &[f32]| -> Vec<f32> {
                (0..n_seq)
                    .flat_map(|s| {
                        let end = rows
                            .iter()
                            .filter(|r| r.0 == s)
                            .map(|r| r.1 as usize + 1)
                            .max()
                            .unwrap_or(0);
                        let base = s as usize * seq_len;
                        (0..nkv as usize).flat_map(move |kvh| {
                            let head = base + kvh * row_len;
                            c[head..head + end * hd_u].to_vec()
                        })
                    })
                    .collect()
            };
            let len = k.len();
            for (what, got, want) in [("k cache", &kb, &want_k), ("v cache", &vb, &want_v)] {
                assert_close(
                    &format!("attention (row table, {what})"),
                    &shape,
                    &written(&read_kv(&gpu, got, len, kv).await),
                    &written(&kv_round(want, kv)),
                    kv_tol(kv).0,
                    kv_tol(kv).1,
                );
            }
        }
    }
}

/// The elements of sequence `s` in a cache of sequences of `len` elements each.
fn s_range(s: usize, len: usize) -> std::ops::Range<usize> {
    s * len..(s + 1) * len
}

async fn rope_store_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 16).unwrap();
    let ctx = 1100u32;
    // (heads, kv heads, head size, rotated, NeoX, q/k norm eps, theta base, freq scale)
    for (nh, nkv, hd, n_rot, neox, qk_eps, theta_base, freq_scale) in [
        (4u32, 2u32, 64u32, 64u32, false, None, 10000.0f32, 1.0f32),
        (4, 2, 64, 64, true, Some(1e-6f32), 100000.0, 1.0),
        (2, 1, 256, 256, true, Some(1e-6), 1_000_000.0, 0.125),
        (3, 1, 128, 64, true, None, 10000.0, 0.5),
        (2, 2, 96, 32, false, Some(1e-5), 10000.0, 1.0),
        (9, 3, 64, 64, true, None, 100000.0, 1.0),
        (1, 1, 80, 40, false, Some(1e-5), 500000.0, 0.25),
    ] {
        // (pos, n_tokens): a prompt from 0, decode, a prompt onto a cache, decode far out.
        for ((pos, n_tokens), kv) in [(0u32, 5u32), (37, 1), (13, 77), (1000, 1)]
            .into_iter()
            .flat_map(|p| [(p, KvType::F16), (p, KvType::F32)])
        {
            let heads = Heads {
                n_head: nh,
                n_kv_head: nkv,
                head_dim: hd,
                ctx,
            };
            let rope = RopeConfig {
                n_rot,
                neox,
                theta_base,
                freq_scale,
            };
            let stride = ((nh + 2 * nkv) * hd) as usize;
            let seed = (hd + nh + n_rot + pos) as u64;
            let qkv = random_f32(seed, n_tokens as usize * stride, 2.0);
            let qn = random_f32(seed + 3, hd as usize, 1.5);
            let kn = random_f32(seed + 4, hd as usize, 1.5);
            let cache_len = (nkv * ctx * hd) as usize;
            let qkvb = upload(&gpu, "qkv", &qkv);
            let kc = gpu.storage("kc", cache_len as u64 * kv.bytes()).unwrap();
            let vc = gpu.storage("vc", cache_len as u64 * kv.bytes()).unwrap();
            let qnb = upload(&gpu, "qn", &qn);
            let knb = upload(&gpu, "kn", &kn);
            let d = kernels::rope_store(
                &gpu,
                &KvBuffers {
                    qkv: &qkvb,
                    k_cache: &kc,
                    v_cache: &vc,
                    kv,
                },
                &step,
                &dummy,
                heads,
                rope,
                qk_eps.map(|e| (&qnb, &knb, e)),
                &dummy,
            )
            .unwrap();
            run_dispatches(&gpu, &[&d], StepInfo::new(n_tokens, pos, 1), &step).await;
            let mut want_qkv = qkv.clone();
            let (mut want_k, mut want_v) = (vec![0.0; cache_len], vec![0.0; cache_len]);
            reference::rope_store(
                &mut want_qkv,
                &mut want_k,
                &mut want_v,
                heads,
                &rope,
                qk_eps.map(|e| (&qn[..], &kn[..], e)),
                pos,
                n_tokens,
            );
            // Only the Q heads of qkv change; compare those (K and V in the caches).
            let q_only = |x: &[f32]| -> Vec<f32> {
                x.chunks(stride)
                    .flat_map(|row| row[..(nh * hd) as usize].to_vec())
                    .collect()
            };
            let shape = format!(
                "heads {nh}/{nkv} of {hd}, n_rot {n_rot}, neox {neox}, qk_norm {qk_eps:?}, theta {theta_base}, freq_scale {freq_scale}, pos {pos}, tokens {n_tokens}, {kv:?} cache"
            );
            // The angle is an f32 on the GPU (1000 rad carries ~3e-5 rad) and WGSL's sin/cos are
            // approximate: ROPE_TOL for the rotated Q; the caches as kv_tol says.
            let (nmse, max_abs) = ROPE_TOL;
            let got_qkv = read(&gpu, &qkvb, qkv.len()).await;
            assert_close(
                "rope_store (q)",
                &shape,
                &q_only(&got_qkv),
                &q_only(&want_qkv),
                nmse,
                max_abs,
            );
            assert_close(
                "rope_store (k)",
                &shape,
                &read_kv(&gpu, &kc, cache_len, kv).await,
                &kv_round(&want_k, kv),
                kv_tol(kv).0,
                kv_tol(kv).1,
            );
            assert_close(
                "rope_store (v)",
                &shape,
                &read_kv(&gpu, &vc, cache_len, kv).await,
                &kv_round(&want_v, kv),
                0.0,
                0.0,
            );
        }
    }
}

/// rmsnorm in its subgroup variant (where the adapter has subgroups) and its portable one; rows
/// of `y` wider than `dim` written from a column (the MTP head's concatenation) too.
async fn rmsnorm_matches_the_reference() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let cases = [
        (1u32, 1u32, 1u32, false, Rows::Tokens, 1e-5f32, None),
        (576, 7, 1, false, Rows::Tokens, 1e-5, None),
        (640, 5, 1, true, Rows::Tokens, 1e-6, None),
        (1000, 9, 3, false, Rows::Out, 1e-5, None),
        (2048, 4, 4, true, Rows::Out, 1e-6, None),
        (257, 300, 1, false, Rows::Tokens, 1e-2, None),
        (64, 5, 1, false, Rows::Tokens, 1e-5, Some((128u32, 64u32))),
        (300, 3, 1, false, Rows::Tokens, 1e-5, Some((601, 0))),
        (96, 4, 2, true, Rows::Out, 1e-5, Some((200, 101))),
    ];
    // The portable variant too where the subgroup one runs.
    let both = kernels::subgroups_fit(&gpu, 256);
    let variants = [true].into_iter().chain(both.then_some(false));
    for (subgroups, (dim, n_tokens, n_out, accumulate, rows, eps, y_cols)) in
        variants.flat_map(|v| cases.map(|c| (v, c)))
    {
        let (stride, col0) = y_cols.unwrap_or((dim, 0));
        let x = random_f32(dim as u64, (n_tokens * dim) as usize, 3.0);
        let w = random_f32(dim as u64 + 1, dim as usize, 1.0);
        let y0 = random_f32(dim as u64 + 2, (n_tokens * stride) as usize, 1.0);
        let xb = upload(&gpu, "x", &x);
        let wb = upload(&gpu, "w", &w);
        let yb = upload(&gpu, "y", &y0);
        let d = kernels::rmsnorm(
            &gpu,
            &xb,
            &wb,
            &yb,
            &step,
            dim,
            eps,
            NormOpts {
                accumulate,
                rows,
                when: When::Always,
                subgroups,
                y_cols,
            },
        )
        .unwrap();
        run_dispatches(&gpu, &[&d], StepInfo::new(n_tokens, 0, n_out), &step).await;
        let (first, count) = match rows {
            Rows::Tokens => (0, n_tokens),
            Rows::Out => (n_tokens - n_out, n_out),
        };
        // The reference on rows of dim, then placed in rows of stride from col0.
        let (dim_u, stride_u, col0_u) = (dim as usize, stride as usize, col0 as usize);
        let mut packed: Vec<f32> = (0..count as usize)
            .flat_map(|r| y0[r * stride_u + col0_u..][..dim_u].to_vec())
            .collect();
        reference::rmsnorm(
            &x,
            &w,
            &mut packed,
            dim_u,
            eps,
            accumulate,
            first as usize,
            count as usize,
        );
        let mut want = y0.clone();
        for (r, row) in packed.chunks(dim_u).enumerate() {
            want[r * stride_u + col0_u..][..dim_u].copy_from_slice(row);
        }
        let shape = format!(
            "dim {dim}, tokens {n_tokens}, out {n_out}, accumulate {accumulate}, {rows:?}, eps {eps}, y columns {y_cols:?}, subgroups {}",
            subgroups && kernels::subgroups_fit(&gpu, 256)
        );
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
        (333, 300, Activation::Silu),
    ] {
        // Wide inputs reach the tails of both activations (and GELU's clamp of its tanh).
        let gu = random_f32(n as u64, (n_tokens * 2 * n) as usize, 12.0);
        let gub = upload(&gpu, "gu", &gu);
        let hb = gpu.storage("h", (n_tokens * n) as u64 * 4).unwrap();
        let d = kernels::glu(&gpu, &gub, &hb, &step, n, act, When::Always).unwrap();
        run_dispatches(&gpu, &[&d], StepInfo::new(n_tokens, 0, 1), &step).await;
        let want = reference::glu(&gu, n as usize, n_tokens as usize, act);
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

/// The combine's quantized output (`AttnOpts::out_q8`: the small passes' input to an int8 output
/// projection) is the f32 combine's output quantized by quantize_q8, byte for byte.
async fn combine_q8_is_combine_then_quantize() {
    let gpu = gpu().await;
    let step = step_buffer(&gpu);
    let dummy = gpu.storage("dummy", 16).unwrap();
    let ctx = 256u32;
    // (heads, kv heads, head size, position, tokens)
    for (nh, nkv, hd, pos, n_tokens) in [
        (8u32, 2u32, 128u32, 200u32, 3u32),
        (6, 3, 64, 130, 5),
        (4, 2, 32, 100, 16),
        // 96 values a row: the units' and sums' last vec4s have padding.
        (3, 1, 32, 100, 4),
    ] {
        let heads = Heads {
            n_head: nh,
            n_kv_head: nkv,
            head_dim: hd,
            ctx,
        };
        let s = StepInfo::new(n_tokens, pos, 1);
        assert!(
            kernels::attention::combines(&heads, 0)(&s),
            "{nh} heads: no combine"
        );
        let seed = (nh * 1000 + hd + pos) as u64;
        let q = random_f32(seed, (n_tokens * (nh + 2 * nkv) * hd) as usize, 1.0);
        let k = random_f32(seed + 1, (nkv * ctx * hd) as usize, 1.0);
        let v = random_f32(seed + 2, (nkv * ctx * hd) as usize, 1.0);
        let (qb, kb, vb) = (
            upload(&gpu, "q", &q),
            upload(&gpu, "k", &k),
            upload(&gpu, "v", &v),
        );
        let pb = gpu
            .storage("partial", kernels::attention_partial_len(&heads) * 4)
            .unwrap();
        let n_cols = nh * hd;
        let ob = gpu.storage("out", (n_tokens * n_cols) as u64 * 4).unwrap();
        let size = kernels::q8_bytes(n_tokens, n_cols);
        let (got_q, want_q) = (
            gpu.storage("got", size).unwrap(),
            gpu.storage("want", size).unwrap(),
        );
        let attention = |out_q8| {
            let opts = AttnOpts {
                scale: 2.0 / (hd as f32).sqrt(),
                window: 0,
                softcap: 0.0,
                decode_rope: None,
                subgroups: true,
                kv: KvType::F32,
                min_grouped_workgroups: 0,
                out_q8,
            };
            kernels::attention(&gpu, &qb, &kb, &vb, &ob, &pb, &step, &dummy, heads, opts).unwrap()
        };
        let d = attention(Some(&got_q));
        run_attention_dispatches(&gpu, &[&d[0], &d[1]], s, &step, nh).await;
        let d = attention(None);
        let quantize =
            kernels::quantize_q8(&gpu, &ob, &want_q, &step, n_cols, Rows::Tokens, Q8From::X)
                .unwrap();
        run_attention_dispatches(&gpu, &[&d[0], &d[1], &quantize], s, &step, nh).await;
        let case = format!("heads {nh}/{nkv} of {hd}, {n_tokens} tokens at {pos}");
        assert_same_bytes(&gpu, &got_q, &want_q, size, &case).await;
    }
}

super::gpu_tests!(
    combine_q8_is_combine_then_quantize,
    attention_matches_the_reference,
    attention_with_decode_prologue_matches_the_reference,
    attention_over_a_row_table_matches_each_row_alone,
    rope_store_matches_the_reference,
    rmsnorm_matches_the_reference,
    glu_matches_the_reference
);
