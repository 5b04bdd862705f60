//! The dispatch machinery every kernel family builds on: the shape of a pass ([`StepInfo`] and
//! its uniform), which rows and passes a dispatch covers ([`Rows`], [`When`]), and the
//! [`Dispatch`] a builder returns: pipeline(s), a bind group made once, and a grid rule evaluated
//! per pass, so a forward pass is a fixed list of dispatches replayed with one small uniform
//! update. Also the helpers the families share: [`grid_2d`], [`key`], [`qtype_suffix`] and
//! [`IN_OUT_LAYOUT`].

use bytemuck::{Pod, Zeroable};

use super::attention::attention_splits;
use crate::gpu::{Binding, Gpu, PipelineKey};
use crate::quant::GgmlType;
use crate::Result;

/// The shape of one forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepInfo {
    /// Tokens processed in this pass.
    pub n_tokens: u32,
    /// Position of the first of them (a pass over one sequence).
    pub pos: u32,
    /// How many of the last tokens need logits.
    pub n_out: u32,
    /// Which sequences the rows belong to.
    pub seqs: Seqs,
}

impl StepInfo {
    /// A pass over sequence 0 (a session's own cache): `n_tokens` tokens from `pos`, logits for
    /// the last `n_out`.
    pub const fn new(n_tokens: u32, pos: u32, n_out: u32) -> StepInfo {
        StepInfo {
            n_tokens,
            pos,
            n_out,
            seqs: Seqs::One(0),
        }
    }

    /// The most keys a row of the pass attends to (before a sliding window): the flash-decoding
    /// split follows it.
    pub fn keys(&self) -> u32 {
        match self.seqs {
            Seqs::One(_) => self.pos + self.n_tokens,
            Seqs::Table { keys } => keys,
        }
    }
}

/// Where a pass's rows belong in a KV cache of several sequences (wgsl/common/rows.wgsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seqs {
    /// Every row is sequence `s`'s, row t at position `pos + t` (a prompt chunk, a decode step,
    /// a verification): the step uniform says it all.
    One(u32),
    /// Row t is entry t of the row table ([`Row`]), written with the uniform: a batched decode
    /// step over several sequences at unrelated positions. `keys`: the longest row's
    /// position + 1.
    Table { keys: u32 },
}

/// `Row` in wgsl/common/rows.wgsl: one entry of the row table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Row {
    pub seq: u32,
    pub pos: u32,
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
    pub seq: u32,
    pub row_table: u32,
    pub _pad: u32,
}

