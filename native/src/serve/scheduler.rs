//! The engine thread: it owns the GPU work of every slot (one [`Session`] each of a
//! [`SessionSet`], on one loaded model) and takes jobs from the HTTP handlers through a channel,
//! answering through each job's own channel.
//!
//! A lost GPU device (a driver reset, an unplugged GPU, or `POST /debug/lose-device`) fails the
//! replies in flight; [`Scheduler::run`] then hands back the requests still waiting, and the
//! engine thread (mod.rs) loads the model again on a new device and goes on with them.
//!
//! Scheduling is continuous batching: each turn of the loop starts waiting jobs in free slots (a
//! prefill each), then runs one step of every running slot ([`Scheduler::step_all`]), so a new
//! prompt joins between two steps of the others. The decode steps of the slots run as one
//! batched forward pass ([`SessionSet::decode`], bench/serve/BATCHING.md) that reads every
//! weight once for all of them, each row sampled by its own request's sampler; a slot running
//! alone runs its own pass (its session's pass runs ahead of the host), as does a speculating
//! one.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use tandem_engine::generate::{GenerateOptions, Generation, Generator};
use tandem_engine::gpu::Gpu;
use tandem_engine::model::{Session, SessionSet};
use tandem_engine::sampling::Sampler;
use tandem_engine::tokenizer::Tokenizer;
use tandem_engine::Error;
use tokio::sync::mpsc::UnboundedSender;

use super::metrics::Metrics;
use super::stop::StopMatcher;
use super::Health;

/// What the HTTP side asks of the engine thread.
pub enum Command {
    Generate(Job),
    /// Destroys the GPU device, as a driver reset would (`POST /debug/lose-device`).
    LoseDevice,
}

/// How [`Scheduler::run`] ended.
pub enum Outcome {
    /// The server stopped taking requests and every admitted one is answered.
    Closed,
    /// The device was lost (`/health` says so): the replies in flight have failed; these
    /// requests still wait.
    DeviceLost { waiting: VecDeque<Job> },
}

/// A request for the engine thread.
pub struct Job {
    pub prompt: Vec<u32>,
    pub opts: GenerateOptions,
    pub stop: Vec<String>,
    /// Where the reply goes; closed when the client has gone, which ends the generation.
    pub events: UnboundedSender<Event>,
    /// The job's place among the admitted requests, given back when the job is dropped.
    pub ticket: Ticket,
}

pub enum Event {
    /// The next piece of the reply's text.
    Text(String),
    /// The reply is complete.
    Done(Generation),
    /// The generation failed (a GPU error); the text sent so far is all there is.
    Failed(String),
}

/// A place among the requests that hold a slot or wait for one (at most `--parallel` plus
/// `--queue` of them).
pub struct Ticket(Arc<Metrics>);

impl Ticket {
    /// A place, if fewer than `limit` requests hold one.
    pub fn take(metrics: &Arc<Metrics>, limit: usize) -> Option<Ticket> {
        metrics
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Ticket(metrics.clone()))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct Scheduler {
    /// One session a slot. Its KV cache keeps the last reply's tokens, so a request that shares
    /// their prefix (the next turn of a conversation, the same system prompt) re-reads only the
    /// rest.
    sessions: SessionSet,
    /// The reply each slot is generating.
    running: Vec<Option<Running>>,
    tokenizer: Arc<Tokenizer>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    /// The device of every slot's model.
    gpu: Arc<Gpu>,
    /// A GPU call failed since the device was last checked: it may be lost.
    suspect: bool,
}

struct Running {
    job: Job,
    gen: Generator,
    stop: StopMatcher,
    /// Tokens already counted in the metrics.
    counted: usize,
}

impl Scheduler {
    /// The slots, one a session; `sessions` is not empty.
    pub fn new(
        sessions: SessionSet,
        tokenizer: Arc<Tokenizer>,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        let gpu = sessions.session(0).model.gpu.clone();
        Scheduler {
            running: (0..sessions.len()).map(|_| None).collect(),
            sessions,
            tokenizer,
            metrics,
            health,
            gpu,
            suspect: false,
        }
    }

