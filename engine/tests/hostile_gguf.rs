//! Hostile GGUF files, generated from one valid file: cut at every byte, every length and count
//! set to absurd values, type fields set to unknown ids, dimension products that overflow,
//! duplicate names, misaligned and out-of-range tensor data. Each must give a clear error
//! naming what is wrong, never a panic, and never an allocation sized from a header's claim
//! before the claim is checked against the file: a counting global allocator records the
//! largest single allocation of every parse (on the parsing thread), which must stay within
//! [`alloc_bound`] of the file's size.
//!
//! Every file is parsed twice: from a slice, and through a source without one (the reader's
//! windowed path, as in the browser), and both must give the same answer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tandem_engine::gguf::{ByteSource, Gguf, Value, MAX_DIMS, MAX_ELEMENTS, MAX_TYPE_ID};
use tandem_engine::model::{read_header, ChunkReader};
use tandem_engine::quant::GgmlType;
use tandem_engine::{Error, Result};

#[path = "support/gguf_writer.rs"]
mod writer;
use writer::{bytes, Builder, Field, Kind};

// ---------------------------------------------------------------------------------------------
// The counting allocator.

/// Passes every call to the system allocator, noting the size of each allocation on threads
/// that measure (see [`largest_allocation`]).
struct Counting;

thread_local! {
    /// The largest allocation since measuring began on this thread; `None` when not measuring.
    static LARGEST: Cell<Option<usize>> = const { Cell::new(None) };
}

fn note(size: usize) {
    // try_with: the slot may be gone while the thread ends.
    let _ = LARGEST.try_with(|l| {
        if let Some(m) = l.get() {
            l.set(Some(m.max(size)));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(Some(0)));
    let out = f();
    let largest = LARGEST.with(|l| l.replace(None)).unwrap_or(0);
    (out, largest)
}

/// The most one parse of a `file_len`-byte file may allocate at once: what the file's own
/// content can need, never what its header claims. The largest growth from file to memory is a
/// u8 array element: one byte in the file, one `Value` in memory; the constant covers error
/// messages and the small fixed allocations.
fn alloc_bound(file_len: usize) -> usize {
    std::mem::size_of::<Value>() * file_len + 4096
}

// ---------------------------------------------------------------------------------------------
// Parsing a hostile file.

/// The same bytes as a source without a slice: the reader reads windows of it.
struct NoSlice<'a>(&'a [u8]);

impl ByteSource for NoSlice<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_at(offset, buf)
    }
}

/// Parses `file` from a slice and without one, and reads every tensor's data where it parses.
/// Fails the test (naming `case`) on a panic, on an allocation past [`alloc_bound`], or when the
/// two ways disagree; returns the parse's result.
fn parse_hostile(file: &[u8], case: &str) -> Result<Gguf> {
    let bound = alloc_bound(file.len());
    let run = |src: &dyn ByteSource| {
        let (out, largest) = largest_allocation(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let g = Gguf::parse(src)?;
                for t in &g.tensors {
                    match g.tensor_data(src, t) {
                        Ok(d) => assert_eq!(d.len() as u64, t.n_bytes, "{case}: {}", t.name),
                        Err(Error::UnsupportedTensorType { name, .. }) => {
                            assert_eq!(name, t.name, "{case}")
                        }
                        Err(e) => panic!("{case}: parsed, but reading {} failed: {e}", t.name),
                    }
                }
                Ok(g)
            }))
        });
        let out: Result<Gguf> = out.unwrap_or_else(|_| panic!("{case}: the reader panicked"));
        assert!(
            largest <= bound,
            "{case}: one allocation of {largest} bytes for a file of {} (bound {bound})",
            file.len()
        );
        out
    };
    let from_slice = run(&file);
    let windowed = run(&NoSlice(file));
    match (&from_slice, &windowed) {
        (Ok(a), Ok(b)) => {
            // As text: a float field may have become NaN.
            assert_eq!(
                format!("{:?}", a.metadata),
                format!("{:?}", b.metadata),
                "{case}"
            );
            assert_eq!(a.tensors, b.tensors, "{case}");
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{case}"),
        (a, b) => panic!("{case}: from a slice {a:?}, windowed {b:?}"),
    }
    from_slice
}

/// The error of a file that must not parse.
fn parse_err(file: &[u8], case: &str) -> Error {
    match parse_hostile(file, case) {
        Ok(_) => panic!("{case}: parsed"),
        Err(e) => e,
    }
}

