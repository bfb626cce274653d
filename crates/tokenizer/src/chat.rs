//! Chat templates: renders Hugging Face style Jinja templates with minijinja, set up the way
//! transformers sets up jinja2 (trim_blocks, lstrip_blocks, `raise_exception`, `tojson`,
//! `strftime_now`, Python string methods, Python-style printing of None/True/lists), and safe on
//! hostile templates: no loader (include/import/extends fail), bounded recursion, bounded work
//! (fuel) and bounded output size.

use std::io;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Environment, ErrorKind, Value, context};

use crate::{Error, pyfmt, strftime};

/// Instructions a template may execute; a real chat template over a long conversation uses a
/// small fraction of this, an endless loop stops after about a second.
const FUEL: u64 = 20_000_000;
/// Nesting depth of macro calls, recursive loops and the like.
const RECURSION_LIMIT: usize = 64;
/// Output allowed regardless of input size.
const BASE_OUTPUT_LIMIT: usize = 1 << 20;
/// Output allowed per byte of messages and tools JSON (templates mostly copy their input).
const OUTPUT_PER_INPUT_BYTE: usize = 4;

/// Renders `template` over the messages (and tools) JSON.
pub(crate) fn render(
    template: &str,
    messages_json: &str,
    tools_json: Option<&str>,
    add_generation_prompt: bool,
    special_tokens: &[(&'static str, String)],
) -> Result<String, Error> {
    let messages = parse_messages(messages_json)?;
    let tools = parse_tools(tools_json)?;
    let input_len = messages_json.len() + tools_json.map_or(0, str::len);
    let limit = BASE_OUTPUT_LIMIT.saturating_add(input_len.saturating_mul(OUTPUT_PER_INPUT_BYTE));

    let env = environment();
    let tmpl = env.template_from_str(template).map_err(template_error)?;
    let tokens: Value = special_tokens
        .iter()
        .map(|(k, v)| (*k, Value::from(v.as_str())))
        .collect();
    let ctx = context! {
        messages => messages,
        tools => tools,
        add_generation_prompt => add_generation_prompt,
        ..tokens
    };
    let mut out = LimitedWriter {
        buf: Vec::new(),
        limit,
        overflowed: false,
    };
    let result = tmpl.render_captured_to(ctx, &mut out).map(|_| ());
    if out.overflowed {
        return Err(Error::TemplateOutputTooLarge { limit });
    }
    result.map_err(template_error)?;
    String::from_utf8(out.buf).map_err(|e| Error::Template {
        message: e.to_string(),
    })
}

/// A jinja environment configured like transformers' chat template sandbox.
fn environment<'s>() -> Environment<'s> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(RECURSION_LIMIT);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(pyfmt::python_formatter);
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env
}

/// Parses and checks the messages: an array of objects, each with a string `role` and a
/// `content` (which may only be missing when the message has `tool_calls`).
fn parse_messages(json: &str) -> Result<Value, Error> {
    let bad = |message: String| Error::InvalidChatInput {
        what: "messages",
        message,
    };
    let messages: Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
    let items = match messages.kind() {
        ValueKind::Seq => messages.try_iter().map_err(|e| bad(e.to_string()))?,
        _ => return Err(bad("expected an array of message objects".to_owned())),
    };
    for (i, message) in items.enumerate() {
        if message.kind() != ValueKind::Map {
            return Err(bad(format!("message {i} is not an object")));
        }
        let field = |name: &str| message.get_attr(name).ok().filter(|v| !v.is_undefined());
        if field("role")
            .and_then(|r| r.as_str().map(str::to_owned))
            .is_none()
        {
            return Err(bad(format!("message {i} has no string \"role\"")));
        }
        if field("content").is_none() && field("tool_calls").is_none() {
            return Err(bad(format!("message {i} has no \"content\"")));
        }
    }
    Ok(messages)
}

/// Parses the tools: absent, empty or `null` means none; otherwise a JSON array.
fn parse_tools(json: Option<&str>) -> Result<Value, Error> {
    let Some(json) = json.filter(|j| !j.trim().is_empty()) else {
        return Ok(Value::from(()));
    };
    let tools: Value = serde_json::from_str(json).map_err(|e| Error::InvalidChatInput {
        what: "tools",
        message: e.to_string(),
    })?;
    match tools.kind() {
        ValueKind::Seq | ValueKind::None => Ok(tools),
        _ => Err(Error::InvalidChatInput {
            what: "tools",
            message: "expected an array".to_owned(),
        }),
    }
}

/// Marks an error raised by the template's `raise_exception`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RaisedException(String);

fn raise_exception(message: String) -> Result<Value, minijinja::Error> {
    Err(
        minijinja::Error::new(ErrorKind::InvalidOperation, message.clone())
            .with_source(RaisedException(message)),
    )
}

fn strftime_now(format: &str) -> String {
    strftime::format_now(format)
}

/// transformers' `tojson`: Python `json.dumps` with ensure_ascii=False by default.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, minijinja::Error> {
    let options = pyfmt::JsonOptions::from_kwargs(&kwargs)?;
    kwargs.assert_all_used()?;
    pyfmt::to_json(value, &options).map(Value::from_safe_string)
}

/// Maps a minijinja error to ours, recognising `raise_exception` and fuel exhaustion.
fn template_error(err: minijinja::Error) -> Error {
    if err.kind() == ErrorKind::OutOfFuel {
        return Error::TemplateOutOfFuel { fuel: FUEL };
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = cause {
        if let Some(RaisedException(message)) = e.downcast_ref::<RaisedException>() {
            return Error::TemplateException {
                message: message.clone(),
            };
        }
        cause = e.source();
    }
    Error::Template {
        message: err.to_string(),
    }
}

/// Collects output and fails once it passes `limit` bytes.
struct LimitedWriter {
    buf: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl io::Write for LimitedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.limit {
            self.overflowed = true;
            return Err(io::Error::other("chat template output too large"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
