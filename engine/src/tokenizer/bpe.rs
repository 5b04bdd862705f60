//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): regex pre-tokenizer, GPT-2 byte mapping,
//! merges applied lowest rank first (ties: leftmost), as llama.cpp's `llm_tokenizer_bpe`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use fancy_regex::Regex;

use crate::error::{Error, Result};

// Pre-tokenizer regexes, from llama.cpp's `llm_tokenizer_bpe` (llama-vocab.cpp). Each list is applied
// in order; every regex splits each piece of the previous step into matches and the text between.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const DEFAULT: &[&str] = &[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"];

/// The regex list for a `tokenizer.ggml.pre` name, and whether the whole piece is looked up in the
/// vocabulary before merging (llama.cpp's `ignore_merges`).
fn pre_tokenizer(pre: &str) -> Option<(Vec<&'static str>, bool)> {
    Some(match pre {
        "default" => (DEFAULT.to_vec(), false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" | "dbrx" | "smaug-bpe" => {
            (vec![LLAMA3], pre != "dbrx" && pre != "smaug-bpe")
        }
        "qwen2" | "stablelm2" | "hunyuan" | "megrez" | "deepseek-r1-qwen" => (vec![QWEN2], false),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" => {
            (vec![r"\p{N}", GPT2], false)
        }
        "gpt-2" | "gpt2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v1-en"
        | "jina-v2-es" | "jina-v2-de" | "jina-v2-code" | "roberta-bpe" | "mpt" | "olmo"
        | "jais" | "trillion" => (vec![GPT2], false),
        _ => return None,
    })
}

/// Whether llama.cpp adds BOS by default (without `tokenizer.ggml.add_bos_token`) for this pre.
pub(super) fn pre_adds_bos(pre: &str) -> bool {
    matches!(
        pre,
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral"
    )
}

/// GPT-2's `bytes_to_unicode`: printable bytes map to themselves, the rest to U+0100 onwards.
fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..256u32 {
        let printable = (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
        table[b as usize] = if printable {
            char::from_u32(b).unwrap_or('\0')
        } else {
            let c = char::from_u32(next).unwrap_or('\0');
            next += 1;
            c
        };
    }
    table
}

/// The inverse of [`byte_to_char_table`]: for code points below 0x144, the byte or -1.
pub(super) fn char_to_byte_table() -> Vec<i16> {
    let mut rev = vec![-1i16; 0x144];
    for (b, c) in byte_to_char_table().iter().enumerate() {
        rev[*c as usize] = b as i16;
    }
    rev
}

