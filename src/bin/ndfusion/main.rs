//! The `ndfusion` command: see `ndfusion --help`.

mod cli;
mod completion;
mod demo;
mod interrupt;
mod output;
mod plot;
mod process_log;
mod progress;
mod repl;
mod serve;
mod statements;
mod terminal;

use clap::{CommandFactory, FromArgMatches};
use cli::{run, Args};

/// Decoded chunks are large, short-lived buffers freed on other threads than the ones that
/// allocated them; glibc's per-thread arenas keep such memory, so a long scan's peak memory
/// grew with the data (BENCHMARKS.md). mimalloc returns it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // No panic reaches the user as a Rust backtrace: report it as an internal error.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("Error: internal error in ndfusion: {info}");
    }));
    let matches = Args::command().get_matches();
    let mut args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = match args.process.take() {
        Some(process) => {
            process_log::init(false);
            runtime.block_on(cli::run_process(process, &args.security))
        }
        None => {
            process_log::init(true);
            let code = runtime.block_on(run(args, &matches));
            // A statement stopped by Ctrl-C removes what it wrote on a blocking thread:
            // let that finish before the process ends.
            runtime.shutdown_timeout(std::time::Duration::from_secs(10));
            code
        }
    };
    std::process::exit(code);
}
