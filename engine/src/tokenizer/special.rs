//! Special and user-defined tokens, split out of the text before the tokenizer model sees it.

use std::collections::HashMap;

/// Special and user-defined tokens, matched in text longest first.
pub(super) struct SpecialMatcher {
    by_text: HashMap<Box<str>, u32>,
    /// For each first byte, the distinct byte lengths of the tokens starting with it, longest first.
    lens: Vec<Vec<usize>>,
}

impl SpecialMatcher {
    pub fn new(entries: impl Iterator<Item = (u32, String)>) -> Self {
        let mut by_text = HashMap::new();
        let mut lens: Vec<Vec<usize>> = vec![Vec::new(); 256];
        for (id, text) in entries {
            if text.is_empty() {
                continue;
            }
            let l = &mut lens[text.as_bytes()[0] as usize];
            if !l.contains(&text.len()) {
                l.push(text.len());
            }
            // The first id wins for duplicate texts, as in llama.cpp's token_to_id.
            by_text.entry(text.into_boxed_str()).or_insert(id);
        }
        for l in &mut lens {
            l.sort_unstable_by(|a, b| b.cmp(a));
        }
        SpecialMatcher { by_text, lens }
    }

    /// The longest special token at the start of `s` that `accept` allows.
    pub fn match_at(&self, s: &str, accept: impl Fn(u32) -> bool) -> Option<(u32, usize)> {
        let first = *s.as_bytes().first()?;
        for &len in &self.lens[first as usize] {
            if let Some(cand) = s.get(..len) {
                if let Some(&id) = self.by_text.get(cand) {
                    if accept(id) {
                        return Some((id, len));
                    }
                }
            }
        }
        None
    }
}
