//! A gated FFN's input side in one dispatch, `h = act(G x') * (U x')` over the stacked weight
//! `[G; U]`: `matvec_glu` for decode (matvec_glu.wgsl and its int8 twin) and `glu_small` for the
//! small passes on f32 x (matvec_batch.wgsl with `GLU`), in place of the product into gate/up
//! and the glu dispatch after it.

use bytemuck::{Pod, Zeroable};

#[cfg(test)]
use super::dispatch::KernelBinds;
use super::dispatch::{grid_2d, qtype_suffix, Dispatch, Rows, When};
use super::glu::Activation;
use super::mat::{
    check_cols, mat_cost, small_q8_pays, GpuWeight, MatParams, WeightChunk, MATVEC_BATCH_GROUP,
    MAT_LAYOUT,
};
use super::shape::MatvecShape;
#[cfg(test)]
use super::shape::MATVEC_WG;
use crate::gpu::{Binding, Gpu};
use crate::Result;

const MATVEC_GLU_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Read,
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

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "matvec_glu",
        layout: MATVEC_GLU_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<MatvecGluParams>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "matvec_glu_q8",
        layout: MATVEC_GLU_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<MatvecGluParams>())],
        constants: &[("WG", MATVEC_WG)],
    },
];

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
    let Some(chunk) = one_chunk(gate_up)? else {
        return Ok(None);
    };
    let n_rows = gate_up.n_rows / 2;
    let shape =
        shape.unwrap_or_else(|| MatvecShape::for_matrix(gpu, n_rows, gate_up.n_cols, chunk.ty));
    let pipeline_key = shape.rows_key(
        gpu,
        shape.kernel("matvec_glu", chunk.ty)?,
        MATVEC_GLU_LAYOUT,
    )?;
    let rows = shape.workgroup_rows();
    let params = MatvecGluParams {
        n_rows,
        n_cols: gate_up.n_cols,
        act: (act == Activation::GeluTanh) as u32,
        flags: (norm.is_some() as u32) << 2,
        eps: norm.map_or(0.0, |n| n.1),
        _pad: [0; 3],
    };
    let pbuf = gpu.uniform(&gate_up.name, &params);
    let (bytes, n_cols) = (chunk.buffer.size(), gate_up.n_cols);
    let fixed = norm.map_or(0, |_| n_cols);
    Dispatch::one(
        gpu,
        &gate_up.name,
        &pipeline_key,
        &[
            &chunk.buffer,
            x,
            h,
            norm.map_or(dummy, |n| n.0),
            &pbuf,
            &chunk.buffer,
        ],
        When::Decode,
        move |_| grid_2d(n_rows.div_ceil(rows)),
    )
    .map(|d| Some(d.costs(move |_| mat_cost(bytes, 2 * n_rows, n_cols, 1, n_cols, fixed))))
}

/// `h[t, :] = act(gate) * up` for the tokens of the small passes (2 to [`MATVEC_BATCH`]) from
/// x' (`x`, or RMSNorm(x) * norm_w with `norm`) and a gated FFN's gate/up weight of one chunk
/// (gate rows, then up rows) on f32 x': matvec_batch.wgsl with `GLU`, in place of those passes'
/// norm, product into gate/up and glu dispatch (the decode step's matvec_glu for a few tokens).
/// `None` where gate and up are two chunks or the chunk's small passes take int8 x'
/// ([`small_q8_pays`]).
#[allow(clippy::too_many_arguments)]
pub fn glu_small(
    gpu: &Gpu,
    gate_up: &GpuWeight,
    x: &wgpu::Buffer,
    h: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    act: Activation,
) -> Result<Option<Dispatch>> {
    if !takes_glu_small(gpu, gate_up) {
        return Ok(None);
    }
    glu_small_with(gpu, gate_up, x, h, step, dummy, norm, act, None)
}

/// Whether the small passes take `gate_up` (a gated FFN's gate/up weight) in one [`glu_small`]
/// dispatch: one chunk, which they take on f32 x.
pub fn takes_glu_small(gpu: &Gpu, gate_up: &GpuWeight) -> bool {
    matches!(gate_up.chunks.as_slice(), [c] if !small_q8_pays(gpu, c))
}

/// The one chunk of a gate/up stack (checked as `mat` checks its weights), or `None` where gate
/// and up are two (their types differ, or the stack exceeds a binding).
fn one_chunk(gate_up: &GpuWeight) -> Result<Option<&WeightChunk>> {
    check_cols(gate_up)?;
    Ok(match gate_up.chunks.as_slice() {
        [c] => Some(c),
        _ => None,
    })
}

/// [`glu_small`] on f32 x whatever the weight's type, in the given shape (at least 2 rows a
/// workgroup: a gate and an up row) or (`None`) the one `mat` takes for the small passes over
/// the weight; `None` where gate and up are two chunks.
#[allow(clippy::too_many_arguments)]
pub fn glu_small_with(
    gpu: &Gpu,
    gate_up: &GpuWeight,
    x: &wgpu::Buffer,
    h: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    act: Activation,
    shape: Option<MatvecShape>,
) -> Result<Option<Dispatch>> {
    let Some(chunk) = one_chunk(gate_up)? else {
        return Ok(None);
    };
    let n_cols = gate_up.n_cols;
    let shape = shape.unwrap_or_else(|| MatvecShape::for_batch(gpu, n_cols, chunk.ty));
    let shape = MatvecShape {
        rows: shape.rows.max(2),
        int8: false,
        ..shape
    };
    let mut key = shape.key(
        gpu,
        format!("matvec_batch_{}", qtype_suffix(chunk.ty)?),
        MAT_LAYOUT,
    )?;
    key.constants
        .extend([("GLU", 1), ("NORM", norm.is_some() as u32)]);
    let n_ff = gate_up.n_rows / 2;
    let params = MatParams {
        n_rows: n_ff,
        n_cols,
        y_stride: n_ff,
        y_offset: 0,
        flags: (norm.is_some() as u32) << 2 | ((act == Activation::GeluTanh) as u32) << 3,
        rows_mode: Rows::Tokens.mode(),
        eps: norm.map_or(0.0, |n| n.1),
        ..Zeroable::zeroed()
    };
    let pbuf = gpu.uniform(&gate_up.name, &params);
    let b = &chunk.buffer;
    let outputs = shape.rows / 2;
    let (bytes, fixed) = (b.size(), norm.map_or(0, |_| n_cols));
    Dispatch::one(
        gpu,
        &gate_up.name,
        &key,
        &[
            b,
            x,
            h,
            dummy,
            &pbuf,
            step,
            norm.map_or(dummy, |n| n.0),
            b,
            dummy,
        ],
        When::Small,
        move |s| {
            let [gx, gy, _] = grid_2d(n_ff.div_ceil(outputs));
            [gx, gy, s.n_tokens.div_ceil(MATVEC_BATCH_GROUP)]
        },
    )
    .map(|d| Some(d.costs(move |s| mat_cost(bytes, 2 * n_ff, n_cols, s.n_tokens, n_cols, fixed))))
}
