//! GGML tensor types: block geometry, CPU dequantization (the reference the kernels are tested
//! against) and the repacking of blocks into the 4-byte-aligned layout the WGSL kernels read.

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
    I8,
    I16,
    I32,
    I64,
    F64,
    BF16,
    /// A type id Tandem knows nothing about (IQ formats, new types); it cannot be loaded.
    Other(u32),
}

impl GgmlType {
    pub fn from_id(id: u32) -> GgmlType {
        use GgmlType::*;
        match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2K,
            11 => Q3K,
            12 => Q4K,
            13 => Q5K,
            14 => Q6K,
            15 => Q8K,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            30 => BF16,
            other => Other(other),
        }
    }

    /// Elements per block and bytes per block, or `None` for unknown types.
    pub fn block_geometry(self) -> Option<(u64, u64)> {
        use GgmlType::*;
        Some(match self {
            F32 => (1, 4),
            F16 => (1, 2),
            BF16 => (1, 2),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            Q2K => (256, 84),
            Q3K => (256, 110),
            Q4K => (256, 144),
            Q5K => (256, 176),
            Q6K => (256, 210),
            Q8K => (256, 292),
            I8 => (1, 1),
            I16 => (1, 2),
            I32 => (1, 4),
            I64 => (1, 8),
            F64 => (1, 8),
            Other(_) => return None,
        })
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
        use GgmlType::*;
        matches!(
            self,
            F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4K | Q5K | Q6K
        )
    }

    pub fn name(self) -> String {
        use GgmlType::*;
        match self {
            F32 => "F32".into(),
            F16 => "F16".into(),
            BF16 => "BF16".into(),
            Q4_0 => "Q4_0".into(),
            Q4_1 => "Q4_1".into(),
            Q5_0 => "Q5_0".into(),
            Q5_1 => "Q5_1".into(),
            Q8_0 => "Q8_0".into(),
            Q8_1 => "Q8_1".into(),
            Q2K => "Q2_K".into(),
            Q3K => "Q3_K".into(),
            Q4K => "Q4_K".into(),
            Q5K => "Q5_K".into(),
            Q6K => "Q6_K".into(),
            Q8K => "Q8_K".into(),
            I8 => "I8".into(),
            I16 => "I16".into(),
            I32 => "I32".into(),
            I64 => "I64".into(),
            F64 => "F64".into(),
            Other(id) => format!("type id {id}"),
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
pub use repack::{gpu_bytes, repack_for_gpu};

mod dequant;
pub use dequant::dequantize;

#[cfg(test)]
pub(crate) mod tests;
