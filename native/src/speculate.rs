//! The speculative-decoding flags of `run` and `chat` and the drafter they choose: the model's
//! own MTP layer, a draft model, or none.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use tandem_engine::generate::Generation;
use tandem_engine::model::{Config, Model, Session};
use tandem_engine::speculative::{check_draft_vocab, Drafter, GuardOptions, SpecStats};
use tandem_engine::{Error, Result};

use crate::load::{open_gguf, Loaded};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Draft with the model's own multi-token-prediction layer
    Mtp,
    /// Draft with the model given by --draft
    Draft,
    /// Decode token by token
    Off,
}

#[derive(Args, Clone)]
pub struct SpecArgs {
    /// Speculative decoding: drafts checked by the model in one pass; greedy, the same tokens as
    /// without, sampled, the same distribution [default: mtp where the model has an MTP layer,
    /// draft where --draft is given, else off]
    #[arg(long, value_enum)]
    pub speculative: Option<Mode>,
    /// A draft model for --speculative draft (same tokenizer as the model)
    #[arg(long)]
    pub draft: Option<PathBuf>,
    /// Most draft tokens a speculative step proposes (the length adapts to the acceptance
    /// between 1 and this, unless --draft-fixed)
    #[arg(long, default_value_t = 4)]
    pub draft_max: usize,
    /// Always draft --draft-max tokens
    #[arg(long)]
    pub draft_fixed: bool,
    /// Speculate on every step, even where plain decode steps measure faster (otherwise each
    /// generation times both as it goes and keeps to the faster; bench times speculation
    /// itself with this)
    #[arg(long)]
    pub always_speculate: bool,
}

impl SpecArgs {
    /// The speed guard of a generation with these flags.
    pub fn guard(&self) -> Option<GuardOptions> {
        (!self.always_speculate).then(GuardOptions::default)
    }
}

/// The drafter `run` and `chat` generate with.
pub struct Speculator {
    pub mode: Mode,
    draft: Option<Session>,
}

impl Speculator {
    /// Resolves the mode for the loaded model and loads the draft model, on the model's GPU,
    /// after checking its vocabulary from its header.
    pub fn new(args: &SpecArgs, target: &Loaded) -> Result<Speculator> {
        let has_mtp = target.session.has_mtp();
        let mode = args.speculative.unwrap_or(match (&args.draft, has_mtp) {
            (Some(_), _) => Mode::Draft,
            (None, true) => Mode::Mtp,
            (None, false) => Mode::Off,
        });
        let draft = match (mode, &args.draft) {
            (Mode::Draft, Some(path)) => Some(load_draft(path, &target.session)?),
            (Mode::Draft, None) => {
                return Err(Error::InvalidArgument(
                    "--speculative draft needs a draft model: --draft PATH".into(),
                ))
            }
            (_, Some(_)) => {
                return Err(Error::InvalidArgument(
                    "--draft is used with --speculative draft only".into(),
                ))
            }
            (Mode::Mtp, None) if !has_mtp => {
                return Err(Error::InvalidArgument(
                    "this model has no MTP layer: use --draft PATH or --speculative off".into(),
                ))
            }
            _ => None,
        };
        Ok(Speculator { mode, draft })
    }

    /// The drafter to generate with.
    pub fn drafter(&mut self) -> Option<Drafter<'_>> {
        match self.mode {
            Mode::Mtp => Some(Drafter::Mtp),
            Mode::Draft => self.draft.as_mut().map(Drafter::Model),
            Mode::Off => None,
        }
    }

    /// The JSON keys `run --json` adds: the mode, then the drafted and accepted tokens, the
    /// acceptance rate, tokens per verification pass and the tokens plain steps made where they
    /// were faster (null where speculation did not run).
    pub fn json(&self, g: &Generation) -> serde_json::Value {
        let s = g.speculation;
        serde_json::json!({
            "speculative": format!("{:?}", self.mode).to_lowercase(),
            "draft_tokens": s.map(|s| s.drafted),
            "accepted_tokens": s.map(|s| s.accepted),
            "acceptance_rate": s.map(|s| s.acceptance_rate()),
            "tokens_per_pass": s.map(|s| s.tokens_per_pass()),
            "plain_tokens": s.map(|s| s.plain),
        })
    }

    /// The line `run` and `chat` print about the speculation of a generation.
    pub fn summary(&self, s: &SpecStats) -> String {
        let mut line = format!(
            "speculative ({:?}): {} of {} drafts accepted ({:.1}%), {:.2} tokens a pass",
            self.mode,
            s.accepted,
            s.drafted,
            100.0 * s.acceptance_rate(),
            s.tokens_per_pass()
        );
        if s.plain > 0 {
            line += &format!("; {} tokens by plain steps, which measured faster", s.plain);
        }
        line
    }
}

/// The draft model's session, on the target's GPU with its context and batch.
fn load_draft(path: &std::path::Path, target: &Session) -> Result<Session> {
    let (src, gguf) = open_gguf(path)?;
    check_draft_vocab(&Config::from_gguf(&gguf)?, &target.model.config)?;
    let model = pollster::block_on(Model::load(
        target.model.gpu.clone(),
        &gguf,
        &src,
        &mut |_| {},
    ))?;
    pollster::block_on(Session::new(Arc::new(model), target.opts))
}