impl StepUniform {
    /// The uniform of pass `s` in a model of `n_head` query heads (the attention split follows
    /// them: [`attention_splits`]).
    pub fn new(s: StepInfo, n_head: u32) -> Self {
        let (seq, row_table) = match s.seqs {
            Seqs::One(seq) => (seq, 0),
            Seqs::Table { .. } => (0, 1),
        };
        StepUniform {
            n_tokens: s.n_tokens,
            pos: s.pos,
            n_out: s.n_out,
            out_row0: s.n_tokens - s.n_out,
            attn_splits: attention_splits(&s, n_head),
            seq,
            row_table,
            _pad: 0,
        }
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
    pub(crate) fn count(self, s: &StepInfo) -> u32 {
        match self {
            Rows::Tokens => s.n_tokens,
            Rows::Out => s.n_out,
        }
    }
    pub(crate) fn mode(self) -> u32 {
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
    /// Passes of 2 to [`MATVEC_BATCH`](super::mat::MATVEC_BATCH) tokens: the small-batch
    /// matrix products' (verification, the batched serve step).
    Small,
    /// Passes of more than [`MATVEC_BATCH`](super::mat::MATVEC_BATCH) tokens: the matmuls'
    /// (prompt chunks).
    Large,
    /// Decode and [`When::Large`] passes.
    NotSmall,
    /// Passes of at most this many tokens.
    AtMost(u32),
    /// Passes of more than this many tokens.
    MoreThan(u32),
}

impl When {
    pub fn admits(self, s: &StepInfo) -> bool {
        match self {
            When::Always => true,
            When::Decode => s.n_tokens == 1,
            When::Batch => s.n_tokens > 1,
            When::Small => (2..=super::mat::MATVEC_BATCH).contains(&s.n_tokens),
            When::Large => s.n_tokens > super::mat::MATVEC_BATCH,
            When::NotSmall => !When::Small.admits(s),
            When::AtMost(n) => s.n_tokens <= n,
            When::MoreThan(n) => s.n_tokens > n,
        }
    }
}

/// Picks the pipeline (index into `pipelines`) and workgroup counts for a pass, or `None` when
/// the pass has nothing for this dispatch.
pub type Grid = Box<dyn Fn(&StepInfo) -> Option<(usize, [u32; 3])> + Send + Sync>;

/// What one dispatch costs in a pass: the bytes it reads from memory and its arithmetic, for the
/// profile's GB/s and FLOP/s (shared/MEASURE.md, rule 6). Bytes count each distinct byte once
/// (weights once per pass, activations once per token), so they are the traffic a kernel that
/// reuses perfectly through its caches would have: the floor its time is measured against.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// Bytes read from memory (weights, activations, KV cache).
    pub bytes: f64,
    /// Floating-point operations (a multiply-add is 2): `2 rows cols tokens` for a matrix
    /// product, an estimate for attention, 0 for the elementwise and reduction kernels.
    pub flops: f64,
}

impl Cost {
    /// A matrix product: `weight_bytes` of weights read once, `x_bytes` of activations besides,
    /// `2 rows cols tokens` FLOPs.
    pub fn product(weight_bytes: f64, x_bytes: f64, rows: u32, cols: u32, tokens: f64) -> Cost {
        Cost {
            bytes: weight_bytes + x_bytes,
            flops: 2.0 * rows as f64 * cols as f64 * tokens,
        }
    }

    /// A kernel that only moves `bytes` (no matrix arithmetic counted).
    pub fn reads(bytes: f64) -> Cost {
        Cost { bytes, flops: 0.0 }
    }
}

/// A dispatch's [`Cost`] in a pass, evaluated like its [`Grid`] (only for passes it runs in).
pub type CostRule = Box<dyn Fn(&StepInfo) -> Cost + Send + Sync>;

/// Bytes of `n` f32 activations.
pub(crate) fn f32s(n: u64) -> f64 {
    n as f64 * 4.0
}

pub struct Dispatch {
    pub label: String,
    pub pipelines: Vec<wgpu::ComputePipeline>,
    pub bind_group: wgpu::BindGroup,
    pub grid: Grid,
    /// What it reads and computes in a pass (the profile's bytes and FLOPs).
    pub cost: CostRule,
}

impl Dispatch {
    /// This dispatch, restricted to the passes `when` admits.
    pub fn only(self, when: When) -> Dispatch {
        self.only_if(move |s| when.admits(s))
    }

    /// This dispatch only in the passes `keep` admits.
    pub fn only_if(mut self, keep: impl Fn(&StepInfo) -> bool + Send + Sync + 'static) -> Dispatch {
        let grid = std::mem::replace(&mut self.grid, Box::new(|_| None));
        self.grid = Box::new(move |s| if keep(s) { grid(s) } else { None });
        self
    }

    /// This dispatch with `cost` as its cost rule.
    pub fn costs(mut self, cost: impl Fn(&StepInfo) -> Cost + Send + Sync + 'static) -> Dispatch {
        self.cost = Box::new(cost);
        self
    }

