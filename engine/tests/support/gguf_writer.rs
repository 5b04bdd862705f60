//! A small GGUF writer for tests, shared by the reader's unit tests (engine/src/gguf/tests.rs),
//! the generated hostile files (engine/tests/hostile_gguf.rs) and the model-loading tests
//! (tests/bad_input.rs), each including it with `#[path]`. Besides the bytes it can list every
//! field it wrote ([`Builder::build_with_fields`]), so a test can cut or overwrite the file
//! field by field. The includer must have `Value` (tandem_engine::gguf::Value) in scope.

#![allow(dead_code)] // each includer uses its part

use super::Value;

/// A value's GGUF type id.
pub fn type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

/// What a field of the file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Magic,
    Version,
    /// u64 counts of the header.
    TensorCount,
    MetadataCount,
    /// The u64 length before a string's bytes (a key, a string value or element, a tensor name).
    StringLength,
    StringBytes,
    /// The u32 type of a metadata value.
    ValueType,
    /// A fixed-size value's bytes.
    FixedValue,
    /// An array's u32 element type and u64 length.
    ArrayType,
    ArrayLength,
    /// A tensor info's u32 dimension count, u64 dimensions, u32 GGML type, u64 offset.
    DimCount,
    Dim,
    TensorType,
    TensorOffset,
    /// The zeros up to the data section and between tensors.
    Padding,
    TensorData,
}

/// One field: `len` bytes at `at`, inside the metadata entry or tensor info `place` (the key or
/// tensor name; "metadata entry i" / "tensor info i" while its name is being read; "header"
/// for the header's own fields).
#[derive(Clone, Debug)]
pub struct Field {
    pub at: usize,
    pub len: usize,
    pub kind: Kind,
    pub place: String,
}

pub struct TestTensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: u32,
    pub data: Vec<u8>,
}

pub struct Builder {
    pub version: u32,
    /// Layout alignment; add `general.alignment` yourself when it is not 32.
    pub alignment: u64,
    pub kvs: Vec<(String, Value)>,
    pub tensors: Vec<TestTensor>,
}

/// Appends to the file while listing its fields.
struct Out {
    b: Vec<u8>,
    fields: Vec<Field>,
    place: String,
}

impl Out {
    fn put(&mut self, kind: Kind, bytes: &[u8]) {
        self.fields.push(Field {
            at: self.b.len(),
            len: bytes.len(),
            kind,
            place: self.place.clone(),
        });
        self.b.extend(bytes);
    }
    fn string(&mut self, s: &str) {
        self.put(Kind::StringLength, &(s.len() as u64).to_le_bytes());
        self.put(Kind::StringBytes, s.as_bytes());
    }
    /// The value's bytes without its type id. Empty arrays get element type u8.
    fn payload(&mut self, v: &Value) {
        match v {
            Value::U8(x) => self.put(Kind::FixedValue, &[*x]),
            Value::I8(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::U16(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::I16(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::U32(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::I32(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::U64(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::I64(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::F32(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::F64(x) => self.put(Kind::FixedValue, &x.to_le_bytes()),
            Value::Bool(x) => self.put(Kind::FixedValue, &[*x as u8]),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                let elem = items.first().map_or(0, type_id);
                self.put(Kind::ArrayType, &elem.to_le_bytes());
                self.put(Kind::ArrayLength, &(items.len() as u64).to_le_bytes());
                for it in items {
                    self.payload(it);
                }
            }
        }
    }
    fn pad_to(&mut self, len: usize) {
        if len > self.b.len() {
            let zeros = vec![0; len - self.b.len()];
            self.put(Kind::Padding, &zeros);
        }
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// Version 3, alignment 32, `general.architecture` = llama, no tensors.
    pub fn new() -> Self {
        Builder {
            version: 3,
            alignment: 32,
            kvs: vec![("general.architecture".into(), Value::String("llama".into()))],
            tensors: vec![],
        }
    }
    pub fn kv(mut self, key: &str, v: Value) -> Self {
        self.kvs.push((key.into(), v));
        self
    }
    /// A tensor of GGML type id `ty` with the data as given (not checked against the dims).
    pub fn tensor(mut self, name: &str, dims: &[u64], ty: u32, data: Vec<u8>) -> Self {
        self.tensors.push(TestTensor {
            name: name.into(),
            dims: dims.to_vec(),
            ty,
            data,
        });
        self
    }
    /// Relative offsets: each tensor padded to the alignment. No padding after the last one.
    pub fn offsets(&self) -> Vec<u64> {
        let mut off = 0u64;
        self.tensors
            .iter()
            .map(|t| {
                let o = off;
                off = (off + t.data.len() as u64).next_multiple_of(self.alignment);
                o
            })
            .collect()
    }
    pub fn build(&self) -> Vec<u8> {
        self.build_with_fields().0
    }
    /// The file and its fields in file order; they cover it byte for byte.
    pub fn build_with_fields(&self) -> (Vec<u8>, Vec<Field>) {
        let mut o = Out {
            b: Vec::new(),
            fields: Vec::new(),
            place: "header".into(),
        };
        o.put(Kind::Magic, b"GGUF");
        o.put(Kind::Version, &self.version.to_le_bytes());
        o.put(
            Kind::TensorCount,
            &(self.tensors.len() as u64).to_le_bytes(),
        );
        o.put(Kind::MetadataCount, &(self.kvs.len() as u64).to_le_bytes());
        for (i, (k, v)) in self.kvs.iter().enumerate() {
            o.place = format!("metadata entry {i}");
            o.string(k);
            o.place = k.clone();
            o.put(Kind::ValueType, &type_id(v).to_le_bytes());
            o.payload(v);
        }
        let offsets = self.offsets();
        for (i, (t, off)) in self.tensors.iter().zip(&offsets).enumerate() {
            o.place = format!("tensor info {i}");
            o.string(&t.name);
            o.place = t.name.clone();
            o.put(Kind::DimCount, &(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                o.put(Kind::Dim, &d.to_le_bytes());
            }
            o.put(Kind::TensorType, &t.ty.to_le_bytes());
            o.put(Kind::TensorOffset, &off.to_le_bytes());
        }
        o.place = "header".into();
        let data_start = (o.b.len() as u64).next_multiple_of(self.alignment);
        for (t, off) in self.tensors.iter().zip(&offsets) {
            // The padding before a tensor's data counts as that tensor's.
            o.place = t.name.clone();
            o.pad_to((data_start + off) as usize);
            o.put(Kind::TensorData, &t.data);
        }
        (o.b, o.fields)
    }
}

/// A u64 length, then the string's bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// `n` bytes of a simple pattern.
pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
