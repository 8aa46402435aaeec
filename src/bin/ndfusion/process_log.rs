//! Log lines on standard error: every record of a cluster process (Ballista logs through the
//! `log` crate), timed; in the command line, ndfusion's own warnings (a netCDF variable left
//! out, a failed write's objects not removed) as `Warning: ...` lines, which the other
//! libraries' logs would drown. `RUST_LOG` sets the level (`error`, `warn`, `info`, `debug`,
//! `trace`; default `warn`); set, it shows every library's records in the command line too.

use std::io::Write;

struct StderrLog {
    level: log::LevelFilter,
    start: std::time::Instant,
    /// The command line's plain `Warning:` lines of ndfusion's records only.
    plain: bool,
}

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.level && (!self.plain || metadata.target().starts_with("ndfusion"))
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = match self.plain {
            true => {
                let level = match record.level() {
                    log::Level::Error => "Error",
                    log::Level::Warn => "Warning",
                    _ => record.level().as_str(),
                };
                writeln!(stderr, "{level}: {}", record.args())
            }
            false => writeln!(
                stderr,
                "[{:9.3}s] {} {}: {}",
                self.start.elapsed().as_secs_f64(),
                record.level(),
                record.target(),
                record.args()
            ),
        };
    }

    fn flush(&self) {}
}

/// Sends log records at or above `RUST_LOG`'s level (default `warn`) to standard error: a
/// cluster process's all, timed; the command line's (`command_line`) ndfusion's own as plain
/// `Warning:` lines unless `RUST_LOG` is set.
pub fn init(command_line: bool) {
    let set = std::env::var("RUST_LOG").ok().and_then(|l| l.parse().ok());
    let level = set.unwrap_or(log::LevelFilter::Warn);
    let logger = Box::leak(Box::new(StderrLog {
        level,
        start: std::time::Instant::now(),
        plain: command_line && set.is_none(),
    }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}
