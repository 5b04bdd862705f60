//! The Rust side of each WGSL kernel: its bindings, its parameters, and the grid it is launched
//! with. A builder returns a [`Dispatch`]: pipeline(s), a bind group made once, and a grid rule
//! evaluated per pass from the [`StepInfo`], so a forward pass is a fixed list of dispatches
//! replayed with one small uniform update.

use bytemuck::{Pod, Zeroable};

use crate::gpu::{Binding, Gpu, PipelineKey};
use crate::quant::GgmlType;
use crate::Result;

pub mod moe;
#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
mod tests;

/// The shape of one forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepInfo {
    /// Tokens processed in this pass.
    pub n_tokens: u32,
    /// Position of the first of them.
    pub pos: u32,
    /// How many of the last tokens need logits.
    pub n_out: u32,
}

/// `Step` in `wgsl/common/step.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct StepUniform {
    pub n_tokens: u32,
    pub pos: u32,
    pub n_out: u32,
    pub out_row0: u32,
    pub attn_splits: u32,
    pub _pad: [u32; 3],
}

impl From<StepInfo> for StepUniform {
    fn from(s: StepInfo) -> Self {
        StepUniform {
            n_tokens: s.n_tokens,
            pos: s.pos,
            n_out: s.n_out,
            out_row0: s.n_tokens - s.n_out,
            attn_splits: attention_splits(&s),
            _pad: [0; 3],
        }
    }
}

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

/// Parts per query for a pass: one 64-key tile each, up to `MAX_ATTN_SPLITS / n_tokens` parts,
/// so a decode step with few heads still spreads over n_head * 64 workgroups (an H200 has 132
/// SMs) while each part keeps one tile of work; a split pass costs one more dispatch (the
/// combine).
pub fn attention_splits(s: &StepInfo) -> u32 {
    if s.n_tokens > MAX_SPLIT_TOKENS {
        1
    } else {
        (s.pos + s.n_tokens)
            .div_ceil(ATTN_TILE)
            .clamp(1, (MAX_ATTN_SPLITS / s.n_tokens.max(1)).max(1))
    }
}

/// Which rows of the pass a kernel covers (`rows_mode` in the WGSL params).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// Every token of the pass.
    Tokens,
    /// The last `n_out` tokens, whose logits are wanted.
    Out,
}

impl Rows {
    fn count(self, s: &StepInfo) -> u32 {
        match self {
            Rows::Tokens => s.n_tokens,
            Rows::Out => s.n_out,
        }
    }
    fn mode(self) -> u32 {
        match self {
            Rows::Tokens => 0,
            Rows::Out => 1,
        }
    }
}

/// Which passes a dispatch belongs to: decode passes (one token) often take a fused kernel
/// whose batched counterpart is a sequence of simpler dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// Passes of one token.
    Decode,
    /// Passes of more than one token.
    Batch,
}

impl When {
    pub fn admits(self, s: &StepInfo) -> bool {
        match self {
            When::Always => true,
            When::Decode => s.n_tokens == 1,
            When::Batch => s.n_tokens > 1,
        }
    }
}

/// Picks the pipeline (index into `pipelines`) and workgroup counts for a pass, or `None` when
/// the pass has nothing for this dispatch.
pub type Grid = Box<dyn Fn(&StepInfo) -> Option<(usize, [u32; 3])> + Send + Sync>;

pub struct Dispatch {
    pub label: String,
    pub pipelines: Vec<wgpu::ComputePipeline>,
    pub bind_group: wgpu::BindGroup,
    pub grid: Grid,
}

impl Dispatch {
    /// This dispatch, restricted to the passes `when` admits.
    pub fn only(mut self, when: When) -> Dispatch {
        let grid = std::mem::replace(&mut self.grid, Box::new(|_| None));
        self.grid = Box::new(move |s| if when.admits(s) { grid(s) } else { None });
        self
    }

    /// The usual dispatch: one pipeline, `key`'s kernel, bound to `buffers` (in the order of
    /// `key.layout`) and launched as `grid(s)` workgroups on the passes `when` admits.
    fn one(
        gpu: &Gpu,
        label: impl Into<String>,
        key: &PipelineKey,
        buffers: &[&wgpu::Buffer],
        when: When,
        grid: impl Fn(&StepInfo) -> [u32; 3] + Send + Sync + 'static,
    ) -> Result<Dispatch> {
        Ok(Dispatch {
            label: label.into(),
            pipelines: vec![gpu.pipeline(key)?],
            bind_group: gpu.bind_group(key.layout, buffers),
            grid: Box::new(move |s| when.admits(s).then(|| (0, grid(s)))),
        })
    }

