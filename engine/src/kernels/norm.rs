//! RMSNorm (rmsnorm.wgsl).

use bytemuck::{Pod, Zeroable};

use super::dispatch::{f32s, key, Cost, Dispatch, Rows, When, IN2_OUT_LAYOUT};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::shape::reduce_variant;
use crate::gpu::Gpu;
use crate::Result;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NormParams {
    dim: u32,
    eps: f32,
    flags: u32,
    rows_mode: u32,
    y_stride: u32,
    y_col0: u32,
    _pad: [u32; 2],
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
    /// Rows of `y` of `stride` elements, written from column `col0` (the MTP head's
    /// concatenation); `None`: rows of `dim`.
    pub y_cols: Option<(u32, u32)>,
}

/// Threads of an rmsnorm workgroup (`WG` in rmsnorm.wgsl), all summing one row.
const NORM_WG: u32 = 256;

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "rmsnorm",
    layout: IN2_OUT_LAYOUT,
    unused: &[],
    uniforms: &[(3, size_of::<NormParams>()), (4, size_of::<StepUniform>())],
    constants: &[("WG", NORM_WG)],
}];

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
        y_stride: opts.y_cols.map_or(dim, |c| c.0),
        y_col0: opts.y_cols.map_or(0, |c| c.1),
        _pad: [0; 2],
    };
    let pbuf = gpu.uniform("rmsnorm", &params);
    let rows = opts.rows;
    Dispatch::one(
        gpu,
        "rmsnorm",
        &key(shader, IN2_OUT_LAYOUT),
        &[x, weight, y, &pbuf, step],
        opts.when,
        move |s| [rows.count(s), 1, 1],
    )
    .map(|d| {
        // Each row (and the row it adds to), the weights.
        let per_row = dim as u64 * (1 + opts.accumulate as u64);
        d.costs(move |s| Cost::reads(f32s(rows.count(s) as u64 * per_row + dim as u64)))
    })
}
