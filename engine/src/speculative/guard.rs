//! Speculation only where it pays. A speculative round costs its draft steps and a verify pass
//! of several tokens; where a pass is bound by its dispatches rather than by reading the weights
//! (a small model on a fast GPU) or the drafts are poor, rounds make tokens more slowly than
//! plain decode steps do, whatever the acceptance. Which way it goes depends on the GPU, the
//! model and the text, so the guard measures it: a generation runs in windows of a few tokens,
//! each either speculative or plain, timed by the wall clock (what the user waits for), and
//! keeps to the faster mode, trying the other again once its figure is old. A trial costs (a
//! window of the slower mode, and the drafter's catching up when speculation resumes: the MTP
//! layer's pass over the pairs the plain steps kept, `Session::keep_mtp_pairs`), so a trial that
//! changes nothing doubles the wait before the next. The tokens are the same either
//! way (greedy) or have the same distribution (sampled).

/// How a generation makes its next tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Speculative rounds: drafts verified in one pass.
    Speculate,
    /// Plain decode steps, one token a pass (run ahead of the host, [`crate::model::Session::decode`]).
    Plain,
}

impl Mode {
    fn index(self) -> usize {
        self as usize
    }

    fn other(self) -> Mode {
        match self {
            Mode::Speculate => Mode::Plain,
            Mode::Plain => Mode::Speculate,
        }
    }
}

/// When the guard decides and how firmly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GuardOptions {
    /// Tokens a window makes before the guard decides again.
    pub window: usize,
    /// Tokens after which the mode not running is tried again (its speed moves with the text
    /// and the context's length); 0: every other window. Doubles after each trial the mode
    /// loses, up to `retry_max`.
    pub retry_after: usize,
    /// The longest wait between trials.
    pub retry_max: usize,
    /// A mode on trial must be this much faster (a fraction of the other's time a token) to stay,
    /// and the running one this much slower to be left, so that modes of about equal speed do
    /// not flap.
    pub margin: f64,
}

impl Default for GuardOptions {
    fn default() -> Self {
        GuardOptions {
            window: 16,
            retry_after: 256,
            retry_max: 4096,
            margin: 0.05,
        }
    }
}

/// The guard's state over a session's generations (kept on the session, one request going on
/// from the last): the mode running (and whether on trial), the current window's count, each
/// mode's last timing and the wait before the next trial.
#[derive(Clone, Debug)]
pub struct SpeedGuard {
    opts: GuardOptions,
    mode: Mode,
    /// The running mode is on trial: it stays after this window only if it beat the other.
    trial: bool,
    /// Tokens between trials, now.
    retry_after: usize,
    /// Tokens and seconds of the current window so far.
    made: usize,
    seconds: f64,
    /// Tokens the generation has made in timed windows.
    total: usize,
    /// Per mode: seconds a token in its last window, and `total` at the end of that window.
    timing: [Option<(f64, usize)>; 2],
}

impl SpeedGuard {
    /// A guard starting with speculation.
    pub fn new(opts: GuardOptions) -> SpeedGuard {
        SpeedGuard {
            opts,
            mode: Mode::Speculate,
            trial: false,
            retry_after: opts.retry_after,
            made: 0,
            seconds: 0.0,
            total: 0,
            timing: [None; 2],
        }
    }

    /// What it was made with.
    pub fn options(&self) -> GuardOptions {
        self.opts
    }

    /// The mode the next pass runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Records a pass of the current mode that made `tokens` in `seconds`; at the end of a
    /// window, decides the next window's mode and returns it where it changed.
    pub fn record(&mut self, tokens: usize, seconds: f64) -> Option<Mode> {
        self.made += tokens;
        self.seconds += seconds;
        if self.made < self.opts.window.max(1) {
            return None;
        }
        self.total += self.made;
        let current = self.seconds / self.made as f64;
        self.timing[self.mode.index()] = Some((current, self.total));
        (self.made, self.seconds) = (0, 0.0);
        let other = self.mode.other();
        let margin = 1.0 - self.opts.margin;
        let (switch, trial) = match self.timing[other.index()] {
            None => (true, true),
            Some((t, _)) if std::mem::take(&mut self.trial) => {
                let stays = current < t * margin;
                if stays {
                    self.retry_after = self.opts.retry_after;
                } else {
                    self.retry_after = (self.retry_after * 2).min(self.opts.retry_max);
                }
                (!stays, false)
            }
            Some((_, at)) if self.total - at >= self.retry_after => (true, true),
            Some((t, _)) => (t < current * margin, false),
        };
        if !switch {
            return None;
        }
        self.mode = other;
        self.trial = trial;
        Some(other)
    }

