//! The cursor the parser reads with: every count and length checked against the bytes left
//! before anything is allocated for it.

use crate::error::{Error, Result};
use crate::quant::GgmlType;

use super::value::{decode_fixed, fixed_size};
use super::{ByteSource, TensorInfo, Value, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_ELEMENTS, MAX_TYPE_ID};

/// Bytes read from a source at a time when it has no slice (a browser buffer reader, a stream).
const WINDOW: u64 = 1 << 20;

/// Adds where-in-the-file context to a parse error.
pub(super) fn context(e: Error, place: &str) -> Error {
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

/// A cursor over the source. With a slice it reads the slice; otherwise it reads windows of
/// `WINDOW` bytes into `buf`. Invariant: `pos <= len`.
pub(super) struct Reader<'a> {
    src: &'a dyn ByteSource,
    slice: Option<&'a [u8]>,
    pub(super) len: u64,
    pub(super) pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl<'a> Reader<'a> {
    pub(super) fn new(src: &'a dyn ByteSource) -> Self {
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

    pub(super) fn remaining(&self) -> u64 {
        self.len - self.pos
    }

    pub(super) fn truncated(&self, what: &str, len: u64) -> Error {
        Error::Truncated {
            what: what.into(),
            offset: self.pos,
            len,
            file_len: self.len,
        }
    }

    /// Checks that `n` bytes remain and returns them, advancing.
    pub(super) fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
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
            self.buf.clear();
            self.buf_start = start;
            if let Err(e) = self.fill(n, what) {
                self.pos = start;
                return Err(e);
            }
        }
        let off = (start - self.buf_start) as usize;
        Ok(&self.buf[off..off + n as usize])
    }

    /// Reads from `buf_start` into the empty `buf` a window of at least `n` bytes (`WINDOW`, or
    /// `n` where larger, short of the end), one `WINDOW` at a time: a length read from the header
    /// is only allocated as far as the source really has the bytes (the length of a download in
    /// progress, or of unknown length, is a claim too).
    fn fill(&mut self, n: u64, what: &str) -> Result<()> {
        let start = self.buf_start;
        let want = n.max(WINDOW).min(self.len - start);
        while (self.buf.len() as u64) < want {
            let have = self.buf.len() as u64;
            let step = (want - have).min(WINDOW);
            if let Err(e) = self.append(step, what) {
                // A source holding only a prefix may not have the whole window: read exactly
                // what `n` still needs.
                let need = n.saturating_sub(have);
                if need >= step || (need > 0 && self.append(need, what).is_err()) {
                    return Err(e);
                }
                break;
            }
        }
        Ok(())
    }

    /// Appends the source's next `step` (at most `WINDOW`) bytes to `buf`.
    fn append(&mut self, step: u64, what: &str) -> Result<()> {
        let have = self.buf.len();
        let step = step as usize; // at most WINDOW
        self.buf
            .try_reserve(step)
            .map_err(|_| Error::Corrupt(format!("{what}: out of memory after {have} bytes")))?;
        self.buf.resize(have + step, 0);
        let read = self
            .src
            .read_at(self.buf_start + have as u64, &mut self.buf[have..]);
        if read.is_err() {
            self.buf.truncate(have);
        }
        read
    }

    pub(super) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A u64 length, then that many bytes of text. Invalid UTF-8 is replaced (U+FFFD) rather than
    /// refused, as llama.cpp accepts arbitrary bytes in token strings.
    pub(super) fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let b = self.take(n, what)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(b).into_owned(),
        })
    }

    /// Checks that the file has room for `count` items of at least `min_size` bytes each, then
    /// reserves room for them (from a source without a slice, a window of memory at most).
    pub(super) fn reserve_for<T>(
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
        // With a slice, the bytes left are there; a source without one may claim a length it
        // does not have (a download in progress, or of unknown length), so reserve no more than
        // a window of memory before the items are read (the vector grows as they are).
        let count = match self.slice {
            Some(_) => count,
            None => count.min(WINDOW / std::mem::size_of::<T>().max(1) as u64),
        };
        let n = usize::try_from(count)
            .map_err(|_| Error::Corrupt(format!("{count} {what} do not fit in memory")))?;
        v.try_reserve_exact(n)
            .map_err(|_| Error::Corrupt(format!("{count} {what} do not fit in memory")))
    }

    /// A metadata value of type `ty`; `depth` counts enclosing arrays.
    pub(super) fn value(&mut self, ty: u32, depth: u32) -> Result<Value> {
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
    pub(super) fn tensor_info(&mut self, i: u64) -> Result<TensorInfo> {
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
            // Each dimension alone too: behind a zero one, the product would not show it.
            if d > MAX_ELEMENTS {
                return Err(Error::Corrupt(format!(
                    "tensor {name} has too many elements (dimension {d})"
                )));
            }
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