    /// Records this dispatch into `pass` for the pass shape `s`; returns whether it ran.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, s: &StepInfo) -> bool {
        let Some((i, [x, y, z])) = (self.grid)(s) else {
            return false;
        };
        pass.set_pipeline(&self.pipelines[i]);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
        true
    }
}

/// Most workgroups one grid dimension may have (WebGPU's default limit).
const MAX_GRID: u32 = 65535;

/// Lays `n` workgroups out as a 2-D grid (kernels fold `x + y * num_workgroups.x` back).
fn grid_2d(n: u32) -> [u32; 3] {
    if n <= MAX_GRID {
        [n.max(1), 1, 1]
    } else {
        let y = n.div_ceil(MAX_GRID);
        [n.div_ceil(y), y, 1]
    }
}

fn qtype_suffix(ty: GgmlType) -> Result<&'static str> {
    ty.gpu()
        .map(|g| g.wgsl)
        .ok_or_else(|| crate::Error::UnsupportedTensorType {
            name: String::new(),
            ty: ty.name(),
        })
}

fn key(shader: String, layout: &'static [Binding]) -> PipelineKey {
    PipelineKey {
        shader,
        constants: Vec::new(),
        layout,
    }
}

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

// ---------------------------------------------------------------------------------------------
// matvec / matmul

const MAT_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Uniform,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MatParams {
    n_rows: u32,
    n_cols: u32,
    y_stride: u32,
    y_offset: u32,
    flags: u32,
    rows_mode: u32,
    eps: f32,
    _pad: u32,
}

/// Options of a matrix product `y (+)= W x (+ bias)`.
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
    /// How the matvec splits its workgroup; `None` for the adapter's choice for the matrix,
    /// [`MatvecShape::for_matrix`].
    pub matvec: Option<MatvecShape>,
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
        }
    }
}

/// Threads per matvec workgroup (`WG` in matvec.wgsl, matvec_glu.wgsl, moe_gate_up.wgsl and
/// moe_down.wgsl).
const MATVEC_WG: u32 = 256;

/// Workgroups a decode matvec should have at least (about two per SM of a large GPU), where its
/// rows allow ([`MatvecShape::for_matrix`]).
const MATVEC_MIN_WORKGROUPS: u32 = 256;

/// Rows per matvec workgroup (`ROWS` in matvec.wgsl and matvec_glu.wgsl) for this adapter. On a
/// GPU, 4: the 64 threads of a row read it coalesced and reduce their sums. On a CPU adapter
/// (lavapipe, SwiftShader), 256: one thread per row and no reduction, because there every
/// workgroup barrier switches each invocation's coroutine; a 1536 x 2048 Q4_K matvec took ~30 ms
/// on lavapipe with 4 rows and ~0.3 ms with 256.
pub fn matvec_rows(gpu: &Gpu) -> u32 {
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        256
    } else {
        4
    }
}

/// Weights per unit of the decode dot products for weight type `ty` (`UNIT` in
/// common/unit_dot.wgsl and its twins): 16 for Q4_K and Q6_K, whose units read each quant word
/// once (common/unit_dot_q4_k.wgsl, unit_dot_q6_k.wgsl), 8 for the others.
pub fn decode_unit(ty: GgmlType) -> u32 {
    ty.gpu().map_or(8, |g| g.decode_unit)
}

/// [`MatvecShape::for_matrix`]'s rows per workgroup on a GPU, from `rows`, for `n_rows` rows of
/// `units` units.
pub(crate) fn gpu_matvec_rows(mut rows: u32, n_rows: u32, units: u32) -> u32 {
    while rows < MATVEC_WG && MATVEC_WG / rows > 2 * units {
        rows *= 2;
    }
    while rows > 1 && n_rows / rows < MATVEC_MIN_WORKGROUPS {
        rows /= 2;
    }
    rows
}

