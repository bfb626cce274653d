//! Chat templates: HF-compatible rendering, and safety against hostile templates and input.

mod common;

use std::time::{Duration, Instant};

use common::{SpStyle, sp_tokenizer};
use genai_tokenizer::{Error, Tokenizer};
use serde_json::json;

const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const MESSAGES: &str = r#"[{"role": "system", "content": "You are helpful."},
                          {"role": "user", "content": "Hi there!"}]"#;

fn with_template(template: &str) -> Tokenizer {
    let config = json!({
        "bos_token": "<s>",
        "eos_token": {"__type": "AddedToken", "content": "</s>", "special": true},
        "chat_template": template,
    });
    sp_tokenizer(SpStyle::Llama, Some(config))
}

/// Renders `template` (as an override) over `messages` with no tools.
fn render(template: &str, messages: &str) -> Result<String, Error> {
    sp_tokenizer(SpStyle::Llama, None).apply_chat_template(Some(template), messages, None, true)
}

#[test]
fn chatml_renders_exactly() {
    let tok = with_template(CHATML);
    assert_eq!(tok.chat_template(), Some(CHATML));
    let with_prompt = tok.apply_chat_template(None, MESSAGES, None, true).unwrap();
    assert_eq!(
        with_prompt,
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n"
    );
    let without = tok
        .apply_chat_template(None, MESSAGES, None, false)
        .unwrap();
    assert_eq!(
        without,
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n"
    );
    // An explicit template overrides the model's; an empty one does not.
    let over = tok.apply_chat_template(Some("{{ messages|length }}"), MESSAGES, None, true);
    assert_eq!(over.unwrap(), "2");
    assert_eq!(
        tok.apply_chat_template(Some(""), MESSAGES, None, true)
            .unwrap(),
        with_prompt
    );
}

#[test]
fn template_list_and_jinja_file_are_found() {
    let config = json!({"chat_template": [
        {"name": "tool_use", "template": "tools"},
        {"name": "default", "template": "default {{ messages[0].role }}"}]});
    let tok = sp_tokenizer(SpStyle::Llama, Some(config.clone()));
    assert_eq!(
        tok.apply_chat_template(None, MESSAGES, None, true).unwrap(),
        "default system"
    );

    // Like onnxruntime-genai 0.18: tokenizer_config.json's template wins over the file, which
    // is used when the config has none.
    for (config, expected) in [
        (config, "default {{ messages[0].role }}"),
        (json!({"bos_token": "<s>"}), "from file"),
    ] {
        let dir = common::model_dir(&[
            (
                "tokenizer.json",
                common::sp_tokenizer_json(SpStyle::Llama).to_string(),
            ),
            ("tokenizer_config.json", config.to_string()),
            ("chat_template.jinja", "from file".to_owned()),
        ]);
        let tok = Tokenizer::from_dir(dir.path(), common::sp_special()).unwrap();
        assert_eq!(tok.chat_template(), Some(expected));
    }

    let none = sp_tokenizer(SpStyle::Llama, None);
    let err = none
        .apply_chat_template(None, MESSAGES, None, true)
        .unwrap_err();
    assert!(matches!(err, Error::NoChatTemplate), "{err:?}");
}

#[test]
fn special_token_variables() {
    let tok = with_template("{{ bos_token }}|{{ eos_token }}|{{ unk_token }}");
    assert_eq!(
        tok.apply_chat_template(None, MESSAGES, None, true).unwrap(),
        "<s>|</s>|"
    );
    // Without tokenizer_config.json, BOS/EOS strings come from genai_config's ids.
    let out = render("{{ bos_token }}|{{ eos_token }}", MESSAGES).unwrap();
    assert_eq!(out, "<s>|</s>");
}

#[test]
fn hf_environment_features() {
    // trim_blocks + lstrip_blocks, loop controls, Python string methods.
    let template = "  {% for m in messages %}\n  {% if loop.index > 1 %}{% break %}{% endif %}\n{{ m.content.strip().upper() }}|{{ m.role.startswith('sys') }}|{{ 'a,b'.split(',') }}\n  {% endfor %}\n";
    assert_eq!(
        render(template, MESSAGES).unwrap(),
        "YOU ARE HELPFUL.|True|['a', 'b']\n"
    );
    // Python printing of None, booleans, numbers and containers.
    let out = render(
        "{{ none }} {{ true }} {{ 1.0 }} {{ {'k': [1, 'x', none]} }}",
        MESSAGES,
    );
    assert_eq!(out.unwrap(), "None True 1.0 {'k': [1, 'x', None]}");
    // dict methods and namespace.
    let out = render(
        "{% set ns = namespace(n=0) %}{% for k, v in messages[1].items() %}{% set ns.n = ns.n + 1 %}{{ k }}={{ v }};{% endfor %}{{ ns.n }}",
        MESSAGES,
    );
    assert_eq!(out.unwrap(), "role=user;content=Hi there!;2");
    let year = render("{{ strftime_now('%Y') }}", MESSAGES).unwrap();
    assert!(year.len() == 4 && year.as_str() >= "2024", "{year}");
}

