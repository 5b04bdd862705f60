//! Where the weight loader gets each tensor's bytes: one mechanism for a memory-mapped file
//! (natively), a `Blob` read by ranges and a download arriving in file order (in the browser).
//!
//! The loader asks for one tensor at a time, in the model's order (layer by layer). A source with
//! random access answers directly; [`FileOrderStream`] reads its stream forward and keeps the
//! tensors it had to pass to reach the one asked for until they are asked for, so the host memory it
//! holds stays around one layer's tensors (GGUF writers keep a layer's tensors together), never the
//! whole model.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::{Error, Result};

/// The bytes of tensors, asked for one at a time. Implemented by every weight source: a
/// [`ByteSource`] (through [`SliceTensors`]), a stream in file order ([`FileOrderStream`]), and the
/// web crate's `Blob` reader.
/// `'s` is the lifetime of borrowed bytes (a memory map's); streams return owned bytes.
#[allow(async_fn_in_trait)]
pub trait TensorBytes<'s> {
    /// The `t.n_bytes` bytes of tensor `t` (the loader asks for each tensor once).
    async fn tensor_bytes(&mut self, g: &Gguf, t: &TensorInfo) -> Result<Cow<'s, [u8]>>;

    /// File bytes received so far (for progress); sources with random access say `None`.
    fn bytes_received(&self) -> Option<u64> {
        None
    }
}

/// A random-access source (a memory map, a buffer): the bytes are borrowed, never copied.
pub struct SliceTensors<'a>(pub &'a dyn ByteSource);

impl<'s> TensorBytes<'s> for SliceTensors<'s> {
    async fn tensor_bytes(&mut self, g: &Gguf, t: &TensorInfo) -> Result<Cow<'s, [u8]>> {
        g.tensor_data(self.0, t)
    }
}

/// Pieces of a file in order (the body of an HTTP response, a file stream). `Ok(None)` at the end.
#[allow(async_fn_in_trait)]
pub trait ChunkReader {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>>;
}

/// The first bytes of a file whose full length is known; reads past them fail as truncated.
struct Prefix<'a> {
    data: &'a [u8],
    file_len: u64,
}

