//! Where GGUF bytes come from: a memory-mapped file natively, a buffer or a download's prefix in
//! the browser.

use crate::error::{Error, Result};

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
