//! The `genai-bridge` command line: generate, chat and inspect on ONNX Runtime GenAI model folders.

mod args;
mod checksum;
mod commands;
mod load;
mod machine;
mod plot;
mod progress;

use args::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(args) => commands::generate::run(&args),
        Command::Chat(args) => commands::chat::run(&args),
        Command::Inspect(args) => commands::inspect::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Route(args) => commands::route::run(&args),
        Command::Plot(args) => commands::plot::run(&args),
        Command::Parity(args) => return finish(commands::parity::run(&args)),
    };
    finish(result.map(|()| ExitCode::SUCCESS))
}

/// Prints an error as one readable line and picks the exit code.
fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(error) => {
            // One readable line: the error and its causes.
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("error: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}