    /// Serves `waiting`, then jobs from the channel, until the channel closes (the server
    /// stopped taking requests) and every admitted job is answered, or until the device is lost.
    pub fn run(mut self, commands: &Receiver<Command>, mut waiting: VecDeque<Job>) -> Outcome {
        loop {
            if waiting.is_empty() && self.running.iter().all(Option::is_none) {
                match commands.recv() {
                    Ok(c) => self.take(c, &mut waiting),
                    Err(_) => return Outcome::Closed,
                }
            }
            for c in commands.try_iter() {
                self.take(c, &mut waiting);
            }
            if std::mem::take(&mut self.suspect) {
                if let Some(reason) = self.gpu.lost() {
                    // Unhealthy before any client hears of the loss.
                    let problem =
                        format!("the GPU device was lost ({reason}); loading the model again");
                    eprintln!("{problem}");
                    self.health.set(Some(problem));
                    self.metrics.count_device_loss();
                    self.fail_running(&reason);
                    return Outcome::DeviceLost { waiting };
                }
            }
            // A client that left while waiting costs no GPU time.
            waiting.retain(|j: &Job| !j.events.is_closed());
            while !waiting.is_empty() {
                let Some(slot) = self.free_slot(&waiting[0].prompt) else {
                    break;
                };
                let job = waiting.pop_front().expect("not empty");
                if let Err(job) = self.start(slot, job) {
                    // The device is lost: the job waits for the model on a new one.
                    waiting.push_front(*job);
                    break;
                }
            }
            self.step_all();
        }
    }

    /// A job joins `waiting`; `LoseDevice` destroys the device.
    fn take(&mut self, c: Command, waiting: &mut VecDeque<Job>) {
        match c {
            Command::Generate(job) => waiting.push_back(job),
            Command::LoseDevice => {
                eprintln!("destroying the GPU device (POST /debug/lose-device)");
                self.gpu.device.destroy();
                // Noticed at once where no work is in flight, else by the next steps, which fail.
                self.suspect = true;
            }
        }
    }

    /// Fails every running reply: the device is lost.
    fn fail_running(&mut self, reason: &str) {
        for running in &mut self.running {
            if let Some(r) = running.take() {
                self.metrics.running.fetch_sub(1, Ordering::SeqCst);
                answer(r.job, Event::Failed(lost_message(reason)));
            }
        }
    }

    /// The free slot whose cache shares the longest prefix with `prompt`.
    fn free_slot(&self, prompt: &[u32]) -> Option<usize> {
        let common = |s: &Session| {
            s.history()
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count()
        };
        (0..self.running.len())
            .filter(|&i| self.running[i].is_none())
            .max_by_key(|&i| (common(self.sessions.session(i)), usize::MAX - i))
    }

    /// Feeds the job's prompt in slot `i`; gives the job back if the device is lost.
    fn start(&mut self, i: usize, job: Job) -> Result<(), Box<Job>> {
        self.metrics.count_prompt(job.prompt.len());
        let session = self.sessions.session_mut(i);
        let started = pollster::block_on(Generator::start(session, None, &job.prompt, &job.opts));
        match started {
            Ok(gen) => {
                self.running[i] = Some(Running {
                    stop: StopMatcher::new(job.stop.clone()),
                    job,
                    gen,
                    counted: 0,
                });
                self.metrics.running.fetch_add(1, Ordering::SeqCst);
            }
            Err(Error::DeviceLost(_)) => {
                self.suspect = true;
                return Err(Box::new(job));
            }
            Err(e) => {
                self.sessions.session_mut(i).truncate(0);
                self.suspect = true;
                answer(job, Event::Failed(e.to_string()));
            }
        }
        Ok(())
    }

