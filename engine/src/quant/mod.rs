//! GGML tensor types: one table ([`TYPES`]) of what Tandem knows about each (block geometry, GGUF
//! id and name, CPU dequantization, how the GPU kernels read it), from which the loader, the error
//! messages, `build.rs`, the tests and `bench/`'s synthetic models derive; the layout of each block
//! type with its dequantization (`blocks.rs`, the reference the kernels are tested against); and
//! the repacking of blocks into the 4-byte-aligned layout the WGSL kernels read.
//!
//! Adding a weight type: a variant below, its block struct and [`Block`] impl in `blocks.rs`, a
//! row in [`TYPES`], and its WGSL helper `wgsl/common/quant_<wgsl>.wgsl` (`build.rs` finds it and
//! builds every `tandem:per-qtype` kernel for it; `gpu::tests` checks that helpers and rows agree).
//! The tests then cover it wherever they loop over [`gpu_types`]; add it to
//! tests/reference/make_quant_fixture.py for the check against gguf-py.

use std::fmt;

/// A GGML tensor type as numbered in GGUF files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    IQ4NL,
    IQ4XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    BF16,
    /// A type Tandem cannot load: one whose geometry GGML documents (a row of [`TYPES`] names it)
    /// or an id it knows nothing about.
    Other(u32),
}

/// Dequantizes whole blocks: GGUF bytes in, values out.
pub type Dequant = fn(&[u8], &mut [f32]);

/// One row of [`TYPES`].
#[derive(Clone, Copy, Debug)]
pub struct TypeInfo {
    pub ty: GgmlType,
    /// GGML's `ggml_type` number, as stored in GGUF files.
    pub id: u32,
    /// GGML's name of the type (`ggml_type_name`).
    pub name: &'static str,
    /// Elements per block.
    pub block: u64,
    /// Bytes per block.
    pub bytes: u64,
    /// Dequantizes whole blocks (`blocks.rs`); `None` where Tandem cannot read the type.
    pub dequant: Option<Dequant>,
    /// The f16 fields of a block for random weights ([`random`]): byte offset, and value per unit
    /// of amplitude. Empty for the float types.
    pub scales: &'static [(usize, f32)],
    /// How the GPU kernels read it; `None` where they cannot.
    pub gpu: Option<GpuType>,
}

/// How the GPU kernels read a weight type.
#[derive(Clone, Copy, Debug)]
pub struct GpuType {
    /// Its WGSL helper is `wgsl/common/quant_<wgsl>.wgsl` and its kernel variants `<kernel>_<wgsl>`.
    pub wgsl: &'static str,
    /// Weights per unit of the decode dot products (`UNIT` in common/unit_dot.wgsl, or in the
    /// type's twin common/unit_dot_<wgsl>.wgsl).
    pub decode_unit: u32,
    /// For blocks whose size is not a multiple of 4 bytes: where the f16 scale sits that the
    /// loader moves to the front of each group of blocks so that the group aligns
    /// ([`repack_for_gpu`]).
    pub grouped_scale: Option<ScaleGroup>,
}

/// A GPU layout of blocks in groups ([`repack_for_gpu`]): the group's f16 scales first, in
/// whole words, then its blocks without their scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleGroup {
    /// The scale's byte offset in the GGUF block.
    pub at: usize,
    /// Blocks a group: 2 (one word of scales), or 8 for Q6_K, whose 208 bytes without the
    /// scale make every block of the group start on 16 bytes behind 16 bytes of scales, so the
    /// kernels read it in 16-byte loads.
    pub blocks: usize,
}

const fn gpu(wgsl: &'static str) -> Option<GpuType> {
    Some(GpuType {
        wgsl,
        decode_unit: 8,
        grouped_scale: None,
    })
}

/// A type stored in groups of `blocks` blocks with their scales (at byte `at`) in front.
const fn grouped(wgsl: &'static str, at: usize, blocks: usize) -> Option<GpuType> {
    Some(GpuType {
        wgsl,
        decode_unit: 8,
        grouped_scale: Some(ScaleGroup { at, blocks }),
    })
}

/// A type stored in pairs of blocks.
const fn paired(wgsl: &'static str, at: usize) -> Option<GpuType> {
    grouped(wgsl, at, 2)
}

/// `g` with a decode unit of `decode_unit` weights.
const fn unit(g: Option<GpuType>, decode_unit: u32) -> Option<GpuType> {
    match g {
        Some(g) => Some(GpuType { decode_unit, ..g }),
        None => None,
    }
}

/// A type Tandem reads, from its block struct.
const fn row<B: Block>(ty: GgmlType, id: u32, name: &'static str, g: Option<GpuType>) -> TypeInfo {
    TypeInfo {
        ty,
        id,
        name,
        block: B::QK as u64,
        bytes: size_of::<B>() as u64,
        dequant: Some(blocks::dequant_blocks::<B>),
        scales: B::SCALES,
        gpu: g,
    }
}

/// A type whose geometry GGML documents but Tandem cannot read.
const fn known(ty: GgmlType, id: u32, name: &'static str, block: u64, bytes: u64) -> TypeInfo {
    TypeInfo {
        ty,
        id,
        name,
        block,
        bytes,
        dequant: None,
        scales: &[],
        gpu: None,
    }
}