/// Whether the subgroup (`_sg`) variant of a kernel whose rows are each summed by `threads`
/// invocations (common/reduce_sg.wgsl) is correct on this adapter: it has subgroups, and
/// `threads` is a whole number of subgroups of every size the adapter may run (a multiple of its
/// largest; WGSL fixes no subgroup size, and some adapters pick one per pipeline).
pub fn subgroups_fit(gpu: &Gpu, threads: u32) -> bool {
    let max = gpu.info.subgroup_max_size;
    gpu.features.subgroups && max.is_power_of_two() && threads.is_multiple_of(max)
}

/// Kernel `base`, or its subgroup variant `<base>_sg` where `subgroups` is asked for and
/// [`subgroups_fit`] rows of `threads` invocations.
fn reduce_variant(gpu: &Gpu, base: String, threads: u32, subgroups: bool) -> String {
    if subgroups && subgroups_fit(gpu, threads) {
        base + "_sg"
    } else {
        base
    }
}

/// How a decode matvec kernel (matvec, matvec_glu, moe_gate_up, moe_down) splits its workgroup
/// of 256 threads over rows, and which variant sums a row's partial dot products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatvecShape {
    /// Rows per workgroup (`ROWS`): a power of two up to 256, so each row has 256 / rows threads.
    pub rows: u32,
    /// Sum with subgroup operations (the `_sg` variant) where [`subgroups_fit`]; `false` takes
    /// the portable variant everywhere.
    pub subgroups: bool,
}

impl MatvecShape {
    /// The adapter's choice: [`matvec_rows`] rows, subgroups where they fit.
    pub fn for_adapter(gpu: &Gpu) -> MatvecShape {
        MatvecShape {
            rows: matvec_rows(gpu),
            subgroups: true,
        }
    }

    /// The adapter's choice for `n_rows` rows (workgroups' worth: for the experts, rows times
    /// routes) of `n_cols` weights of type `ty`: as [`MatvecShape::for_adapter`], but on a GPU
    /// first with more rows per workgroup where more than half of a row's threads would have no
    /// unit ([`decode_unit`]; a 256-wide Q4_K row has 16), then with fewer where the matrix
    /// would make fewer than [`MATVEC_MIN_WORKGROUPS`] workgroups (a 128-expert router's 32
    /// workgroups of 4 rows leave most of a large GPU idle).
    pub fn for_matrix(gpu: &Gpu, n_rows: u32, n_cols: u32, ty: GgmlType) -> MatvecShape {
        let mut shape = MatvecShape::for_adapter(gpu);
        if gpu.info.device_type != wgpu::DeviceType::Cpu {
            shape.rows = gpu_matvec_rows(shape.rows, n_rows, n_cols / decode_unit(ty));
        }
        shape
    }

    /// The variant name (`<base>` or `<base>_sg`) and pipeline key of kernel `base` in this
    /// shape, checked to divide the workgroup into a power of two of threads per row (the
    /// portable reduction halves them).
    fn key(self, gpu: &Gpu, base: String, layout: &'static [Binding]) -> Result<PipelineKey> {
        let rows = self.rows;
        if !rows.is_power_of_two() || rows > MATVEC_WG {
            return Err(crate::Error::InvalidArgument(format!(
                "{rows} matvec rows per workgroup: not a power of two up to {MATVEC_WG}"
            )));
        }
        Ok(PipelineKey {
            shader: reduce_variant(gpu, base, MATVEC_WG / rows, self.subgroups),
            constants: vec![("ROWS", rows)],
            layout,
        })
    }

    /// Whether this shape takes the subgroup variant on `gpu`.
    pub fn uses_subgroups(self, gpu: &Gpu) -> bool {
        self.subgroups && subgroups_fit(gpu, MATVEC_WG / self.rows.max(1))
    }
}

fn check_cols(w: &GpuWeight) -> Result<()> {
    if !w.n_cols.is_multiple_of(32) {
        return Err(crate::Error::InvalidArgument(format!(
            "{}: row length {} is not a multiple of 32",
            w.name, w.n_cols
        )));
    }
    Ok(())
}

