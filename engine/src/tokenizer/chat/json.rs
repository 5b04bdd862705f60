//! Hugging Face's `tojson` filter: Python's `json.dumps`, bounded for templates from model files.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{ErrorKind, State, Value};

/// Deepest nesting `tojson` writes (Python's `json.dumps` stops near 1,000 at its recursion limit).
const MAX_JSON_DEPTH: usize = 128;

/// Largest `tojson(indent=...)`: enough for any layout, small enough that indentation cannot
/// allocate gigabytes.
const MAX_JSON_INDENT: usize = 64;

/// Python's `json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys)`, which is
/// what Hugging Face's `tojson` is (minijinja's own escapes `<`, `>`, `&` and `'`).
pub(super) fn tojson(
    state: &State,
    value: Value,
    kwargs: Kwargs,
) -> std::result::Result<Value, minijinja::Error> {
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
        state,
        indent,
        sort_keys: sort_keys.unwrap_or(false),
        item_sep,
        key_sep,
    };
    let mut out = String::new();
    py_json(&value, &opts, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

struct JsonOpts<'s, 'e> {
    /// Charged for the indentation, the one part of the output that can outgrow the value
    /// (128 levels of 64 spaces before each item), before it is allocated.
    state: &'s State<'s, 'e>,
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
            o.state.consume_fuel((n * depth) as u64 / 64)?;
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * depth));
        }
        Ok::<(), minijinja::Error>(())
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
                newline(out, depth + 1)?;
                let ks = k
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| k.to_string());
                out.push_str(&serde_json::to_string(&ks).unwrap_or_default());
                out.push_str(&o.key_sep);
                py_json(&v.get_item(k)?, o, depth + 1, out)?;
            }
            newline(out, depth)?;
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
                newline(out, depth + 1)?;
                py_json(item, o, depth + 1, out)?;
            }
            newline(out, depth)?;
            out.push(']');
        }
        _ => out.push_str(&serde_json::to_string(&v.to_string()).unwrap_or_default()),
    }
    Ok(())
}