impl ByteSource for Prefix<'_> {
    fn len(&self) -> u64 {
        self.file_len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= self.data.len() as u64 => {
                buf.copy_from_slice(&self.data[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(Error::Truncated {
                what: "the header".into(),
                offset,
                len: buf.len() as u64,
                file_len: self.data.len() as u64,
            }),
        }
    }
}

/// Reads a GGUF header from the front of a stream: parses the bytes fetched so far and fetches
/// more while the header runs past them (vocabularies make headers of several MB). Returns the
/// header and the bytes read (the tensor data that follows them is not read again). `file_len` is
/// the whole file's length (a download's Content-Length, a `Blob`'s size).
pub async fn read_header<R: ChunkReader>(reader: &mut R, file_len: u64) -> Result<(Gguf, Vec<u8>)> {
    read_header_from(reader, file_len, 1 << 16).await
}

async fn read_header_from<R: ChunkReader>(
    reader: &mut R,
    file_len: u64,
    first: u64,
) -> Result<(Gguf, Vec<u8>)> {
    let mut prefix = Vec::new();
    let mut want = first;
    loop {
        while (prefix.len() as u64) < want.min(file_len) {
            match reader.next_chunk().await? {
                Some(c) => prefix.extend_from_slice(&c),
                None => break,
            }
        }
        let have = prefix.len() as u64;
        let src = Prefix {
            data: &prefix,
            file_len,
        };
        match Gguf::parse(&src) {
            Ok(g) => return Ok((g, prefix)),
            // The header goes on past what was fetched: fetch more (at least twice as much).
            Err(Error::Truncated { offset, len, .. })
                if offset.saturating_add(len) > have
                    && have < file_len
                    && have >= want.min(file_len) =>
            {
                want = offset.saturating_add(len).max(2 * want);
            }
            Err(Error::Truncated { offset, len, .. }) if have < file_len => {
                return Err(Error::Truncated {
                    what: "the header (the stream ended early)".into(),
                    offset,
                    len,
                    file_len: have,
                })
            }
            Err(e) => return Err(e),
        }
    }
}

/// Bytes reserved past a read's need for the chunk that crosses its end (streams deliver 64 KiB
/// to 1 MiB pieces); reads this large or larger take the buffer over instead of copying it.
const CHUNK_SLACK: usize = 4 << 20;

/// Tensors from a stream that yields the file front to back. The header has been parsed from a
/// prefix already: `consumed` says how many of the stream's bytes were used for it (those bytes are
/// not read again), and `leftover` holds bytes past them that were already fetched.
pub struct FileOrderStream<R> {
    reader: R,
    /// File offset of `buf[0]`.
    pos: u64,
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    start: usize,
    /// Tensors passed on the way to another one, by offset.
    parked: HashMap<u64, Vec<u8>>,
    received: u64,
    file_len: u64,
}

impl<R: ChunkReader> FileOrderStream<R> {
    /// `prefix` is the file's first `prefix.len()` bytes (those the header was parsed from).
    pub fn new(reader: R, prefix: Vec<u8>, file_len: u64) -> Self {
        FileOrderStream {
            reader,
            pos: 0,
            received: prefix.len() as u64,
            buf: prefix,
            start: 0,
            parked: HashMap::new(),
            file_len,
        }
    }

    /// Bytes parked for tensors not asked for yet.
    pub fn parked_bytes(&self) -> u64 {
        self.parked.values().map(|v| v.len() as u64).sum()
    }

    /// Makes `buf[start..]` hold at least `n` bytes; fails at the end of the stream.
    async fn fill(&mut self, n: usize, what: &str) -> Result<()> {
        if self.buf.len() - self.start < n {
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.pos += self.start as u64;
                self.start = 0;
            }
            // Room for exactly what is asked and the last chunk's overshoot: growing by doubling
            // would hold up to twice the largest tensor (the wasm heap never shrinks).
            self.buf
                .reserve_exact((n - self.buf.len()).saturating_add(CHUNK_SLACK));
        }
        while self.buf.len() - self.start < n {
            match self.reader.next_chunk().await? {
                Some(c) => {
                    self.received += c.len() as u64;
                    self.buf.extend_from_slice(&c)
                }
                None => {
                    return Err(Error::Truncated {
                        what: what.into(),
                        offset: self.pos + self.buf.len() as u64,
                        len: (n - (self.buf.len() - self.start)) as u64,
                        file_len: self.file_len,
                    })
                }
            }
        }
        Ok(())
    }

    /// Reads `len` bytes at file offset `offset` (at or after the read position).
    async fn take(&mut self, offset: u64, len: u64, what: &str) -> Result<Vec<u8>> {
        let here = self.pos + self.start as u64;
        if offset < here {
            return Err(Error::InvalidArgument(format!(
                "{what}: offset {offset} was already passed in the stream (at {here})"
            )));
        }
        // Skip what lies before (padding, tensors nobody asks for), without holding it.
        let mut skip = offset - here;
        while skip > 0 {
            self.fill(1, what).await?;
            let n = ((self.buf.len() - self.start) as u64).min(skip) as usize;
            self.start += n;
            skip -= n as u64;
        }
        let len = usize::try_from(len).map_err(|_| Error::Limits {
            what: format!("memory for {what}"),
            need: len,
            have: usize::MAX as u64,
        })?;
        self.fill(len, what).await?;
        let end = self.start + len;
        if len < CHUNK_SLACK {
            let out = self.buf[self.start..end].to_vec();
            self.start = end;
            return Ok(out);
        }
        // A large tensor: hand the buffer itself over (its bytes moved to the front) and keep
        // only what follows it, rather than holding the tensor twice.
        let rest = self.buf.split_off(end);
        let mut out = std::mem::replace(&mut self.buf, rest);
        out.drain(..self.start);
        self.pos += end as u64;
        self.start = 0;
        Ok(out)
    }
}