/// Asserts that `e`'s message contains every one of `needles`.
fn mentions(e: &Error, needles: &[&str], case: &str) {
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "{case}: {msg:?} does not mention {n:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The valid file everything is derived from.

const F32: u32 = 0;
const F16: u32 = 1;
const Q8_0: u32 = 8;
const Q4_K: u32 = 12;

/// Metadata of many kinds (integers, floats, bools, strings, arrays of numbers, of strings, of
/// arrays, an empty one) and four tensors of different types; the last tensor's data ends the
/// file.
fn sample() -> Builder {
    let s = |x: &str| Value::String(x.into());
    Builder::new()
        .kv("llama.block_count", Value::U32(2))
        .kv("llama.rope.freq_base", Value::F32(10000.0))
        .kv("general.flag", Value::Bool(true))
        .kv("general.big", Value::U64(1 << 40))
        .kv("general.neg", Value::I64(-5))
        .kv("general.ratio", Value::F64(0.5))
        .kv("general.name", s("hostile ✓"))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(vec![s("<s>"), s(""), s("hello")]),
        )
        .kv(
            "tokenizer.ggml.scores",
            Value::Array(vec![Value::F32(0.0), Value::F32(-1.5), Value::F32(2.0)]),
        )
        .kv(
            "general.ids",
            Value::Array(vec![Value::I64(-1), Value::I64(7)]),
        )
        .kv(
            "general.bytes",
            Value::Array(vec![Value::U8(1), Value::U8(2)]),
        )
        .kv("general.empty", Value::Array(vec![]))
        .kv(
            "general.nested",
            Value::Array(vec![
                Value::Array(vec![Value::U16(1), Value::U16(2)]),
                Value::Array(vec![s("x")]),
            ]),
        )
        .tensor("token_embd.weight", &[4, 3], F32, bytes(48, 1))
        .tensor("output_norm.weight", &[6], F16, bytes(12, 2))
        .tensor("blk.0.attn_q.weight", &[32, 2], Q8_0, bytes(68, 3))
        .tensor("blk.0.ffn_up.weight", &[256, 1], Q4_K, bytes(144, 4))
}

/// The sample's bytes and fields; checks that it parses and that the fields cover it.
fn sample_file() -> (Vec<u8>, Vec<Field>) {
    let (file, fields) = sample().build_with_fields();
    let g = parse_hostile(&file, "the valid sample").expect("the sample parses");
    assert_eq!(g.tensors.len(), 4);
    let mut end = 0;
    for f in &fields {
        assert_eq!(f.at, end, "fields in order, without gaps");
        end += f.len;
    }
    assert_eq!(end, file.len());
    (file, fields)
}

fn with_u64(file: &[u8], f: &Field, v: u64) -> Vec<u8> {
    assert_eq!(f.len, 8, "{f:?}");
    let mut out = file.to_vec();
    out[f.at..f.at + 8].copy_from_slice(&v.to_le_bytes());
    out
}

fn with_u32(file: &[u8], f: &Field, v: u32) -> Vec<u8> {
    assert_eq!(f.len, 4, "{f:?}");
    let mut out = file.to_vec();
    out[f.at..f.at + 4].copy_from_slice(&v.to_le_bytes());
    out
}

