//! The matvec shape policy: how a decode matvec kernel (matvec, matvec_glu, moe_gate_up,
//! moe_down) splits its workgroup over rows on this adapter, and when a kernel takes its
//! subgroup (`_sg`) variant.

use crate::gpu::{Binding, Gpu, PipelineKey};
use crate::quant::GgmlType;
use crate::Result;

/// Threads per matvec workgroup (`WG` in matvec.wgsl, matvec_glu.wgsl, moe_gate_up.wgsl and
/// moe_down.wgsl).
pub(crate) const MATVEC_WG: u32 = 256;

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

/// Rows each thread group of matvec, matvec_glu and moe_gate_up serves
/// ([`MatvecShape::per_thread`]). On a GPU, 4: x' is read once for four rows, and four rows'
/// loads are in flight (H200, dense 8B decode: 144.6 tok/s with 1, 172.0 with 2, 177.8 with 4;
/// Qwen3-30B-A3B decode with moe_gate_up's rows: 213.5 with 1, 226.1 with 2, 227.5 with 4;
/// bench/RESULTS.md). On a CPU adapter, 1 (there a group is one thread).
pub fn matvec_rows_per_thread(gpu: &Gpu) -> u32 {
    if gpu.info.device_type == wgpu::DeviceType::Cpu {
        1
    } else {
        4
    }
}

/// Weights per unit of the decode dot products for weight type `ty` (`UNIT` in
/// common/unit_dot.wgsl and its twins): 32 for Q4_K (two 16-byte loads a unit,
/// common/unit_dot_q4_k.wgsl), 16 for Q6_K, whose unit reads each quant word once
/// (unit_dot_q6_k.wgsl), 8 for the others.
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

/// Most weight bytes a workgroup of the small passes' f32 kernel reads where it could serve
/// fewer rows: past it, the one compute unit that runs the workgroup streams them at its share of
/// the bandwidth. A 128-expert router's 2048-wide f32 rows (8 KiB each) took 2-3% more of a
/// pass in 32 workgroups of 4 rows than in 128 of one (H200, Qwen3-30B-A3B shape).
const BATCH_WG_BYTES: u64 = 8 << 10;

/// [`MatvecShape::for_batch`]'s rows per workgroup on a GPU for rows of `n_cols` weights taking
/// `row_bytes` each: a row about as many threads as it has units of 32 weights, at least a
/// subgroup's 32, and fewer rows where they would read more than [`BATCH_WG_BYTES`].
pub(crate) fn gpu_batch_rows(n_cols: u32, row_bytes: u64) -> u32 {
    let threads = (n_cols / 32).next_power_of_two().clamp(32, MATVEC_WG);
    let mut rows = MATVEC_WG / threads;
    while rows > 1 && rows as u64 * row_bytes > BATCH_WG_BYTES {
        rows /= 2;
    }
    rows
}

/// Whether weights of type `ty` have the `_q8` matrix products (a twin
/// common/unit_q8_<qtype>.wgsl, listed on the kernels' `// tandem:qtypes` lines).
pub fn has_q8_unit(ty: GgmlType) -> bool {
    ty.gpu()
        .is_some_and(|g| crate::gpu::shaders::source(&format!("matvec_q8_{}", g.wgsl)).is_some())
}

/// Row length from which a `_q8` decode kernel pays whatever its rows: the f32 units read x'
/// (48 KiB of f32 for 12288 columns) once per group of rows, past what a compute unit's L1 keeps
/// for its workgroups; staging reads it once per workgroup (H200, dense 8B shape: ffn_down, 12288
/// columns and 16 rows a workgroup, 1,596 to 1,273 us a pass).
const Q8_LONG_ROW: u32 = 8192;

/// Rows a workgroup of a `_q8` decode kernel must serve for staging x' to pay, on a GPU. H200,
/// dense 8B decode (bench/RESULTS.md, twelfth session): with 16, the attention projections
/// (Q4_K, 16 rows a workgroup) take `_q8` too, 218.0 to 233.4 tok/s (attn_qkv 1,047 to 896 us a
/// pass, attn_output 678 to 580); Qwen3-30B-A3B shape 213.9 to 218.2. Fewer rows than 16 change
/// nothing on these shapes (no decode matrix has them).
const Q8_MIN_ROWS: u32 = 16;

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
pub(crate) fn reduce_variant(gpu: &Gpu, base: String, threads: u32, subgroups: bool) -> String {
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
    /// Groups of threads per workgroup (`ROWS` of the kernels that give each group one row): a
    /// power of two up to 256, so each group has 256 / rows threads.
    pub rows: u32,
    /// Rows each group serves in matvec, matvec_glu and moe_gate_up (`RPT`: 1, 2 or 4), reading
    /// x' once for all of them; their `ROWS` is `rows * per_thread`. moe_down ignores it.
    pub per_thread: u32,
    /// Sum with subgroup operations (the `_sg` variant) where [`subgroups_fit`]; `false` takes
    /// the portable variant everywhere.
    pub subgroups: bool,
    /// Dot the weights with x' staged as int8 (the `_q8` variants, common/q8_stage.wgsl) where
    /// the type has such a unit ([`has_q8_unit`]); `false` takes the f32 units everywhere.
    pub int8: bool,
}

