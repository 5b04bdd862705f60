//! SentencePiece BPE (`tokenizer.ggml.model = "llama"`), as llama.cpp's `llm_tokenizer_spm`: start
//! from one symbol per character, repeatedly merge the adjacent pair whose joined text is the token
//! with the highest score (ties: leftmost), then emit each symbol's token, or its bytes as `<0xNN>`
//! tokens when it has none.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::token_type;
use crate::error::Result;

/// SentencePiece's visible space.
const SPACE: char = '\u{2581}';

/// `<0x0A>` -> 0x0A.
pub(super) fn parse_byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// Appends the token's text with `▁` turned back into a space.
pub(super) fn unescape_into(t: &str, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    for c in t.chars() {
        let c = if c == SPACE { ' ' } else { c };
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
}

pub(super) struct Spm {
    scores: Vec<f32>,
    byte_token: [Option<u32>; 256],
}

#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

impl Spm {
    pub(super) fn new(tokens: &[String], types: &[i32], scores: Vec<f32>) -> Result<Spm> {
        let mut byte_token = [None; 256];
        for (i, t) in tokens.iter().enumerate() {
            if types[i] == token_type::BYTE {
                if let Some(b) = parse_byte_token(t) {
                    byte_token[b as usize].get_or_insert(i as u32);
                }
            }
        }
        Ok(Spm { scores, byte_token })
    }

    /// Tokenizes one fragment of plain text (no special tokens in it).
    pub(super) fn encode(
        &self,
        raw: &str,
        token_to_id: &HashMap<String, u32>,
        unk: Option<u32>,
        out: &mut Vec<u32>,
    ) {
        let text: String = raw
            .chars()
            .map(|c| if c == ' ' { SPACE } else { c })
            .collect();
        let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
        for (i, (start, c)) in text.char_indices().enumerate() {
            syms.push(Sym {
                start,
                len: c.len_utf8(),
                prev: i.wrapping_sub(1),
                next: i + 1,
            });
        }
        let n = syms.len();
        let mut heap = BinaryHeap::new();
        let try_add = |syms: &[Sym], heap: &mut BinaryHeap<Bigram>, left: usize, right: usize| {
            if left >= n || right >= n {
                return;
            }
            let (a, b) = (syms[left], syms[right]);
            let joined = &text[a.start..b.start + b.len];
            if let Some(&id) = token_to_id.get(joined) {
                heap.push(Bigram {
                    score: self.scores.get(id as usize).copied().unwrap_or(0.0),
                    left,
                    right,
                    size: joined.len(),
                });
            }
        };
        for i in 1..n {
            try_add(&syms, &mut heap, i - 1, i);
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (syms[bg.left], syms[bg.right]);
            // Stale: one side was merged away, or grew since this pair was queued.
            if l.len == 0 || r.len == 0 || l.len + r.len != bg.size || l.next != bg.right {
                continue;
            }
            syms[bg.left].len += r.len;
            syms[bg.right].len = 0;
            syms[bg.left].next = r.next;
            if r.next < n {
                syms[r.next].prev = bg.left;
            }
            try_add(&syms, &mut heap, syms[bg.left].prev, bg.left);
            try_add(&syms, &mut heap, bg.left, syms[bg.left].next);
        }
        let mut i = 0;
        while i < n {
            let s = syms[i];
            let piece = &text[s.start..s.start + s.len];
            match token_to_id.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for &b in piece.as_bytes() {
                        if let Some(id) = self.byte_token[b as usize].or(unk) {
                            out.push(id);
                        }
                    }
                }
            }
            i = s.next;
        }
    }
}
