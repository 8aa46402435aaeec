//! Pieces the Zarr and lance-nd scans share.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, plan_err, Result, Statistics};
use datafusion::logical_expr::CreateExternalTable;
use futures::{Stream, StreamExt};

/// The projected schema and the projected per-column sources of a table whose columns come
/// from `sources` (all of them when `projection` is `None`).
pub(crate) fn project_columns<T: Clone>(
    schema: &Schema,
    sources: &[T],
    projection: Option<&Vec<usize>>,
) -> Result<(SchemaRef, Vec<T>)> {
    let indices: Vec<usize> = match projection {
        Some(p) => p.clone(),
        None => (0..sources.len()).collect(),
    };
    let projected = Arc::new(schema.project(&indices)?);
    Ok((
        projected,
        indices.iter().map(|&i| sources[i].clone()).collect(),
    ))
}

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

/// The statistics of a scan whose partitions produce `rows[i]` rows (all of them when
/// `partition` is `None`), cut at `limit`; inexact when a row filter drops an unknown number.
pub(crate) fn scan_statistics(
    schema: &Schema,
    rows: &[usize],
    partition: Option<usize>,
    limit: Option<usize>,
    filtered: bool,
) -> Result<Statistics> {
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
    let n = if filtered {
        Precision::Inexact(n)
    } else {
        Precision::Exact(n)
    };
    Ok(Statistics::new_unknown(schema).with_num_rows(n))
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

/// ndfusion's tables take no column list or partitioning: their columns come from the data.
/// `format` is the `STORED AS` name, for messages.
pub(crate) fn check_external_table(cmd: &CreateExternalTable, format: &str) -> Result<()> {
    if !cmd.schema.fields().is_empty() {
        return plan_err!(
            "STORED AS {format} reads its columns from the data: leave out the column list"
        );
    }
    if !cmd.table_partition_cols.is_empty() {
        return plan_err!("STORED AS {format} does not support PARTITIONED BY");
    }
    Ok(())
}