impl MatvecShape {
    /// The adapter's choice: [`matvec_rows`] rows, subgroups where they fit.
    pub fn for_adapter(gpu: &Gpu) -> MatvecShape {
        MatvecShape {
            rows: matvec_rows(gpu),
            per_thread: matvec_rows_per_thread(gpu),
            subgroups: true,
            int8: gpu.features.int8_dot,
        }
    }

    /// The adapter's choice for `n_rows` rows (workgroups' worth: for the experts, rows times
    /// routes) of `n_cols` weights of type `ty`: as [`MatvecShape::for_adapter`], but on a GPU
    /// first with more rows per workgroup where more than half of a row's threads would have no
    /// unit ([`decode_unit`]; a 256-wide Q4_K row has 8), then with fewer where the matrix
    /// would make fewer than [`MATVEC_MIN_WORKGROUPS`] workgroups (a 128-expert router's 32
    /// workgroups of 4 rows leave most of a large GPU idle). The `_q8` kernels start from twice
    /// the rows and are kept only where the rows repay staging x' ([`Q8_MIN_ROWS`],
    /// [`Q8_LONG_ROW`]).
    pub fn for_matrix(gpu: &Gpu, n_rows: u32, n_cols: u32, ty: GgmlType) -> MatvecShape {
        MatvecShape::for_adapter(gpu).fit(gpu, n_rows, n_cols, ty)
    }

    /// [`MatvecShape::for_matrix`] for the experts' down projection (moe_down) of `k` routes a
    /// token: a group serves one row, whose threads stride over the units of its `k` experts'
    /// rows, so the row is fitted as one of `k n_cols` weights. It keeps the f32 units: staging
    /// each route's x' as int8 cost more than it saved there (H200, Qwen3-30B-A3B shape:
    /// ffn_down_exps 864 to 1,310 us a pass; bench/RESULTS.md). Fitted before as four rows a
    /// group, which moe_down does not serve, its 2048 rows took 1024 workgroups of 2 rows where
    /// this takes 512 of 4: decode 274.7 -> 279.0 tok/s on that shape (twenty-fifth session; 256
    /// workgroups of 8: 272.9).
    pub fn for_experts(gpu: &Gpu, n_rows: u32, n_cols: u32, k: u32, ty: GgmlType) -> MatvecShape {
        let shape = MatvecShape {
            int8: false,
            per_thread: 1,
            ..MatvecShape::for_adapter(gpu)
        };
        shape.fit(gpu, n_rows, k * n_cols, ty)
    }

    /// The shape of matvec_batch_q8 over `n_rows` x `n_cols` weights of type `ty`: the decode
    /// `_q8` kernels' rows (twice the adapter's, fitted to the matrix), whatever the rows: x' is
    /// quantized once for the pass, so there is no staging for few rows to repay.
    pub fn for_small(gpu: &Gpu, n_rows: u32, n_cols: u32, ty: GgmlType) -> MatvecShape {
        let shape = MatvecShape {
            int8: true,
            ..MatvecShape::for_adapter(gpu)
        };
        if gpu.info.device_type == wgpu::DeviceType::Cpu {
            return shape;
        }
        let groups = n_rows.div_ceil(shape.per_thread);
        let rows = gpu_matvec_rows(2 * shape.rows, groups, n_cols / decode_unit(ty));
        MatvecShape { rows, ..shape }
    }

