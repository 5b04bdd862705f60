//! Matrix products with the weights on the GPU: `mat` (the matvec kernel for one token, the
//! small-batch matvec for 2 to [`MATVEC_BATCH`], the register-blocked matmul for more;
//! matvec.wgsl, matvec_batch.wgsl, matmul.wgsl), and the weight matrices they read
//! ([`GpuWeight`]). A gated FFN's input side in one dispatch is `ffn_in`'s.

use bytemuck::{Pod, Zeroable};

use super::dispatch::{
    f32s, grid_2d, key, qtype_suffix, Cost, CostRule, Dispatch, Rows, When, IN2_OUT_LAYOUT,
    IN_OUT_LAYOUT,
};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::glu::Activation;
use super::matvec_pair::{matvec_pair, pair_kernel};
use super::shape::MatvecShape;
#[cfg(test)]
use super::shape::MATVEC_WG;
use crate::gpu::{Binding, Gpu};
use crate::quant::GgmlType;
use crate::Result;

/// A weight matrix on the GPU, split by rows into chunks that each fit one storage binding. A
/// matrix may stack several GGUF tensors (Q, K and V; gate and up): consecutive parts of one
/// type share a chunk, so a stacked product is one dispatch when the types agree.
pub struct GpuWeight {
    pub name: String,
    pub n_rows: u32,
    pub n_cols: u32,
    pub chunks: Vec<WeightChunk>,
}

pub struct WeightChunk {
    pub buffer: wgpu::Buffer,
    pub ty: GgmlType,
    pub row0: u32,
    pub n_rows: u32,
}

/// Rows and tokens of a matmul workgroup's tile (`TM`, `TN` in matmul.wgsl; matmul_coop.wgsl's
/// tile has the rows and twice the tokens).
const MATMUL_TILE: u32 = 64;

/// Tokens a matvec_batch workgroup takes (`BATCH` in matvec_batch.wgsl): it reads each weight
/// once for all of them; a pass's groups of this many are grid z.
pub(super) const MATVEC_BATCH_GROUP: u32 = 8;

/// The token counts matvec_batch_q8 has a pipeline for (`TOKENS`): a pass of n tokens takes the
/// first that holds them (the widest, in groups, past it), so a 2-token verification keeps two
/// tokens' sums, not eight. The kernel holds at most the last (its named accumulators).
const SMALL_TOKENS: [u32; 3] = [2, 4, 8];

/// Most tokens a pass for which `mat` takes matvec_batch.wgsl; longer passes take the matmul.
/// Past 8 tokens the small-batch kernel reads the weights once per group of 8 while the matmul
/// computes whole 64-token tiles (a 9-token pass costs it a 64-token one): 16 guesses the
/// crossover; measure it on each GPU.
pub(crate) const MATVEC_BATCH: u32 = 16;

pub(super) const MAT_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Uniform,
    Binding::Read,
    Binding::Read,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(super) struct MatParams {
    pub(super) n_rows: u32,
    pub(super) n_cols: u32,
    pub(super) y_stride: u32,
    pub(super) y_offset: u32,
    pub(super) flags: u32,
    pub(super) rows_mode: u32,
    pub(super) eps: f32,
    /// [`matvec_route`](super::route_share::matvec_route)'s: the router's experts, the slot it adds into, the slot it clears.
    pub(super) route_experts: u32,
    pub(super) route_at: u32,
    pub(super) route_clear: u32,
    pub(super) _pad: [u32; 2],
}

