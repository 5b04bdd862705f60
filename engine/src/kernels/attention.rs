//! Split ("flash decoding") attention over the KV cache (attention.wgsl) and the merge of its
//! parts: by the workgroup that finishes a head's last part where each query head has its own
//! workgroups (the `_last` variant), by a combine dispatch (attention_combine.wgsl) where heads
//! share them; with RoPE and the cache store in the decode prologue.

use bytemuck::{Pod, Zeroable};

use super::dispatch::{f32s, Cost, Dispatch, Seqs, StepInfo, When};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::rope::{Heads, KvType, RopeConfig};
use super::shape::reduce_variant;
use crate::gpu::{Binding, Gpu, PipelineKey};
use crate::Result;

/// Threads of an attention workgroup (`WG` in attention.wgsl), all summing the q/k norm.
const ATTN_WG: u32 = 256;
/// Keys per attention tile (`TK` in attention.wgsl); a split covers whole tiles.
pub const ATTN_TILE: u32 = 64;
/// Most (query, part) pairs per head a pass splits into: the partial results of split attention
/// take at most `[n_head, MAX_ATTN_SPLITS, head_dim + 4]` floats (see [`attention_partial_len`]).
pub const MAX_ATTN_SPLITS: u32 = 64;
/// Passes of up to this many tokens (decode, speculative verification) split their keys; longer
/// ones have parallelism enough in their queries.
pub const MAX_SPLIT_TOKENS: u32 = 16;

/// Query heads one attention workgroup serves where the pass has workgroups enough
/// ([`grouped_takes`]; `GQ` in attention.wgsl): the most, up to 4, that divide a KV head's group
/// and keep the queries within 512 floats of workgroup memory. Each key and value the workgroup
/// loads serves them all.
fn heads_per_workgroup(h: &Heads) -> u32 {
    let group = h.n_head / h.n_kv_head.max(1);
    (1..=4)
        .rev()
        .find(|g| group.is_multiple_of(*g) && g * h.head_dim <= 512)
        .unwrap_or(1)
}

/// Workgroups a pass's attention should have at least (about two per SM of a large GPU) before
/// its query heads share workgroups (`grouped_takes`).
pub const ATTN_MIN_WORKGROUPS: u32 = 256;

/// Workgroups a decode step's attention aims at, one query head each ([`attention_splits`]); at
/// long context the parts are then many enough for the heads to share workgroups
/// ([`grouped_takes`]): each key and value read once for a KV head's group. H200, decode at 4k
/// context (bench/RESULTS.md, twenty-fourth session): Qwen3-8B shape 226.9 tok/s with 512 (16
/// parts of four tiles, a head a workgroup), 257.3 with 1024 (32 parts of two, four heads a
/// workgroup), 249.7 with 2048 (64 of one); Qwen3-30B-A3B 199.6, 227.9, 222.1; at 512 context
/// the same (291.0).
pub const ATTN_DECODE_WORKGROUPS: u32 = 1024;

/// Whether pass `s`, split into `splits` parts, takes the workgroups of `gq` query heads: where
/// they are still `min` ([`ATTN_MIN_WORKGROUPS`] in a model: long contexts; measured on the H200,
/// Qwen3-8B's decode at 4k context 172.7 -> 184.1 tok/s, at 512 226.6 -> 218.3 had it taken them
/// there too).
fn grouped_takes(n_head: u32, gq: u32, s: &StepInfo, splits: u32, min: u32) -> bool {
    gq > 1 && n_head / gq * s.n_tokens * splits >= min
}

/// Parts per query for a pass of `n_head` query heads, each of whole 64-key tiles of the longest
/// row's keys. A decode step cuts its keys into at least [`ATTN_DECODE_WORKGROUPS`] / `n_head`
/// parts (workgroups to fill a large GPU) of as many tiles as that allows: with each thread's
/// loads a tile ahead (attention.wgsl), a part of several tiles hides its loads where one of a
/// tile waits for them. Small passes take a tile a part. At most `MAX_ATTN_SPLITS / n_tokens`
/// parts; a split pass costs one more dispatch (the combine).
pub fn attention_splits(s: &StepInfo, n_head: u32) -> u32 {
    if s.n_tokens > MAX_SPLIT_TOKENS {
        return 1;
    }
    let tiles = s.keys().div_ceil(ATTN_TILE);
    let most = (MAX_ATTN_SPLITS / s.n_tokens.max(1)).max(1);
    if s.n_tokens > 1 {
        return tiles.clamp(1, most);
    }
    let parts = ATTN_DECODE_WORKGROUPS.div_ceil(n_head.max(1));
    let per_part = (tiles / parts).max(1);
    tiles.div_ceil(per_part).clamp(1, most)
}

