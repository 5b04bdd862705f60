//! The layout of every block type Tandem reads, mirrored from GGML's (ggml-common.h) by a
//! `#[repr(C)]` struct whose size is checked at compile time against the GGUF block size, and its
//! plain CPU dequantization (dequantize_row_* in ggml-quants.c): the reference the GPU kernels are
//! tested against. [`super::TYPES`] takes each type's geometry and dequantizer from here.

use bytemuck::{Pod, Zeroable};
use half::{bf16, f16};

use super::GgmlType;
use crate::{Error, Result};

/// A GGML block type: its layout is the struct, its size the block's bytes.
pub trait Block: Pod {
    /// Elements per block.
    const QK: usize;
    /// Its f16 fields for random weights (`quant::random`): byte offset, and the value per unit
    /// of amplitude that keeps the block's values within about that amplitude.
    const SCALES: &'static [(usize, f32)];
    /// Writes the block's `QK` values into `y`.
    fn dequant(&self, y: &mut [f32]);
}

/// Dequantizes whole blocks of `B` (the caller checks the lengths).
pub(super) fn dequant_blocks<B: Block>(data: &[u8], out: &mut [f32]) {
    for (y, b) in out
        .chunks_exact_mut(B::QK)
        .zip(data.chunks_exact(size_of::<B>()))
    {
        bytemuck::pod_read_unaligned::<B>(b).dequant(y);
    }
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
    let Some(dequant) = ty.info().and_then(|t| t.dequant) else {
        return Err(Error::UnsupportedTensorType {
            name: String::new(),
            ty: ty.name(),
        });
    };
    dequant(data, out);
    Ok(())
}

fn h(b: [u8; 2]) -> f32 {
    f16::from_le_bytes(b).to_f32()
}

// The float types, one value a "block".

#[repr(transparent)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct F32Le(pub [u8; 4]);

impl Block for F32Le {
    const QK: usize = 1;
    const SCALES: &'static [(usize, f32)] = &[];
    fn dequant(&self, y: &mut [f32]) {
        y[0] = f32::from_le_bytes(self.0);
    }
}

#[repr(transparent)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct F16Le(pub [u8; 2]);

impl Block for F16Le {
    const QK: usize = 1;
    const SCALES: &'static [(usize, f32)] = &[];
    fn dequant(&self, y: &mut [f32]) {
        y[0] = h(self.0);
    }
}

#[repr(transparent)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BF16Le(pub [u8; 2]);

impl Block for BF16Le {
    const QK: usize = 1;
    const SCALES: &'static [(usize, f32)] = &[];
    fn dequant(&self, y: &mut [f32]) {
        y[0] = bf16::from_le_bytes(self.0).to_f32();
    }
}

// Each block type: its struct (fields in GGML's order), size assertion and dequantization.

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: [u8; 2],
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ4_0>() == 18);

impl Block for BlockQ4_0 {
    const QK: usize = 32;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 8.0)];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        for j in 0..16 {
            y[j] = ((self.qs[j] & 0xF) as i32 - 8) as f32 * d;
            y[j + 16] = ((self.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ4_1>() == 20);

impl Block for BlockQ4_1 {
    const QK: usize = 32;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 8.0), (2, -1.0)];
    fn dequant(&self, y: &mut [f32]) {
        let (d, m) = (h(self.d), h(self.m));
        for j in 0..16 {
            y[j] = (self.qs[j] & 0xF) as f32 * d + m;
            y[j + 16] = (self.qs[j] >> 4) as f32 * d + m;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ5_0>() == 22);

impl Block for BlockQ5_0 {
    const QK: usize = 32;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 16.0)];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..16 {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            y[j] = (((self.qs[j] & 0xF) as u32 | h0) as i32 - 16) as f32 * d;
            y[j + 16] = (((self.qs[j] >> 4) as u32 | h1) as i32 - 16) as f32 * d;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ5_1>() == 24);

impl Block for BlockQ5_1 {
    const QK: usize = 32;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 16.0), (2, -1.0)];
    fn dequant(&self, y: &mut [f32]) {
        let (d, m) = (h(self.d), h(self.m));
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..16 {
            let h0 = ((qh >> j) & 1) << 4;
            let h1 = ((qh >> (j + 16)) & 1) << 4;
            y[j] = ((self.qs[j] & 0xF) as u32 | h0) as f32 * d + m;
            y[j + 16] = ((self.qs[j] >> 4) as u32 | h1) as f32 * d + m;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: [u8; 2],
    pub qs: [i8; 32],
}
const _: () = assert!(size_of::<BlockQ8_0>() == 34);

impl Block for BlockQ8_0 {
    const QK: usize = 32;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 127.0)];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        for (y, q) in y.iter_mut().zip(self.qs) {
            *y = q as f32 * d;
        }
    }
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

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qs: [u8; 128],
}
const _: () = assert!(size_of::<BlockQ4K>() == 144);