impl MatParams {
    /// The parameters of the products over chunk `chunk` of `w` with `opts` (`mat`'s, the pair's,
    /// and the route kernels' before their own fields).
    pub(super) fn of_chunk(w: &GpuWeight, chunk: &WeightChunk, opts: &MatOpts) -> MatParams {
        MatParams {
            n_rows: chunk.n_rows,
            n_cols: w.n_cols,
            y_stride: opts.y_stride.unwrap_or(w.n_rows),
            y_offset: chunk.row0,
            flags: opts.bias.is_some() as u32
                | (opts.accumulate as u32) << 1
                | (opts.norm.is_some() as u32) << 2,
            rows_mode: opts.rows.mode(),
            eps: opts.norm.map_or(0.0, |n| n.1),
            ..Zeroable::zeroed()
        }
    }
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "matvec",
        layout: MAT_LAYOUT,
        // The bind group is shared with matvec_batch_q8, which alone reads binding 8.
        unused: &[8],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "matvec_batch",
        layout: MAT_LAYOUT,
        // The bind group is the matvec's (binding 6: the norm prologue's weights), less x
        // quantized.
        unused: &[8],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "matmul",
        layout: MAT_LAYOUT,
        // The bind group is the matvec's; only its norm prologue reads binding 6, only its wide
        // unit loads binding 7, only matvec_batch_q8 binding 8.
        unused: &[6, 7, 8],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[],
    },
    KernelBinds {
        stem: "matmul_coop",
        layout: MAT_LAYOUT,
        // As the matmul's, but it reads x as f16 (binding 8, `MatOpts::x_f16`) instead of x, and
        // the weights' wide view (binding 7).
        unused: &[6],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[],
    },
    KernelBinds {
        stem: "matvec_q8",
        layout: MAT_LAYOUT,
        unused: &[8],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "matvec_batch_q8",
        layout: MAT_LAYOUT,
        // The bind group is the matvec's; only its norm prologue reads binding 6. It reads x
        // quantized (binding 8).
        unused: &[6],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG), ("TOKENS", SMALL_TOKENS[2])],
    },
    KernelBinds {
        stem: "to_f16",
        layout: IN_OUT_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<ToF16Params>()), (3, size_of::<StepUniform>())],
        constants: &[],
    },
    KernelBinds {
        stem: "quantize_q8",
        layout: IN2_OUT_LAYOUT,
        unused: &[],
        uniforms: &[
            (3, size_of::<QuantizeParams>()),
            (4, size_of::<StepUniform>()),
        ],
        constants: &[("WG", QUANTIZE_WG)],
    },
];

/// Options of a matrix product `y (+)= W x (+ bias)`.
#[derive(Clone, Copy)]
pub struct MatOpts<'a> {
    pub bias: Option<&'a wgpu::Buffer>,
    /// Add into `y` instead of overwriting it (the residual add fused into the epilogue).
    pub accumulate: bool,
    /// Floats between consecutive tokens' rows of `y` (the output width, by default `n_rows`).
    pub y_stride: Option<u32>,
    pub rows: Rows,
    /// RMSNorm `x` first with these weights and epsilon (decode only: the matvec prologue).
    pub norm: Option<(&'a wgpu::Buffer, f32)>,
    pub when: When,
    /// How the matvec and the small-batch kernels split their workgroups; `None` for the adapter's
    /// choice for the matrix, [`MatvecShape::for_matrix`] ([`MatvecShape::for_small`],
    /// [`MatvecShape::for_batch`]).
    pub matvec: Option<MatvecShape>,
    /// x quantized for the pass by [`quantize_q8`]: passes of 2 to [`MATVEC_BATCH`] tokens then
    /// take matvec_batch_q8.wgsl, which reads it instead of x, for the weight chunks whose type
    /// [`takes_small_q8`]; `None` keeps them on the f32 matvec_batch.wgsl.
    pub x_q8: Option<&'a wgpu::Buffer>,
    /// Room for x as f16 (`n_tokens * n_cols` halves; the same buffer as `x_q8` where both are
    /// given, bound at the same place): on an adapter with matrix units, the passes of more than
    /// [`MATVEC_BATCH`] tokens convert x into it ([`to_f16`]) and take matmul_coop.wgsl, which
    /// reads it; `None` keeps them on the f32 matmul.wgsl.
    pub x_f16: Option<&'a wgpu::Buffer>,
}

impl Default for MatOpts<'_> {
    fn default() -> Self {
        MatOpts {
            bias: None,
            accumulate: false,
            y_stride: None,
            rows: Rows::Tokens,
            norm: None,
            when: When::Always,
            matvec: None,
            x_q8: None,
            x_f16: None,
        }
    }
}

