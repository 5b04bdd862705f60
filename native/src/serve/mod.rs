//! `tandem serve`: an OpenAI-compatible HTTP server (axum on tokio).
//!
//! One engine thread owns the model and the GPU work of every slot (scheduler.rs); the HTTP
//! handlers (http.rs) read requests in OpenAI's format (openai.rs), queue them for it through a
//! channel and stream its replies back. Stop strings are matched in stop.rs, `/metrics` counted
//! in metrics.rs.
//!
//! When the GPU device is lost, the engine thread fails the replies in flight, `/health` answers
//! 503 with the reason, and the thread loads the model again on a new device; the requests that
//! were waiting (and those that come meanwhile) are served once it has.

mod http;
mod metrics;
mod openai;
mod scheduler;
mod stop;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use tandem_engine::{Error, Result};

use crate::args::ModelArgs;
use crate::load;
use http::App;
use metrics::Metrics;
use scheduler::{Command, Job, Outcome, Scheduler};

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on (0.0.0.0 for every interface)
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free one; the address is printed)
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Require `Authorization: Bearer KEY` on every route but /health
    #[arg(long)]
    pub api_key: Option<String>,
    /// The model's name in the API [default: the file name without .gguf]
    #[arg(long)]
    pub alias: Option<String>,
    /// KV-cache slots: requests generated at the same time (each holds its own context; the
    /// greedy ones decode together, one batched forward pass a step)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub parallel: u32,
    /// Requests that may wait for a slot; past that a request gets a 503
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Serve POST /debug/lose-device, which destroys the GPU device as a driver reset would, to
    /// test how clients and a load balancer ride out a lost GPU (the replies in flight fail,
    /// /health answers 503 until the model is loaded again on a new device)
    #[arg(long)]
    pub debug_endpoints: bool,
}

/// Whether the server can generate: `None` when it can, else why not (`/health` says it).
#[derive(Default)]
pub struct Health(Mutex<Option<String>>);

impl Health {
    pub fn problem(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn set(&self, problem: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }
}

/// Seconds since 1970 (OpenAI's `created`).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the engine thread hands the server once the model is loaded.
struct Ready {
    path: std::path::PathBuf,
    tokenizer: Arc<tandem_engine::tokenizer::Tokenizer>,
    recommended: tandem_engine::sampling::Sampling,
    ctx: u32,
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .or_else(|_| {
            std::net::ToSocketAddrs::to_socket_addrs(&(args.host.as_str(), args.port))
                .ok()
                .and_then(|mut a| a.next())
                .ok_or(())
        })
        .map_err(|_| Error::InvalidArgument(format!("cannot listen on host {:?}", args.host)))?;
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    let (jobs, job_rx) = std::sync::mpsc::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // The engine (the wgpu device, the model, the sessions) lives on its own thread; handlers
    // reach it only through `jobs`.
    let engine = {
        let (model_args, parallel) = (args.model.clone(), args.parallel);
        let (metrics, health) = (metrics.clone(), health.clone());
        std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || run_engine(&model_args, parallel, &job_rx, ready_tx, &metrics, &health))
            .map_err(|e| Error::io("starting the engine thread", e))?
    };
    let ready = ready_rx
        .recv()
        .map_err(|_| Error::Gpu("the engine thread stopped while loading".into()))??;
    let model_id = args.alias.clone().unwrap_or_else(|| {
        ready
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let template = ready.tokenizer.chat_template_renderer().transpose()?;
    let app = Arc::new(App {
        model_id,
        tokenizer: ready.tokenizer,
        template,
        recommended: ready.recommended,
        ctx: ready.ctx,
        api_key: args.api_key.clone(),
        parallel: args.parallel as usize,
        queue: args.queue,
        jobs,
        metrics,
        health,
        debug_endpoints: args.debug_endpoints,
        started: unix_now(),
        next_id: AtomicU64::new(0),
    });
    let runtime = tokio::runtime::Runtime::new().map_err(|e| Error::io("starting tokio", e))?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io(format!("listening on {addr}"), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::io("reading the listening address", e))?;
        eprintln!(
            "serving {} on http://{local} ({} slots, context {} each)",
            app.model_id, app.parallel, app.ctx
        );
        axum::serve(listener, http::router(app))
            .with_graceful_shutdown(shutdown())
            .await
            .map_err(|e| Error::io("serving", e))
    })?;
    // Every connection has closed and with it every sender of jobs: the engine thread answers
    // what it holds and ends.
    engine
        .join()
        .map_err(|_| Error::Gpu("the engine thread panicked".into()))?;
    eprintln!("stopped");
    Ok(())
}