/// The cost of attention in pass `s` with a cache of `kv_bytes` bytes per key (or value) vector
/// of one head (4 for f32) and a sliding `window` (0: none): per kv head the keys and values of
/// every position some query sees (`pos + n_tokens`, or the window's), each once, and the
/// queries' q rows; `4 head_dim` FLOPs per (query head, visible key): QK^T and PV. A batched step
/// over several sequences (the row table) counts every row at the longest row's keys, a bound.
pub(crate) fn attention_cost(h: &Heads, kv_bytes: f64, window: u32, s: &StepInfo) -> Cost {
    let w = if window == 0 { u64::MAX } else { window as u64 };
    let (keys, seen) = match s.seqs {
        Seqs::One(_) => {
            let end = (s.pos + s.n_tokens) as u64;
            // Query at position p sees keys max(0, p + 1 - w)..=p.
            let first = (s.pos as u64 + 1).saturating_sub(w);
            let seen: u64 = (s.pos as u64..end).map(|p| (p + 1).min(w)).sum();
            (end - first, seen)
        }
        Seqs::Table { keys } => {
            let all = (keys as u64).min(w) * s.n_tokens as u64;
            (all, all)
        }
    };
    let hd = h.head_dim as u64;
    Cost {
        bytes: 2.0 * (keys * h.n_kv_head as u64 * hd) as f64 * kv_bytes
            + f32s(s.n_tokens as u64 * (h.n_head + 2 * h.n_kv_head) as u64 * hd),
        flops: 4.0 * (hd * h.n_head as u64) as f64 * seen as f64,
    }
}

const ATTN_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Read,
    Binding::Uniform,
    Binding::Uniform,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CombineParams {
    n_head: u32,
    head_dim: u32,
    _pad: [u32; 2],
}

/// Words of the scratch buffer that split attention writes its partial results to: per
/// (token, head, part) the running max and sum (padded to a vec4) and the unnormalised output,
/// for at most `MAX_ATTN_SPLITS` (token, part) pairs per head (`attention_splits`); then the
/// per-head pipeline's count of each (token, head)'s finished parts (common/attn_parts_last.wgsl),
/// zero between passes.
pub fn attention_partial_len(heads: &Heads) -> u64 {
    heads.n_head as u64 * MAX_ATTN_SPLITS as u64 * (heads.head_dim as u64 + 4 + 1)
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct AttnParams {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    ctx: u32,
    scale: f32,
    window: u32,
    softcap: f32,
    q_stride: u32,
    n_rot: u32,
    mode: u32,
    theta_base: f32,
    freq_scale: f32,
    eps: f32,
    flags: u32,
    _pad: [u32; 2],
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "attention",
        layout: ATTN_LAYOUT,
        unused: &[],
        uniforms: &[(7, size_of::<AttnParams>()), (8, size_of::<StepUniform>())],
        constants: &[("WG", ATTN_WG), ("TK", ATTN_TILE)],
    },
    KernelBinds {
        stem: "attention_last",
        layout: ATTN_LAYOUT,
        unused: &[],
        uniforms: &[(7, size_of::<AttnParams>()), (8, size_of::<StepUniform>())],
        constants: &[
            ("WG", ATTN_WG),
            ("TK", ATTN_TILE),
            ("MAX_SPLITS", MAX_ATTN_SPLITS),
        ],
    },
    KernelBinds {
        stem: "attention_coop",
        layout: ATTN_LAYOUT,
        // No split parts, no decode prologue, one sequence (no row table).
        unused: &[4, 5, 6, 9],
        uniforms: &[(7, size_of::<AttnParams>()), (8, size_of::<StepUniform>())],
        constants: &[("BK", ATTN_TILE)],
    },
    KernelBinds {
        stem: "attention_combine",
        layout: COMBINE_LAYOUT,
        unused: &[],
        uniforms: &[
            (2, size_of::<CombineParams>()),
            (3, size_of::<StepUniform>()),
        ],
        constants: &[],
    },
];

