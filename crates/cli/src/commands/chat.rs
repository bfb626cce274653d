//! `genai-bridge chat`: an interactive conversation that streams each reply, using the model's
//! chat template.

use crate::args::ChatArgs;
use crate::load;
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::io::{BufRead, Write};

pub fn run(args: &ChatArgs) -> Result<()> {
    let loaded = load::load(&args.run)?;
    let mut messages: Vec<Value> = Vec::new();
    if let Some(system) = &args.system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    eprintln!(
        "chatting with {} ({}); an empty line or end of input quits",
        loaded.config().model.model_type,
        loaded.session.info().backend
    );
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
            return Ok(());
        }
        messages.push(json!({ "role": "user", "content": line.trim_end() }));
        let prompt = loaded
            .tokenizer
            .apply_chat_template(
                None,
                &Value::Array(messages.clone()).to_string(),
                None,
                true,
            )
            .context("applying the chat template")?;
        let ids = loaded.tokenizer.encode(&prompt)?;
        let search = load::search_options(loaded.config(), &args.search, ids.len())?;
        let mut generator = loaded.session.generator(&search)?;
        generator.append_tokens(&ids)?;
        let mut stream = loaded.tokenizer.stream();
        let mut reply = String::new();
        while !generator.is_done() {
            generator.generate_next_token()?;
            if generator.finished_by_eos() {
                break;
            }
            if let Some(piece) = stream.push(generator.next_tokens()[0])? {
                reply.push_str(&piece);
                write!(stdout, "{piece}")?;
                stdout.flush()?;
            }
        }
        if let Some(rest) = stream.flush()? {
            reply.push_str(&rest);
            write!(stdout, "{rest}")?;
        }
        writeln!(stdout)?;
        messages.push(json!({ "role": "assistant", "content": reply }));
    }
}