/// The model on the GPU with a session for each of `parallel` slots.
fn load(
    args: &ModelArgs,
    parallel: u32,
) -> Result<(load::LoadedModel, tandem_engine::model::SessionSet)> {
    let m = load::load_model(args, parallel)?;
    let sessions = load::session_set(&m.model, args, parallel)?;
    Ok((m, sessions))
}

/// The engine thread: loads the model, tells `ready` how it went, then serves `commands` until
/// they end, loading the model again on a new device whenever the device is lost.
fn run_engine(
    args: &ModelArgs,
    parallel: u32,
    commands: &Receiver<Command>,
    ready: std::sync::mpsc::Sender<Result<Ready>>,
    metrics: &Arc<Metrics>,
    health: &Arc<Health>,
) {
    let (m, sessions) = match load(args, parallel) {
        Ok(l) => l,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let tokenizer = Arc::new(m.tokenizer);
    let _ = ready.send(Ok(Ready {
        path: m.path,
        tokenizer: tokenizer.clone(),
        recommended: m.recommended,
        ctx: sessions.session(0).opts.ctx,
    }));
    let mut sessions = Some(sessions);
    let mut waiting = VecDeque::new();
    loop {
        let slots = match sessions.take() {
            Some(s) => s,
            None => match load(args, parallel) {
                Ok((_, s)) => {
                    eprintln!("the model is loaded again; serving");
                    s
                }
                Err(e) => {
                    let problem = format!(
                        "the GPU device was lost and loading the model again failed ({e}); \
                         retrying in {} s",
                        RELOAD_RETRY.as_secs()
                    );
                    eprintln!("{problem}");
                    health.set(Some(problem.clone()));
                    // Nobody waits for a retry that may never succeed.
                    if !fail_all(commands, &mut waiting, &problem) {
                        return;
                    }
                    std::thread::sleep(RELOAD_RETRY);
                    continue;
                }
            },
        };
        health.set(None);
        let scheduler = Scheduler::new(slots, tokenizer.clone(), metrics.clone(), health.clone());
        match scheduler.run(commands, waiting) {
            Outcome::Closed => return,
            Outcome::DeviceLost { waiting: w } => waiting = w,
        }
    }
}

/// How long the engine waits before it tries again to load the model after a failed reload.
const RELOAD_RETRY: Duration = Duration::from_secs(5);

/// Fails the `waiting` jobs and those in the channel with `problem`; false when the channel
/// has closed (the server is stopping).
fn fail_all(commands: &Receiver<Command>, waiting: &mut VecDeque<Job>, problem: &str) -> bool {
    let fail = |job: Job| scheduler::answer(job, scheduler::Event::Failed(problem.to_string()));
    waiting.drain(..).for_each(fail);
    loop {
        match commands.try_recv() {
            Ok(Command::Generate(job)) => fail(job),
            Ok(Command::LoseDevice) => {}
            Err(std::sync::mpsc::TryRecvError::Empty) => return true,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return false,
        }
    }
}

/// Resolves at Ctrl-C or SIGTERM: the server stops accepting and lets in-flight replies finish.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    eprintln!("shutting down: no new connections; finishing the replies in flight");
}
