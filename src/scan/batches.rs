//! Batches through a scan: cut to the batch size, stopped at a limit, reversed for a scan read
//! backwards, counted for statistics.

use arrow::array::{RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::compute::take;
use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, Result};
use futures::{FutureExt, Stream, StreamExt, TryFutureExt, TryStreamExt};

use super::source::UnitRead;

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

/// `unit`, calling `end` once its batches have all been taken (not when it is dropped
/// unfinished).
pub(crate) fn on_unit_end(unit: UnitRead, end: impl FnOnce() + Send + 'static) -> UnitRead {
    unit.map_ok(move |batches| {
        let end = futures::stream::once(async move {
            end();
            None
        });
        batches
            .map(Some)
            .chain(end)
            .filter_map(futures::future::ready)
            .boxed()
    })
    .boxed()
}

/// `unit`'s rows last to first: all its batches taken, then each given back reversed, the
/// last first. A reversed unit so holds its whole output at once (the source counts it).
pub(crate) fn reversed_unit(unit: UnitRead) -> UnitRead {
    async move {
        let batches: Vec<RecordBatch> = unit.await?.try_collect().await?;
        let reversed = batches.into_iter().rev().map(|batch| {
            let n = batch.num_rows() as u32;
            let indices = UInt32Array::from_iter_values((0..n).rev());
            let columns = (batch.columns().iter())
                .map(|c| take(c.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let options = RecordBatchOptions::new().with_row_count(Some(n as usize));
            Ok(RecordBatch::try_new_with_options(
                batch.schema(),
                columns,
                &options,
            )?)
        });
        Ok(futures::stream::iter(reversed.collect::<Vec<Result<RecordBatch>>>()).boxed())
    }
    .boxed()
}

/// The rows of a scan whose partitions produce `rows[i]` rows (all of them when `partition`
/// is `None`), cut at `limit`; inexact when a row filter drops an unknown number of them.
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
    // A filter cannot add rows: none before it is none after.
    Ok(if filtered && n > 0 {
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
