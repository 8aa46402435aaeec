//! The progress line of a statement that runs longer than a second, on standard error: the
//! scans' units done of those planned (chunks, blocks, members: `ScanExec`'s
//! `{unit}_planned` and `{unit}_done` counters, summed over the plan), bytes read, rows out,
//! the time so far and an estimate of the rest.
//!
//! It is drawn from the plan's metrics four times a second by a task of its own: the scans
//! only add to counters they keep anyway, so a scan is no slower for being watched.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::physical_plan::ExecutionPlan;
use tokio::task::JoinHandle;

/// How long a statement runs before its progress is shown.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// How often the line is drawn again.
const EVERY: Duration = Duration::from_millis(250);

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// When standard error is a terminal, and results go to a terminal or as a table.
    Auto,
    Always,
    Never,
}

/// The progress line of one running statement; cleared when dropped.
pub struct Progress {
    task: JoinHandle<()>,
    drawn: Arc<AtomicUsize>,
}

impl Progress {
    /// Shows the progress of `plan`, whose rows out are counted in `rows`, from a second
    /// after now until dropped.
    pub fn start(plan: Arc<dyn ExecutionPlan>, rows: Arc<AtomicUsize>) -> Progress {
        let drawn = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let task = tokio::spawn({
            let drawn = Arc::clone(&drawn);
            async move {
                tokio::time::sleep(QUIET_FOR).await;
                let mut ticks = tokio::time::interval(EVERY);
                loop {
                    ticks.tick().await;
                    let counts = Counts::of(plan.as_ref());
                    let line = counts.line(rows.load(Ordering::Relaxed), start.elapsed());
                    let width = crate::terminal::stderr_width()
                        .unwrap_or(80)
                        .saturating_sub(1);
                    let line = crate::output::shorten(&line, width);
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                    drawn.store(1, Ordering::Relaxed);
                }
            }
        });
        Progress { task, drawn }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
        if self.drawn.load(Ordering::Relaxed) > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

/// The counters of a plan that progress shows, summed over its nodes and partitions.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    /// Units done and planned, by unit (`chunks`, `blocks`, ...), in name order.
    units: BTreeMap<String, (usize, usize)>,
    bytes_read: usize,
}

impl Counts {
    fn of(plan: &dyn ExecutionPlan) -> Counts {
        let mut counts = Counts::default();
        counts.add(plan);
        counts
    }

    fn add(&mut self, plan: &dyn ExecutionPlan) {
        for metric in plan.metrics().iter().flat_map(|m| m.iter()) {
            let value = metric.value();
            let name = value.name();
            if let Some(unit) = name.strip_suffix("_planned") {
                self.units.entry(unit.to_string()).or_default().1 += value.as_usize();
            } else if let Some(unit) = name.strip_suffix("_done") {
                self.units.entry(unit.to_string()).or_default().0 += value.as_usize();
            } else if name == "bytes_read" {
                self.bytes_read += value.as_usize();
            }
        }
        for child in plan.children() {
            self.add(child.as_ref());
        }
    }

    /// `chunks 120/400 · 1.2 GiB read · 3,456,789 rows · 12.3 s, about 28 s left`.
    fn line(&self, rows: usize, elapsed: Duration) -> String {
        let mut parts: Vec<String> = (self.units.iter())
            .filter(|(_, (_, planned))| *planned > 0)
            .map(|(unit, (done, planned))| format!("{unit} {done}/{planned}"))
            .collect();
        if self.bytes_read > 0 {
            parts.push(format!(
                "{} read",
                ndfusion::format_size(self.bytes_read as u64)
            ));
        }
        parts.push(format!("{} rows", thousands(rows)));
        let seconds = elapsed.as_secs_f64();
        let mut time = format!("{seconds:.1} s");
        // The rest estimated from the units of the first scan that has done some.
        let share = (self.units.values()).find(|(done, planned)| *done > 0 && planned > done);
        if let Some((done, planned)) = share {
            let left = seconds * (planned - done) as f64 / *done as f64;
            time.push_str(&format!(", about {left:.0} s left"));
        }
        parts.push(time);
        parts.join(" · ")
    }
}

/// `1234567` as `1,234,567`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_units_bytes_rows_and_an_estimate() {
        let counts = Counts {
            units: BTreeMap::from([("chunks".to_string(), (100, 400))]),
            bytes_read: 3 * 1024 * 1024 * 1024 / 2,
        };
        assert_eq!(
            counts.line(1_234_567, Duration::from_secs(10)),
            "chunks 100/400 · 1.5 GiB read · 1,234,567 rows · 10.0 s, about 30 s left"
        );
        assert_eq!(
            Counts::default().line(0, Duration::from_millis(1500)),
            "0 rows · 1.5 s"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(ndfusion::format_size(1023), "1023 B");
    }
}
