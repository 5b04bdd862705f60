//! `tandem serve`: an OpenAI-compatible HTTP server (axum on tokio).
//!
//! One engine thread owns the model and the GPU work of every slot (scheduler.rs); the HTTP
//! handlers (http.rs) read requests in OpenAI's format (openai.rs), queue them for it through a
//! channel and stream its replies back. Stop strings are matched in stop.rs, `/metrics` counted
//! in metrics.rs.

mod http;
mod metrics;
mod openai;
mod scheduler;
mod stop;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use clap::Args;
use tandem_engine::{Error, Result};

use crate::args::ModelArgs;
use crate::load;
use http::App;
use metrics::Metrics;
use scheduler::Scheduler;

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
    /// KV-cache slots: requests generated at the same time (each holds its own context)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub parallel: u32,
    /// Requests that may wait for a slot; past that a request gets a 503
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
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
    let (jobs, job_rx) = std::sync::mpsc::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // The engine (the wgpu device, the model, the sessions) lives on its own thread; handlers
    // reach it only through `jobs`.
    let engine = {
        let (model_args, parallel, metrics) = (args.model.clone(), args.parallel, metrics.clone());
        std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || {
                let loaded = (|| {
                    let m = load::load_model(&model_args)?;
                    let sessions = (0..parallel)
                        .map(|_| load::session(&m.model, &model_args))
                        .collect::<Result<Vec<_>>>()?;
                    Ok::<_, Error>((m, sessions))
                })();
                let (m, sessions) = match loaded {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let tokenizer = Arc::new(m.tokenizer);
                let _ = ready_tx.send(Ok(Ready {
                    path: m.path,
                    tokenizer: tokenizer.clone(),
                    recommended: m.recommended,
                    ctx: sessions[0].opts.ctx,
                }));
                Scheduler::new(sessions, tokenizer, metrics).run(job_rx);
            })
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
