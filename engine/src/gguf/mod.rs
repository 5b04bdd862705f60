//! GGUF reader (versions 2 and 3, little-endian).
//!
//! A GGUF file is a header (magic `GGUF`, version, tensor count, metadata count), the metadata
//! key/value pairs, the tensor infos (name, dims, type, offset relative to the data section), then
//! padding up to `general.alignment` (32 by default) and the tensor data.
//!
//! The reader treats every byte as hostile: each count and length is checked against the bytes that
//! remain before anything is allocated for it, all arithmetic on sizes is checked, and every tensor's
//! data range is checked against the file's length. Nothing here panics on bad input; it returns
//! [`Error::Truncated`], [`Error::Corrupt`], [`Error::BadMagic`] or [`Error::UnsupportedVersion`].
//!
//! Reading goes through [`ByteSource`], so the same parser reads a memory-mapped file natively and
//! a buffer (or the prefix of a download) in the browser. When the source has the whole content as
//! one slice, the parser reads that slice directly, without copies.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::quant::GgmlType;

#[cfg(test)]
mod tests;

/// The magic at the start of every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a tensor may have (GGML_MAX_DIMS).
pub const MAX_DIMS: usize = 4;
/// Largest element count accepted for one tensor.
pub const MAX_ELEMENTS: u64 = 1 << 62;
/// Deepest nesting of arrays inside arrays accepted in metadata.
pub const MAX_ARRAY_DEPTH: u32 = 8;
/// Type ids above this are rejected as corrupt; ids below it that Tandem does not know are kept as
/// [`GgmlType::Other`] so the header still parses (loading such a tensor fails later).
pub const MAX_TYPE_ID: u32 = 1000;

/// Bytes read from a source at a time when it has no slice (a browser buffer reader, a stream).
const WINDOW: u64 = 1 << 20;

/// Random-access bytes: a memory-mapped file natively, a buffer or a stream's prefix in a browser.
///
/// `len` is the length of the whole file. A source that holds only a prefix (a download in
/// progress) may fail `read_at` for ranges it does not have yet; the parser then asks for exactly
/// the bytes it needs, never more than the header's own extent.
pub trait ByteSource {
    fn len(&self) -> u64;
    /// Fills `buf` from `offset`; Err(Error::Truncated{..}) when the range is past the end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The whole content as one slice, when the source has it (mmap, Vec); lets callers avoid copies.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `read_at` for a source that is one slice.
fn slice_read_at(data: &[u8], offset: u64, buf: &mut [u8]) -> Result<()> {
    let file_len = data.len() as u64;
    let len = buf.len() as u64;
    let truncated = || Error::Truncated {
        what: "a read".into(),
        offset,
        len,
        file_len,
    };
    let end = offset.checked_add(len).ok_or_else(truncated)?;
    if end > file_len {
        return Err(truncated());
    }
    // Both bounds are at most data.len(), so they fit in usize.
    buf.copy_from_slice(&data[offset as usize..end as usize]);
    Ok(())
}

impl ByteSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        slice_read_at(self, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// Lets a borrowed slice be passed as `&dyn ByteSource` (`Gguf::parse(&bytes)` with `bytes: &[u8]`).
impl ByteSource for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        slice_read_at(self, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        slice_read_at(self, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// A file mapped into memory, read-only.
#[cfg(not(target_arch = "wasm32"))]
pub struct MmapSource {
    map: memmap2::Mmap,
}

#[cfg(not(target_arch = "wasm32"))]
impl MmapSource {
    pub fn open(path: &std::path::Path) -> Result<MmapSource> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| Error::io(name.clone(), e))?;
        // SAFETY: the map is read-only. Another process truncating or rewriting the file while it is
        // mapped is undefined behaviour in Rust's model; that is the usual, accepted risk of mapping
        // model files (llama.cpp does the same).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(name, e))?;
        Ok(MmapSource { map })
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl ByteSource for MmapSource {
    fn len(&self) -> u64 {
        self.map.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        slice_read_at(&self.map, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.map)
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// Any integer that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer, when it fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// Any float or integer, converted (rounded) to f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            Value::U8(v) => Some(v as f32),
            Value::I8(v) => Some(v as f32),
            Value::U16(v) => Some(v as f32),
            Value::I16(v) => Some(v as f32),
            Value::U32(v) => Some(v as f32),
            Value::I32(v) => Some(v as f32),
            Value::U64(v) => Some(v as f32),
            Value::I64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

/// Short human-readable form: strings quoted, long arrays cut after a few items.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) if s.chars().count() > 80 => {
                let cut: String = s.chars().take(80).collect();
                write!(f, "{cut:?}...")
            }
            Value::String(s) => write!(f, "{s:?}"),
            Value::Array(a) => {
                const SHOWN: usize = 8;
                f.write_str("[")?;
                for (i, v) in a.iter().take(SHOWN).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                if a.len() > SHOWN {
                    write!(f, ", ... ({} items)", a.len())?;
                }
                f.write_str("]")
            }
        }
    }
}

/// One tensor's header entry.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGML order: dims[0] is the innermost (row length).
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Bytes of data. 0 for a type whose block size Tandem does not know (loading it fails).
    pub n_bytes: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        // Parse checked the product; saturate for hand-built infos.
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }
}