/// `y[t, :] (+)= W x[t, :] (+ bias)` for the tokens of the pass: the matvec kernel for one
/// token, the tiled matmul for more. One dispatch per weight chunk.
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
    if opts.norm.is_some() && opts.when != When::Decode {
        return Err(crate::Error::InvalidArgument(
            "the norm prologue exists only in the decode matvec".into(),
        ));
    }
    let mut out = Vec::new();
    for chunk in &w.chunks {
        let q = qtype_suffix(chunk.ty)?;
        let shape = opts
            .matvec
            .unwrap_or_else(|| MatvecShape::for_matrix(gpu, chunk.n_rows, w.n_cols, chunk.ty));
        let matvec_rows = shape.rows;
        let matvec = gpu.pipeline(&shape.key(gpu, format!("matvec_{q}"), MAT_LAYOUT)?)?;
        let matmul = gpu.pipeline(&key(format!("matmul_{q}"), MAT_LAYOUT))?;
        let params = MatParams {
            n_rows: chunk.n_rows,
            n_cols: w.n_cols,
            y_stride: opts.y_stride.unwrap_or(w.n_rows),
            y_offset: chunk.row0,
            flags: opts.bias.is_some() as u32
                | (opts.accumulate as u32) << 1
                | (opts.norm.is_some() as u32) << 2,
            rows_mode: opts.rows.mode(),
            eps: opts.norm.map_or(0.0, |n| n.1),
            _pad: 0,
        };
        let pbuf = gpu.uniform(&w.name, &params);
        let bind_group = gpu.bind_group(
            MAT_LAYOUT,
            &[
                &chunk.buffer,
                x,
                y,
                opts.bias.unwrap_or(dummy),
                &pbuf,
                step,
                opts.norm.map_or(dummy, |n| n.0),
            ],
        );
        let (rows, when) = (opts.rows, opts.when);
        let n_rows = chunk.n_rows;
        out.push(Dispatch {
            label: w.name.clone(),
            pipelines: vec![matvec, matmul],
            bind_group,
            grid: Box::new(move |s| {
                if !when.admits(s) {
                    return None;
                }
                match rows.count(s) {
                    0 => None,
                    1 => Some((0, grid_2d(n_rows.div_ceil(matvec_rows)))),
                    n => Some((1, [n_rows.div_ceil(64), n.div_ceil(32), 1])),
                }
            }),
        });
    }
    Ok(out)
}

const MATVEC_GLU_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct MatvecGluParams {
    n_rows: u32,
    n_cols: u32,
    act: u32,
    flags: u32,
    eps: f32,
    _pad: [u32; 3],
}

/// The decode FFN input side in one dispatch: `h = act(G x') * (U x')` over the stacked weight
/// `[G; U]`, with x' = RMSNorm(x) * norm weights when `norm` is given. `None` when the stack is
/// not one chunk (its parts have different types, or it exceeds a binding): then use `mat` + `glu`.
#[allow(clippy::too_many_arguments)]
pub fn matvec_glu(
    gpu: &Gpu,
    gate_up: &GpuWeight,
    x: &wgpu::Buffer,
    h: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    act: Activation,
) -> Result<Option<Dispatch>> {
    matvec_glu_with(gpu, gate_up, x, h, dummy, norm, act, None)
}

/// [`matvec_glu`] in the given shape, or (`None`) the adapter's choice for the matrix
/// ([`MatvecShape::for_matrix`]).
#[allow(clippy::too_many_arguments)]
pub fn matvec_glu_with(
    gpu: &Gpu,
    gate_up: &GpuWeight,
    x: &wgpu::Buffer,
    h: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    act: Activation,
    shape: Option<MatvecShape>,
) -> Result<Option<Dispatch>> {
    check_cols(gate_up)?;
    let [chunk] = gate_up.chunks.as_slice() else {
        return Ok(None);
    };
    let n_rows = gate_up.n_rows / 2;
    let shape =
        shape.unwrap_or_else(|| MatvecShape::for_matrix(gpu, n_rows, gate_up.n_cols, chunk.ty));
    let q = qtype_suffix(chunk.ty)?;
    let pipeline_key = shape.key(gpu, format!("matvec_glu_{q}"), MATVEC_GLU_LAYOUT)?;
    let rows = shape.rows;
    let params = MatvecGluParams {
        n_rows,
        n_cols: gate_up.n_cols,
        act: (act == Activation::GeluTanh) as u32,
        flags: (norm.is_some() as u32) << 2,
        eps: norm.map_or(0.0, |n| n.1),
        _pad: [0; 3],
    };
    let pbuf = gpu.uniform(&gate_up.name, &params);
    Dispatch::one(
        gpu,
        &gate_up.name,
        &pipeline_key,
        &[&chunk.buffer, x, h, norm.map_or(dummy, |n| n.0), &pbuf],
        When::Decode,
        move |_| grid_2d(n_rows.div_ceil(rows)),
    )
    .map(Some)
}

