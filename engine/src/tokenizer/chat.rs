//! Chat templates: the Jinja source in `tokenizer.chat_template`, rendered with minijinja the way
//! Hugging Face's `apply_chat_template` renders it (jinja2 with `trim_blocks`, `lstrip_blocks`, loop
//! controls, `raise_exception`, a Python-style `tojson`, `strftime_now`, and Python string methods
//! such as `.strip()` and `.startswith()` through minijinja-contrib's pycompat).

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, ErrorKind, Value};
use serde::Serialize;

use crate::error::{Error, Result};

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

/// The instructions one render may run (minijinja's fuel): this many, plus
/// [`TEMPLATE_STEPS_PER_MESSAGE`] a message, at most [`MAX_TEMPLATE_STEPS`]. A template comes from
/// the model file, so it is input: without a budget `{% for i in range(99999) %}{% for j in
/// range(99999) %}` never ends.
pub const TEMPLATE_STEPS_BASE: u64 = 10_000;

/// The instructions one render may run per message, beyond [`TEMPLATE_STEPS_BASE`]. gemma3's
/// template spends about 50 a message (the test `long_conversation_fits_the_budget`).
pub const TEMPLATE_STEPS_PER_MESSAGE: u64 = 200;

/// The most instructions one render may run, whatever the conversation's length. It also bounds
/// how deep a hostile template can nest a value (a nested list literal is one instruction a
/// level), which minijinja drops recursively: 100,000 levels take some tens of MiB of stack, so
/// rendering runs on [`crate::platform::with_deep_stack`]'s 64 MiB stack, not on the caller's
/// (a tokio worker's 2 MiB overflow near 5,000 levels in a debug build).
pub const MAX_TEMPLATE_STEPS: u64 = 100_000;

/// Most bytes a rendered conversation may have: far more than any context holds (a token is a few
/// bytes), far less than a template could otherwise print (`{{ 'x' * 100000000 }}` in a loop).
pub const MAX_RENDERED_BYTES: usize = 16 << 20;

/// Deepest nesting `tojson` writes (Python's `json.dumps` stops near 1,000 at its recursion limit).
const MAX_JSON_DEPTH: usize = 128;

/// Largest `tojson(indent=...)`: enough for any layout, small enough that indentation cannot
/// allocate gigabytes.
const MAX_JSON_INDENT: usize = 64;

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
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
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
        let steps = TEMPLATE_STEPS_BASE
            .saturating_add(TEMPLATE_STEPS_PER_MESSAGE.saturating_mul(messages.len() as u64))
            .min(MAX_TEMPLATE_STEPS);
        env.set_fuel(Some(steps));
        let tmpl = env.get_template(NAME).map_err(template_error)?;
        let base = minijinja::context! {
            messages => Value::from_serialize(messages),
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        let ctx = if extra.is_undefined() {
            base
        } else {
            minijinja::context! { ..extra, ..base }
        };
        let mut out = LimitedWriter(Vec::new());
        tmpl.render_captured_to(ctx, &mut out).map_err(|e| {
            if e.kind() == ErrorKind::OutOfFuel {
                Error::Template(format!(
                    "the chat template ran more than {steps} steps for {} messages; it loops too long",
                    messages.len()
                ))
            } else {
                template_error(e)
            }
        })?;
        // The template writes only strings, so the bytes are UTF-8; lossy for safety.
        Ok(String::from_utf8(out.0)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }
}

/// The render's output, refusing to grow past [`MAX_RENDERED_BYTES`].
struct LimitedWriter(Vec<u8>);

impl std::io::Write for LimitedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len().saturating_add(buf.len()) > MAX_RENDERED_BYTES {
            return Err(std::io::Error::other(format!(
                "the rendered conversation exceeds {} MiB",
                MAX_RENDERED_BYTES >> 20
            )));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn raise_exception(msg: String) -> std::result::Result<Value, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
}

