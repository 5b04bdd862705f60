//! Streaming detokenization: a token can end in the middle of a UTF-8 character (byte-level BPE, or
//! SentencePiece `<0xNN>` byte tokens), so the incomplete tail is held back until the next token.

use super::Tokenizer;

/// Turns token ids into text as they come, holding back incomplete UTF-8 sequences. Control tokens
/// are skipped, as in [`Tokenizer::decode`]; invalid bytes become U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct TextStream {
    pending: Vec<u8>,
    started: bool,
}

impl TextStream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token; returns the text that is now complete (often empty or one token's worth).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> String {
        if tok.is_control(id) {
            return String::new();
        }
        let mut bytes = tok.token_bytes(id);
        if !self.started && !bytes.is_empty() {
            self.started = true;
            if tok.strips_leading_space() && bytes[0] == b' ' {
                bytes = &bytes[1..];
            }
        }
        self.pending.extend_from_slice(bytes);
        self.take_complete()
    }

    /// Everything still held back, lossily (an unfinished character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    /// Whether bytes are held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn take_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // `valid` bytes were just checked to be UTF-8.
                    out.push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // Incomplete sequence at the end: keep it for the next token.
                        None => {
                            rest = &rest[valid..];
                            break;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &rest[valid + bad..];
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let len = self.pending.len();
        self.pending.drain(..len - keep);
        out
    }
}