// ---------------------------------------------------------------------------------------------
// embedding lookup

const EMBED_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct EmbedParams {
    dim: u32,
    n_rows: u32,
    row0: u32,
    scale: f32,
}

/// `y[t, :] = scale * table[tokens[t], :]`.
pub fn embed(
    gpu: &Gpu,
    table: &GpuWeight,
    tokens: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    scale: f32,
) -> Result<Vec<Dispatch>> {
    let mut out = Vec::new();
    for chunk in &table.chunks {
        let q = qtype_suffix(chunk.ty)?;
        let params = EmbedParams {
            dim: table.n_cols,
            n_rows: chunk.n_rows,
            row0: chunk.row0,
            scale,
        };
        let pbuf = gpu.uniform("embed", &params);
        out.push(Dispatch::one(
            gpu,
            &table.name,
            &key(format!("embed_{q}"), EMBED_LAYOUT),
            &[&chunk.buffer, tokens, y, &pbuf, step],
            When::Always,
            |s| [s.n_tokens, 1, 1],
        )?);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// RMSNorm

const NORM_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NormParams {
    dim: u32,
    eps: f32,
    flags: u32,
    rows_mode: u32,
}

pub struct NormOpts {
    /// Add the normalised rows into `y` (Gemma's post-norms feed the residual stream).
    pub accumulate: bool,
    /// Normalise only the output rows (the last `n_out` tokens), writing them from row 0 of `y`.
    pub rows: Rows,
    pub when: When,
    /// Sum the squares with subgroup operations where the adapter has them (the `_sg` variant);
    /// `false` takes the portable variant.
    pub subgroups: bool,
}

/// Threads of an rmsnorm workgroup (`WG` in rmsnorm.wgsl), all summing one row.
const NORM_WG: u32 = 256;

#[allow(clippy::too_many_arguments)]
pub fn rmsnorm(
    gpu: &Gpu,
    x: &wgpu::Buffer,
    weight: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dim: u32,
    eps: f32,
    opts: NormOpts,
) -> Result<Dispatch> {
    let shader = reduce_variant(gpu, "rmsnorm".into(), NORM_WG, opts.subgroups);
    let params = NormParams {
        dim,
        eps,
        flags: opts.accumulate as u32 | ((opts.rows == Rows::Out) as u32) << 1,
        rows_mode: opts.rows.mode(),
    };
    let pbuf = gpu.uniform("rmsnorm", &params);
    let rows = opts.rows;
    Dispatch::one(
        gpu,
        "rmsnorm",
        &key(shader, NORM_LAYOUT),
        &[x, weight, y, &pbuf, step],
        opts.when,
        move |s| [rows.count(s), 1, 1],
    )
}

// ---------------------------------------------------------------------------------------------
// gated activation

const GLU_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluTanh,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GluParams {
    n: u32,
    act: u32,
    stride: u32,
    up_offset: u32,
}

/// `h = act(gate) * up`, elementwise over `n` values per token, reading gate and up from the
/// stacked output `gate_up` `[n_tokens, 2n]` of the stacked FFN weight.
pub fn glu(
    gpu: &Gpu,
    gate_up: &wgpu::Buffer,
    h: &wgpu::Buffer,
    step: &wgpu::Buffer,
    n: u32,
    act: Activation,
    when: When,
) -> Result<Dispatch> {
    let params = GluParams {
        n,
        act: (act == Activation::GeluTanh) as u32,
        stride: 2 * n,
        up_offset: n,
    };
    let pbuf = gpu.uniform("glu", &params);
    Dispatch::one(
        gpu,
        "glu",
        &key("glu".into(), GLU_LAYOUT),
        &[gate_up, gate_up, h, &pbuf, step],
        when,
        move |s| grid_2d((s.n_tokens * n).div_ceil(256)),
    )
}

// ---------------------------------------------------------------------------------------------
// RoPE, q/k norm and the KV-cache store

const ROPE_LAYOUT: &[Binding] = &[
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Read,
    Binding::Uniform,
    Binding::Uniform,
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    /// Rotated elements per head (partial rotary when below the head size).
    pub n_rot: u32,
    /// NeoX layout (rotate halves) rather than GGML's normal layout (adjacent pairs).
    pub neox: bool,
    pub theta_base: f32,
    /// 1 / linear scaling factor.
    pub freq_scale: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RopeParams {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    n_rot: u32,
    ctx: u32,
    mode: u32,
    theta_base: f32,
    freq_scale: f32,
    eps: f32,
    flags: u32,
    _pad: [u32; 2],
}

/// Head geometry shared by the attention kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    pub n_head: u32,
    pub n_kv_head: u32,
    pub head_dim: u32,
    /// KV-cache capacity in positions.
    pub ctx: u32,
}

pub struct KvBuffers<'a> {
    /// The QKV projection's output: per token the Q heads, then K, then V.
    pub qkv: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
}

/// Q/K norm (when `qk_norm` gives the weights), RoPE (Q in place in `qkv`), and the K/V cache
/// store for the pass.
pub fn rope_store(
    gpu: &Gpu,
    b: &KvBuffers,
    step: &wgpu::Buffer,
    heads: Heads,
    rope: RopeConfig,
    qk_norm: Option<(&wgpu::Buffer, &wgpu::Buffer, f32)>,
    dummy: &wgpu::Buffer,
) -> Result<Dispatch> {
    let params = RopeParams {
        n_head: heads.n_head,
        n_kv_head: heads.n_kv_head,
        head_dim: heads.head_dim,
        n_rot: rope.n_rot,
        ctx: heads.ctx,
        mode: rope.neox as u32,
        theta_base: rope.theta_base,
        freq_scale: rope.freq_scale,
        eps: qk_norm.map_or(0.0, |n| n.2),
        flags: qk_norm.is_some() as u32,
        _pad: [0; 2],
    };
    let pbuf = gpu.uniform("rope", &params);
    let (qn, kn) = qk_norm.map_or((dummy, dummy), |n| (n.0, n.1));
    let slots = heads.n_head + 2 * heads.n_kv_head;
    Dispatch::one(
        gpu,
        "rope_store",
        &key("rope_store".into(), ROPE_LAYOUT),
        &[b.qkv, b.k_cache, b.v_cache, qn, kn, &pbuf, step],
        When::Always,
        move |s| [slots, s.n_tokens, 1],
    )
}

// ---------------------------------------------------------------------------------------------
// attention

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
];
/// (input, output, parameters, step): the layout of the kernels with one input and one output
/// (attention_combine, moe_sort, moe_combine).
const IN_OUT_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CombineParams {
    n_head: u32,
    head_dim: u32,
    _pad: [u32; 2],
}