/// The first eight bindings of [`MAT_LAYOUT`] for a chunk's weights `buffer` and its
/// parameters `params`, which the pair kernel (matvec_pair.rs) shares: weights, x, y, the bias,
/// the parameters, the step, the norm's weights and the weights' 16-byte view (`dummy` where
/// `opts` has no bias or norm).
pub(super) fn chunk_bindings<'a>(
    buffer: &'a wgpu::Buffer,
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    params: &'a wgpu::Buffer,
    step: &'a wgpu::Buffer,
    dummy: &'a wgpu::Buffer,
    opts: &MatOpts<'a>,
) -> [&'a wgpu::Buffer; 8] {
    [
        buffer,
        x,
        y,
        opts.bias.unwrap_or(dummy),
        params,
        step,
        opts.norm.map_or(dummy, |n| n.0),
        buffer,
    ]
}

pub(super) fn check_cols(w: &GpuWeight) -> Result<()> {
    if !w.n_cols.is_multiple_of(32) {
        return Err(crate::Error::InvalidArgument(format!(
            "{}: row length {} is not a multiple of 32",
            w.name, w.n_cols
        )));
    }
    Ok(())
}

/// The matmul for passes of more than [`MATVEC_BATCH`] tokens and the tokens of its tile: on the
/// adapter's matrix units where it has them (matmul_coop.wgsl), else the register-blocked f32
/// tiles (matmul.wgsl). Both tiles have [`MATMUL_TILE`] rows.
fn matmul_kernel(gpu: &Gpu, x_f16: bool) -> (&'static str, u32) {
    if gpu.features.coop && x_f16 {
        ("matmul_coop", 2 * MATMUL_TILE)
    } else {
        ("matmul", MATMUL_TILE)
    }
}

/// Whether passes of 2 to [`MATVEC_BATCH`] tokens over weights of type `ty` take
/// matvec_batch_q8.wgsl (x quantized once by [`quantize_q8`]) on this adapter: it has the int8 dot
/// product, and the type a `_q8` unit.
pub fn takes_small_q8(gpu: &Gpu, ty: GgmlType) -> bool {
    gpu.features.int8_dot && super::shape::has_q8_unit(ty)
}

/// Bytes from which a weight chunk's small passes take matvec_batch_q8 in a model's forward
/// pass ([`small_q8_pays`]). Below it the pass is bound by its dispatches, and the quantization's
/// own dispatch costs more than the kernel saves: on the H200, the MTP demo model (matrices of 0.1
/// to 2.2 MB) verified at 1,500 tok/s with every matrix on it against 1,767 before, while the
/// 4.7 MB attention output of the 30B MoE shape went from 1,369 to 858 us a 4-token pass, the
/// 9.4 MB one of the dense 8B from 1,634 to 878 (bench/RESULTS.md, eleventh session).
pub const SMALL_Q8_MIN_BYTES: u64 = 4 << 20;

/// [`SMALL_Q8_MIN_BYTES`] where a model runs; none in the engine's unit tests, whose tiny models
/// would otherwise never take the path.
const PAYS_FROM: u64 = if cfg!(test) { 0 } else { SMALL_Q8_MIN_BYTES };

/// Whether a forward pass quantizes x for chunk `c`'s small passes: its type
/// [`takes_small_q8`], and it holds at least [`SMALL_Q8_MIN_BYTES`].
pub fn small_q8_pays(gpu: &Gpu, c: &WeightChunk) -> bool {
    pays_from(gpu, c, PAYS_FROM)
}

fn pays_from(gpu: &Gpu, c: &WeightChunk, min_bytes: u64) -> bool {
    takes_small_q8(gpu, c.ty) && c.buffer.size() >= min_bytes
}

/// Whether a forward pass's small passes quantize x for `w` (some chunk of it
/// [`small_q8_pays`]), and whether every chunk of `w` then reads x': `mat` gives x' to each
/// chunk whose type [`takes_small_q8`], large or not, so only where one does not does the pass
/// need x on f32 (the norm into xn) beside it.
pub fn small_q8_reads(gpu: &Gpu, w: &GpuWeight) -> (bool, bool) {
    small_q8_reads_from(gpu, w, PAYS_FROM)
}

pub(super) fn small_q8_reads_from(gpu: &Gpu, w: &GpuWeight, min_bytes: u64) -> (bool, bool) {
    let any = w.chunks.iter().any(|c| pays_from(gpu, c, min_bytes));
    let all = w.chunks.iter().all(|c| takes_small_q8(gpu, c.ty));
    (any, any && all)
}

