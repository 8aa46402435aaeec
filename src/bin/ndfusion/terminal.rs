//! What the CLI asks of the terminal: its width.

use std::io::IsTerminal;
use std::os::fd::AsFd;

/// Columns of the terminal `stream` writes to; `None` when it is not a terminal (or one that
/// does not say, as a new pseudo-terminal: then `COLUMNS`, when set).
fn width_of(stream: impl AsFd + IsTerminal) -> Option<usize> {
    if !stream.is_terminal() {
        return None;
    }
    let size = rustix::termios::tcgetwinsize(stream).ok();
    match size.map(|s| s.ws_col as usize).filter(|&w| w > 0) {
        Some(width) => Some(width),
        None => std::env::var("COLUMNS").ok()?.parse().ok(),
    }
}

/// Columns of the terminal standard output is, if it is one.
pub fn stdout_width() -> Option<usize> {
    width_of(std::io::stdout())
}

/// Columns of the terminal standard error is, if it is one.
pub fn stderr_width() -> Option<usize> {
    width_of(std::io::stderr())
}
