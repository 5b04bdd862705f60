//! What `GET /metrics` reports, in Prometheus' text format: requests by status, tokens read and
//! generated (and how many of these by batched steps), slots busy, requests waiting, and the generation speed of the last few seconds.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window the tokens-per-second gauge averages over.
const WINDOW: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Metrics {
    /// Responses by HTTP status.
    requests: Mutex<BTreeMap<u16, u64>>,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    /// Tokens made by batched decode steps (several slots' steps in one forward pass).
    batched_tokens: AtomicU64,
    /// Times the GPU device was lost (and the model loaded again).
    device_losses: AtomicU64,
    /// Requests holding a slot.
    pub running: AtomicUsize,
    /// Requests admitted (running or waiting for a slot).
    pub admitted: AtomicUsize,
    /// Generated tokens by when they came, over the last [`WINDOW`].
    recent: Mutex<VecDeque<(Instant, usize)>>,
}

impl Metrics {
    pub fn count_response(&self, status: u16) {
        *lock(&self.requests).entry(status).or_default() += 1;
    }

    pub fn count_prompt(&self, tokens: usize) {
        self.prompt_tokens
            .fetch_add(tokens as u64, Ordering::Relaxed);
    }

    pub fn count_batched(&self, tokens: usize) {
        self.batched_tokens
            .fetch_add(tokens as u64, Ordering::Relaxed);
    }

    pub fn count_device_loss(&self) {
        self.device_losses.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_generated(&self, tokens: usize) {
        if tokens == 0 {
            return;
        }
        self.completion_tokens
            .fetch_add(tokens as u64, Ordering::Relaxed);
        let now = Instant::now();
        let mut recent = lock(&self.recent);
        recent.push_back((now, tokens));
        while recent
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > WINDOW)
        {
            recent.pop_front();
        }
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.admitted
            .load(Ordering::Relaxed)
            .saturating_sub(self.running.load(Ordering::Relaxed))
    }

    pub fn render(&self, slots: usize) -> String {
        let now = Instant::now();
        let recent: usize = lock(&self.recent)
            .iter()
            .filter(|(t, _)| now.duration_since(*t) <= WINDOW)
            .map(|(_, n)| n)
            .sum();
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, values: &[(String, f64)]| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in values {
                let _ = writeln!(s, "{name}{labels} {v}");
            }
        };
        let by_status: Vec<(String, f64)> = lock(&self.requests)
            .iter()
            .map(|(code, n)| (format!("{{status=\"{code}\"}}"), *n as f64))
            .collect();
        let one = |v: f64| [(String::new(), v)];
        metric(
            "tandem_requests_total",
            "counter",
            "HTTP responses by status.",
            &by_status,
        );
        metric(
            "tandem_prompt_tokens_total",
            "counter",
            "Prompt tokens of the requests that reached a slot.",
            &one(self.prompt_tokens.load(Ordering::Relaxed) as f64),
        );
        metric(
            "tandem_completion_tokens_total",
            "counter",
            "Tokens generated.",
            &one(self.completion_tokens.load(Ordering::Relaxed) as f64),
        );
        metric(
            "tandem_batched_tokens_total",
            "counter",
            "Tokens made by batched decode steps (several slots' steps in one forward pass).",
            &one(self.batched_tokens.load(Ordering::Relaxed) as f64),
        );
        metric(
            "tandem_device_losses_total",
            "counter",
            "Times the GPU device was lost (each followed by loading the model again).",
            &one(self.device_losses.load(Ordering::Relaxed) as f64),
        );
        metric(
            "tandem_requests_running",
            "gauge",
            "Requests generating in a slot.",
            &one(self.running.load(Ordering::Relaxed) as f64),
        );
        metric(
            "tandem_queue_depth",
            "gauge",
            "Requests waiting for a slot.",
            &one(self.queued() as f64),
        );
        metric(
            "tandem_slots",
            "gauge",
            "KV-cache slots (--parallel).",
            &one(slots as f64),
        );
        metric(
            "tandem_tokens_per_second",
            "gauge",
            "Tokens generated per second over the last 10 seconds, all slots together.",
            &one(recent as f64 / WINDOW.as_secs_f64()),
        );
        s
    }
}

/// A lock that a panicking holder cannot poison for the others (the data are counters).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
