//! Chat templates: the Jinja source in `tokenizer.chat_template`, rendered with minijinja the way
//! Hugging Face's `apply_chat_template` renders it (jinja2 with `trim_blocks`, `lstrip_blocks`, loop
//! controls, `raise_exception`, a Python-style `tojson`, `strftime_now`, and Python string methods
//! such as `.strip()` and `.startswith()` through minijinja-contrib's pycompat).

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, ValueOrKwargs};
use minijinja::{Environment, ErrorKind, Value};
use serde::Serialize;

use crate::error::{Error, Result};

mod date;
mod json;

use date::{strftime, today};
use json::tojson;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const NAME: &str = "chat_template";

/// One render's budget (minijinja's fuel: an instruction costs 1, data about 1 per 64 bytes it
/// creates or walks): this much, plus [`TEMPLATE_FUEL_PER_MESSAGE`] a message and
/// [`TEMPLATE_FUEL_PER_BYTE_DIVISOR`]'s share of the conversation's bytes, at most
/// [`MAX_TEMPLATE_FUEL`]. A template comes from the model file, so it is input: without a budget
/// `{% for i in range(99999) %}{% for j in range(99999) %}` never ends, and a string that doubles
/// each loop step (`{% set ns.x = [ns.x] ~ ns.x %}`) fills the memory in 30 steps. The output
/// is data too: at most 64 bytes a fuel, 16 MB.
pub const TEMPLATE_FUEL_BASE: u64 = 10_000;

/// The budget per message, beyond [`TEMPLATE_FUEL_BASE`]. gemma3's template spends about 52 a
/// short message (the test `long_conversation_fits_the_budget`).
pub const TEMPLATE_FUEL_PER_MESSAGE: u64 = 200;

/// The budget per byte of the messages and extra variables is one over this: half a fuel, 32
/// times what copying a byte costs (gemma3's and SmolLM2's templates spend 3 to 4 times).
pub const TEMPLATE_FUEL_PER_BYTE_DIVISOR: u64 = 2;

/// The largest budget, whatever the conversation. It also bounds how deep a hostile template can
/// nest a value (a nested list literal costs about 1 a level), which minijinja drops
/// recursively: rendering runs on [`crate::platform::with_deep_stack`]'s stack, not on the
/// caller's (a tokio worker's 2 MiB overflow near 5,000 levels in a debug build). Measured with
/// minijinja 3.1: a budget of 1,000,000 fits 64 MiB in a release build, 250,000 fits 128 MiB in a
/// debug build.
pub const MAX_TEMPLATE_FUEL: u64 = 250_000;

fn template_error(e: minijinja::Error) -> Error {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    Error::Template(msg)
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the texts the template sees under those
    /// names (for example `"<bos>"`).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        Self::with_date(source, bos_token, eos_token, today())
    }

    /// As [`ChatTemplate::new`], with the date that `strftime_now` gives (year, month 1-12, day).
    pub fn with_date(
        source: &str,
        bos_token: &str,
        eos_token: &str,
        date: (i32, u32, u32),
    ) -> Result<Self> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(template_error)?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", move |fmt: String| strftime(&fmt, date));
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, source.to_owned())
            .map_err(template_error)?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// Renders a conversation; `add_generation_prompt` appends the opening of the assistant's turn.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with(messages, add_generation_prompt, Value::UNDEFINED)
    }

    /// As [`ChatTemplate::render`], with extra variables (a map, e.g. `tools`, `enable_thinking`).
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extra: Value,
    ) -> Result<String> {
        crate::platform::with_deep_stack(|| {
            self.render_here(messages, add_generation_prompt, extra)
        })
        .map_err(|e| {
            Error::Template(format!("cannot start a thread to render the template: {e}"))
        })?
    }

    fn render_here(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extra: Value,
    ) -> Result<String> {
        // Fuel is set on the environment; a clone shares the compiled template.
        let mut env = self.env.clone();
        let bytes = messages
            .iter()
            .map(|m| m.role.len() + m.content.len())
            .sum::<usize>()
            + if extra.is_undefined() {
                0
            } else {
                extra.to_string().len()
            };
        let fuel = TEMPLATE_FUEL_BASE
            .saturating_add(TEMPLATE_FUEL_PER_MESSAGE.saturating_mul(messages.len() as u64))
            .saturating_add(bytes as u64 / TEMPLATE_FUEL_PER_BYTE_DIVISOR)
            .min(MAX_TEMPLATE_FUEL);
        env.set_fuel(Some(fuel));
        let namespaces = Namespaces::default();
        env.add_function("namespace", namespaces.constructor());
        let tmpl = env.get_template(NAME).map_err(template_error)?;
        let base = minijinja::context! {
            messages => Value::from(Serde(messages)),
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        let ctx = if extra.is_undefined() {
            base
        } else {
            minijinja::context! { ..extra, ..base }
        };
        let rendered = tmpl.render(ctx);
        namespaces.release();
        rendered.map_err(|e| {
            if e.kind() == ErrorKind::OutOfFuel {
                Error::Template(format!(
                    "the chat template used up its budget ({fuel} instructions, or data at 64 \
                     bytes each) for {} messages; it loops too long or builds too much",
                    messages.len()
                ))
            } else {
                template_error(e)
            }
        })
    }
}