impl Block for BlockQ4K {
    const QK: usize = 256;
    // x = d * sc * q - dmin * m with 6-bit sc, m: dmin = d * q_mid centres it.
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / (63.0 * 15.0)), (2, 7.5 / (63.0 * 15.0))];
    fn dequant(&self, y: &mut [f32]) {
        let (d, dmin) = (h(self.d), h(self.dmin));
        for c in 0..4 {
            let (s1, m1) = scale_min_k4(2 * c, &self.scales);
            let (s2, m2) = scale_min_k4(2 * c + 1, &self.scales);
            let q = &self.qs[32 * c..32 * c + 32];
            for l in 0..32 {
                y[64 * c + l] = d * s1 * (q[l] & 0xF) as f32 - dmin * m1;
                y[64 * c + 32 + l] = d * s2 * (q[l] >> 4) as f32 - dmin * m2;
            }
        }
    }
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
const _: () = assert!(size_of::<BlockQ5K>() == 176);

impl Block for BlockQ5K {
    const QK: usize = 256;
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / (63.0 * 31.0)), (2, 15.5 / (63.0 * 31.0))];
    fn dequant(&self, y: &mut [f32]) {
        let (d, dmin) = (h(self.d), h(self.dmin));
        for c in 0..4 {
            let (s1, m1) = scale_min_k4(2 * c, &self.scales);
            let (s2, m2) = scale_min_k4(2 * c + 1, &self.scales);
            let q = &self.qs[32 * c..32 * c + 32];
            let (u1, u2) = (1u8 << (2 * c), 1u8 << (2 * c + 1));
            for l in 0..32 {
                let h1 = if self.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if self.qh[l] & u2 != 0 { 16 } else { 0 };
                y[64 * c + l] = d * s1 * ((q[l] & 0xF) + h1) as f32 - dmin * m1;
                y[64 * c + 32 + l] = d * s2 * ((q[l] >> 4) + h2) as f32 - dmin * m2;
            }
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; 128],
    pub qh: [u8; 64],
    pub scales: [i8; 16],
    pub d: [u8; 2],
}
const _: () = assert!(size_of::<BlockQ6K>() == 210);

impl Block for BlockQ6K {
    const QK: usize = 256;
    // x = d * sc * (q - 32) with int8 sc.
    const SCALES: &'static [(usize, f32)] = &[(208, 1.0 / (127.0 * 32.0))];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        for half in 0..2 {
            let ql = &self.ql[64 * half..64 * half + 64];
            let qh = &self.qh[32 * half..32 * half + 32];
            let sc = &self.scales[8 * half..8 * half + 8];
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

/// The 16 values of IQ4_NL and IQ4_XS quants (GGML's kvalues_iq4nl).
const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockIQ4NL {
    pub d: [u8; 2],
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockIQ4NL>() == 18);

impl Block for BlockIQ4NL {
    const QK: usize = 32;
    // x = d * kvalue, |kvalue| <= 127.
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / 127.0)];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(self.qs[j] & 0xF) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(self.qs[j] >> 4) as usize] as f32;
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; 32],
    pub qs: [u8; 64],
    pub scales: [u8; 12],
    pub d: [u8; 2],
}
const _: () = assert!(size_of::<BlockQ3K>() == 110);