/// A parsed GGUF header: metadata in file order and the tensor directory. The tensor data stays in
/// the source; [`Gguf::tensor_data`] reads it.
///
/// `get` and `tensor` use an index built at parse time; the public vectors are for reading (if
/// you change them, lookups by name do not see the change).
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    /// Absolute offset of the data section (the end of the header, rounded up to `alignment`).
    pub data_offset: u64,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    kv_index: HashMap<String, usize>,
    tensor_index: HashMap<String, usize>,
}

impl Gguf {
    pub fn parse(src: &dyn ByteSource) -> Result<Gguf> {
        let mut r = Reader::new(src);

        let magic: [u8; 4] = r.array("GGUF magic")?;
        if magic != GGUF_MAGIC {
            return Err(Error::BadMagic { found: magic });
        }
        let version = r.u32("GGUF version")?;
        match version {
            2 | 3 => {}
            v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
                return Err(Error::Corrupt(format!(
                    "this is a big-endian GGUF (version {}); Tandem reads little-endian files only",
                    v.swap_bytes()
                )))
            }
            v => return Err(Error::UnsupportedVersion(v)),
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;

        // Smallest metadata entry: empty key (8) + value type (4) + a one-byte value.
        let mut metadata = Vec::new();
        r.reserve_for(&mut metadata, n_kv, 8 + 4 + 1, "metadata entries")?;
        let mut kv_index = HashMap::with_capacity(metadata.capacity());
        for i in 0..n_kv {
            let key = r
                .string("metadata key")
                .map_err(|e| context(e, &format!("metadata entry {i}")))?;
            let value = r
                .u32("metadata value type")
                .and_then(|ty| r.value(ty, 0))
                .map_err(|e| context(e, &format!("metadata {key}")))?;
            if kv_index.insert(key.clone(), metadata.len()).is_some() {
                return Err(Error::Corrupt(format!("duplicate metadata key {key}")));
            }
            metadata.push((key, value));
        }

        let alignment = match kv_index.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => {
                let v = &metadata[i].1;
                let a = v.as_u64().ok_or_else(|| Error::MetadataType {
                    key: "general.alignment".into(),
                    expected: "u32",
                })?;
                if a == 0 || !a.is_power_of_two() {
                    return Err(Error::Corrupt(format!(
                        "general.alignment is {a}; it must be a nonzero power of two"
                    )));
                }
                a
            }
        };

        // Smallest tensor info: empty name (8) + n_dims (4) + type (4) + offset (8).
        let mut tensors = Vec::new();
        r.reserve_for(&mut tensors, n_tensors, 8 + 4 + 4 + 8, "tensor infos")?;
        let mut tensor_index = HashMap::with_capacity(tensors.capacity());
        for i in 0..n_tensors {
            let t = r.tensor_info(i)?;
            if tensor_index.insert(t.name.clone(), tensors.len()).is_some() {
                return Err(Error::Corrupt(format!("duplicate tensor name {}", t.name)));
            }
            tensors.push(t);
        }

