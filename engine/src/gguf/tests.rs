use super::*;
#[cfg(not(target_arch = "wasm32"))]
use std::path::PathBuf;

// The GGUF writer the tests share (the generated hostile files in engine/tests/hostile_gguf.rs use
// it too).
#[path = "../../tests/support/gguf_writer.rs"]
mod writer;
use writer::{bytes, put_str, Builder};

fn every_type_values() -> Vec<(String, Value)> {
    let s = |x: &str| Value::String(x.into());
    vec![
        ("t.u8".into(), Value::U8(255)),
        ("t.i8".into(), Value::I8(-128)),
        ("t.u16".into(), Value::U16(65535)),
        ("t.i16".into(), Value::I16(-32768)),
        ("t.u32".into(), Value::U32(u32::MAX)),
        ("t.i32".into(), Value::I32(i32::MIN)),
        ("t.f32".into(), Value::F32(-1.5)),
        ("t.bool".into(), Value::Bool(true)),
        ("t.bool_false".into(), Value::Bool(false)),
        ("t.string".into(), s("héllo ✓")),
        ("t.empty".into(), s("")),
        ("t.u64".into(), Value::U64(u64::MAX)),
        ("t.i64".into(), Value::I64(i64::MIN)),
        ("t.f64".into(), Value::F64(1e-300)),
        (
            "t.arr_str".into(),
            Value::Array(vec![s("a"), s(""), s("<|im_end|>")]),
        ),
        (
            "t.arr_f32".into(),
            Value::Array(vec![Value::F32(0.25), Value::F32(-2.0)]),
        ),
        (
            "t.arr_i64".into(),
            Value::Array(vec![Value::I64(-1), Value::I64(7)]),
        ),
        ("t.arr_empty".into(), Value::Array(vec![])),
        (
            "t.arr_nested".into(),
            Value::Array(vec![
                Value::Array(vec![Value::U16(1), Value::U16(2)]),
                Value::Array(vec![Value::U16(3)]),
            ]),
        ),
    ]
}

/// A small valid file: metadata of every type and three tensors; the last tensor's data ends the
/// file, so every strict prefix is invalid.
fn sample() -> Builder {
    let mut b = Builder::new();
    for (k, v) in every_type_values() {
        b = b.kv(&k, v);
    }
    b.tensor("tok_embd.weight", &[4, 3], 0, bytes(48, 1))
        .tensor("norm.weight", &[5], 1, bytes(10, 2))
        .tensor("q.weight", &[32, 2], 8, bytes(68, 3))
}

fn parse(b: &[u8]) -> Result<Gguf> {
    Gguf::parse(&b)
}

fn expect_corrupt(b: &[u8], needle: &str) {
    match parse(b) {
        Err(Error::Corrupt(msg)) => {
            assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}")
        }
        other => panic!("expected Corrupt({needle}), got {other:?}"),
    }
}