/// Floats of the scratch buffer that split attention writes its partial results to: per
/// (token, head, part) the running max and sum (padded to a vec4) and the unnormalised output,
/// for at most `MAX_ATTN_SPLITS` (token, part) pairs per head (`attention_splits`).
pub fn attention_partial_len(heads: &Heads) -> u64 {
    heads.n_head as u64 * MAX_ATTN_SPLITS as u64 * (heads.head_dim as u64 + 4)
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
}

/// RoPE and the optional q/k norm weights and epsilon, for attention's decode prologue.
pub struct DecodeRope<'a> {
    pub rope: RopeConfig,
    pub qk_norm: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer, f32)>,
}

/// Causal (optionally sliding-window) grouped-query attention of the pass's queries (the Q heads
/// of the QKV output `q`) over the cache, into `out` `[n_tokens, n_head * head_dim]`: the split
/// attention kernel and, when a pass splits, the combine kernel (`partial` holds
/// [`attention_partial_len`] floats). With `opts.decode_rope`, a pass of one token reads q, k and
/// v raw from `q` and stores k and v itself (no rope_store before it).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    gpu: &Gpu,
    q: &wgpu::Buffer,
    k_cache: &wgpu::Buffer,
    v_cache: &wgpu::Buffer,
    out: &wgpu::Buffer,
    partial: &wgpu::Buffer,
    step: &wgpu::Buffer,
    heads: Heads,
    opts: AttnOpts,
) -> Result<[Dispatch; 2]> {
    if !heads.head_dim.is_multiple_of(4) || heads.head_dim > 256 {
        return Err(crate::Error::InvalidArgument(format!(
            "attention needs a head size that is a multiple of 4 and at most 256, not {}",
            heads.head_dim
        )));
    }
    let hd = ("HD", heads.head_dim);
    let pipeline = gpu.pipeline(&PipelineKey {
        shader: reduce_variant(gpu, "attention".into(), ATTN_WG, opts.subgroups),
        constants: vec![hd],
        layout: ATTN_LAYOUT,
    })?;
    let combine = gpu.pipeline(&PipelineKey {
        shader: "attention_combine".into(),
        constants: vec![hd, ("MAX_SPLITS", MAX_ATTN_SPLITS)],
        layout: IN_OUT_LAYOUT,
    })?;
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
    Ok([
        Dispatch {
            label: "attention".into(),
            pipelines: vec![pipeline],
            bind_group: gpu.bind_group(
                ATTN_LAYOUT,
                &[q, k_cache, v_cache, out, partial, qn, kn, &pbuf, step],
            ),
            grid: Box::new(move |s| Some((0, [n_head, s.n_tokens, attention_splits(s)]))),
        },
        Dispatch {
            label: "attention_combine".into(),
            pipelines: vec![combine],
            bind_group: gpu.bind_group(IN_OUT_LAYOUT, &[partial, out, &cbuf, step]),
            grid: Box::new(move |s| {
                (attention_splits(s) > 1).then_some((0, [n_head, s.n_tokens, 1]))
            }),
        },
    ])
}

