//! `sojourn-engine`: the data-path programs of sojourn behind one binary.
//! Each subcommand's options and behaviour live in its own crate's `cli` module.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "sojourn-engine", version, about = "sojourn's data path: web server, load generator, link emulator, simulator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a directory over HTTP/1.1 with FAIR, SRPT or LAS connection scheduling.
    Serve(sojourn_server::cli::ServeArgs),
    /// Drive an HTTP server from a trace or load model, recording every request.
    Load(sojourn_load::cli::LoadArgs),
    /// Emulate wide-area links (loss, queue, rate, delay) between TUN devices.
    Wan(sojourn_wan::cli::WanArgs),
    /// Simulate a bottleneck link under a scheduling policy.
    Sim(sojourn_sim::cli::SimArgs),
    /// Simulate dispatch among CPU-bound stage queues (003 §4.1).
    Stages(sojourn_stages::cli::StagesArgs),
    /// Parse access-log blocks for `sojourn trace import clf` (stdin to stdout; not for people).
    #[command(hide = true)]
    Logparse(sojourn_logparse::cli::LogparseArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Sim(_) | Command::Stages(_)) {
        sojourn_sys::exit_quietly_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Serve(args) => sojourn_server::cli::run(args),
        Command::Load(args) => sojourn_load::cli::run(args),
        Command::Wan(args) => sojourn_wan::cli::run(args),
        Command::Sim(args) => sojourn_sim::cli::run(args),
        Command::Stages(args) => sojourn_stages::cli::run(args),
        Command::Logparse(args) => sojourn_logparse::cli::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sojourn-engine: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
