//! Stop strings: text is passed on as it forms, except a tail that could still turn into a stop
//! string, which waits for the next piece; at a stop string the text before it is the last.

pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        StopMatcher {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    /// Takes the next piece of text; returns the text that is safe to pass on and whether a
    /// stop string was reached (then nothing after it is passed on, ever).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        self.held.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        // Keep the longest tail that is a proper prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .flat_map(|s| {
                let held = &self.held;
                (1..s.len().min(held.len() + 1))
                    .rev()
                    .filter(move |&n| s.is_char_boundary(n) && held.ends_with(&s[..n]))
                    .take(1)
            })
            .max()
            .unwrap_or(0);
        let out = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (out, false)
    }

    /// The text still held back, at the end of a generation that met no stop string.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::StopMatcher;

    /// Feeds `pieces`; returns everything passed on and whether a stop string was reached.
    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let (text, hit) = m.push(p);
            out.push_str(&text);
            if hit {
                return (out, true);
            }
        }
        out.push_str(&m.flush());
        (out, false)
    }

    #[test]
    fn stops_across_pieces_and_keeps_what_came_before() {
        assert_eq!(run(&["\n\n"], &["a b", "\n", "\nc"]), ("a b".into(), true));
        assert_eq!(run(&["END"], &["xE", "N", "Dyy"]), ("x".into(), true));
        // The earliest of several stop strings wins.
        assert_eq!(run(&["c", "b"], &["abc"]), ("a".into(), true));
    }

    #[test]
    fn a_prefix_that_does_not_complete_is_passed_on() {
        assert_eq!(run(&["END"], &["xE", "NX", "y"]), ("xENXy".into(), false));
        assert_eq!(run(&["END"], &["xEN"]), ("xEN".into(), false));
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
        assert_eq!(run(&[""], &["a"]), ("a".into(), false));
    }

    #[test]
    fn holds_back_only_a_possible_stop_prefix() {
        let mut m = StopMatcher::new(vec!["éz".into()]);
        assert_eq!(m.push("abé"), ("ab".into(), false));
        assert_eq!(m.push("y"), ("éy".into(), false));
    }
}