/// Python's `json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys)`, which is
/// what Hugging Face's `tojson` is (minijinja's own escapes `<`, `>`, `&` and `'`).
fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    if let Some(n) = indent.filter(|&n| n > MAX_JSON_INDENT) {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: indent {n} is larger than {MAX_JSON_INDENT}"),
        ));
    }
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let (item_sep, key_sep) = match separators.as_deref() {
        Some([a, b]) => (a.clone(), b.clone()),
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let opts = JsonOpts {
        indent,
        sort_keys: sort_keys.unwrap_or(false),
        item_sep,
        key_sep,
    };
    let mut out = String::new();
    py_json(&value, &opts, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

struct JsonOpts {
    indent: Option<usize>,
    sort_keys: bool,
    item_sep: String,
    key_sep: String,
}

fn py_json(
    v: &Value,
    o: &JsonOpts,
    depth: usize,
    out: &mut String,
) -> std::result::Result<(), minijinja::Error> {
    if depth > MAX_JSON_DEPTH {
        return Err(minijinja::Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: the value is nested more than {MAX_JSON_DEPTH} deep"),
        ));
    }
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = o.indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * depth));
        }
    };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&v.to_string()),
        ValueKind::String | ValueKind::Bytes | ValueKind::Invalid | ValueKind::Plain => {
            let s = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            out.push_str(&serde_json::to_string(&s).unwrap_or_default());
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if o.sort_keys {
                keys.sort();
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_sep);
                }
                newline(out, depth + 1);
                let ks = k
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| k.to_string());
                out.push_str(&serde_json::to_string(&ks).unwrap_or_default());
                out.push_str(&o.key_sep);
                py_json(&v.get_item(k)?, o, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&o.item_sep);
                }
                newline(out, depth + 1);
                py_json(item, o, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        _ => out.push_str(&serde_json::to_string(&v.to_string()).unwrap_or_default()),
    }
    Ok(())
}

/// Today's date (UTC) from the platform's wall clock; a fixed date where there is none.
fn today() -> (i32, u32, u32) {
    match crate::platform::unix_seconds() {
        Some(s) => civil_from_days((s / 86_400.0).floor() as i64),
        None => (2024, 7, 26),
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    ((if m <= 2 { y + 1 } else { y }) as i32, m, d)
}

/// The subset of `strftime` that chat templates use: %d %m %Y %y %b %B %a %A %e %j %%.
fn strftime(fmt: &str, (y, m, d): (i32, u32, u32)) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    // Days since the epoch, for the weekday (1970-01-01 was a Thursday).
    let days = days_from_civil(y, m, d);
    let weekday = DAYS[((days + 3).rem_euclid(7)) as usize];
    let month = MONTHS[(m.clamp(1, 12) - 1) as usize];
    let yday = days - days_from_civil(y, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y as i64 - 1 } else { y as i64 };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod date_tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_930), (2024, 7, 26));
        assert_eq!(days_from_civil(2024, 7, 26), 19_930);
        assert_eq!(strftime("%d %b %Y", (2024, 7, 26)), "26 Jul 2024");
        assert_eq!(
            strftime("%A %B %e, %y %%", (2024, 7, 26)),
            "Friday July 26, 24 %"
        );
    }
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
    fn endless_loops_run_out_of_steps() {
        let src = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("steps"), "{err}");
    }

    #[test]
    fn self_nesting_stops_before_the_stack_does() {
        // Each step wraps the list in a new one; 100,000 levels overflow the stack on drop.
        let src = "{% set ns = namespace(x=[]) %}{% for i in range(99999) %}{% set ns.x = [ns.x] %}{% endfor %}ok";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("steps"), "{err}");
        // The deepest value the largest budget allows, a literal nested 50 deep a step, is built
        // and dropped without overflowing the caller's stack (a test thread's 2 MiB).
        let literal = format!("{}ns.x{}", "[".repeat(50), "]".repeat(50));
        let within = src.replace("[ns.x]", &literal);
        let err = render(&within, &conversation(1000))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ran more than 100000 steps"), "{err}");
    }

    #[test]
    fn output_is_bounded() {
        let src = "{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}";
        let err = render(src, &[]).unwrap_err().to_string();
        assert!(err.contains("exceeds 16 MiB"), "{err}");
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
    /// [`MAX_TEMPLATE_STEPS`].
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