/// `y[t, :] (+)= W x[t, :] (+ bias)` for the tokens of the pass: the matvec kernel for one
/// token, the small-batch kernel (each weight read once per 2, 4 or 8 tokens: matvec_batch_q8 from
/// `opts.x_q8` where given and [`takes_small_q8`], else matvec_batch) for 2 to [`MATVEC_BATCH`],
/// the matmul ([`matmul_kernel`]) for more. One dispatch per weight chunk.
pub fn mat(
    gpu: &Gpu,
    w: &GpuWeight,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    opts: &MatOpts,
) -> Result<Vec<Dispatch>> {
    check_cols(w)?;
    let coop = gpu.features.coop && opts.x_f16.is_some();
    // The small passes' f32 kernel (matvec_batch.wgsl) has the prologue too.
    let small_f32 = opts.when == When::Small && opts.x_q8.is_none();
    if opts.norm.is_some() && opts.when != When::Decode && !small_f32 {
        return Err(crate::Error::InvalidArgument(
            "the norm prologue exists only in the decode matvec and the small passes' f32 kernel"
                .into(),
        ));
    }
    let mut out = Vec::new();
    if let Some(xh) = opts.x_f16.filter(|_| coop) {
        out.push(to_f16(gpu, x, xh, step, w.n_cols, opts.rows, opts.when)?);
    }
    // Two chunks of different types take one decode dispatch between them where a pair kernel
    // has them and fits the shape; their own dispatches then take the other passes only.
    let pair = pair_kernel(gpu, w, opts.matvec);
    let paired = pair.is_some();
    if let Some(pair) = pair {
        out.push(matvec_pair(gpu, w, x, y, step, dummy, opts, pair)?);
    }
    for chunk in &w.chunks {
        let q = qtype_suffix(chunk.ty)?;
        let shape = opts
            .matvec
            .unwrap_or_else(|| MatvecShape::for_matrix(gpu, chunk.n_rows, w.n_cols, chunk.ty));
        let matvec_rows = shape.workgroup_rows();
        let matvec = shape.kernel("matvec", chunk.ty)?;
        let matvec = gpu.pipeline(&shape.rows_key(gpu, matvec, MAT_LAYOUT)?)?;
        // The small-batch pipelines and the most tokens a workgroup of each takes.
        let (batch, batch_rows) = match opts.x_q8 {
            Some(_) if takes_small_q8(gpu, chunk.ty) => {
                let small = opts.matvec.map_or_else(
                    || MatvecShape::for_small(gpu, chunk.n_rows, w.n_cols, chunk.ty),
                    |s| MatvecShape { int8: true, ..s },
                );
                let kernel = format!("matvec_batch_q8_{q}");
                let key = small.rows_key(gpu, kernel, MAT_LAYOUT)?;
                let pipelines = SMALL_TOKENS
                    .iter()
                    .map(|&t| {
                        let mut key = key.clone();
                        key.constants.push(("TOKENS", t));
                        Ok((t, gpu.pipeline(&key)?))
                    })
                    .collect::<Result<Vec<_>>>()?;
                (pipelines, small.workgroup_rows())
            }
            _ => {
                let f32_shape = opts.matvec.map_or_else(
                    || MatvecShape::for_batch(gpu, w.n_cols, chunk.ty),
                    |s| MatvecShape { int8: false, ..s },
                );
                let kernel = format!("matvec_batch_{q}");
                let mut key = f32_shape.key(gpu, kernel, MAT_LAYOUT)?;
                key.constants.push(("NORM", opts.norm.is_some() as u32));
                (
                    vec![(MATVEC_BATCH_GROUP, gpu.pipeline(&key)?)],
                    f32_shape.rows,
                )
            }
        };
        let (matmul, matmul_tokens) = matmul_kernel(gpu, coop);
        let matmul = gpu.pipeline(&key(format!("{matmul}_{q}"), MAT_LAYOUT))?;
        let pbuf = gpu.uniform(&w.name, &MatParams::of_chunk(w, chunk, opts));
        let bind_group = gpu.bind_group(
            MAT_LAYOUT,
            &[
                &chunk_bindings(&chunk.buffer, x, y, &pbuf, step, dummy, opts)[..],
                &[opts.x_q8.or(opts.x_f16).unwrap_or(dummy)],
            ]
            .concat(),
        );
        let (rows, when) = (opts.rows, opts.when);
        let (batch_tokens, batch): (Vec<u32>, Vec<_>) = batch.into_iter().unzip();
        let n_rows = chunk.n_rows;
        out.push(Dispatch {
            cost: mat_cost_rule(chunk, w.n_cols, opts),
            label: w.name.clone(),
            pipelines: [matvec].into_iter().chain(batch).chain([matmul]).collect(),
            bind_group,
            grid: Box::new(move |s| {
                if !when.admits(s) {
                    return None;
                }
                match rows.count(s) {
                    0 => None,
                    1 if paired => None,
                    1 => Some((0, grid_2d(n_rows.div_ceil(matvec_rows)))),
                    n @ 2..=MATVEC_BATCH => {
                        let [gx, gy, _] = grid_2d(n_rows.div_ceil(batch_rows));
                        // The first pipeline whose workgroups take all n tokens, else the widest.
                        let i = batch_tokens
                            .iter()
                            .position(|&t| t >= n)
                            .unwrap_or(batch_tokens.len() - 1);
                        Some((1 + i, [gx, gy, n.div_ceil(batch_tokens[i])]))
                    }
                    n => Some((
                        1 + batch_tokens.len(),
                        [n_rows.div_ceil(MATMUL_TILE), n.div_ceil(matmul_tokens), 1],
                    )),
                }
            }),
        });
    }
    Ok(out)
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ToF16Params {
    n_cols: u32,
    rows_mode: u32,
    _pad: [u32; 2],
}

/// `xh` = the rows `rows` of `x` (`[rows, n_cols]`, f32) as f16 (to_f16.wgsl), for the passes
/// that take the products on the matrix units (more than [`MATVEC_BATCH`] tokens, admitted by
/// `when`): matmul_coop.wgsl, moe_gate_up_batch_coop.wgsl.
pub(crate) fn to_f16(
    gpu: &Gpu,
    x: &wgpu::Buffer,
    xh: &wgpu::Buffer,
    step: &wgpu::Buffer,
    n_cols: u32,
    rows: Rows,
    when: When,
) -> Result<Dispatch> {
    let params = ToF16Params {
        n_cols,
        rows_mode: rows.mode(),
        _pad: [0; 2],
    };
    let pbuf = gpu.uniform("to_f16", &params);
    let cols4 = n_cols / 4;
    Ok(Dispatch {
        label: "to_f16".into(),
        pipelines: vec![gpu.pipeline(&key("to_f16".into(), IN_OUT_LAYOUT))?],
        bind_group: gpu.bind_group(IN_OUT_LAYOUT, &[x, xh, &pbuf, step]),
        grid: Box::new(move |s| {
            let n = rows.count(s);
            (when.admits(s) && n > MATVEC_BATCH).then(|| (0, grid_2d((n * cols4).div_ceil(256))))
        }),
        cost: Box::new(move |s| Cost::reads(f32s(rows.count(s) as u64 * n_cols as u64))),
    })
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct QuantizeParams {
    n_cols: u32,
    eps: f32,
    flags: u32,
    rows_mode: u32,
}

/// Bytes of `n_rows` rows of `n_cols` values quantized by [`quantize_q8`]
/// (common/q8_global.wgsl's layout: 16 int8 of each plane an entry, then the blocks' f32 units,
/// the entries' f32 sums and the row's scale).
pub fn q8_bytes(n_rows: u32, n_cols: u32) -> u64 {
    n_rows as u64 * (n_cols / 8 + n_cols.div_ceil(128) + n_cols.div_ceil(64) + 1) as u64 * 16
}

/// What [`quantize_q8`] quantizes of each row of its input.
#[derive(Clone, Copy)]
pub enum Q8From<'a> {
    /// The row as it is.
    X,
    /// RMSNorm(row) * these weights, with this epsilon.
    Norm(&'a wgpu::Buffer, f32),
    /// `act(gate) * up` of a row holding gate and up side by side (`2 n_cols` wide: the batch
    /// gate/up product's output), as [`glu`](super::glu) computes it: the dense FFN's input to
    /// its down projection without the activation's own dispatch.
    Glu(Activation),
}

/// `xq` = the rows `rows` of `x` (`[rows, n_cols]`, f32; `[rows, 2 n_cols]` for [`Q8From::Glu`])
/// as `from` says, quantized to int8 blocks for the matrix products that read them
/// ([`MatOpts::x_q8`]); `xq` holds [`q8_bytes`]. It runs in the passes whose rows take the
/// small-batch kernel (2 to [`MATVEC_BATCH`]); four values a thread (quantize_q8.wgsl).
pub fn quantize_q8(
    gpu: &Gpu,
    x: &wgpu::Buffer,
    xq: &wgpu::Buffer,
    step: &wgpu::Buffer,
    n_cols: u32,
    rows: Rows,
    from: Q8From,
) -> Result<Dispatch> {
    if !n_cols.is_multiple_of(32) {
        return Err(crate::Error::InvalidArgument(format!(
            "quantize_q8: row length {n_cols} is not a multiple of 32"
        )));
    }
    let (norm, eps, flags, x_cols) = match from {
        Q8From::X => (None, 0.0, 0, n_cols),
        Q8From::Norm(w, eps) => (Some(w), eps, 1, n_cols),
        Q8From::Glu(Activation::Silu) => (None, 0.0, 2, 2 * n_cols),
        Q8From::Glu(Activation::GeluTanh) => (None, 0.0, 2 | 4, 2 * n_cols),
    };
    let params = QuantizeParams {
        n_cols,
        eps,
        flags,
        rows_mode: rows.mode(),
    };
    let pbuf = gpu.uniform("quantize_q8", &params);
    let shader = super::shape::reduce_variant(gpu, "quantize_q8".into(), QUANTIZE_WG, true);
    let norm_w = if norm.is_some() { n_cols as u64 } else { 0 };
    let groups = (n_cols / 4).div_ceil(QUANTIZE_WG);
    Ok(Dispatch {
        label: "quantize_q8".into(),
        pipelines: vec![gpu.pipeline(&key(shader, IN2_OUT_LAYOUT))?],
        bind_group: gpu.bind_group(IN2_OUT_LAYOUT, &[x, norm.unwrap_or(x), xq, &pbuf, step]),
        // The passes whose rows take the small-batch kernel (`mat`'s grid).
        grid: Box::new(move |s| {
            let n = rows.count(s);
            (2..=MATVEC_BATCH)
                .contains(&n)
                .then_some((0, [groups, n, 1]))
        }),
        cost: Box::new(move |s| Cost::reads(f32s(rows.count(s) as u64 * x_cols as u64 + norm_w))),
    })
}

/// Threads of a quantize_q8 workgroup (`WG` in quantize_q8.wgsl).
const QUANTIZE_WG: u32 = 256;

/// The cost of a matrix product over `n` tokens of a weight chunk of `n_rows` x `n_cols` and
/// `weight_bytes` on the GPU: the weights once, `per_token` activation floats a token (its input
/// row; the output row it adds to when accumulating) and `fixed` floats besides (bias, norm
/// weights); `2 n_rows n_cols n` FLOPs.
pub(crate) fn mat_cost(
    weight_bytes: u64,
    n_rows: u32,
    n_cols: u32,
    n: u32,
    per_token: u32,
    fixed: u32,
) -> Cost {
    let x = f32s(n as u64 * per_token as u64 + fixed as u64);
    Cost::product(weight_bytes as f64, x, n_rows, n_cols, n as f64)
}

/// [`mat_cost`] of `mat`'s dispatch over `chunk` in each pass (the rows `opts.rows` takes).
pub(super) fn mat_cost_rule(chunk: &WeightChunk, n_cols: u32, opts: &MatOpts) -> CostRule {
    let (bytes, n_rows, rows) = (chunk.buffer.size(), chunk.n_rows, opts.rows);
    let per_token = n_cols + if opts.accumulate { n_rows } else { 0 };
    let fixed = opts.bias.map_or(0, |_| n_rows) + opts.norm.map_or(0, |_| n_cols);
    Box::new(move |s| mat_cost(bytes, n_rows, n_cols, rows.count(s), per_token, fixed))
}