    /// The shape of the small passes' f32 kernel (matvec_batch.wgsl, whose `ROWS` rows each have
    /// `256 / ROWS` threads striding over the row's units of 32 weights) over rows of `n_cols`
    /// weights of type `ty` ([`gpu_batch_rows`]). The decode fit keeps many workgroups for
    /// streaming and left most of a short row's threads idle in these latency-bound passes:
    /// SmolLM2's attention rows (576 columns, 18 units) had 256 threads, and a 2-token pass of
    /// its shape took 2.10 ms where this takes 1.38 (H200, bench/RESULTS.md, twenty-ninth
    /// session).
    pub fn for_batch(gpu: &Gpu, n_cols: u32, ty: GgmlType) -> MatvecShape {
        let shape = MatvecShape {
            int8: false,
            ..MatvecShape::for_adapter(gpu)
        };
        if gpu.info.device_type == wgpu::DeviceType::Cpu {
            return shape;
        }
        MatvecShape {
            rows: gpu_batch_rows(
                n_cols,
                ty.bytes_for(n_cols as u64).unwrap_or(4 * n_cols as u64),
            ),
            ..shape
        }
    }

    /// This shape's rows fitted to the matrix ([`MatvecShape::for_matrix`]).
    fn fit(self, gpu: &Gpu, n_rows: u32, n_cols: u32, ty: GgmlType) -> MatvecShape {
        let mut shape = self;
        if gpu.info.device_type == wgpu::DeviceType::Cpu {
            return shape;
        }
        let groups = n_rows.div_ceil(shape.per_thread);
        let units = n_cols / decode_unit(ty);
        if shape.takes_q8(ty) {
            // Staging x' costs a workgroup the same whatever its rows: twice the rows pays
            // (H200, dense 8B decode: 200.3 tok/s with 4 groups of 4 rows, 207.5 with 8), and
            // too few rows do not repay it.
            let rows = gpu_matvec_rows(2 * shape.rows, groups, units);
            if rows * shape.per_thread >= Q8_MIN_ROWS || n_cols >= Q8_LONG_ROW {
                return MatvecShape { rows, ..shape };
            }
            shape.int8 = false;
        }
        shape.rows = gpu_matvec_rows(shape.rows, groups, units);
        // A matrix too short for the workgroups even at one group each (a MoE router's 128 rows:
        // 32 workgroups of 4 rows) spreads its rows thinner instead.
        while shape.rows == 1
            && shape.per_thread > 1
            && n_rows.div_ceil(shape.per_thread) < MATVEC_MIN_WORKGROUPS
        {
            shape.per_thread /= 2;
        }
        shape
    }

    /// The variant name (`<base>` or `<base>_sg`) and pipeline key of kernel `base` in this
    /// shape, checked to divide the workgroup into a power of two of threads per row (the
    /// portable reduction halves them).
    pub(crate) fn key(
        self,
        gpu: &Gpu,
        base: String,
        layout: &'static [Binding],
    ) -> Result<PipelineKey> {
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

    /// Rows a workgroup of matvec, matvec_glu and moe_gate_up serves (their `ROWS`).
    pub(crate) fn workgroup_rows(self) -> u32 {
        self.rows * self.per_thread
    }

    /// [`MatvecShape::key`] for matvec, matvec_glu and moe_gate_up, whose groups serve
    /// `per_thread` rows.
    pub(crate) fn rows_key(
        self,
        gpu: &Gpu,
        base: String,
        layout: &'static [Binding],
    ) -> Result<PipelineKey> {
        if ![1, 2, 4].contains(&self.per_thread) {
            return Err(crate::Error::InvalidArgument(format!(
                "{} matvec rows per thread: 1, 2 or 4",
                self.per_thread
            )));
        }
        let mut key = self.key(gpu, base, layout)?;
        key.constants = vec![("ROWS", self.workgroup_rows()), ("RPT", self.per_thread)];
        Ok(key)
    }

    /// Whether this shape takes the `_q8` variant for weights of type `ty`.
    pub fn takes_q8(self, ty: GgmlType) -> bool {
        self.int8 && has_q8_unit(ty)
    }

    /// The variant stem of decode kernel `stem` (`matvec`, `matvec_glu`, `matvec_batch`) for
    /// weights of type `ty` in this shape: `<stem>_q8_<qtype>` or `<stem>_<qtype>`.
    pub(crate) fn kernel(self, stem: &str, ty: GgmlType) -> Result<String> {
        let q = super::dispatch::qtype_suffix(ty)?;
        Ok(if self.takes_q8(ty) {
            format!("{stem}_q8_{q}")
        } else {
            format!("{stem}_{q}")
        })
    }

    /// Whether this shape takes the subgroup variant on `gpu`.
    pub fn uses_subgroups(self, gpu: &Gpu) -> bool {
        self.subgroups && subgroups_fit(gpu, MATVEC_WG / self.rows.max(1))
    }
}