        let header_end = r.pos;
        let data_offset = header_end
            .checked_next_multiple_of(alignment)
            .ok_or_else(|| Error::Corrupt("the data offset overflows".into()))?;
        let file_len = r.len;
        for t in &mut tensors {
            if t.offset % alignment != 0 {
                return Err(Error::Corrupt(format!(
                    "tensor {} has offset {} in the data section, which is not a multiple of the alignment {alignment}",
                    t.name, t.offset
                )));
            }
            let start = data_offset.checked_add(t.offset);
            let end = start.and_then(|s| s.checked_add(t.n_bytes));
            match (start, end) {
                (Some(start), Some(end)) if end <= file_len => t.offset = start,
                _ => {
                    return Err(Error::Truncated {
                        what: format!("the data of tensor {}", t.name),
                        offset: start.unwrap_or(u64::MAX),
                        len: t.n_bytes,
                        file_len,
                    })
                }
            }
        }

        Ok(Gguf {
            version,
            alignment,
            data_offset,
            metadata,
            tensors,
            kv_index,
            tensor_index,
        })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.kv_index
            .get(key)
            .and_then(|&i| self.metadata.get(i))
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
            .filter(|t| t.name == name)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.opt_str("general.architecture")?
            .ok_or_else(|| Error::MissingMetadata {
                key: "general.architecture".into(),
                arch: "unknown".into(),
            })
    }

    fn typed<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        conv: impl FnOnce(&'s Value) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => conv(v).map(Some).ok_or_else(|| Error::MetadataType {
                key: key.into(),
                expected,
            }),
        }
    }

    fn missing(&self, key: &str) -> Error {
        let arch = self
            .get("general.architecture")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        Error::MissingMetadata {
            key: key.into(),
            arch: arch.into(),
        }
    }

    /// Any non-negative integer.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "a non-negative integer", Value::as_u64)
    }
    /// Any non-negative integer that fits in a u32.
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.typed(key, "a non-negative integer that fits in u32", |v| {
            v.as_u64().and_then(|x| u32::try_from(x).ok())
        })
    }
    /// Any float or integer.
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        self.typed(key, "a number", Value::as_f32)
    }
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "bool", Value::as_bool)
    }
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "string", Value::as_str)
    }
    pub fn opt_array(&self, key: &str) -> Result<Option<&[Value]>> {
        self.typed(key, "array", Value::as_array)
    }

    pub fn req_u32(&self, key: &str) -> Result<u32> {
        self.opt_u32(key)?.ok_or_else(|| self.missing(key))
    }
    pub fn req_f32(&self, key: &str) -> Result<f32> {
        self.opt_f32(key)?.ok_or_else(|| self.missing(key))
    }
    pub fn req_str(&self, key: &str) -> Result<&str> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    /// The bytes of one tensor (borrowed when the source has a slice).
    ///
    /// Fails with `UnsupportedTensorType` for a type whose size Tandem does not know, and with
    /// `Truncated` when the range is not in `src` (for example a different, shorter file).
    pub fn tensor_data<'a>(
        &self,
        src: &'a dyn ByteSource,
        t: &TensorInfo,
    ) -> Result<Cow<'a, [u8]>> {
        if t.n_bytes == 0 && t.n_elements() > 0 {
            return Err(Error::UnsupportedTensorType {
                name: t.name.clone(),
                ty: t.ty.name(),
            });
        }
        let file_len = src.len();
        let truncated = || Error::Truncated {
            what: format!("the data of tensor {}", t.name),
            offset: t.offset,
            len: t.n_bytes,
            file_len,
        };
        let end = t.offset.checked_add(t.n_bytes).ok_or_else(truncated)?;
        if end > file_len {
            return Err(truncated());
        }
        if let Some(s) = src.as_slice() {
            let (Ok(a), Ok(b)) = (usize::try_from(t.offset), usize::try_from(end)) else {
                return Err(truncated());
            };
            return s.get(a..b).map(Cow::Borrowed).ok_or_else(truncated);
        }
        let n = usize::try_from(t.n_bytes).map_err(|_| Error::Limits {
            what: format!("memory for tensor {}", t.name),
            need: t.n_bytes,
            have: usize::MAX as u64,
        })?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(n).map_err(|_| Error::Limits {
            what: format!("memory for tensor {}", t.name),
            need: t.n_bytes,
            have: 0,
        })?;
        buf.resize(n, 0);
        src.read_at(t.offset, &mut buf)?;
        Ok(Cow::Owned(buf))
    }
}

