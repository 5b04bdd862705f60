//! Plain CPU dequantization of every weight type the kernels read, written from GGML's block
//! layouts (ggml-common.h, dequantize_row_* in ggml-quants.c): the reference the GPU kernels
//! are tested against. Each block is mirrored by a `#[repr(C)]` struct whose size is checked at
//! compile time against the GGUF block size.

use bytemuck::{Pod, Zeroable};
use half::{bf16, f16};

use super::GgmlType;
use crate::{Error, Result};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: [u8; 2],
    pub qs: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qs: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: [u8; 2],
    pub qs: [i8; 32],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qs: [u8; 128],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qh: [u8; 32],
    pub qs: [u8; 128],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; 128],
    pub qh: [u8; 64],
    pub scales: [i8; 16],
    pub d: [u8; 2],
}

const _: () = {
    assert!(size_of::<BlockQ4_0>() == 18);
    assert!(size_of::<BlockQ4_1>() == 20);
    assert!(size_of::<BlockQ5_0>() == 22);
    assert!(size_of::<BlockQ5_1>() == 24);
    assert!(size_of::<BlockQ8_0>() == 34);
    assert!(size_of::<BlockQ4K>() == 144);
    assert!(size_of::<BlockQ5K>() == 176);
    assert!(size_of::<BlockQ6K>() == 210);
};

fn h(b: [u8; 2]) -> f32 {
    f16::from_le_bytes(b).to_f32()
}

/// GGML's get_scale_min_k4: the 6-bit scale and min of sub-block `j` of a Q4_K/Q5_K block.
fn scale_min_k4(j: usize, q: &[u8; 12]) -> (f32, f32) {
    if j < 4 {
        ((q[j] & 63) as f32, (q[j + 4] & 63) as f32)
    } else {
        let sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (sc as f32, m as f32)
    }
}

fn blocks<B: Pod>(data: &[u8]) -> impl Iterator<Item = B> + '_ {
    data.chunks_exact(size_of::<B>())
        .map(bytemuck::pod_read_unaligned)
}

/// Dequantizes `data` (whole blocks in GGUF layout) of type `ty` into `out`.
pub fn dequantize(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    let need = ty.bytes_for(out.len() as u64);
    if need != Some(data.len() as u64) {
        return Err(Error::InvalidArgument(format!(
            "{} bytes of {ty} do not hold {} values",
            data.len(),
            out.len()
        )));
    }
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = h([c[0], c[1]]);
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::Q4_0 => {
            for (y, b) in out.chunks_exact_mut(32).zip(blocks::<BlockQ4_0>(data)) {
                let d = h(b.d);
                for j in 0..16 {
                    y[j] = ((b.qs[j] & 0xF) as i32 - 8) as f32 * d;
                    y[j + 16] = ((b.qs[j] >> 4) as i32 - 8) as f32 * d;
                }
            }
        }
        GgmlType::Q4_1 => {
            for (y, b) in out.chunks_exact_mut(32).zip(blocks::<BlockQ4_1>(data)) {
                let (d, m) = (h(b.d), h(b.m));
                for j in 0..16 {
                    y[j] = (b.qs[j] & 0xF) as f32 * d + m;
                    y[j + 16] = (b.qs[j] >> 4) as f32 * d + m;
                }
            }
        }
        GgmlType::Q5_0 => {
            for (y, b) in out.chunks_exact_mut(32).zip(blocks::<BlockQ5_0>(data)) {
                let d = h(b.d);
                let qh = u32::from_le_bytes(b.qh);
                for j in 0..16 {
                    let h0 = ((qh >> j) & 1) << 4;
                    let h1 = ((qh >> (j + 16)) & 1) << 4;
                    y[j] = (((b.qs[j] & 0xF) as u32 | h0) as i32 - 16) as f32 * d;
                    y[j + 16] = (((b.qs[j] >> 4) as u32 | h1) as i32 - 16) as f32 * d;
                }
            }
        }
        GgmlType::Q5_1 => {
            for (y, b) in out.chunks_exact_mut(32).zip(blocks::<BlockQ5_1>(data)) {
                let (d, m) = (h(b.d), h(b.m));
                let qh = u32::from_le_bytes(b.qh);
                for j in 0..16 {
                    let h0 = ((qh >> j) & 1) << 4;
                    let h1 = ((qh >> (j + 16)) & 1) << 4;
                    y[j] = ((b.qs[j] & 0xF) as u32 | h0) as f32 * d + m;
                    y[j + 16] = ((b.qs[j] >> 4) as u32 | h1) as f32 * d + m;
                }
            }
        }
        GgmlType::Q8_0 => {
            for (y, b) in out.chunks_exact_mut(32).zip(blocks::<BlockQ8_0>(data)) {
                let d = h(b.d);
                for (y, q) in y.iter_mut().zip(b.qs) {
                    *y = q as f32 * d;
                }
            }
        }
        GgmlType::Q4K => {
            for (y, b) in out.chunks_exact_mut(256).zip(blocks::<BlockQ4K>(data)) {
                let (d, dmin) = (h(b.d), h(b.dmin));
                for c in 0..4 {
                    let (s1, m1) = scale_min_k4(2 * c, &b.scales);
                    let (s2, m2) = scale_min_k4(2 * c + 1, &b.scales);
                    let q = &b.qs[32 * c..32 * c + 32];
                    for l in 0..32 {
                        y[64 * c + l] = d * s1 * (q[l] & 0xF) as f32 - dmin * m1;
                        y[64 * c + 32 + l] = d * s2 * (q[l] >> 4) as f32 - dmin * m2;
                    }
                }
            }
        }
        GgmlType::Q5K => {
            for (y, b) in out.chunks_exact_mut(256).zip(blocks::<BlockQ5K>(data)) {
                let (d, dmin) = (h(b.d), h(b.dmin));
                for c in 0..4 {
                    let (s1, m1) = scale_min_k4(2 * c, &b.scales);
                    let (s2, m2) = scale_min_k4(2 * c + 1, &b.scales);
                    let q = &b.qs[32 * c..32 * c + 32];
                    let (u1, u2) = (1u8 << (2 * c), 1u8 << (2 * c + 1));
                    for l in 0..32 {
                        let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                        let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                        y[64 * c + l] = d * s1 * ((q[l] & 0xF) + h1) as f32 - dmin * m1;
                        y[64 * c + 32 + l] = d * s2 * ((q[l] >> 4) + h2) as f32 - dmin * m2;
                    }
                }
            }
        }
        GgmlType::Q6K => {
            for (y, b) in out.chunks_exact_mut(256).zip(blocks::<BlockQ6K>(data)) {
                let d = h(b.d);
                for half in 0..2 {
                    let ql = &b.ql[64 * half..64 * half + 64];
                    let qh = &b.qh[32 * half..32 * half + 32];
                    let sc = &b.scales[8 * half..8 * half + 8];
                    let y = &mut y[128 * half..128 * half + 128];
                    for l in 0..32 {
                        let is = l / 16;
                        let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                        let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                        let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                        let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                        y[l] = d * sc[is] as f32 * q1 as f32;
                        y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                        y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                        y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
                    }
                }
            }
        }
        other => {
            return Err(Error::UnsupportedTensorType {
                name: String::new(),
                ty: other.name(),
            })
        }
    }
    Ok(())
}