    /// One step of every running slot: hands out the tokens its last pass made, then makes its
    /// next ones, in one batched pass when two or more can; a reply that ended (an end token, a
    /// stop string, the token budget, the client gone) leaves its slot.
    fn step_all(&mut self) {
        // Slots whose next token comes from the batched pass, and slots that run their own.
        let (mut batch, mut own) = (Vec::new(), Vec::new());
        for i in 0..self.running.len() {
            let Some(r) = &mut self.running[i] else {
                continue;
            };
            let more = !r.job.events.is_closed() && {
                let (events, stop) = (&r.job.events, &mut r.stop);
                let session = self.sessions.session(i);
                r.gen
                    .hand_out(session, &self.tokenizer, |p| pass_on(events, stop, p))
            };
            let n = r.gen.tokens().len();
            self.metrics.count_generated(n - r.counted);
            r.counted = n;
            if !more {
                self.finish(i);
            } else if r.gen.batchable() {
                batch.push(i);
            } else {
                own.push(i);
            }
        }
        // Alone, a slot's own pass runs ahead of the host, which a batched step does not.
        if batch.len() == 1 {
            own.append(&mut batch);
        }
        if !batch.is_empty() {
            let mut rows: Vec<(usize, &mut Sampler)> = self
                .running
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| batch.contains(i))
                .filter_map(|(i, r)| Some((i, r.as_mut()?.gen.sampler())))
                .collect();
            match pollster::block_on(self.sessions.decode(&mut rows)) {
                Ok(ids) => {
                    self.metrics.count_batched(ids.len());
                    for (&i, id) in batch.iter().zip(ids) {
                        if let Some(r) = &mut self.running[i] {
                            r.gen.take(id);
                        }
                    }
                }
                Err(e) => batch.iter().for_each(|&i| self.failed(i, &e)),
            }
        }
        for i in own {
            let Some(r) = &mut self.running[i] else {
                continue;
            };
            let session = self.sessions.session_mut(i);
            if let Err(e) = pollster::block_on(r.gen.advance(session, None)) {
                self.failed(i, &e);
            }
        }
    }

    /// Slot `i`'s reply is complete: the text held back, then the end.
    fn finish(&mut self, i: usize) {
        let Running {
            job, gen, mut stop, ..
        } = self.running[i].take().expect("running");
        let g = gen.finish(|p| pass_on(&job.events, &mut stop, p));
        let rest = stop.flush();
        if !rest.is_empty() {
            let _ = job.events.send(Event::Text(rest));
        }
        self.metrics.running.fetch_sub(1, Ordering::SeqCst);
        answer(job, Event::Done(g));
    }

    /// Slot `i`'s pass failed with `e`: a lost device fails every reply once `/health` says why
    /// (`run`); any other error fails this reply and clears its session.
    fn failed(&mut self, i: usize, e: &Error) {
        self.suspect = true;
        if matches!(e, Error::DeviceLost(_)) {
            return;
        }
        if let Some(r) = self.running[i].take() {
            self.sessions.session_mut(i).truncate(0);
            self.metrics.running.fetch_sub(1, Ordering::SeqCst);
            answer(r.job, Event::Failed(e.to_string()));
        }
    }
}

/// What a client hears when the device is lost under its reply.
fn lost_message(reason: &str) -> String {
    format!("the GPU device was lost ({reason}); the server is loading the model again: retry in a moment")
}

/// Sends a job's last event, after giving back its place: a client that sends its next request
/// as soon as this one is answered finds the place free.
pub fn answer(job: Job, last: Event) {
    let Job { events, ticket, .. } = job;
    drop(ticket);
    let _ = events.send(last);
}

/// Sends the text of `piece` that no stop string can still claim; returns whether to go on.
fn pass_on(events: &UnboundedSender<Event>, stop: &mut StopMatcher, piece: &str) -> bool {
    let (text, hit) = stop.push(piece);
    if !text.is_empty() {
        let _ = events.send(Event::Text(text));
    }
    !hit && !events.is_closed()
}