/// The namespaces one render made. A namespace can hold itself (`{% set ns.me = ns %}`, or two
/// holding each other): a cycle of `Arc`s that minijinja never frees, so a hostile template would
/// leak on every request. Their attributes are set to `none` after the render, which breaks every
/// such cycle: a value built earlier cannot hold one built later except through an attribute set
/// with `{% set ns.name = ... %}`.
#[derive(Clone, Default)]
struct Namespaces(std::sync::Arc<std::sync::Mutex<Vec<Value>>>);

impl Namespaces {
    /// minijinja's `namespace()`, keeping each namespace it makes.
    fn constructor(
        &self,
    ) -> impl Fn(Option<ValueOrKwargs>) -> std::result::Result<Value, minijinja::Error>
           + Send
           + Sync
           + 'static {
        let made = self.clone();
        move |defaults| {
            let ns = minijinja::functions::namespace(defaults)?;
            made.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(ns.clone());
            Ok(ns)
        }
    }

    /// Sets every attribute of every namespace made to `none`, through a template that assigns
    /// each name (the only way to write a namespace from outside minijinja); its length is the
    /// number of attributes, which the render's budget bounded.
    fn release(&self) {
        let made = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        let mut source = String::new();
        for (i, ns) in made.iter().enumerate() {
            let names: Vec<String> = ns
                .try_iter()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .filter(|k| is_identifier(k))
                .collect();
            if !names.is_empty() {
                source.push_str(&format!("{{% set ns = spaces[{i}] %}}"));
                for n in names {
                    source.push_str(&format!("{{% set ns.{n} = none %}}"));
                }
            }
        }
        if source.is_empty() {
            return;
        }
        // The names come from `{% set ns.name %}` in a template that compiled, or from
        // `namespace(...)`'s keys filtered to identifiers, so the source compiles; if it did
        // not, the cost would be the leak this guards against, not a wrong render.
        let _ = Environment::new().render_str(&source, minijinja::context! { spaces => made });
    }
}