impl<'s, R: ChunkReader> TensorBytes<'s> for FileOrderStream<R> {
    async fn tensor_bytes(&mut self, g: &Gguf, t: &TensorInfo) -> Result<Cow<'s, [u8]>> {
        if let Some(data) = self.parked.remove(&t.offset) {
            return Ok(Cow::Owned(data));
        }
        // Tensors between the read position and `t`, in file order, are parked on the way.
        let here = self.pos + self.start as u64;
        let mut before: Vec<&TensorInfo> = g
            .tensors
            .iter()
            .filter(|u| u.offset >= here && u.offset < t.offset && u.n_bytes > 0)
            .collect();
        before.sort_by_key(|u| u.offset);
        for u in before {
            let data = self.take(u.offset, u.n_bytes, &u.name).await?;
            self.parked.insert(u.offset, data);
        }
        Ok(Cow::Owned(self.take(t.offset, t.n_bytes, &t.name).await?))
    }

    fn bytes_received(&self) -> Option<u64> {
        Some(self.received)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    struct Chunks(Vec<Vec<u8>>);
    impl ChunkReader for Chunks {
        async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>> {
            Ok(if self.0.is_empty() {
                None
            } else {
                Some(self.0.remove(0))
            })
        }
    }

    fn info(name: &str, offset: u64, n_bytes: u64) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dims: vec![n_bytes],
            ty: crate::quant::GgmlType::I8,
            offset,
            n_bytes,
        }
    }

    #[test]
    fn file_order_stream_parks_tensors_passed_on_the_way() {
        let file: Vec<u8> = (0..100u8).collect();
        let chunks = file[10..].chunks(7).map(|c| c.to_vec()).collect();
        let mut s = FileOrderStream::new(Chunks(chunks), file[..10].to_vec(), 100);
        let (a, b, c) = (info("a", 12, 5), info("b", 20, 30), info("c", 64, 36));
        let mut header = b"GGUF".to_vec();
        header.extend(3u32.to_le_bytes());
        header.extend([0u8; 16]);
        let mut g = crate::gguf::Gguf::parse(&header).unwrap();
        g.tensors = vec![a.clone(), b.clone(), c.clone()];
        let got =
            |t: &TensorInfo| file[t.offset as usize..(t.offset + t.n_bytes) as usize].to_vec();
        let want_b = got(&b);
        let b_bytes = crate::platform::block_on(s.tensor_bytes(&g, &b))
            .unwrap()
            .into_owned();
        assert_eq!(b_bytes, want_b);
        assert_eq!(s.parked_bytes(), 5);
        let c_bytes = crate::platform::block_on(s.tensor_bytes(&g, &c))
            .unwrap()
            .into_owned();
        assert_eq!(c_bytes, got(&c));
        let a_bytes = crate::platform::block_on(s.tensor_bytes(&g, &a))
            .unwrap()
            .into_owned();
        assert_eq!(a_bytes, got(&a));
        assert_eq!(s.parked_bytes(), 0);
        assert_eq!(s.bytes_received(), Some(100));
    }

    #[test]
    fn read_header_fetches_more_until_the_header_parses() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let file = std::fs::read(dir.join("tiny-gemma3.gguf")).unwrap();
        let whole = crate::gguf::Gguf::parse(&file).unwrap();
        let mut chunks = Chunks(file.chunks(1000).map(|c| c.to_vec()).collect());
        // A first guess of 1 KiB: the 16 KiB header needs several rounds.
        let (g, prefix) =
            crate::platform::block_on(read_header_from(&mut chunks, file.len() as u64, 1024))
                .unwrap();
        assert!(prefix.len() as u64 >= g.data_offset.min(file.len() as u64) - 32);
        assert_eq!(g.tensors, whole.tensors);
        assert_eq!(prefix, file[..prefix.len()]);
        let mut bad = Chunks(vec![b"GGUX0000".to_vec()]);
        assert!(matches!(
            crate::platform::block_on(read_header(&mut bad, 8)),
            Err(Error::BadMagic { .. })
        ));
    }
}
