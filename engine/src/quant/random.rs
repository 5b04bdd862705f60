//! Random weights in GGUF block layouts, with sane scale fields: kernel tests quantize nothing
//! (random quant bytes, then `dequantize` as the reference) and `bench/`'s synthetic-model
//! generator fills gigabytes at memory speed. Not a quantizer.

use half::{bf16, f16};

use super::GgmlType;

/// xorshift64*: fast, seeded, good enough for test and benchmark weights.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let v = self.next_u64().to_le_bytes();
        let n = rest.len();
        rest.copy_from_slice(&v[..n]);
    }
}

fn put_f16(b: &mut [u8], off: usize, v: f32) {
    b[off..off + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// Fills `out` (whole blocks of `ty`) with random weights of magnitude about `amp` (at most
/// about `amp`, roughly centred on zero): random quants and scales, with the f16 super-scales
/// set so the values stay in range. Returns false for types it cannot make.
pub fn fill_random(ty: GgmlType, amp: f32, rng: &mut XorShift, out: &mut [u8]) -> bool {
    use GgmlType::{BF16, F16, F32};
    match ty {
        F32 => {
            for c in out.chunks_exact_mut(4) {
                c.copy_from_slice(&(amp * rng.next_f32()).to_le_bytes());
            }
            return true;
        }
        F16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&f16::from_f32(amp * rng.next_f32()).to_le_bytes());
            }
            return true;
        }
        BF16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&bf16::from_f32(amp * rng.next_f32()).to_le_bytes());
            }
            return true;
        }
        _ => {}
    }
    let Some(info) = ty
        .info()
        .filter(|t| t.dequant.is_some() && !t.scales.is_empty())
    else {
        return false;
    };
    // (offset, value) of each f16 field of a block.
    let fields: Vec<(usize, f32)> = info.scales.iter().map(|&(o, v)| (o, v * amp)).collect();
    rng.fill(out);
    let bs = info.bytes as usize;
    // The same f16 bytes for every block: compute once.
    let mut proto = vec![0u8; bs];
    for &(off, v) in &fields {
        put_f16(&mut proto, off, v);
    }
    for block in out.chunks_exact_mut(bs) {
        for &(off, _) in &fields {
            block[off..off + 2].copy_from_slice(&proto[off..off + 2]);
        }
    }
    true
}

/// `n_elements` random weights of `ty` (see [`fill_random`]), or `None` for a type it cannot make.
pub fn random_weights(ty: GgmlType, n_elements: u64, amp: f32, seed: u64) -> Option<Vec<u8>> {
    let mut out = vec![0u8; ty.bytes_for(n_elements)? as usize];
    fill_random(ty, amp, &mut XorShift::new(seed), &mut out).then_some(out)
}