/// Every type Tandem knows, the ones the GPU reads first, in the order error messages list them.
#[rustfmt::skip]
pub static TYPES: &[TypeInfo] = {
    use blocks::*;
    use GgmlType::*;
    &[
        row::<F32Le>(F32, 0, "F32", gpu("f32")),
        row::<F16Le>(F16, 1, "F16", gpu("f16")),
        row::<BF16Le>(BF16, 30, "BF16", gpu("bf16")),
        row::<BlockQ4_0>(Q4_0, 2, "Q4_0", paired("q4_0", 0)),
        row::<BlockQ4_1>(Q4_1, 3, "Q4_1", gpu("q4_1")),
        row::<BlockQ5_0>(Q5_0, 6, "Q5_0", paired("q5_0", 0)),
        row::<BlockQ5_1>(Q5_1, 7, "Q5_1", gpu("q5_1")),
        row::<BlockQ8_0>(Q8_0, 8, "Q8_0", paired("q8_0", 0)),
        row::<BlockQ2K>(Q2K, 10, "Q2_K", gpu("q2_k")),
        row::<BlockQ3K>(Q3K, 11, "Q3_K", paired("q3_k", 108)),
        row::<BlockQ4K>(Q4K, 12, "Q4_K", unit(gpu("q4_k"), 32)),
        row::<BlockQ5K>(Q5K, 13, "Q5_K", gpu("q5_k")),
        row::<BlockQ6K>(Q6K, 14, "Q6_K", unit(grouped("q6_k", 208, 8), 16)),
        row::<BlockIQ4NL>(IQ4NL, 20, "IQ4_NL", paired("iq4_nl", 0)),
        row::<BlockIQ4XS>(IQ4XS, 23, "IQ4_XS", gpu("iq4_xs")),
        known(Q8_1, 9, "Q8_1", 32, 36),
        known(Q8K, 15, "Q8_K", 256, 292),
        known(Other(16), 16, "IQ2_XXS", 256, 66),
        known(Other(17), 17, "IQ2_XS", 256, 74),
        known(Other(18), 18, "IQ3_XXS", 256, 98),
        known(Other(19), 19, "IQ1_S", 256, 50),
        known(Other(21), 21, "IQ3_S", 256, 110),
        known(Other(22), 22, "IQ2_S", 256, 82),
        known(I8, 24, "I8", 1, 1),
        known(I16, 25, "I16", 1, 2),
        known(I32, 26, "I32", 1, 4),
        known(I64, 27, "I64", 1, 8),
        known(F64, 28, "F64", 1, 8),
        known(Other(29), 29, "IQ1_M", 256, 56),
        known(Other(34), 34, "TQ1_0", 256, 54),
        known(Other(35), 35, "TQ2_0", 256, 66),
        known(Other(39), 39, "MXFP4", 32, 17),
    ]
};

/// The weight types the GPU kernels read, in table order.
pub fn gpu_types() -> Vec<GgmlType> {
    TYPES
        .iter()
        .filter(|t| t.gpu.is_some())
        .map(|t| t.ty)
        .collect()
}

/// The names of [`gpu_types`], comma-separated (for error messages).
pub fn gpu_type_names() -> String {
    let names: Vec<_> = TYPES
        .iter()
        .filter(|t| t.gpu.is_some())
        .map(|t| t.name)
        .collect();
    names.join(", ")
}

impl GgmlType {
    pub fn from_id(id: u32) -> GgmlType {
        TYPES
            .iter()
            .find(|t| t.id == id)
            .map_or(GgmlType::Other(id), |t| t.ty)
    }

    /// Its row of [`TYPES`], or `None` for an id Tandem knows nothing about.
    pub fn info(self) -> Option<&'static TypeInfo> {
        TYPES.iter().find(|t| t.ty == self)
    }

    /// How the GPU kernels read it, or `None` where they cannot.
    pub fn gpu(self) -> Option<&'static GpuType> {
        self.info()?.gpu.as_ref()
    }

    /// The GGUF type id.
    pub fn id(self) -> u32 {
        match (self, self.info()) {
            (_, Some(t)) => t.id,
            (GgmlType::Other(id), None) => id,
            (ty, None) => unreachable!("{ty:?} has a row in TYPES"),
        }
    }

    /// Elements per block and bytes per block, or `None` for unknown types.
    pub fn block_geometry(self) -> Option<(u64, u64)> {
        self.info().map(|t| (t.block, t.bytes))
    }

    /// Bytes taken by `n_elements` of this type, or `None` when the count is not a whole number of
    /// blocks, the type is unknown, or the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (block, bytes) = self.block_geometry()?;
        if !n_elements.is_multiple_of(block) {
            return None;
        }
        (n_elements / block).checked_mul(bytes)
    }

    /// Whether the GPU kernels can read this type.
    pub fn gpu_supported(self) -> bool {
        self.gpu().is_some()
    }

    pub fn name(self) -> String {
        match (self, self.info()) {
            (_, Some(t)) => t.name.into(),
            (ty, None) => format!("type id {}", ty.id()),
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

pub mod random;
mod repack;
pub use repack::{gpu_block_group, gpu_bytes, repack_for_gpu};

mod blocks;
pub use blocks::{dequantize, Block};

#[cfg(test)]
pub(crate) mod tests;