/// A name `{% set ns.name = ... %}` can assign.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn raise_exception(msg: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    fn render(src: &str, messages: &[ChatMessage]) -> Result<String> {
        ChatTemplate::with_date(src, "<s>", "</s>", (2024, 7, 26))?.render(messages, true)
    }

    fn conversation(n: usize) -> Vec<ChatMessage> {
        (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                ChatMessage::new(role, format!("message {i}, a few words long."))
            })
            .collect()
    }

    #[test]
    fn endless_loops_run_out_of_budget() {
        let src = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("budget (10000 "), "{err}");
    }

    #[test]
    fn self_nesting_stops_before_the_stack_does() {
        // Each step wraps the list in a new one; 100,000 levels overflow the stack on drop.
        let src = "{% set ns = namespace(x=[]) %}{% for i in range(99999) %}{% set ns.x = [ns.x] %}{% endfor %}ok";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("budget"), "{err}");
        // The deepest value the largest budget allows, a literal nested 50 deep a step, is built
        // and dropped without overflowing the caller's stack (a test thread's 2 MiB).
        let literal = format!("{}ns.x{}", "[".repeat(50), "]".repeat(50));
        let within = src.replace("[ns.x]", &literal);
        let err = render(&within, &conversation(1300))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("budget ({MAX_TEMPLATE_FUEL} ")),
            "{err}"
        );
    }

    /// The fuzzer's finding (fuzz/regressions/chat_template/timeout-7b61...): `~` turns the list
    /// into its repr, escaping the string's quotes, so the string more than doubles each step
    /// (30 steps took 17 s and 2.6 GB before the data was in the budget).
    #[test]
    fn doubling_strings_run_out_of_budget() {
        let src = "{% set ns = namespace(x='\"') %}{% for i in range(60) %}{% set ns.x = [ns.x] ~ ns.x %}{% endfor %}{{ ns.x | length }}";
        let start = std::time::Instant::now();
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("budget"), "{err}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    /// Fuzz finding 5: a list holding another several times is cheap to build (the items are
    /// shared) and a lazily repeated one (`n * [x]`) costs nothing until read, but both print as a
    /// tree; stringifying, comparing or serializing them walked it unbudgeted (a 410-byte template
    /// took 20 s and 3.2 GB). The patched minijinja (third_party/README.md) charges every item a
    /// walk visits, and does not fold such values at compile time, where there is no budget.
    #[test]
    fn walking_shared_and_repeated_lists_runs_out_of_budget() {
        let mut nested = String::from("{% set l0 = ['xxxxxxxxxx'] %}");
        for level in 1..=8 {
            let items = vec![format!("l{}", level - 1); 10].join(",");
            nested += &format!("{{% set l{level} = [{items}] %}}");
        }
        let lazy = "{% set n = 99999999 %}{% set l8 = n * ['...'] %}";
        let walks = [
            "{{ 1 ~ l8 }}",
            "{{ l8 }}",
            "{{ l8 | string }}",
            "{{ l8 | join }}",
            "{{ l8 | upper }}",
            "{{ l8 | tojson }}",
            "{{ l8 | pprint }}",
            "{{ l8 | max }}",
            "{{ '%s' | format(l8) }}",
            "{% set m = {'a': l8} %}{{ m }}",
        ];
        let start = std::time::Instant::now();
        for prelude in [&nested[..], lazy] {
            for walk in walks {
                let src = format!("{prelude}{walk}");
                let err = render(&src, &[]).unwrap_err().to_string();
                assert!(err.contains("budget"), "{walk}: {err}");
            }
        }
        // Folded at compile time, there is no budget: such constants are left to the render.
        for src in [
            "{{ 1 ~ (99999999 * ['...']) }}",
            "{{ (99999999 * ['...']) == (99999999 * ['...']) }}",
        ] {
            let err = render(src, &[]).unwrap_err().to_string();
            assert!(err.contains("budget"), "{src}: {err}");
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn output_is_in_the_budget() {
        let src = "{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("budget"), "{err}");
        // Long messages bring their own budget: a 1 MB message renders.
        let long = [ChatMessage::new("user", "y".repeat(1 << 20))];
        let out = render(
            "{% for m in messages %}{{ m.content | trim }}{% endfor %}",
            &long,
        );
        assert_eq!(out.unwrap().len(), 1 << 20);
    }

    /// A value that counts its live copies: what a template stores of it is freed after the
    /// render unless a cycle holds it.
    #[derive(Debug)]
    struct Probe {
        _live: std::sync::Arc<()>,
    }

    impl minijinja::value::Object for Probe {}

    #[test]
    fn namespaces_that_hold_themselves_are_freed() {
        let template = |src: &str| ChatTemplate::with_date(src, "<s>", "</s>", (2024, 7, 26));
        let cycles = [
            "{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.p = probe %}ok",
            // Two namespaces holding each other, one made from a dict with odd keys.
            "{% set a = namespace({'odd key': probe, 'none': 1}) %}{% set b = namespace(a=a) %}{% set a.b = b %}{% set a.none = a %}ok",
            // Through a macro, which holds the namespace it closes over.
            "{% set ns = namespace(p=probe) %}{% macro m() %}{{ ns.p }}{% endmacro %}{% set ns.m = m %}ok",
            // A render that fails still frees what it made.
            "{% set ns = namespace(p=probe) %}{% set ns.me = ns %}{{ raise_exception('no') }}",
        ];
        for src in cycles {
            let live = std::sync::Arc::new(());
            let probe = Value::from_object(Probe {
                _live: live.clone(),
            });
            let _ = template(src).unwrap().render_with(
                &[],
                false,
                minijinja::context! { probe => probe },
            );
            assert_eq!(std::sync::Arc::strong_count(&live), 1, "leaked: {src}");
        }
    }

    #[test]
    fn tojson_bounds_indent_and_depth() {
        let msgs = conversation(2);
        let err = render("{{ messages | tojson(indent=99999999999) }}", &msgs)
            .unwrap_err()
            .to_string();
        assert!(err.contains("indent 99999999999"), "{err}");
        let deep = "{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}";
        let err = render(deep, &[]).unwrap_err().to_string();
        assert!(err.contains("nested more than 128"), "{err}");
        let ok = render("{{ messages | tojson(indent=4) }}", &msgs).unwrap();
        assert!(ok.contains("\n    {\n        \"role\": \"user\""), "{ok}");
    }

    /// gemma3's template (tests/golden/tokenizer_gemma3.json) over 2,000 messages stays within
    /// [`MAX_TEMPLATE_FUEL`].
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn long_conversation_fits_the_budget() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/golden/tokenizer_gemma3.json"
        );
        let golden: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let src = golden["chat_template"].as_str().unwrap();
        let out = render(src, &conversation(2000)).unwrap();
        assert!(out.contains("message 1999, a few words long."));
    }
}
