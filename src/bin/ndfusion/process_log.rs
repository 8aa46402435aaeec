//! Log lines of a cluster process (Ballista logs through the `log` crate) on standard error.
//! `RUST_LOG` sets the level (`error`, `warn`, `info`, `debug`, `trace`; default `warn`).

use std::io::Write;

struct StderrLog {
    level: log::LevelFilter,
    start: std::time::Instant,
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "[{:9.3}s] {} {}: {}",
                self.start.elapsed().as_secs_f64(),
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// Sends log records at or above `RUST_LOG`'s level (default `warn`) to standard error.
pub fn init() {
    let level = std::env::var("RUST_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(log::LevelFilter::Warn);
    let logger = Box::leak(Box::new(StderrLog {
        level,
        start: std::time::Instant::now(),
    }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}