/// What the error for a read cut short inside field `f` names: the header field itself, or the
/// metadata entry / tensor the field belongs to.
fn place_of(f: &Field) -> &str {
    match f.kind {
        Kind::Magic => "GGUF magic",
        Kind::Version => "GGUF version",
        Kind::TensorCount => "tensor count",
        Kind::MetadataCount => "metadata count",
        _ => &f.place,
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn truncated_at_every_byte() {
    let (file, fields) = sample_file();
    for f in &fields {
        for cut in f.at..f.at + f.len {
            let case = format!("cut at byte {cut} (inside {:?} of {})", f.kind, f.place);
            let e = parse_err(&file[..cut], &case);
            let Error::Truncated {
                ref what,
                offset,
                len,
                file_len,
            } = e
            else {
                panic!("{case}: expected Truncated, got {e:?}")
            };
            // The error points at a read that ends past the cut (and, in the header, starts
            // before it: tensor data may start past the end).
            assert_eq!(file_len, cut as u64, "{case}");
            let in_data = matches!(f.kind, Kind::Padding | Kind::TensorData);
            assert!(
                (in_data || offset <= file_len) && offset.saturating_add(len) > file_len,
                "{case}: {e}"
            );
            // And names what it was reading: the field's entry, or (when a count no longer
            // fits what is left) the whole list of them.
            let msg = e.to_string();
            let named = msg.contains(place_of(f))
                || ["metadata entries", "tensor infos"]
                    .iter()
                    .any(|list| what.ends_with(list) && offset <= f.at as u64);
            assert!(
                named,
                "{case}: {msg:?} names neither {:?} nor its list",
                f.place
            );
        }
    }
}

/// The u64 values every length, count, dimension and offset is set to: each absurd for a file
/// of `file_len` bytes whose field ends at `end`.
fn absurd_u64(file_len: u64, end: u64) -> [(u64, &'static str); 7] {
    [
        (u64::MAX, "u64::MAX"),
        (1 << 63, "2^63"),
        (1 << 32, "2^32"),
        (file_len + 1, "the file's size + 1"),
        (file_len - end + 1, "one past the end"),
        // Added to the position after the field, it wraps around to 0.
        (u64::MAX - end + 1, "wrapping to offset 0"),
        ((u64::MAX - end) / 2 + 1, "wrapping when doubled"),
    ]
}

#[test]
fn absurd_lengths_counts_dimensions_and_offsets() {
    let (file, fields) = sample_file();
    let n = file.len() as u64;
    let mut cases = 0;
    for f in &fields {
        let u64_field = [
            Kind::TensorCount,
            Kind::MetadataCount,
            Kind::StringLength,
            Kind::ArrayLength,
            Kind::Dim,
            Kind::TensorOffset,
        ];
        if !u64_field.contains(&f.kind) {
            continue;
        }
        let end = (f.at + f.len) as u64;
        for (v, name) in absurd_u64(n, end) {
            let case = format!("{:?} of {} set to {v} ({name})", f.kind, f.place);
            let e = parse_err(&with_u64(&file, f, v), &case);
            cases += 1;
            match f.kind {
                Kind::TensorCount => mentions(&e, &["truncated", "tensor infos"], &case),
                Kind::MetadataCount => mentions(&e, &["truncated", "metadata entries"], &case),
                Kind::StringLength => mentions(&e, &["truncated", &f.place], &case),
                Kind::ArrayLength => {
                    mentions(&e, &["truncated", "array elements", &f.place], &case)
                }
                // Too many elements, a size that overflows, rows that are not whole blocks, or
                // data past the end: whichever, the tensor is named.
                Kind::Dim => mentions(&e, &[&format!("tensor {}", f.place)], &case),
                // Misaligned or past the end.
                Kind::TensorOffset => {
                    mentions(&e, &[&format!("tensor {}", f.place)], &case);
                    let msg = e.to_string();
                    assert!(
                        msg.contains("not a multiple of the alignment")
                            || msg.contains("the data of tensor"),
                        "{case}: {msg}"
                    );
                }
                _ => unreachable!(),
            }
        }
    }
    assert!(cases > 150, "{cases} cases");
}

#[test]
fn absurd_and_unknown_type_fields() {
    let (file, fields) = sample_file();
    for f in &fields {
        let (values, needle): (&[u32], &str) = match f.kind {
            Kind::DimCount => (&[MAX_DIMS as u32 + 1, 1 << 31, u32::MAX], "dimensions"),
            Kind::ValueType => (&[13, 1 << 31, u32::MAX], "unknown metadata value type"),
            Kind::ArrayType => (&[13, 1 << 31, u32::MAX], "unknown array element type"),
            Kind::TensorType => (&[MAX_TYPE_ID + 1, 1 << 31, u32::MAX], "type id"),
            _ => continue,
        };
        for &v in values {
            let case = format!("{:?} of {} set to {v}", f.kind, f.place);
            let e = parse_err(&with_u32(&file, f, v), &case);
            assert!(matches!(e, Error::Corrupt(_)), "{case}: {e:?}");
            mentions(&e, &[needle, &v.to_string(), &f.place], &case);
        }
    }
}

/// Every tensor given every type id up to 40 and a few beyond: ids Tandem does not know parse
/// (the tensor fails when it is read); the known ones either fit the data (then they are read)
/// or give an error that names the tensor.
#[test]
fn every_ggml_type_in_every_tensor() {
    let (file, fields) = sample_file();
    for f in fields.iter().filter(|f| f.kind == Kind::TensorType) {
        for id in (0..=40).chain([200, MAX_TYPE_ID]) {
            let case = format!("tensor {} given type {id}", f.place);
            match parse_hostile(&with_u32(&file, f, id), &case) {
                Ok(g) => {
                    let t = g.tensor(&f.place).expect("the tensor");
                    let ty = GgmlType::from_id(id);
                    let expect = match ty.block_geometry() {
                        Some(_) => ty.bytes_for(t.n_elements()).expect("whole blocks"),
                        None => 0,
                    };
                    assert_eq!(t.n_bytes, expect, "{case}");
                }
                Err(e) => {
                    mentions(&e, &[&format!("tensor {}", f.place)], &case);
                    let msg = e.to_string();
                    assert!(
                        msg.contains("block size") || msg.contains("the data of tensor"),
                        "{case}: {msg}"
                    );
                }
            }
        }
    }
}

/// Every other field (and these too) overwritten with a few patterns: whatever the reader
/// makes of it, no panic, no runaway allocation.
#[test]
fn every_field_overwritten_never_panics() {
    let (file, fields) = sample_file();
    let patterns: [&[u8]; 5] = [&[0x00], &[0xff], &[0x80], &[0x7f], &[0x01]];
    for f in &fields {
        for p in patterns {
            // The pattern in the field's first byte, and in all its bytes.
            for whole in [false, true] {
                let mut hostile = file.clone();
                let span = if whole { f.len } else { f.len.min(1) };
                hostile[f.at..f.at + span].fill(p[0]);
                let case = format!("{:?} of {} filled with {:#04x}", f.kind, f.place, p[0]);
                let _ = parse_hostile(&hostile, &case);
            }
        }
    }
}

#[test]
fn dimension_products_and_sizes_that_overflow() {
    let big = |dims: &[u64], ty: u32| Builder::new().tensor("x.weight", dims, ty, vec![]).build();
    let cases: &[(&[u64], u32, &str)] = &[
        // The product overflows u64 (at the second, at the fourth dimension).
        (&[1 << 32, 1 << 32], F32, "too many elements"),
        (
            &[1 << 16, 1 << 16, 1 << 16, 1 << 16],
            F32,
            "too many elements",
        ),
        (&[u64::MAX, 2], F32, "too many elements"),
        (&[2, u64::MAX], Q8_0, "too many elements"),
        // Past the most elements a tensor may have, without overflowing.
        (&[MAX_ELEMENTS, 2], F32, "too many elements"),
        // A dimension that is absurd alone, hidden behind a zero.
        (&[0, u64::MAX], F32, "too many elements"),
        (&[0, 1, 1 << 63], F16, "too many elements"),
        // The element count is allowed, its size in bytes overflows u64.
        (&[1 << 31, 1 << 31], F32, "overflows"),
        (&[1 << 62], F32, "overflows"),
        // The size fits u64 (and usize) but not the file.
        (&[1 << 30, 1 << 31], F32, "the data of tensor x.weight"),
        (&[256, 1 << 40], Q4_K, "the data of tensor x.weight"),
        // Quantized rows must be whole blocks.
        (&[33, 1], Q8_0, "block size"),
        (&[u64::MAX - 31, 1], Q8_0, "too many elements"),
    ];
    for &(dims, ty, needle) in cases {
        let case = format!("dims {dims:?} of type {ty}");
        let e = parse_err(&big(dims, ty), &case);
        mentions(&e, &["x.weight", needle], &case);
    }
}

#[test]
fn duplicate_keys_and_tensor_names() {
    let base = sample();
    let n_kv = base.kvs.len();
    for i in 0..n_kv {
        for j in i + 1..n_kv {
            let mut b = sample();
            b.kvs[j].0 = b.kvs[i].0.clone();
            let key = &b.kvs[i].0;
            let e = parse_err(&b.build(), &format!("key {j} named as key {i}"));
            assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
            mentions(&e, &[&format!("duplicate metadata key {key}")], key);
        }
    }
    let n_t = base.tensors.len();
    for i in 0..n_t {
        for j in i + 1..n_t {
            let mut b = sample();
            b.tensors[j].name = b.tensors[i].name.clone();
            let name = &b.tensors[i].name;
            let e = parse_err(&b.build(), &format!("tensor {j} named as tensor {i}"));
            assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
            mentions(&e, &[&format!("duplicate tensor name {name}")], name);
        }
    }
}

#[test]
fn misaligned_tensor_data() {
    let (file, fields) = sample_file();
    for f in fields.iter().filter(|f| f.kind == Kind::TensorOffset) {
        let off = u64::from_le_bytes(file[f.at..f.at + 8].try_into().unwrap());
        for delta in 1..32 {
            let case = format!("tensor {} moved by {delta} bytes", f.place);
            let e = parse_err(&with_u64(&file, f, off + delta), &case);
            assert!(matches!(e, Error::Corrupt(_)), "{case}: {e:?}");
            mentions(
                &e,
                &[
                    &format!("tensor {}", f.place),
                    "not a multiple of the alignment 32",
                ],
                &case,
            );
        }
    }
    // An alignment that is no power of two, or too large for any data to follow.
    for (a, needle) in [
        (Value::U32(0), "power of two"),
        (Value::U32(3), "power of two"),
        (Value::U32(48), "power of two"),
        (Value::U64(u64::MAX), "power of two"),
        (Value::U64(1 << 63), "the data of tensor"),
        (Value::I32(-32), "general.alignment"),
        (Value::String("32".into()), "general.alignment"),
    ] {
        let case = format!("general.alignment {a:?}");
        let e = parse_err(&sample().kv("general.alignment", a).build(), &case);
        mentions(&e, &[needle], &case);
    }
}

/// Each tensor moved to the last aligned offset where its data still fits, then one alignment
/// further.
#[test]
fn tensor_data_past_the_end() {
    let (file, fields) = sample_file();
    let data_len = |name: &str| {
        fields
            .iter()
            .find(|f| f.kind == Kind::TensorData && f.place == name)
            .unwrap()
            .len as u64
    };
    let g = parse_hostile(&file, "the valid sample").unwrap();
    for f in fields.iter().filter(|f| f.kind == Kind::TensorOffset) {
        // The last aligned offset at which the tensor still fits, then the next one.
        let last_fit = (file.len() as u64 - g.data_offset - data_len(&f.place)) / 32 * 32;
        let case = format!("tensor {} at the last offset that fits", f.place);
        parse_hostile(&with_u64(&file, f, last_fit), &case).expect(&case);
        let case = format!("tensor {} one alignment further", f.place);
        let e = parse_err(&with_u64(&file, f, last_fit + 32), &case);
        assert!(matches!(e, Error::Truncated { .. }), "{case}: {e:?}");
        mentions(&e, &[&format!("the data of tensor {}", f.place)], &case);
    }
}

/// A download in progress, or of unknown length: the length it claims (a Content-Length, or a
/// stand-in for none) is not the bytes it has.
struct Download<'a> {
    data: &'a [u8],
    claimed: u64,
}

impl ByteSource for Download<'_> {
    fn len(&self) -> u64 {
        self.claimed
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.data.read_at(offset, buf)
    }
}

/// A stream in 4 KiB pieces.
struct Chunks(VecDeque<Vec<u8>>);

impl ChunkReader for Chunks {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.0.pop_front())
    }
}

