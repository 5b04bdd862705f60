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

use crate::error::{Error, Result};
use crate::quant::GgmlType;

mod reader;
mod source;
mod value;

#[cfg(test)]
mod tests;

pub use source::ByteSource;
#[cfg(not(target_arch = "wasm32"))]
pub use source::MmapSource;
pub use value::Value;

use reader::{context, Reader};

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
