//! The decode matvec over a matrix of two chunks of different weight types in one dispatch
//! (matvec_q8_pair.wgsl): a Q4_K_M file keeps the attention's Q and K in Q4_K and V in Q6_K in
//! half its layers, so their stacked product has two chunks, and each chunk's dispatch waits
//! for the one before it (wgpu orders every dispatch that writes a buffer after all earlier
//! work in the pass). [`mat`](super::mat::mat) takes it for the decode steps of such a matrix
//! where [`pair_fits`] its shape.

use super::dispatch::{grid_2d, Cost, Dispatch};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::mat::{chunk_bindings, mat_cost_rule, GpuWeight, MatOpts, MatParams, MAT_LAYOUT};
use super::shape::MatvecShape;
#[cfg(test)]
use super::shape::MATVEC_WG;
use crate::gpu::{layout_with, Binding, Gpu};
use crate::quant::GgmlType;
use crate::Result;

/// matvec_q8_pair.wgsl's bindings: the matrix products' first eight (`mat::MAT_LAYOUT`; the
/// first chunk's), then the second chunk's weights, their 16-byte view and its parameters.
const PAIR_LAYOUT: &[Binding] = &layout_with::<11>(
    MAT_LAYOUT.split_at(8).0,
    &[Binding::Read, Binding::Read, Binding::Uniform],
);

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "matvec_q8_pair",
    layout: PAIR_LAYOUT,
    unused: &[],
    uniforms: &[
        (4, size_of::<MatParams>()),
        (5, size_of::<StepUniform>()),
        (10, size_of::<MatParams>()),
    ],
    constants: &[("WG", MATVEC_WG)],
}];

/// Most weight bytes a pair workgroup of the second chunk may read ([`pair_fits`]). The pair
/// runs the second chunk in the first's shape, so where the second alone would take the f32
/// kernel's many small workgroups, its rows pile into few, long ones. H100, the attention
/// projections' V in Q6_K: Qwen3-30B-A3B's (2048 columns, 16 rows: 26,880 bytes a workgroup)
/// decode 294.4 -> 303.4 tok/s paired; Qwen3-8B's (4096 columns: 53,760 bytes) 273.0 -> 269.0
/// (bench/RESULTS.md, forty-second session).
const PAIR_WG_BYTES: u64 = 32 << 10;

/// Whether the pair kernel in `shape` serves a second chunk of type `b` with `n_cols` columns:
/// both chunks' types take the `_q8` units in it, and the second's workgroups read at most
/// [`PAIR_WG_BYTES`].
pub(crate) fn pair_fits(shape: MatvecShape, a: GgmlType, b: GgmlType, n_cols: u32) -> bool {
    let wg_bytes = b
        .bytes_for(n_cols as u64)
        .map(|row| shape.workgroup_rows() as u64 * row);
    a != b && shape.takes_q8(a) && shape.takes_q8(b) && wg_bytes.is_some_and(|n| n <= PAIR_WG_BYTES)
}

/// The pair kernel and its shape for the decode steps of `w` in `shape` (`None`: the adapter's
/// choice for its first chunk), where `w` has two chunks of different types whose pair has a
/// variant and [`pair_fits`] that shape.
pub(super) fn pair_kernel(
    gpu: &Gpu,
    w: &GpuWeight,
    shape: Option<MatvecShape>,
) -> Option<(String, MatvecShape)> {
    let [a, b] = w.chunks.as_slice() else {
        return None;
    };
    let shape = shape.unwrap_or_else(|| MatvecShape::for_matrix(gpu, a.n_rows, w.n_cols, a.ty));
    if !pair_fits(shape, a.ty, b.ty, w.n_cols) {
        return None;
    }
    let name = format!(
        "matvec_q8_pair_{}_{}",
        super::dispatch::qtype_suffix(a.ty).ok()?,
        super::dispatch::qtype_suffix(b.ty).ok()?
    );
    crate::gpu::shaders::source(&name).map(|_| (name, shape))
}

/// The decode step's `y (+)= W x (+ bias)` over both chunks of `w` in one dispatch, with `opts`
/// as [`mat`](super::mat::mat) takes them (`kernel`, `shape`: [`pair_kernel`]'s). It runs for
/// passes whose rows count one token; `mat`'s per-chunk dispatches skip those.
#[allow(clippy::too_many_arguments)]
pub(super) fn matvec_pair(
    gpu: &Gpu,
    w: &GpuWeight,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    opts: &MatOpts,
    (kernel, shape): (String, MatvecShape),
) -> Result<Dispatch> {
    let [a, b] = w.chunks.as_slice() else {
        unreachable!("pair_kernel takes two chunks");
    };
    let (pa, pb) = (
        gpu.uniform(&w.name, &MatParams::of_chunk(w, a, opts)),
        gpu.uniform(&w.name, &MatParams::of_chunk(w, b, opts)),
    );
    let rows = shape.workgroup_rows();
    let workgroups = a.n_rows.div_ceil(rows) + b.n_rows.div_ceil(rows);
    let key = shape.rows_key(gpu, kernel, PAIR_LAYOUT)?;
    let (cost_a, cost_b) = (
        mat_cost_rule(a, w.n_cols, opts),
        mat_cost_rule(b, w.n_cols, opts),
    );
    let (rows_of, when) = (opts.rows, opts.when);
    Ok(Dispatch {
        label: w.name.clone(),
        pipelines: vec![gpu.pipeline(&key)?],
        bind_group: gpu.bind_group(
            PAIR_LAYOUT,
            &[
                &chunk_bindings(&a.buffer, x, y, &pa, step, dummy, opts)[..],
                &[&b.buffer, &b.buffer, &pb],
            ]
            .concat(),
        ),
        grid: Box::new(move |s| {
            (when.admits(s) && rows_of.count(s) == 1).then(|| (0, grid_2d(workgroups)))
        }),
        cost: Box::new(move |s| {
            let (ca, cb) = (cost_a(s), cost_b(s));
            Cost {
                bytes: ca.bytes + cb.bytes,
                flops: ca.flops + cb.flops,
            }
        }),
    })
}