// ---------------------------------------------------------------------------------------------
// greedy sampling

/// (input, output, parameters): both argmax stages.
const ARGMAX_LAYOUT: &[Binding] = &[Binding::Read, Binding::ReadWrite, Binding::Uniform];

/// Logits per workgroup of argmax's stage 1 (`SLICE` in argmax.wgsl and argmax_combine.wgsl):
/// 4 per thread, so a 151936-token row spreads over 149 workgroups (an H200 has 132 SMs) and a
/// 49152-token one over 48, while stage 2 has few winners to merge.
const ARGMAX_SLICE: u32 = 1024;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ArgmaxParams {
    n_vocab: u32,
    row: u32,
    _pad: [u32; 2],
}

/// Words (u32) of the scratch buffer that argmax's stage 1 writes its per-slice winners to, one
/// (f32 bits, id) pair per slice of `ARGMAX_SLICE` logits; allocate it once with the
/// activations.
pub fn argmax_partial_len(n_vocab: u32) -> u64 {
    2 * n_vocab.div_ceil(ARGMAX_SLICE).max(1) as u64
}

/// `tokens[0] = argmax(logits[row, :])`, the lowest id on ties, in two dispatches: one
/// workgroup per slice of the row into `partial` ([`argmax_partial_len`] words), then one
/// workgroup over the slices' winners. One workgroup over the whole row could not pull memory
/// fast enough (215 µs for 151936 logits on an H200); the second dispatch costs one dependent
/// launch (~3.6 µs there, MEASURE.md).
pub fn argmax(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    tokens: &wgpu::Buffer,
    partial: &wgpu::Buffer,
    n_vocab: u32,
    row: u32,
) -> Result<[Dispatch; 2]> {
    let groups = n_vocab.div_ceil(ARGMAX_SLICE).max(1);
    if groups > MAX_GRID {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax handles vocabularies up to {} tokens, not {n_vocab}",
            MAX_GRID as u64 * ARGMAX_SLICE as u64
        )));
    }
    if partial.size() < argmax_partial_len(n_vocab) * 4 {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax of {n_vocab} logits needs a partial buffer of {} bytes, not {}",
            argmax_partial_len(n_vocab) * 4,
            partial.size()
        )));
    }
    let pbuf = gpu.uniform(
        "argmax",
        &ArgmaxParams {
            n_vocab,
            row,
            _pad: [0; 2],
        },
    );
    let stage = |shader: &str, buffers: &[&wgpu::Buffer], n: u32| {
        Dispatch::one(
            gpu,
            shader,
            &PipelineKey {
                shader: shader.into(),
                constants: vec![("SLICE", ARGMAX_SLICE)],
                layout: ARGMAX_LAYOUT,
            },
            buffers,
            When::Always,
            move |_| [n, 1, 1],
        )
    };
    Ok([
        stage("argmax", &[logits, partial, &pbuf], groups)?,
        stage("argmax_combine", &[partial, tokens, &pbuf], 1)?,
    ])
}

// ---------------------------------------------------------------------------------------------
// sampling: repetition penalty, top-k, top-p, min-p, temperature, draw