    /// This dispatch with a second kernel, `key`'s where given, for passes of more than
    /// [`MATVEC_BATCH`](super::mat::MATVEC_BATCH) tokens (prompt chunks): the same bind group and
    /// grid (the matrix-unit twins of the batched expert products).
    pub(crate) fn long_passes(mut self, gpu: &Gpu, key: Option<&PipelineKey>) -> Result<Dispatch> {
        let Some(key) = key else {
            return Ok(self);
        };
        self.pipelines.push(gpu.pipeline(key)?);
        let long = self.pipelines.len() - 1;
        let grid = std::mem::replace(&mut self.grid, Box::new(|_| None));
        self.grid = Box::new(move |s| {
            let (i, g) = grid(s)?;
            Some((
                if s.n_tokens > super::mat::MATVEC_BATCH {
                    long
                } else {
                    i
                },
                g,
            ))
        });
        Ok(self)
    }

    /// The usual dispatch: one pipeline, `key`'s kernel, bound to `buffers` (in the order of
    /// `key.layout`) and launched as `grid(s)` workgroups on the passes `when` admits.
    pub(crate) fn one(
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
            cost: Box::new(|_| Cost::default()),
        })
    }

    /// Records this dispatch into `pass` for the pass shape `s`; returns whether it ran. An
    /// empty grid is not recorded (it would do nothing, and Dawn warns about it on stdout).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, s: &StepInfo) -> bool {
        let Some((i, [x, y, z])) = (self.grid)(s) else {
            return false;
        };
        if x == 0 || y == 0 || z == 0 {
            return false;
        }
        pass.set_pipeline(&self.pipelines[i]);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
        true
    }
}

/// Most workgroups one grid dimension may have (WebGPU's default limit).
pub(crate) const MAX_GRID: u32 = 65535;

/// Lays `n` workgroups out as a 2-D grid (kernels fold `x + y * num_workgroups.x` back).
pub(crate) fn grid_2d(n: u32) -> [u32; 3] {
    if n <= MAX_GRID {
        [n.max(1), 1, 1]
    } else {
        let y = n.div_ceil(MAX_GRID);
        [n.div_ceil(y), y, 1]
    }
}

/// The variant suffix of weight type `ty` (`matvec_<suffix>`, build.rs's `tandem:per-qtype`).
pub(crate) fn qtype_suffix(ty: GgmlType) -> Result<&'static str> {
    ty.gpu()
        .map(|g| g.wgsl)
        .ok_or_else(|| crate::Error::UnsupportedTensorType {
            name: String::new(),
            ty: ty.name(),
        })
}

/// The pipeline key of variant `shader` with no override constants.
pub(crate) fn key(shader: String, layout: &'static [Binding]) -> PipelineKey {
    PipelineKey {
        shader,
        constants: Vec::new(),
        layout,
    }
}

/// (input, output, parameters, step): the layout of the kernels with one input and one output
/// (moe_sort, moe_combine).
pub(crate) const IN_OUT_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

/// (input, second input, output, parameters, step): the layout of the kernels with two inputs
/// and one output (rmsnorm and quantize_q8: x and the norm weights; embed: the table and the
/// token ids; moe_router: the logits and the bias).
pub(crate) const IN2_OUT_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

/// What one WGSL kernel binds, as the Rust side binds it: each family file lists its kernels
/// next to their layouts and `Params` (`BINDS`), and `kernels/tests/bindings.rs` checks every
/// variant of every kernel in `gpu::shaders::SHADERS` against naga's reading of its WGSL.
#[cfg(test)]
pub(crate) struct KernelBinds {
    /// The kernel's file in wgsl/ without `.wgsl`; its variants are `<stem>` or
    /// `<stem>_<qtype>`, each with its `_sg` twin where the kernel has one.
    pub stem: &'static str,
    /// The bind group layout its pipelines are created with: binding i is `layout[i]`.
    pub layout: &'static [Binding],
    /// Bindings of `layout` the WGSL does not declare (a bind group shared with another kernel).
    pub unused: &'static [u32],
    /// (binding, size of the Rust value written to that uniform).
    pub uniforms: &'static [(u32, usize)],
    /// WGSL `const`s and `override` defaults that must equal these Rust values.
    pub constants: &'static [(&'static str, u32)],
}
