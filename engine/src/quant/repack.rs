//! The layout the WGSL kernels read weights in. Storage buffers are arrays of u32, so a block
//! whose size is not a multiple of 4 bytes (Q4_0 18, Q5_0 22, Q8_0 34, Q6_K 210) cannot be
//! addressed in place. Those types (a `paired_scale` in their row of [`super::TYPES`]) are stored
//! in pairs of blocks: one word with both f16 scales, then the two blocks without their scale.
//! Every other supported type keeps its GGUF layout. The WGSL readers in
//! `wgsl/common/quant_<qtype>.wgsl` mirror this.

use std::borrow::Cow;

use super::GgmlType;

/// Where a block's f16 scale sits, for the paired types.
fn paired_scale_offset(ty: GgmlType) -> Option<usize> {
    ty.gpu()?.paired_scale
}

/// Bytes the GPU copy of `n_elements` of `ty` takes (whole blocks; padded to a whole pair).
pub fn gpu_bytes(ty: GgmlType, n_elements: u64) -> Option<u64> {
    let (block, bytes) = ty.block_geometry()?;
    let n_blocks = n_elements / block;
    Some(match paired_scale_offset(ty) {
        Some(_) => n_blocks.div_ceil(2) * (2 * bytes),
        None => (n_blocks * bytes).next_multiple_of(4),
    })
}

/// Repacks whole blocks of `ty` from their GGUF layout into the GPU layout. Paired types come
/// out as whole pairs (a trailing odd block is padded with zeros); the other types are returned
/// as they are, which for an odd count of F16/BF16 values ends mid-word: `gpu_bytes` counts that
/// tail padded to 4 bytes, as `Gpu::storage_init` pads it.
pub fn repack_for_gpu(ty: GgmlType, data: &[u8]) -> Cow<'_, [u8]> {
    let Some(d_off) = paired_scale_offset(ty) else {
        return Cow::Borrowed(data);
    };
    let (_, bs) = ty.block_geometry().expect("paired types have a geometry");
    let bs = bs as usize;
    let body = bs - 2;
    let n_blocks = data.len() / bs;
    let mut out = vec![0u8; n_blocks.div_ceil(2) * 2 * bs];
    for (pair, dst) in out.chunks_exact_mut(2 * bs).enumerate() {
        for half in 0..2 {
            let b = pair * 2 + half;
            if b >= n_blocks {
                break;
            }
            let src = &data[b * bs..(b + 1) * bs];
            dst[half * 2..half * 2 + 2].copy_from_slice(&src[d_off..d_off + 2]);
            let body_dst = &mut dst[4 + half * body..4 + (half + 1) * body];
            body_dst[..d_off].copy_from_slice(&src[..d_off]);
            body_dst[d_off..].copy_from_slice(&src[d_off + 2..]);
        }
    }
    Cow::Owned(out)
}