/// Lengths and counts checked against a length the source only claims: nothing is allocated for
/// them before their bytes have been read.
#[test]
fn a_download_gets_no_allocation_for_bytes_it_has_not_delivered() {
    let (file, fields) = sample_file();
    // The reader reads a source without a slice one window (1 MiB) at a time.
    let bound = alloc_bound(file.len()) + (4 << 20);
    let claims = [
        Kind::TensorCount,
        Kind::MetadataCount,
        Kind::StringLength,
        Kind::ArrayLength,
    ];
    let mut cases = 0;
    for f in fields.iter().filter(|f| claims.contains(&f.kind)) {
        for claim in [1u64 << 30, 1 << 40] {
            let hostile = with_u64(&file, f, claim);
            let case = format!("{:?} of {} set to {claim}", f.kind, f.place);
            // Unknown length (what the browser passes for a download without one), and a
            // Content-Length that agrees with the claim.
            for claimed in [u64::MAX >> 1, 1 << 45] {
                let src = Download {
                    data: &hostile,
                    claimed,
                };
                let (r, largest) = largest_allocation(|| Gguf::parse(&src).map(drop));
                let e = r.expect_err(&case);
                if f.kind == Kind::StringLength {
                    assert!(matches!(e, Error::Truncated { .. }), "{case}: {e:?}");
                }
                assert!(
                    largest <= bound,
                    "{case}: one allocation of {largest} bytes"
                );
                cases += 1;
            }
            // And as the browser reads a stream: its header from the pieces that came.
            let pieces = hostile.chunks(4096).map(<[u8]>::to_vec).collect();
            let (r, largest) = largest_allocation(|| {
                pollster::block_on(read_header(&mut Chunks(pieces), u64::MAX >> 1)).map(drop)
            });
            r.expect_err(&case);
            assert!(
                largest <= bound,
                "{case}, streamed: one allocation of {largest} bytes"
            );
        }
    }
    assert!(cases > 40, "{cases} cases");
}