/// Appends the bytes a byte-level token stands for (`rev` from [`char_to_byte_table`]).
/// Characters outside the byte mapping (text of tokens added as-is) are kept as their UTF-8.
pub(super) fn unmap_bytes(token: &str, rev: &[i16], out: &mut Vec<u8>) {
    for c in token.chars() {
        let byte = rev.get(c as usize).and_then(|&b| u8::try_from(b).ok());
        match byte {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

pub(super) struct Bpe {
    regexes: Vec<Regex>,
    ignore_merges: bool,
    byte_char: [char; 256],
    /// Token id of each byte's mapped character.
    byte_token: [Option<u32>; 256],
    /// (left id, right id) -> (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
}

impl Bpe {
    pub(super) fn new(
        pre: &str,
        token_to_id: &HashMap<String, u32>,
        merges: &[String],
    ) -> Result<Bpe> {
        let (patterns, ignore_merges) = pre_tokenizer(pre).ok_or_else(|| {
            Error::Tokenizer(format!(
                "pre-tokenizer {pre:?} (tokenizer.ggml.pre) is not supported; Tandem knows default, gpt2, llama-bpe, qwen2, smollm, starcoder and their aliases"
            ))
        })?;
        let regexes = patterns
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| {
                    Error::Tokenizer(format!("pre-tokenizer {pre:?}: regex {p:?}: {e:?}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let byte_char = byte_to_char_table();
        let mut byte_token = [None; 256];
        let mut buf = [0u8; 4];
        for (b, c) in byte_char.iter().enumerate() {
            byte_token[b] = token_to_id.get(&*c.encode_utf8(&mut buf)).copied();
        }
        let mut ranks = HashMap::with_capacity(merges.len());
        let mut joined = String::new();
        for (rank, m) in merges.iter().enumerate() {
            // A merge is "left right"; a left part may itself start with a space-like char, so split
            // at the first space after the first character.
            let Some(first) = m.chars().next() else {
                continue;
            };
            let Some(sp) = m[first.len_utf8()..].find(' ') else {
                continue;
            };
            let (left, right) = (&m[..first.len_utf8() + sp], &m[first.len_utf8() + sp + 1..]);
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            if let (Some(&l), Some(&r), Some(&j)) = (
                token_to_id.get(left),
                token_to_id.get(right),
                token_to_id.get(joined.as_str()),
            ) {
                ranks.entry((l, r)).or_insert((rank as u32, j));
            }
        }
        Ok(Bpe {
            regexes,
            ignore_merges,
            byte_char,
            byte_token,
            merges: ranks,
        })
    }

    /// Splits `text` into pre-tokenizer pieces (byte ranges).
    pub(super) fn split(&self, text: &str) -> Result<Vec<(usize, usize)>> {
        let mut pieces = vec![(0, text.len())];
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for &(s, e) in &pieces {
                let sub = &text[s..e];
                let mut last = 0;
                for m in re.find_iter(sub) {
                    let m = m.map_err(|e| Error::Tokenizer(format!("pre-tokenizer: {e}")))?;
                    if m.start() > last {
                        next.push((s + last, s + m.start()));
                    }
                    if m.end() > m.start() {
                        next.push((s + m.start(), s + m.end()));
                    }
                    last = m.end();
                }
                if last < sub.len() {
                    next.push((s + last, e));
                }
            }
            pieces = next;
        }
        Ok(pieces)
    }

    pub(super) fn encode(
        &self,
        text: &str,
        token_to_id: &HashMap<String, u32>,
        unk: Option<u32>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let mut mapped = String::new();
        let mut syms: Vec<Sym> = Vec::new();
        let mut heap = BinaryHeap::new();
        for (s, e) in self.split(text)? {
            let piece = &text.as_bytes()[s..e];
            if self.ignore_merges {
                mapped.clear();
                mapped.extend(piece.iter().map(|&b| self.byte_char[b as usize]));
                if let Some(&id) = token_to_id.get(mapped.as_str()) {
                    out.push(id);
                    continue;
                }
            }
            self.merge_word(piece, unk, &mut syms, &mut heap, out);
        }
        Ok(())
    }

    fn merge_word(
        &self,
        piece: &[u8],
        unk: Option<u32>,
        syms: &mut Vec<Sym>,
        heap: &mut BinaryHeap<Reverse<(u32, usize, u32, u32)>>,
        out: &mut Vec<u32>,
    ) {
        syms.clear();
        heap.clear();
        for (i, &b) in piece.iter().enumerate() {
            syms.push(Sym {
                id: self.byte_token[b as usize],
                prev: i.wrapping_sub(1),
                next: i + 1,
            });
        }
        let n = syms.len();
        let push_pair = |syms: &[Sym], heap: &mut BinaryHeap<_>, l: usize| {
            if l >= n {
                return;
            }
            let r = syms[l].next;
            if r >= n {
                return;
            }
            if let (Some(a), Some(b)) = (syms[l].id, syms[r].id) {
                if let Some(&(rank, _)) = self.merges.get(&(a, b)) {
                    heap.push(Reverse((rank, l, a, b)));
                }
            }
        };
        for i in 0..n.saturating_sub(1) {
            push_pair(syms, heap, i);
        }
        while let Some(Reverse((_, l, a, b))) = heap.pop() {
            let r = syms[l].next;
            // Stale entry: the left symbol was merged away, changed, or its neighbour changed.
            if r >= n || syms[l].id != Some(a) || syms[r].id != Some(b) {
                continue;
            }
            let Some(&(_, merged)) = self.merges.get(&(a, b)) else {
                continue;
            };
            syms[l].id = Some(merged);
            let rn = syms[r].next;
            syms[l].next = rn;
            syms[r].prev = usize::MAX - 1; // dead
            syms[r].id = None;
            if rn < n {
                syms[rn].prev = l;
            }
            let p = syms[l].prev;
            if p < n {
                push_pair(syms, heap, p);
            }
            push_pair(syms, heap, l);
        }
        let mut i = 0;
        while i < n {
            match syms[i].id {
                Some(id) => out.push(id),
                None => {
                    if let Some(u) = unk {
                        out.push(u);
                    }
                }
            }
            i = syms[i].next;
        }
    }
}

struct Sym {
    /// `None`: a byte with no token (or a dead symbol).
    id: Option<u32>,
    /// `usize::MAX` for the first symbol; `usize::MAX - 1` once merged into its left neighbour.
    prev: usize,
    next: usize,
}