pub struct AttnOpts<'a> {
    pub scale: f32,
    /// Sliding window in positions (0: none).
    pub window: u32,
    /// Score soft-capping (0: none).
    pub softcap: f32,
    /// Do rope_store's work (q/k norm, RoPE, the KV-cache store) in the prologue of decode
    /// passes; then run rope_store for batched passes only (`Dispatch::only(When::Batch)`).
    pub decode_rope: Option<DecodeRope<'a>>,
    /// Sum the decode prologue's q/k norm with subgroup operations where the adapter has them
    /// (the `_sg` variant); `false` takes the portable variant.
    pub subgroups: bool,
    /// What the cache holds.
    pub kv: KvType,
    /// Workgroups a pass must still have for its query heads to share workgroups
    /// (`grouped_takes`): [`ATTN_MIN_WORKGROUPS`] in a model; 0 makes every pass share them.
    pub min_grouped_workgroups: u32,
    /// Where the small passes that take the combine ([`combines`]) write its output quantized
    /// for the int8 products (quantize_q8's rows, [`q8_bytes`](super::q8_bytes)) instead of to
    /// `out`; `None` writes `out` always. The head size must be a multiple of 32.
    pub out_q8: Option<&'a wgpu::Buffer>,
}

/// (partial results, output, parameters, step, quantized output): attention_combine's layout.
const COMBINE_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
    Binding::ReadWrite,
];

/// Whether a pass's attention ([`attention`] with `heads` and `min_grouped_workgroups`) merges
/// its parts in the combine dispatch: split, over workgroups of several query heads.
pub fn combines(heads: &Heads, min_grouped_workgroups: u32) -> impl Fn(&StepInfo) -> bool + Copy {
    let (n_head, gq) = (heads.n_head, heads_per_workgroup(heads));
    move |s| {
        let splits = attention_splits(s, n_head);
        splits > 1 && grouped_takes(n_head, gq, s, splits, min_grouped_workgroups)
    }
}

/// RoPE and the optional q/k norm weights and epsilon, for attention's decode prologue.
pub struct DecodeRope<'a> {
    pub rope: RopeConfig,
    pub qk_norm: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer, f32)>,
}

/// Whether passes of more than [`MAX_SPLIT_TOKENS`] take attention_coop.wgsl, on the matrix
/// units: where the adapter has them, with the f16 cache, which that kernel reads as fragments of
/// 16 dimensions (heads a multiple of 16) and of whole 64-key tiles (the cache too).
pub(crate) fn coop_fits(gpu: &Gpu, heads: &Heads, kv: KvType) -> bool {
    gpu.features.coop
        && kv == KvType::F16
        && heads.head_dim.is_multiple_of(16)
        && heads.ctx.is_multiple_of(ATTN_TILE)
}

/// Whether pass `s` takes attention_coop.wgsl where [`coop_fits`]: a pass over one sequence of
/// more than [`MAX_SPLIT_TOKENS`] tokens (a prompt chunk; no row table).
pub(crate) fn coop_takes(s: &StepInfo) -> bool {
    s.n_tokens > MAX_SPLIT_TOKENS && matches!(s.seqs, Seqs::One(_))
}

