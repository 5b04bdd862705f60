//! The layout the WGSL kernels read weights in. Storage buffers are arrays of u32, so a block
//! whose size is not a multiple of 4 bytes (Q4_0 18, Q5_0 22, Q8_0 34, Q6_K 210) cannot be
//! addressed in place. Those types (a `grouped_scale` in their row of [`super::TYPES`]) are
//! stored in groups of blocks: the group's f16 scales first, padded to whole words, then its
//! blocks without their scale. Groups are pairs (one word of scales), but for Q6_K, whose groups
//! of eight (16 bytes of scales, then 8 x 208 bytes) start every block on 16 bytes. Every other
//! supported type keeps its GGUF layout. The WGSL readers in `wgsl/common/quant_<qtype>.wgsl`
//! mirror this.

use std::borrow::Cow;

use super::{GgmlType, ScaleGroup};

/// The group layout of `ty`, for the grouped types.
fn scale_group(ty: GgmlType) -> Option<ScaleGroup> {
    ty.gpu()?.grouped_scale
}

/// Bytes of a group's f16 scales, in whole words: where its first block's body starts.
fn scales_bytes(g: ScaleGroup) -> usize {
    (2 * g.blocks).next_multiple_of(4)
}

/// Bytes of a group of `g` blocks of `bytes` each: the scales, then the bodies.
fn group_bytes(g: ScaleGroup, bytes: u64) -> u64 {
    scales_bytes(g) as u64 + g.blocks as u64 * (bytes - 2)
}

/// Blocks a GPU layout keeps together: a piece of a weight that ends on a multiple of this many
/// blocks can be followed by another in the same buffer (1 for the ungrouped types).
pub fn gpu_block_group(ty: GgmlType) -> u64 {
    scale_group(ty).map_or(1, |g| g.blocks as u64)
}

/// Bytes the GPU copy of `n_elements` of `ty` takes (whole blocks; padded to a whole group).
pub fn gpu_bytes(ty: GgmlType, n_elements: u64) -> Option<u64> {
    let (block, bytes) = ty.block_geometry()?;
    let n_blocks = n_elements / block;
    Some(match scale_group(ty) {
        Some(g) => n_blocks.div_ceil(g.blocks as u64) * group_bytes(g, bytes),
        None => (n_blocks * bytes).next_multiple_of(4),
    })
}

/// Repacks whole blocks of `ty` from their GGUF layout into the GPU layout. Grouped types come
/// out as whole groups (a trailing partial group is padded with zeros); the other types are
/// returned as they are, which for an odd count of F16/BF16 values ends mid-word: `gpu_bytes`
/// counts that tail padded to 4 bytes, as `Gpu::storage_init` pads it.
pub fn repack_for_gpu(ty: GgmlType, data: &[u8]) -> Cow<'_, [u8]> {
    let Some(g) = scale_group(ty) else {
        return Cow::Borrowed(data);
    };
    let (_, bs) = ty.block_geometry().expect("grouped types have a geometry");
    let gb = group_bytes(g, bs) as usize;
    let (bs, at) = (bs as usize, g.at);
    let head = scales_bytes(g);
    let body = bs - 2;
    let n_blocks = data.len() / bs;
    let mut out = vec![0u8; n_blocks.div_ceil(g.blocks) * gb];
    for (group, dst) in out.chunks_exact_mut(gb).enumerate() {
        for i in 0..g.blocks {
            let b = group * g.blocks + i;
            if b >= n_blocks {
                break;
            }
            let src = &data[b * bs..(b + 1) * bs];
            dst[i * 2..i * 2 + 2].copy_from_slice(&src[at..at + 2]);
            let body_dst = &mut dst[head + i * body..head + (i + 1) * body];
            body_dst[..at].copy_from_slice(&src[..at]);
            body_dst[at..].copy_from_slice(&src[at + 2..]);
        }
    }
    Cow::Owned(out)
}