/// Adds where-in-the-file context to a parse error.
fn context(e: Error, place: &str) -> Error {
    match e {
        Error::Truncated {
            what,
            offset,
            len,
            file_len,
        } => Error::Truncated {
            what: format!("{what} of {place}"),
            offset,
            len,
            file_len,
        },
        Error::Corrupt(msg) => Error::Corrupt(format!("{place}: {msg}")),
        other => other,
    }
}

/// Sizes of the metadata value types that have a fixed size.
fn fixed_size(ty: u32) -> Option<u64> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        _ => return None,
    })
}

/// Decodes one fixed-size value from exactly `fixed_size(ty)` bytes.
fn decode_fixed(ty: u32, b: &[u8]) -> Value {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    match ty {
        0 => Value::U8(b[0]),
        1 => Value::I8(b[0] as i8),
        2 => Value::U16(u16::from_le_bytes(arr(b))),
        3 => Value::I16(i16::from_le_bytes(arr(b))),
        4 => Value::U32(u32::from_le_bytes(arr(b))),
        5 => Value::I32(i32::from_le_bytes(arr(b))),
        6 => Value::F32(f32::from_le_bytes(arr(b))),
        7 => Value::Bool(b[0] != 0),
        10 => Value::U64(u64::from_le_bytes(arr(b))),
        11 => Value::I64(i64::from_le_bytes(arr(b))),
        _ => Value::F64(f64::from_le_bytes(arr(b))), // 12; callers pass only fixed-size types
    }
}

