//! The `ndfusion` command: see `ndfusion --help`.

use clap::{CommandFactory, FromArgMatches};
use ndfusion::cli::{run, Args};

fn main() {
    // No panic reaches the user as a Rust backtrace: report it as an internal error.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("Error: internal error in ndfusion: {info}");
    }));
    let matches = Args::command().get_matches();
    let args = match Args::from_arg_matches(&matches) {
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
    let code = runtime.block_on(run(args, &matches));
    std::process::exit(code);
}