fn expect_truncated(b: &[u8]) {
    match parse(b) {
        Err(Error::Truncated { .. }) => {}
        other => panic!("expected Truncated, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Valid files.

#[test]
fn gguf_roundtrip_every_value_type() {
    let builder = sample();
    let file = builder.build();
    let g = parse(&file).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.alignment, 32);
    assert_eq!(g.metadata.len(), builder.kvs.len());
    for ((k, v), (pk, pv)) in builder.kvs.iter().zip(&g.metadata) {
        assert_eq!(k, pk, "metadata order");
        assert_eq!(v, pv, "value of {k}");
        assert_eq!(g.get(k), Some(v));
    }
    assert_eq!(g.architecture().unwrap(), "llama");

    assert_eq!(g.data_offset % 32, 0);
    let offs = builder.offsets();
    assert_eq!(g.tensors.len(), 3);
    for ((t, bt), off) in g.tensors.iter().zip(&builder.tensors).zip(offs) {
        assert_eq!(t.name, bt.name);
        assert_eq!(t.dims, bt.dims);
        assert_eq!(t.offset, g.data_offset + off);
        assert_eq!(t.n_bytes, bt.data.len() as u64);
        let data = g.tensor_data(&file, t).unwrap();
        assert!(matches!(data, Cow::Borrowed(_)));
        assert_eq!(&*data, &bt.data[..]);
        assert_eq!(g.tensor(&t.name), Some(t));
    }
    let q = g.tensor("q.weight").unwrap();
    assert_eq!(q.ty, GgmlType::Q8_0);
    assert_eq!(q.n_elements(), 64);
    assert_eq!(g.tensor("norm.weight").unwrap().ty, GgmlType::F16);
    assert!(g.tensor("nope").is_none());
    assert!(g.get("nope").is_none());
}

#[test]
fn gguf_version_2_and_custom_alignment() {
    let mut b = sample().kv("general.alignment", Value::U32(256));
    b.version = 2;
    b.alignment = 256;
    let file = b.build();
    let g = parse(&file).unwrap();
    assert_eq!(g.version, 2);
    assert_eq!(g.alignment, 256);
    assert_eq!(g.data_offset % 256, 0);
    for (t, bt) in g.tensors.iter().zip(&b.tensors) {
        assert_eq!(t.offset % 256, 0);
        assert_eq!(&*g.tensor_data(&file, t).unwrap(), &bt.data[..]);
    }
}

#[test]
fn gguf_no_tensors_no_metadata() {
    let mut b = Builder::new();
    b.kvs.clear();
    let g = parse(&b.build()).unwrap();
    assert!(g.metadata.is_empty() && g.tensors.is_empty());
    assert_eq!(g.data_offset, 32);
    assert!(matches!(
        g.architecture(),
        Err(Error::MissingMetadata { ref arch, .. }) if arch == "unknown"
    ));
}

#[test]
fn gguf_typed_getters() {
    let file = Builder::new()
        .kv("k.u8", Value::U8(7))
        .kv("k.i32_neg", Value::I32(-1))
        .kv("k.i64", Value::I64(5))
        .kv("k.big", Value::U64(1 << 40))
        .kv("k.f64", Value::F64(0.5))
        .kv("k.bool", Value::Bool(true))
        .kv("k.str", Value::String("x".into()))
        .kv("k.arr", Value::Array(vec![Value::U8(1)]))
        .build();
    let g = parse(&file).unwrap();
    assert_eq!(g.opt_u64("k.u8").unwrap(), Some(7));
    assert_eq!(g.opt_u32("k.i64").unwrap(), Some(5));
    assert_eq!(g.opt_u64("k.big").unwrap(), Some(1 << 40));
    assert_eq!(g.req_u32("k.u8").unwrap(), 7);
    assert_eq!(g.opt_f32("k.f64").unwrap(), Some(0.5));
    assert_eq!(g.opt_f32("k.u8").unwrap(), Some(7.0));
    assert_eq!(g.req_f32("k.i32_neg").unwrap(), -1.0);
    assert_eq!(g.opt_bool("k.bool").unwrap(), Some(true));
    assert_eq!(g.opt_str("k.str").unwrap(), Some("x"));
    assert_eq!(g.req_str("k.str").unwrap(), "x");
    assert_eq!(g.opt_array("k.arr").unwrap().map(|a| a.len()), Some(1));
    assert_eq!(g.opt_u32("absent").unwrap(), None);
    assert_eq!(g.opt_str("absent").unwrap(), None);

    let wrong = |r: Result<()>| match r {
        Err(Error::MetadataType { key, .. }) => key,
        other => panic!("expected MetadataType, got {other:?}"),
    };
    assert_eq!(wrong(g.opt_u32("k.big").map(drop)), "k.big");
    assert_eq!(wrong(g.opt_u64("k.i32_neg").map(drop)), "k.i32_neg");
    assert_eq!(wrong(g.opt_u64("k.f64").map(drop)), "k.f64");
    assert_eq!(wrong(g.opt_f32("k.str").map(drop)), "k.str");
    assert_eq!(wrong(g.opt_bool("k.u8").map(drop)), "k.u8");
    assert_eq!(wrong(g.opt_str("k.u8").map(drop)), "k.u8");
    assert_eq!(wrong(g.opt_array("k.str").map(drop)), "k.str");
    assert_eq!(wrong(g.req_str("k.arr").map(drop)), "k.arr");

    match g.req_u32("llama.block_count") {
        Err(Error::MissingMetadata { key, arch }) => {
            assert_eq!(key, "llama.block_count");
            assert_eq!(arch, "llama");
        }
        other => panic!("expected MissingMetadata, got {other:?}"),
    }
    assert!(matches!(g.req_f32("x"), Err(Error::MissingMetadata { .. })));
}

#[test]
fn gguf_value_accessors_and_display() {
    assert_eq!(Value::I8(-1).as_u64(), None);
    assert_eq!(Value::I64(3).as_u64(), Some(3));
    assert_eq!(Value::Bool(true).as_u64(), None);
    assert_eq!(Value::U64(u64::MAX).as_i64(), None);
    assert_eq!(Value::String("a".into()).as_f32(), None);
    assert_eq!(Value::U8(1).as_bool(), None);
    assert_eq!(Value::Array(vec![]).type_name(), "array");
    let long = Value::Array((0..20).map(Value::U32).collect());
    assert_eq!(long.to_string(), "[0, 1, 2, 3, 4, 5, 6, 7, ... (20 items)]");
    assert_eq!(Value::String("a\"b".into()).to_string(), "\"a\\\"b\"");
}

#[test]
fn gguf_invalid_utf8_is_replaced() {
    let mut file = Builder::new().kv("k.s", Value::String("ab".into())).build();
    let pos = file.windows(2).rposition(|w| w == b"ab").unwrap();
    file[pos] = 0xff;
    let g = parse(&file).unwrap();
    assert_eq!(g.opt_str("k.s").unwrap(), Some("\u{fffd}b"));
}

#[test]
fn gguf_known_geometry_for_types_tandem_cannot_load() {
    // IQ2_XXS (16): ggml knows its size, so the extent is checked; type 200: nothing known.
    let file = Builder::new()
        .tensor("iq.weight", &[256, 2], 16, bytes(132, 0))
        .tensor("new.weight", &[8], 200, vec![])
        .build();
    let g = parse(&file).unwrap();
    let iq = g.tensor("iq.weight").unwrap();
    assert_eq!(iq.ty, GgmlType::Other(16));
    assert_eq!(iq.ty.to_string(), "IQ2_XXS");
    assert_eq!(iq.n_bytes, 132);
    let new = g.tensor("new.weight").unwrap();
    assert_eq!(new.ty, GgmlType::Other(200));
    assert_eq!(new.n_bytes, 0);
    assert!(matches!(
        g.tensor_data(&file, new),
        Err(Error::UnsupportedTensorType { .. })
    ));
}

/// A source without a slice that holds only the first `have` bytes of a longer file, like a
/// download in progress.
struct Prefix {
    data: Vec<u8>,
    have: usize,
}

impl ByteSource for Prefix {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset as usize + buf.len();
        if end > self.have {
            return Err(Error::Truncated {
                what: "not downloaded yet".into(),
                offset,
                len: buf.len() as u64,
                file_len: self.have as u64,
            });
        }
        buf.copy_from_slice(&self.data[offset as usize..end]);
        Ok(())
    }
}

#[test]
fn gguf_source_without_slice() {
    // Make tensor data large so the header is far smaller than the reader's window.
    let big = bytes(3 << 20, 9);
    let file = sample()
        .tensor("big.weight", &[big.len() as u64 / 4], 0, big.clone())
        .build();
    let from_slice = parse(&file).unwrap();
    let header_len = from_slice.data_offset as usize;
    for have in [header_len, file.len()] {
        let src = Prefix {
            data: file.clone(),
            have,
        };
        let g = Gguf::parse(&src).unwrap();
        assert_eq!(g.metadata, from_slice.metadata);
        assert_eq!(g.tensors, from_slice.tensors);
    }
    let src = Prefix {
        data: file.clone(),
        have: file.len(),
    };
    let g = Gguf::parse(&src).unwrap();
    let t = g.tensor("big.weight").unwrap();
    let data = g.tensor_data(&src, t).unwrap();
    assert!(matches!(data, Cow::Owned(_)));
    assert_eq!(&*data, &big[..]);
    // A header cut short of what the source has gives Truncated, not a panic.
    let src = Prefix {
        data: file,
        have: header_len - 40, // the header proper ends at most 31 bytes before data_offset
    };
    assert!(matches!(Gguf::parse(&src), Err(Error::Truncated { .. })));
}

#[test]
fn gguf_tensor_data_checks_the_source() {
    let file = sample().build();
    let g = parse(&file).unwrap();
    let t = g.tensor("q.weight").unwrap();
    let short = file[..file.len() - 1].to_vec();
    assert!(matches!(
        g.tensor_data(&short, t),
        Err(Error::Truncated { .. })
    ));
    let mut forged = t.clone();
    forged.offset = u64::MAX - 3;
    assert!(matches!(
        g.tensor_data(&file, &forged),
        Err(Error::Truncated { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Hostile and broken files: each a clear error, never a panic. The systematic cases (every cut,
// every absurd length, count, type, dimension and offset, duplicates, misalignment) are generated
// in engine/tests/hostile_gguf.rs, under a counting allocator.

#[test]
fn gguf_empty_and_bad_magic() {
    expect_truncated(&[]);
    expect_truncated(b"GG");
    let mut file = sample().build();
    file[..4].copy_from_slice(b"GGML");
    assert!(matches!(
        parse(&file),
        Err(Error::BadMagic { found }) if &found == b"GGML"
    ));
}

#[test]
fn gguf_unsupported_versions() {
    for v in [0u32, 1, 4, 99, u32::MAX] {
        let mut b = sample();
        b.version = v;
        match parse(&b.build()) {
            Err(Error::UnsupportedVersion(x)) => assert_eq!(x, v),
            other => panic!("version {v}: expected UnsupportedVersion, got {other:?}"),
        }
    }
    let mut b = sample();
    b.version = 3u32.swap_bytes();
    expect_corrupt(&b.build(), "big-endian");
}

#[test]
fn gguf_random_corruption_never_panics() {
    use rand::{Rng, SeedableRng};
    let file = sample().build();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let header_len = parse(&file).unwrap().data_offset as usize;
    for _ in 0..3000 {
        let mut f = file.clone();
        for _ in 0..rng.random_range(1..4) {
            let i = rng.random_range(0..header_len);
            f[i] = match rng.random_range(0..3) {
                0 => rng.random(),
                1 => 0xff,
                _ => f[i] ^ (1 << rng.random_range(0..8)),
            };
        }
        if let Ok(g) = parse(&f) {
            for t in &g.tensors {
                let _ = g.tensor_data(&f, t);
            }
        }
    }
}

#[test]
fn gguf_nesting_depth_is_bounded() {
    let mut v = Value::Array(vec![Value::U8(1)]);
    for _ in 0..MAX_ARRAY_DEPTH - 1 {
        v = Value::Array(vec![v]);
    }
    parse(&Builder::new().kv("k", v.clone()).build()).unwrap();
    let v = Value::Array(vec![v]);
    expect_corrupt(&Builder::new().kv("k", v).build(), "nested");
    // A deep chain in a hostile file: every level claims one array element.
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    put_str(&mut b, "k");
    b.extend(9u32.to_le_bytes());
    for _ in 0..100_000 {
        b.extend(9u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    expect_corrupt(&b, "nested");
}

// ---------------------------------------------------------------------------------------------
// Files written by others.

#[cfg(not(target_arch = "wasm32"))]
fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Compares a parsed value with tiny.json's `{"type": .., "value": ..}`.
#[cfg(not(target_arch = "wasm32"))]
fn check_json_value(key: &str, v: &Value, j: &serde_json::Value) {
    let ty = j["type"].as_str().unwrap();
    assert_eq!(v.type_name(), ty, "type of {key}");
    let jv = &j["value"];
    match v {
        Value::U64(x) => assert_eq!(Some(*x), jv.as_u64(), "{key}"),
        Value::I64(x) => assert_eq!(Some(*x), jv.as_i64(), "{key}"),
        Value::F32(x) => assert_eq!(Some(*x), jv.as_f64().map(|f| f as f32), "{key}"),
        Value::F64(x) => assert_eq!(Some(*x), jv.as_f64(), "{key}"),
        Value::Bool(x) => assert_eq!(Some(*x), jv.as_bool(), "{key}"),
        Value::String(x) => assert_eq!(Some(x.as_str()), jv.as_str(), "{key}"),
        Value::Array(items) => {
            let js = jv.as_array().unwrap();
            assert_eq!(items.len(), js.len(), "length of {key}");
            for (i, (it, ji)) in items.iter().zip(js).enumerate() {
                check_json_value(&format!("{key}[{i}]"), it, ji);
            }
        }
        small => assert_eq!(small.as_i64(), jv.as_i64(), "{key}"),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn gguf_fixture_written_by_gguf_py() {
    let dir = fixtures();
    let src = MmapSource::open(&dir.join("tiny.gguf")).unwrap();
    let expect: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tiny.json")).unwrap()).unwrap();
    assert_eq!(src.len(), expect["file_len"].as_u64().unwrap());
    let g = Gguf::parse(&src).unwrap();
    assert_eq!(g.version as u64, expect["version"].as_u64().unwrap());
    assert_eq!(g.alignment, expect["alignment"].as_u64().unwrap());
    assert_eq!(g.architecture().unwrap(), "llama");

    let kv = expect["kv"].as_array().unwrap();
    assert_eq!(g.metadata.len(), kv.len());
    for ((k, v), j) in g.metadata.iter().zip(kv) {
        assert_eq!(k, j["key"].as_str().unwrap(), "metadata order");
        check_json_value(k, v, j);
    }
    assert_eq!(g.req_u32("llama.block_count").unwrap(), 2);
    assert_eq!(g.req_f32("llama.rope.freq_base").unwrap(), 10000.0);

    let ts = expect["tensors"].as_array().unwrap();
    assert_eq!(g.tensors.len(), ts.len());
    for (t, j) in g.tensors.iter().zip(ts) {
        assert_eq!(t.name, j["name"].as_str().unwrap());
        let dims: Vec<u64> = j["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(t.dims, dims, "{}", t.name);
        assert_eq!(t.ty.name(), j["type"].as_str().unwrap(), "{}", t.name);
        assert_eq!(t.offset, j["offset"].as_u64().unwrap(), "{}", t.name);
        assert_eq!(t.offset % 64, 0);
        assert_eq!(t.n_bytes, j["n_bytes"].as_u64().unwrap(), "{}", t.name);
        let data = g.tensor_data(&src, t).unwrap();
        assert_eq!(hex(&data), j["data_hex"].as_str().unwrap(), "{}", t.name);
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn gguf_mmap_missing_and_empty_files() {
    let missing = fixtures().join("no-such-file.gguf");
    assert!(matches!(MmapSource::open(&missing), Err(Error::Io { .. })));
    let dir = std::env::temp_dir().join(format!("tandem-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    // Some platforms refuse to map an empty file; either way it is an error, not a panic.
    match MmapSource::open(&empty) {
        Ok(src) => expect_truncated_src(&src),
        Err(Error::Io { .. }) => {}
        Err(e) => panic!("unexpected {e:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(target_arch = "wasm32"))]
fn expect_truncated_src(src: &dyn ByteSource) {
    assert!(matches!(Gguf::parse(src), Err(Error::Truncated { .. })));
}

/// Parses the real models when they are on this machine (`scripts` fetch them into
/// ~/.cache/tandem/models); skipped with a note otherwise.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn gguf_real_models_if_present() {
    let Some(home) = std::env::var_os("HOME") else {
        eprintln!("note: HOME is not set; skipping the real-model GGUF test");
        return;
    };
    let dir = PathBuf::from(home).join(".cache/tandem/models");
    let models = [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "llama", 49152usize),
        ("gemma-3-270m-Q4_K_M.gguf", "gemma3", 262144),
    ];
    for (file, arch, vocab) in models {
        let path = dir.join(file);
        if !path.exists() {
            eprintln!("note: {} is absent; skipping it", path.display());
            continue;
        }
        let src = MmapSource::open(&path).unwrap();
        let t0 = std::time::Instant::now();
        let g = Gguf::parse(&src).unwrap();
        eprintln!(
            "{file}: parsed in {:?}: {} metadata, {} tensors, data at {}",
            t0.elapsed(),
            g.metadata.len(),
            g.tensors.len(),
            g.data_offset
        );
        assert_eq!(g.architecture().unwrap(), arch);
        let tokens = g.opt_array("tokenizer.ggml.tokens").unwrap().unwrap();
        assert_eq!(tokens.len(), vocab, "{file} vocab");
        assert!(tokens.iter().all(|t| t.as_str().is_some()));
        let n_layers = g.req_u32(&format!("{arch}.block_count")).unwrap();
        assert!(n_layers > 0);
        g.req_u32(&format!("{arch}.embedding_length")).unwrap();
        assert!(g.tensor("token_embd.weight").is_some(), "{file}");
        assert!(g.tensor("blk.0.attn_q.weight").is_some(), "{file}");
        // Every tensor has a known size and lies inside the file, in order and without overlap.
        let mut ts: Vec<&TensorInfo> = g.tensors.iter().collect();
        ts.sort_by_key(|t| t.offset);
        let mut end = g.data_offset;
        for t in ts {
            assert!(t.n_bytes > 0, "{} has unknown size", t.name);
            assert!(t.offset >= end, "{} overlaps", t.name);
            end = t.offset + t.n_bytes;
            let d = g.tensor_data(&src, t).unwrap();
            assert_eq!(d.len() as u64, t.n_bytes);
        }
        assert!(end <= src.len());
    }
}
