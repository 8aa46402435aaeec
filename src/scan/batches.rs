//! Batches through a scan: cut to the batch size, stopped at a limit, counted for statistics.

use arrow::array::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, Result};
use futures::{Stream, StreamExt};

/// Zero-copy slices of `batches` of at most `batch_size` rows each.
pub(crate) fn slices(batches: &[RecordBatch], batch_size: usize) -> Vec<RecordBatch> {
    let batch_size = batch_size.max(1);
    batches
        .iter()
        .flat_map(|batch| {
            let rows = batch.num_rows();
            (0..rows.max(1))
                .step_by(batch_size)
                .map(move |offset| batch.slice(offset, batch_size.min(rows - offset)))
        })
        .collect()
}

/// The rows of a scan whose partitions produce `rows[i]` rows (all of them when `partition`
/// is `None`), cut at `limit`; inexact when a row filter drops an unknown number.
pub(crate) fn row_count(
    rows: &[usize],
    partition: Option<usize>,
    limit: Option<usize>,
    filtered: bool,
) -> Result<Precision<usize>> {
    let n = match partition {
        None => rows.iter().sum(),
        Some(i) => match rows.get(i) {
            Some(&n) => n,
            None => return internal_err!("the scan has no partition {i}"),
        },
    };
    let n = match (partition, limit) {
        (None, Some(limit)) => n.min(limit),
        _ => n,
    };
    Ok(if filtered {
        Precision::Inexact(n)
    } else {
        Precision::Exact(n)
    })
}

/// Stops a batch stream after `limit` rows, slicing the last batch.
pub(crate) fn limit_rows(
    stream: impl Stream<Item = Result<RecordBatch>>,
    limit: Option<usize>,
) -> impl Stream<Item = Result<RecordBatch>> {
    stream.scan(limit.unwrap_or(usize::MAX), |remaining, batch| {
        let out = match batch {
            Ok(_) if *remaining == 0 => return futures::future::ready(None),
            Ok(b) => {
                let keep = b.num_rows().min(*remaining);
                *remaining -= keep;
                Ok(b.slice(0, keep))
            }
            Err(e) => Err(e),
        };
        futures::future::ready(Some(out))
    })
}