/// A cursor over the source. With a slice it reads the slice; otherwise it reads windows of
/// `WINDOW` bytes into `buf`. Invariant: `pos <= len`.
struct Reader<'a> {
    src: &'a dyn ByteSource,
    slice: Option<&'a [u8]>,
    len: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> Reader<'a> {
    fn new(src: &'a dyn ByteSource) -> Self {
        let slice = src.as_slice();
        let len = match slice {
            Some(s) => s.len() as u64,
            None => src.len(),
        };
        Reader {
            src,
            slice,
            len,
            pos: 0,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    fn truncated(&self, what: &str, len: u64) -> Error {
        Error::Truncated {
            what: what.into(),
            offset: self.pos,
            len,
            file_len: self.len,
        }
    }

    /// Checks that `n` bytes remain and returns them, advancing.
    fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        if n > self.remaining() {
            return Err(self.truncated(what, n));
        }
        let start = self.pos;
        let end = start + n;
        self.pos = end;
        if let Some(s) = self.slice {
            // end <= len == s.len(), so both fit in usize.
            return Ok(&s[start as usize..end as usize]);
        }
        let buf_end = self.buf_start + self.buf.len() as u64;
        if start < self.buf_start || end > buf_end {
            let too_big = || Error::Corrupt(format!("{what} of {n} bytes is too large to read"));
            let n_usize = usize::try_from(n).map_err(|_| too_big())?;
            let window = n.max(WINDOW).min(self.len - start);
            let window = usize::try_from(window).unwrap_or(n_usize);
            self.buf.clear();
            self.buf.try_reserve_exact(window).map_err(|_| too_big())?;
            self.buf.resize(window, 0);
            if self.src.read_at(start, &mut self.buf).is_err() {
                // A source holding only a prefix may not have the whole window: read exactly n.
                self.buf.truncate(n_usize);
                if let Err(e) = self.src.read_at(start, &mut self.buf) {
                    self.pos = start;
                    return Err(e);
                }
            }
            self.buf_start = start;
        }
        let off = (start - self.buf_start) as usize;
        Ok(&self.buf[off..off + n as usize])
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A u64 length, then that many bytes of text. Invalid UTF-8 is replaced (U+FFFD) rather than
    /// refused, as llama.cpp accepts arbitrary bytes in token strings.
    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let b = self.take(n, what)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        })
    }

    /// Reserves room for `count` items, each at least `min_size` bytes in the file, after checking
    /// that the file has that many bytes left.
    fn reserve_for<T>(
        &mut self,
        v: &mut Vec<T>,
        count: u64,
        min_size: u64,
        what: &str,
    ) -> Result<()> {
        let need = count.saturating_mul(min_size);
        if need > self.remaining() {
            return Err(Error::Truncated {
                what: format!("{count} {what}"),
                offset: self.pos,
                len: need,
                file_len: self.len,
            });
        }
        let n = usize::try_from(count)
            .map_err(|_| Error::Corrupt(format!("{count} {what} do not fit in memory")))?;
        v.try_reserve_exact(n)
            .map_err(|_| Error::Corrupt(format!("{count} {what} do not fit in memory")))
    }

    /// A metadata value of type `ty`; `depth` counts enclosing arrays.
    fn value(&mut self, ty: u32, depth: u32) -> Result<Value> {
        if let Some(size) = fixed_size(ty) {
            let b = self.take(size, "value")?;
            return Ok(decode_fixed(ty, b));
        }
        match ty {
            8 => self.string("string").map(Value::String),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(Error::Corrupt(format!(
                        "arrays nested more than {MAX_ARRAY_DEPTH} deep"
                    )));
                }
                let elem = self.u32("array element type")?;
                let n = self.u64("array length")?;
                let min_size = match elem {
                    8 => 8,     // a string: its length
                    9 => 4 + 8, // an array: element type and length
                    t => fixed_size(t)
                        .ok_or_else(|| Error::Corrupt(format!("unknown array element type {t}")))?,
                };
                let mut items = Vec::new();
                self.reserve_for(&mut items, n, min_size, "array elements")?;
                if fixed_size(elem).is_some() {
                    // n * min_size was checked above.
                    let bytes = self.take(n * min_size, "array")?;
                    items.extend(
                        bytes
                            .chunks_exact(min_size as usize)
                            .map(|c| decode_fixed(elem, c)),
                    );
                } else {
                    for _ in 0..n {
                        items.push(self.value(elem, depth + 1)?);
                    }
                }
                Ok(Value::Array(items))
            }
            t => Err(Error::Corrupt(format!("unknown metadata value type {t}"))),
        }
    }

    /// Tensor info number `i`; its offset is still relative to the data section.
    fn tensor_info(&mut self, i: u64) -> Result<TensorInfo> {
        let name = self
            .string("tensor name")
            .map_err(|e| context(e, &format!("tensor info {i}")))?;
        let place = format!("tensor {name}");
        let n_dims = self
            .u32("tensor dimension count")
            .map_err(|e| context(e, &place))?;
        if n_dims as usize > MAX_DIMS {
            return Err(Error::Corrupt(format!(
                "tensor {name} has {n_dims} dimensions; at most {MAX_DIMS} are allowed"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut n_elements: u64 = 1;
        for _ in 0..n_dims {
            let d = self
                .u64("tensor dimension")
                .map_err(|e| context(e, &place))?;
            n_elements = n_elements
                .checked_mul(d)
                .filter(|&n| n <= MAX_ELEMENTS)
                .ok_or_else(|| {
                    Error::Corrupt(format!(
                        "tensor {name} has too many elements (dims {:?} x {d})",
                        dims
                    ))
                })?;
            dims.push(d);
        }
        let id = self.u32("tensor type").map_err(|e| context(e, &place))?;
        if id > MAX_TYPE_ID {
            return Err(Error::Corrupt(format!(
                "tensor {name} has type id {id}, which no GGML type has"
            )));
        }
        let ty = GgmlType::from_id(id);
        let n_bytes = match ty.block_geometry() {
            None => 0,
            Some((block, block_bytes)) => {
                let row = dims.first().copied().unwrap_or(1);
                if row % block != 0 {
                    return Err(Error::Corrupt(format!(
                        "tensor {name} of type {ty} has rows of {row} elements, not a multiple of its block size {block}"
                    )));
                }
                (n_elements / block)
                    .checked_mul(block_bytes)
                    .ok_or_else(|| Error::Corrupt(format!("tensor {name}'s size overflows")))?
            }
        };
        let offset = self.u64("tensor offset").map_err(|e| context(e, &place))?;
        Ok(TensorInfo {
            name,
            dims,
            ty,
            offset,
            n_bytes,
        })
    }
}
