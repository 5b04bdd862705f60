//! Dequantization against the PyPI `gguf` package: tests/fixtures/quant_blocks.gguf holds one
//! tensor of every type packed by gguf-py, quant_blocks.json gguf-py's dequantization of each
//! (made by tests/reference/make_quant_fixture.py).

use half::{bf16, f16};
use rand::{Rng, SeedableRng};

use super::{dequantize, gpu_bytes, gpu_types, repack_for_gpu, GgmlType, TYPES};
use crate::gguf::Gguf;

/// `n_blocks` seeded random blocks of `ty` in GGUF layout: random quant bytes with the f16 scale
/// fields overwritten by sane values (|d| in [0.002, 0.02), either sign), and random finite
/// values in [-1, 1) for the float types. For quantized tests at shapes the fixture lacks.
pub(crate) fn random_blocks(ty: GgmlType, n_blocks: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let (_, size) = ty.block_geometry().expect("a known type");
    let size = size as usize;
    let mut out = vec![0u8; n_blocks * size];
    let scale = |rng: &mut rand::rngs::StdRng| {
        let v: f32 = rng.random_range(0.002..0.02);
        let v = if rng.random_bool(0.5) { -v } else { v };
        f16::from_f32(v).to_le_bytes()
    };
    match ty {
        GgmlType::F32 => {
            for c in out.chunks_exact_mut(4) {
                c.copy_from_slice(&rng.random_range(-1.0f32..1.0).to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&f16::from_f32(rng.random_range(-1.0..1.0)).to_le_bytes());
            }
        }
        GgmlType::BF16 => {
            for c in out.chunks_exact_mut(2) {
                c.copy_from_slice(&bf16::from_f32(rng.random_range(-1.0..1.0)).to_le_bytes());
            }
        }
        _ => {
            rng.fill(&mut out[..]);
            // The f16 fields of the block (their values from the table are for `quant::random`).
            let fields = ty.info().unwrap().scales;
            assert!(
                !fields.is_empty(),
                "random_blocks: {ty} has no scale fields"
            );
            for b in out.chunks_exact_mut(size) {
                for &(off, _) in fields {
                    b[off..off + 2].copy_from_slice(&scale(&mut rng));
                }
            }
        }
    }
    out
}

pub(crate) struct FixtureTensor {
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// GGUF layout bytes.
    pub data: Vec<u8>,
    /// gguf-py's dequantization.
    pub expected: Vec<f32>,
}

/// The fixture's tensors of the types the GPU reads (it may hold a type before the table does).
pub(crate) fn fixture() -> Vec<FixtureTensor> {
    // Compiled in, so the kernel tests read them in the browser too.
    let src: &[u8] = include_bytes!("../../../tests/fixtures/quant_blocks.gguf");
    let g = Gguf::parse(&src).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/quant_blocks.json")).unwrap();
    g.tensors
        .iter()
        .filter(|t| t.ty.gpu_supported())
        .map(|t| {
            let e = &json["tensors"][&t.name];
            let b64 = e["dequantized_f32le_base64"].as_str().unwrap();
            FixtureTensor {
                name: t.name.clone(),
                ty: t.ty,
                rows: e["rows"].as_u64().unwrap() as usize,
                cols: e["cols"].as_u64().unwrap() as usize,
                data: g.tensor_data(&src, t).unwrap().into_owned(),
                expected: bytemuck::pod_collect_to_vec(&base64_decode(b64)),
            }
        })
        .collect()
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64"),
    } as u32;
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn every_type_dequantizes_like_gguf_py() {
    let tensors = fixture();
    let mut types: Vec<_> = tensors.iter().map(|t| t.ty).collect();
    let mut want = gpu_types();
    types.sort_by_key(|t| t.id());
    want.sort_by_key(|t| t.id());
    assert_eq!(types, want, "the fixture has one tensor of every GPU type");
    for t in tensors {
        let mut out = vec![0.0; t.rows * t.cols];
        dequantize(t.ty, &t.data, &mut out).unwrap();
        for (i, (g, w)) in out.iter().zip(&t.expected).enumerate() {
            // gguf-py computes in numpy's float32 too; allow one ulp for operation order.
            let ulp = w.abs().max(f32::MIN_POSITIVE) * f32::EPSILON;
            assert!(
                (g - w).abs() <= ulp,
                "{} ({}): element {i}: {g} vs gguf-py {w}",
                t.name,
                t.ty
            );
        }
    }
}

#[test]
fn dequantize_rejects_a_partial_block() {
    let err = dequantize(GgmlType::Q8_0, &[0u8; 33], &mut [0.0; 32]).unwrap_err();
    assert!(err.to_string().contains("do not hold"), "{err}");
}

