//! Dequantization against the PyPI `gguf` package: tests/fixtures/quant_blocks.gguf holds one
//! tensor of every type packed by gguf-py, quant_blocks.json gguf-py's dequantization of each
//! (made by tests/reference/make_quant_fixture.py).

use super::{dequantize, gpu_bytes, repack_for_gpu, GgmlType};
use crate::gguf::Gguf;

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

pub(crate) fn fixture() -> Vec<FixtureTensor> {
    // Compiled in, so the kernel tests read them in the browser too.
    let src: &[u8] = include_bytes!("../../../tests/fixtures/quant_blocks.gguf");
    let g = Gguf::parse(&src).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/quant_blocks.json")).unwrap();
    g.tensors
        .iter()
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
    assert_eq!(tensors.len(), 11);
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

#[test]
fn repack_pairs_misaligned_blocks() {
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