const SAMPLE_TOPK_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
];
const SAMPLE_LAYOUT: &[Binding] = &[Binding::Read, Binding::ReadWrite, Binding::Uniform];

/// Logits per stage-1 workgroup and candidates each keeps (SLICE and K in the WGSL).
const SAMPLE_SLICE: u32 = 2048;
const SAMPLE_K: u32 = 64;
/// Most candidates stage 2 merges (256 threads x 32).
const SAMPLE_MAX_CANDIDATES: u32 = 8192;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SampleTopkParams {
    n_vocab: u32,
    row: u32,
    n_history: u32,
    penalty: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SampleParams {
    n_cand: u32,
    top_k: u32,
    top_p: f32,
    min_p: f32,
    temp: f32,
    u: f32,
    _pad: [u32; 2],
}

/// The two sampling dispatches and the buffers the host updates before each sampled pass.
pub struct SampleKernels {
    pub dispatches: [Dispatch; 2],
    history: wgpu::Buffer,
    topk_params: wgpu::Buffer,
    params: wgpu::Buffer,
    n_vocab: u32,
    row: u32,
}

/// Sampling of `logits[row, :]` into `tokens[0]` (see wgsl/sample_topk.wgsl, wgsl/sample.wgsl).
pub fn sample(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    tokens: &wgpu::Buffer,
    n_vocab: u32,
    row: u32,
) -> Result<SampleKernels> {
    let groups = n_vocab.div_ceil(SAMPLE_SLICE);
    if groups * SAMPLE_K > SAMPLE_MAX_CANDIDATES {
        return Err(crate::Error::InvalidArgument(format!(
            "sampling on the GPU handles vocabularies up to {} tokens, not {n_vocab}",
            SAMPLE_MAX_CANDIDATES / SAMPLE_K * SAMPLE_SLICE
        )));
    }
    let cand = gpu.storage("sample candidates", (groups * SAMPLE_K) as u64 * 8)?;
    let history = gpu.storage(
        "sample history",
        crate::sampling::MAX_REPEAT_LAST_N as u64 * 4,
    )?;
    let topk_params = gpu.uniform(
        "sample_topk",
        &SampleTopkParams {
            n_vocab,
            row,
            n_history: 0,
            penalty: 1.0,
        },
    );
    let params = gpu.uniform("sample", &SampleParams::zeroed());
    Ok(SampleKernels {
        dispatches: [
            Dispatch::one(
                gpu,
                "sample_topk",
                &key("sample_topk".into(), SAMPLE_TOPK_LAYOUT),
                &[logits, &history, &cand, &topk_params],
                When::Always,
                move |_| [groups, 1, 1],
            )?,
            Dispatch::one(
                gpu,
                "sample",
                &key("sample".into(), SAMPLE_LAYOUT),
                &[&cand, tokens, &params],
                When::Always,
                |_| [1, 1, 1],
            )?,
        ],
        history,
        topk_params,
        params,
        n_vocab,
        row,
    })
}

impl SampleKernels {
    /// Sets the parameters, the recent tokens (the last `repeat_last_n` of `history`) and the
    /// random number for the next sampled pass.
    pub fn prepare(
        &self,
        gpu: &Gpu,
        params: &crate::sampling::SamplerParams,
        history: &[u32],
        u: f32,
    ) {
        let n = (params.repeat_last_n.min(crate::sampling::MAX_REPEAT_LAST_N) as usize)
            .min(history.len());
        let recent = &history[history.len() - n..];
        if n > 0 {
            gpu.queue
                .write_buffer(&self.history, 0, bytemuck::cast_slice(recent));
        }
        gpu.queue.write_buffer(
            &self.topk_params,
            0,
            bytemuck::bytes_of(&SampleTopkParams {
                n_vocab: self.n_vocab,
                row: self.row,
                n_history: n as u32,
                penalty: params.repeat_penalty,
            }),
        );
        gpu.queue.write_buffer(
            &self.params,
            0,
            bytemuck::bytes_of(&SampleParams {
                n_cand: self.n_vocab.div_ceil(SAMPLE_SLICE) * SAMPLE_K,
                top_k: params.effective_top_k(),
                top_p: params.top_p,
                min_p: params.min_p,
                temp: params.temperature.max(1e-6),
                u,
                _pad: [0; 2],
            }),
        );
    }
}