impl Block for BlockQ3K {
    const QK: usize = 256;
    // x = d * (sc - 32) * q with 6-bit sc and q in -4..3.
    const SCALES: &'static [(usize, f32)] = &[(108, 1.0 / (32.0 * 4.0))];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        // Two halves of 128; in each, 4 shifts of the 2-bit quants by 2 x 32 weights with a
        // 6-bit scale each (low 4 bits in scales[0..8], high 2 bits in scales[8..12]).
        for n in 0..2 {
            for shift in 0..4 {
                for half in 0..2 {
                    let is = 8 * n + 2 * shift + half;
                    let lo = (self.scales[is % 8] >> (4 * (is / 8))) & 0xF;
                    let hi = (self.scales[8 + is % 4] >> (2 * (is / 4))) & 3;
                    let dl = d * ((lo | hi << 4) as i32 - 32) as f32;
                    let m = 1u8 << (4 * n + shift);
                    for l in 0..16 {
                        let k = 16 * half + l;
                        let q = ((self.qs[32 * n + k] >> (2 * shift)) & 3) as i32;
                        let q = q - if self.hmask[k] & m != 0 { 0 } else { 4 };
                        y[128 * n + 32 * shift + k] = dl * q as f32;
                    }
                }
            }
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockIQ4XS {
    pub d: [u8; 2],
    pub scales_h: [u8; 2],
    pub scales_l: [u8; 4],
    pub qs: [u8; 128],
}
const _: () = assert!(size_of::<BlockIQ4XS>() == 136);

impl Block for BlockIQ4XS {
    const QK: usize = 256;
    // x = d * (ls - 32) * kvalue with 6-bit ls, |kvalue| <= 127.
    const SCALES: &'static [(usize, f32)] = &[(0, 1.0 / (32.0 * 127.0))];
    fn dequant(&self, y: &mut [f32]) {
        let d = h(self.d);
        let sh = u16::from_le_bytes(self.scales_h);
        for ib in 0..8 {
            let lo = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
            let hi = ((sh >> (2 * ib)) & 3) as u8;
            let dl = d * ((lo | hi << 4) as i32 - 32) as f32;
            let qs = &self.qs[16 * ib..16 * ib + 16];
            let y = &mut y[32 * ib..32 * ib + 32];
            for j in 0..16 {
                y[j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
                y[j + 16] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ2K {
    pub scales: [u8; 16],
    pub qs: [u8; 64],
    pub d: [u8; 2],
    pub dmin: [u8; 2],
}
const _: () = assert!(size_of::<BlockQ2K>() == 84);

impl Block for BlockQ2K {
    const QK: usize = 256;
    // x = d * sc * q - dmin * m with 4-bit sc, m and q in 0..3: dmin = d * q_mid centres it.
    const SCALES: &'static [(usize, f32)] = &[(80, 1.0 / (15.0 * 3.0)), (82, 1.5 / (15.0 * 3.0))];
    fn dequant(&self, y: &mut [f32]) {
        let (d, dmin) = (h(self.d), h(self.dmin));
        // As Q3_K without the high bit: 16 groups of 16 with a 4-bit scale and min in one byte.
        for n in 0..2 {
            for shift in 0..4 {
                for half in 0..2 {
                    let sc = self.scales[8 * n + 2 * shift + half];
                    let dl = d * (sc & 0xF) as f32;
                    let ml = dmin * (sc >> 4) as f32;
                    for l in 0..16 {
                        let k = 16 * half + l;
                        let q = (self.qs[32 * n + k] >> (2 * shift)) & 3;
                        y[128 * n + 32 * shift + k] = dl * q as f32 - ml;
                    }
                }
            }
        }
    }
}