/// Causal (optionally sliding-window) grouped-query attention of the pass's queries (the Q heads
/// of the QKV output `q`) over the caches `[n_seq, n_kv_head, ctx, head_dim]`, each row over its
/// own sequence's keys (the step uniform, or the row table `rows` of [`Row`](super::Row)s),
/// into `out` `[n_tokens, n_head * head_dim]`: the split attention kernel and, when a pass
/// splits over workgroups of several query heads, the combine kernel (`partial` holds
/// [`attention_partial_len`] words); long passes
/// over one sequence on the matrix units where [`coop_fits`]. With `opts.decode_rope`, a pass of
/// one token reads q, k and v raw from `q` and stores k and v itself (no rope_store before it).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    gpu: &Gpu,
    q: &wgpu::Buffer,
    k_cache: &wgpu::Buffer,
    v_cache: &wgpu::Buffer,
    out: &wgpu::Buffer,
    partial: &wgpu::Buffer,
    step: &wgpu::Buffer,
    rows: &wgpu::Buffer,
    heads: Heads,
    opts: AttnOpts,
) -> Result<[Dispatch; 2]> {
    if !heads.head_dim.is_multiple_of(4) || heads.head_dim > 256 {
        return Err(crate::Error::InvalidArgument(format!(
            "attention needs a head size that is a multiple of 4 and at most 256, not {}",
            heads.head_dim
        )));
    }
    if opts.out_q8.is_some() && !heads.head_dim.is_multiple_of(32) {
        return Err(crate::Error::InvalidArgument(format!(
            "attention's quantized output needs heads of whole 32-value blocks, not {}",
            heads.head_dim
        )));
    }
    let hd = ("HD", heads.head_dim);
    let gq = heads_per_workgroup(&heads);
    let shader =
        |stem: &str| reduce_variant(gpu, opts.kv.variant(stem.into()), ATTN_WG, opts.subgroups);
    // Pipelines: one query head a workgroup (merging a split pass's parts itself: the `_last`
    // variant), then `gq` of them (the combine dispatch merges their parts), then attention_coop.
    let mut pipelines = vec![gpu.pipeline(&PipelineKey {
        shader: shader("attention_last"),
        constants: vec![hd, ("GQ", 1), ("MAX_SPLITS", MAX_ATTN_SPLITS)],
        layout: ATTN_LAYOUT,
    })?];
    if gq > 1 {
        pipelines.push(gpu.pipeline(&PipelineKey {
            shader: shader("attention"),
            constants: vec![hd, ("GQ", gq)],
            layout: ATTN_LAYOUT,
        })?);
    }
    let coop = pipelines.len();
    if coop_fits(gpu, &heads, opts.kv) {
        pipelines.push(gpu.pipeline(&PipelineKey {
            shader: "attention_coop".into(),
            constants: vec![hd],
            layout: ATTN_LAYOUT,
        })?);
    }
    let combine = [0, 1]
        .into_iter()
        .take(1 + opts.out_q8.is_some() as usize)
        .map(|q8| {
            gpu.pipeline(&PipelineKey {
                shader: "attention_combine".into(),
                constants: vec![hd, ("Q8", q8)],
                layout: COMBINE_LAYOUT,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let params = AttnParams {
        n_head: heads.n_head,
        n_kv_head: heads.n_kv_head,
        head_dim: heads.head_dim,
        ctx: heads.ctx,
        scale: opts.scale,
        window: opts.window,
        softcap: opts.softcap,
        q_stride: (heads.n_head + 2 * heads.n_kv_head) * heads.head_dim,
        n_rot: opts.decode_rope.as_ref().map_or(0, |r| r.rope.n_rot),
        mode: opts.decode_rope.as_ref().map_or(0, |r| r.rope.neox as u32),
        theta_base: opts.decode_rope.as_ref().map_or(1.0, |r| r.rope.theta_base),
        freq_scale: opts.decode_rope.as_ref().map_or(1.0, |r| r.rope.freq_scale),
        eps: opts
            .decode_rope
            .as_ref()
            .and_then(|r| r.qk_norm)
            .map_or(0.0, |n| n.2),
        flags: opts
            .decode_rope
            .as_ref()
            .map_or(0, |r| r.qk_norm.is_some() as u32 | 2),
        _pad: [0; 2],
    };
    // Absent norm weights: bind q again (read-only, never read).
    let (qn, kn) = opts
        .decode_rope
        .as_ref()
        .and_then(|r| r.qk_norm)
        .map_or((q, q), |n| (n.0, n.1));
    let pbuf = gpu.uniform("attention", &params);
    let cbuf = gpu.uniform(
        "attention_combine",
        &CombineParams {
            n_head: heads.n_head,
            head_dim: heads.head_dim,
            _pad: [0; 2],
        },
    );
    let n_head = heads.n_head;
    // Bytes of one cached element.
    let kv_bytes = opts.kv.bytes() as f64;
    let window = opts.window;
    let has_coop = pipelines.len() > coop;
    let min_grouped = opts.min_grouped_workgroups;
    let combines = combines(&heads, min_grouped);
    let q8 = opts.out_q8.is_some();
    let partial_floats = (heads.n_head * (heads.head_dim + 4)) as u64;
    Ok([
        Dispatch {
            label: "attention".into(),
            grid: Box::new(move |s| {
                if has_coop && coop_takes(s) {
                    return Some((coop, [n_head, s.n_tokens.div_ceil(16), 1]));
                }
                let splits = attention_splits(s, n_head);
                if grouped_takes(n_head, gq, s, splits, min_grouped) {
                    return Some((1, [n_head / gq, s.n_tokens, splits]));
                }
                Some((0, [n_head, s.n_tokens, splits]))
            }),
            pipelines,
            bind_group: gpu.bind_group(
                ATTN_LAYOUT,
                &[q, k_cache, v_cache, out, partial, qn, kn, &pbuf, step, rows],
            ),
            cost: Box::new(move |s| attention_cost(&heads, kv_bytes, window, s)),
        },
        Dispatch {
            label: "attention_combine".into(),
            pipelines: combine,
            // Without `out_q8`, `rows` stands in for it: bound, never written.
            bind_group: gpu.bind_group(
                COMBINE_LAYOUT,
                &[partial, out, &cbuf, step, opts.out_q8.unwrap_or(rows)],
            ),
            grid: Box::new(move |s| {
                let pipeline = (q8 && When::Small.admits(s)) as usize;
                combines(s).then_some((pipeline, [n_head, s.n_tokens, 1]))
            }),
            cost: Box::new(move |s| {
                let parts = s.n_tokens as u64 * attention_splits(s, n_head) as u64;
                Cost::reads(f32s(parts * partial_floats))
            }),
        },
    ])
}
