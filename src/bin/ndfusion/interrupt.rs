//! Ctrl-C stops the running statement, not the process.
//!
//! Once the handler is installed SIGINT no longer ends the process: a statement raced
//! against it is dropped when it arrives, which drops its plan (scans stop fetching, a
//! `COPY` removes what it staged: `zarr/write/target.rs`). The REPL then prompts again; `-c`,
//! `-f` and standard input stop with exit status 130, as a shell reports SIGINT. At the
//! REPL's prompt the line editor reads Ctrl-C as a key itself (the terminal is in raw mode).

use std::future::Future;

use futures::FutureExt;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The exit status of a command stopped by Ctrl-C (128 + SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

/// SIGINT, caught for the life of the process.
pub struct Interrupts {
    signal: Signal,
}

impl Interrupts {
    /// Installs the handler; `None` if the system refuses it (Ctrl-C then ends the process,
    /// as without ndfusion's handler).
    pub fn install() -> Option<Self> {
        signal(SignalKind::interrupt())
            .ok()
            .map(|signal| Interrupts { signal })
    }

    /// Forgets a Ctrl-C that came while nothing ran (the REPL between statements), so it
    /// does not stop the next one.
    pub fn forget_pending(&mut self) {
        while let Some(Some(())) = self.signal.recv().now_or_never() {}
    }

    /// `work`'s output, or `None` when Ctrl-C came first (`work` is then dropped).
    pub async fn run<F: Future>(&mut self, work: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            _ = self.signal.recv() => None,
            output = work => Some(output),
        }
    }
}

/// Runs `work`, stopped by Ctrl-C when `interrupts` is given.
pub async fn interruptible<F: Future>(
    interrupts: Option<&mut Interrupts>,
    work: F,
) -> Option<F::Output> {
    match interrupts {
        Some(interrupts) => interrupts.run(work).await,
        None => Some(work.await),
    }
}