/// The inverse of `repack_for_gpu`, written from the layout description in repack.rs.
fn unpack_gpu(ty: GgmlType, gpu: &[u8], n_blocks: usize) -> Vec<u8> {
    let (_, bs) = ty.block_geometry().unwrap();
    let bs = bs as usize;
    let Some(g) = ty.gpu().unwrap().grouped_scale else {
        return gpu[..n_blocks * bs].to_vec();
    };
    let (body, head) = (bs - 2, (2 * g.blocks).next_multiple_of(4));
    let group = head + g.blocks * body;
    let mut out = Vec::new();
    for b in 0..n_blocks {
        let grp = &gpu[(b / g.blocks) * group..(b / g.blocks + 1) * group];
        let i = b % g.blocks;
        let d = &grp[2 * i..2 * i + 2];
        let rest = &grp[head + i * body..head + (i + 1) * body];
        out.extend_from_slice(&rest[..g.at]);
        out.extend_from_slice(d);
        out.extend_from_slice(&rest[g.at..]);
    }
    out
}

#[test]
fn repack_round_trips_every_type() {
    for ty in gpu_types() {
        let (block, _) = ty.block_geometry().unwrap();
        for n_blocks in [1usize, 2, 7, 8, 10, 17] {
            let data = random_blocks(ty, n_blocks, n_blocks as u64);
            let packed = repack_for_gpu(ty, &data);
            assert_eq!(
                packed.len().next_multiple_of(4) as u64,
                gpu_bytes(ty, n_blocks as u64 * block).unwrap(),
                "{ty} x{n_blocks}: gpu_bytes"
            );
            assert_eq!(unpack_gpu(ty, &packed, n_blocks), data, "{ty} x{n_blocks}");
        }
    }
}

#[test]
fn random_blocks_dequantize_to_finite_values() {
    for ty in gpu_types() {
        let (block, _) = ty.block_geometry().unwrap();
        let n = 5 * block as usize;
        let data = random_blocks(ty, 5, 1);
        let mut out = vec![0.0; n];
        dequantize(ty, &data, &mut out).unwrap();
        assert!(out.iter().all(|v| v.is_finite()), "{ty}");
        assert!(out.iter().any(|&v| v != 0.0), "{ty}");
        assert_ne!(random_blocks(ty, 5, 2), data, "{ty}: the seed matters");
    }
}

#[test]
fn repack_groups_misaligned_blocks() {
    for t in fixture() {
        let packed = repack_for_gpu(t.ty, &t.data);
        assert_eq!(packed.len() % 4, 0, "{}", t.ty);
        assert_eq!(
            packed.len() as u64,
            gpu_bytes(t.ty, (t.rows * t.cols) as u64).unwrap(),
            "{}",
            t.ty
        );
    }
    // Q8_0 pair: both scales first, then the two blocks' quants.
    let mut two = vec![0u8; 68];
    two[0..2].copy_from_slice(&[1, 2]);
    two[2..34].fill(7);
    two[34..36].copy_from_slice(&[3, 4]);
    two[36..68].fill(9);
    let p = repack_for_gpu(GgmlType::Q8_0, &two);
    assert_eq!(&p[0..4], &[1, 2, 3, 4]);
    assert!(p[4..36].iter().all(|&b| b == 7) && p[36..68].iter().all(|&b| b == 9));
}

#[test]
fn the_type_table_is_consistent() {
    for (i, t) in TYPES.iter().enumerate() {
        assert_eq!(GgmlType::from_id(t.id), t.ty, "{}: id", t.name);
        assert_eq!(t.ty.name(), t.name);
        assert!(
            TYPES[..i].iter().all(|u| u.id != t.id && u.ty != t.ty),
            "{}: one row per type",
            t.name
        );
        if let Some(g) = t.gpu {
            assert!(
                t.dequant.is_some(),
                "{}: the GPU reads what the CPU cannot",
                t.name
            );
            // The WGSL names are GGML's, lower case.
            assert_eq!(g.wgsl, t.name.to_lowercase());
            // Quantized blocks that do not fill whole words are grouped, the others are not.
            assert_eq!(
                g.grouped_scale.is_some(),
                t.block > 1 && t.bytes % 4 != 0,
                "{}: grouping",
                t.name
            );
            // Q6_K's groups start every block on 16 bytes (its 16-byte loads need them to).
            if g.grouped_scale.is_some_and(|s| s.blocks == 8) {
                assert_eq!((t.bytes - 2) % 16, 0, "{}: 16-byte bodies", t.name);
            }
            assert!([8, 16, 32].contains(&g.decode_unit), "{}: unit", t.name);
        }
    }
    assert_eq!(GgmlType::from_id(999), GgmlType::Other(999));
    assert_eq!(GgmlType::Other(999).name(), "type id 999");
    assert_eq!(GgmlType::Other(16).name(), "IQ2_XXS");
    assert!(!GgmlType::Other(16).gpu_supported());
}