#[test]
fn tojson_is_python_json_dumps() {
    let tools = r#"[{"type": "function", "function": {"name": "get_weather",
        "parameters": {"z": 1, "a": [1.5, true, null, "é\"\n"]}}}]"#;
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let out = tok
        .apply_chat_template(
            Some("{{ tools[0] | tojson }}"),
            MESSAGES,
            Some(tools),
            false,
        )
        .unwrap();
    assert_eq!(
        out,
        r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"z": 1, "a": [1.5, true, null, "é\"\n"]}}}"#
    );
    let indented = tok
        .apply_chat_template(
            Some("{{ tools[0].function.parameters | tojson(indent=2, sort_keys=true) }}"),
            MESSAGES,
            Some(tools),
            false,
        )
        .unwrap();
    assert_eq!(
        indented,
        "{\n  \"a\": [\n    1.5,\n    true,\n    null,\n    \"é\\\"\\n\"\n  ],\n  \"z\": 1\n}"
    );
    let ascii = render("{{ 'é' | tojson(ensure_ascii=true) }}", MESSAGES).unwrap();
    assert_eq!(ascii, r#""\u00e9""#);
    // No tools: `tools` is None, as transformers passes it.
    assert_eq!(render("{{ tools is none }}", MESSAGES).unwrap(), "True");
}

#[test]
fn raise_exception_surfaces_its_message() {
    let template = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}";
    match render(template, MESSAGES) {
        Err(Error::TemplateException { message }) => {
            assert_eq!(message, "System role not supported")
        }
        other => panic!("expected TemplateException, got {other:?}"),
    }
    // Also from inside a macro.
    let template = "{% macro check() %}{{ raise_exception('inner') }}{% endmacro %}{{ check() }}";
    assert!(
        matches!(render(template, MESSAGES), Err(Error::TemplateException { message }) if message == "inner")
    );
}

#[test]
fn include_import_and_extends_fail() {
    for template in [
        "{% include 'x' %}",
        "{% include '../../../../etc/passwd' %}",
        "{% import 'macros.j2' as m %}",
        "{% extends 'base.html' %}",
        "{% include '<string>' %}",
    ] {
        let err = render(template, MESSAGES).unwrap_err();
        assert!(matches!(err, Error::Template { .. }), "{template}: {err:?}");
    }
}

#[test]
fn endless_work_runs_out_of_fuel() {
    let started = Instant::now();
    let template =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    let err = render(template, MESSAGES).unwrap_err();
    assert!(matches!(err, Error::TemplateOutOfFuel { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn recursion_is_bounded() {
    let template = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    let err = render(template, MESSAGES).unwrap_err();
    assert!(
        matches!(&err, Error::Template { message } if message.contains("recursion")),
        "{err:?}"
    );
    let template = "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}";
    assert!(render(template, MESSAGES).is_err());
}

#[test]
fn output_size_is_bounded() {
    let template = "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}";
    let err = render(template, MESSAGES).unwrap_err();
    assert!(
        matches!(err, Error::TemplateOutputTooLarge { limit } if limit >= 1 << 20),
        "{err:?}"
    );
}

#[test]
fn malformed_messages_are_clear_errors() {
    for messages in [
        "not json",
        "",
        "{}",
        r#"{"role": "user", "content": "x"}"#,
        "[1]",
        r#"[{"content": "no role"}]"#,
        r#"[{"role": 3, "content": "x"}]"#,
        r#"[{"role": "user"}]"#,
    ] {
        let err = render(CHATML, messages).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidChatInput {
                    what: "messages",
                    ..
                }
            ),
            "{messages}: {err:?}"
        );
    }
    // An assistant turn with tool calls needs no content.
    let calls = r#"[{"role": "assistant", "tool_calls": [{"name": "f"}]}]"#;
    assert_eq!(
        render("{{ messages[0].tool_calls[0].name }}", calls).unwrap(),
        "f"
    );
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let err = tok.apply_chat_template(Some(CHATML), MESSAGES, Some(r#"{"a": 1}"#), true);
    assert!(
        matches!(err, Err(Error::InvalidChatInput { what: "tools", .. })),
        "{err:?}"
    );
}

#[test]
fn syntax_errors_are_template_errors() {
    let err = render("{% for %}", MESSAGES).unwrap_err();
    assert!(matches!(err, Error::Template { .. }), "{err:?}");
    let err = render("{{ messages | no_such_filter }}", MESSAGES).unwrap_err();
    assert!(matches!(err, Error::Template { .. }), "{err:?}");
}