    /// Tokens made in timed windows so far.
    pub fn timed_tokens(&self) -> usize {
        self.total
    }

    /// Seconds a token of `mode` in its last timed window.
    pub fn seconds_per_token(&self, mode: Mode) -> Option<f64> {
        self.timing[mode.index()].map(|(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(window: usize, retry_after: usize) -> SpeedGuard {
        SpeedGuard::new(GuardOptions {
            window,
            retry_after,
            retry_max: 8 * retry_after,
            margin: 0.05,
        })
    }

    /// Feeds windows of `mode`'s speed (`spt` seconds a token, 4 tokens a pass) until the guard
    /// switches or `max` passes went by; returns the passes.
    fn run(g: &mut SpeedGuard, spt: [f64; 2], max: usize) -> usize {
        for i in 1..=max {
            let t = spt[g.mode().index()];
            if g.record(4, 4.0 * t).is_some() {
                return i;
            }
        }
        max
    }

    #[test]
    fn times_plain_steps_once_then_keeps_the_faster() {
        // Speculation twice as fast: one window of it, one of plain to time it, back for good
        // (until the retry).
        let mut g = guard(16, 1000);
        assert_eq!(g.mode(), Mode::Speculate);
        assert_eq!(run(&mut g, [1.0, 2.0], 100), 4);
        assert_eq!(g.mode(), Mode::Plain);
        assert_eq!(run(&mut g, [1.0, 2.0], 100), 4);
        assert_eq!(g.mode(), Mode::Speculate);
        assert_eq!(g.seconds_per_token(Mode::Plain), Some(2.0));
        assert_eq!(run(&mut g, [1.0, 2.0], 200), 200);
        assert_eq!(g.mode(), Mode::Speculate);

        // Plain steps faster: after the first window of each, plain stays.
        let mut g = guard(16, 1000);
        run(&mut g, [2.0, 1.0], 100);
        assert_eq!(g.mode(), Mode::Plain);
        assert_eq!(run(&mut g, [2.0, 1.0], 200), 200);
        assert_eq!(g.mode(), Mode::Plain);
    }

    #[test]
    fn tries_the_other_mode_again_once_its_figure_is_old() {
        let mut g = guard(8, 64);
        // Plain steps twice as fast: one window of speculation, plain steps from 8 to 72
        // tokens, then speculation is tried again.
        assert_eq!(run(&mut g, [2.0, 1.0], 100), 2);
        assert_eq!(run(&mut g, [2.0, 1.0], 100), 16);
        assert_eq!((g.mode(), g.total), (Mode::Speculate, 72));
        // Now it is the faster (the text became predictable): it stays until plain's figure
        // is 64 tokens old, plain is tried for a window and loses.
        assert_eq!(run(&mut g, [0.5, 1.0], 100), 16);
        assert_eq!((g.mode(), g.total), (Mode::Plain, 136));
        assert_eq!(run(&mut g, [0.5, 1.0], 100), 2);
        assert_eq!(g.mode(), Mode::Speculate);
        assert_eq!(g.seconds_per_token(Mode::Speculate), Some(0.5));
        // A trial that changed nothing: the next comes after twice as long, 128 tokens, then
        // 256, then the cap of 512.
        for wait in [128, 256, 512, 512] {
            assert_eq!(run(&mut g, [0.5, 1.0], 1000), wait / 4, "{wait}");
            assert_eq!(run(&mut g, [0.5, 1.0], 1000), 2);
        }
    }

    #[test]
    fn a_small_difference_does_not_switch() {
        // Plain 3% faster, within the 5% margin: it does not win its trial.
        let mut g = guard(4, 1000);
        assert_eq!(run(&mut g, [1.0, 0.97], 10), 1);
        assert_eq!(g.mode(), Mode::Plain);
        assert_eq!(run(&mut g, [1.0, 0.97], 10), 1);
        assert_eq!(g.mode(), Mode::Speculate);
        assert_eq!(run(&mut g, [1.0, 0.97], 200), 200);
        // 10% faster: it stays.
        let mut g = guard(4, 1000);
        run(&mut g, [1.0, 0.9], 10);
        assert_eq!(run(&mut g, [1.0, 0.9], 200), 200);
        assert_eq!(g.mode(), Mode::Plain);
    }

    #[test]
    fn retry_after_zero_alternates_every_window() {
        let mut g = guard(4, 0);
        let modes: Vec<Mode> = (0..6)
            .map(|_| {
                g.record(4, 1.0);
                g.mode()
            })
            .collect();
        use Mode::*;
        assert_eq!(
            modes,
            [Plain, Speculate, Plain, Speculate, Plain, Speculate]
        );
    }
}
