//! [`LanceNdSink`]: a query's rows appended to a lance-nd table as nd record batches, in one
//! Lance commit, by `COPY ... STORED AS LANCE_ND` and `INSERT INTO`.
//!
//! The sink requires its rows sorted by their global attributes (`nd/rows_groups.rs`), so the rows of
//! one batch arrive together: when the next batch's first row arrives, the batch is laid on
//! its grid and its data files are written (`StagedWrite`), and its rows are let go. A write
//! holds one batch at a time, reserved from the session's memory pool (the sort before it
//! spills); one batch larger than the pool is an error, never a process out of memory. The
//! commit comes after the last batch, so a query that fails or is cancelled first commits
//! nothing. Gridding runs on a blocking thread, off the async workers.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;

use crate::error::Error;
use crate::lance_nd::table::Reading;
use crate::lance_nd::writer::{StagedWrite, WriteOptions};
use crate::nd::rows_batch::RowsLayout;
use crate::nd::rows_groups::{required_ordering, GroupCuts};

/// Appends rows to the lance-nd table at one location.
#[derive(Debug)]
pub(crate) struct LanceNdSink {
    location: String,
    layout: Arc<RowsLayout>,
    options: WriteOptions,
    schema: SchemaRef,
    /// The table written through (`INSERT INTO`): it reads the version the write made next.
    table: Option<Arc<Reading>>,
    /// What the sink is, in EXPLAIN (`COPY` or `INSERT`).
    statement: &'static str,
    metrics: ExecutionPlanMetricsSet,
}

impl LanceNdSink {
    pub(crate) fn new(
        location: &str,
        layout: RowsLayout,
        options: WriteOptions,
        schema: SchemaRef,
        table: Option<Arc<Reading>>,
    ) -> Self {
        LanceNdSink {
            location: location.to_string(),
            layout: Arc::new(layout),
            options,
            schema,
            statement: if table.is_some() { "INSERT" } else { "COPY" },
            table,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The order the sink takes its rows in (by their batch), for its `DataSinkExec`.
    pub(crate) fn required_ordering(&self) -> Option<LexRequirement> {
        required_ordering(&self.schema, &self.layout.keys())
    }

    /// A write refused for `reason`, naming the location.
    fn refused(&self, reason: impl ToString) -> DataFusionError {
        DataFusionError::from(Error::Write {
            location: self.location.clone(),
            reason: reason.to_string(),
        })
    }
}

impl DisplayAs for LanceNdSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LanceNdSink: {} location={}, {}",
            self.statement, self.location, self.layout
        )
    }
}

/// The rows of the batch being received, and what they hold in the memory pool.
struct OpenBatch {
    rows: Vec<RecordBatch>,
    memory: MemoryReservation,
}

impl OpenBatch {
    fn take(&mut self, rows: RecordBatch) -> DfResult<()> {
        if rows.num_rows() > 0 {
            self.memory.try_grow(rows.get_array_memory_size())?;
            self.rows.push(rows);
        }
        Ok(())
    }
}

#[async_trait]
impl DataSink for LanceNdSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Takes the rows in the order of their batches, writes each batch's data files when
    /// its rows are complete, and commits them all at the end: called once per statement.
    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let written = MetricBuilder::new(&self.metrics).global_counter("nd_batches");
        let mut write = StagedWrite::begin(&self.location, &self.options).await?;
        let mut cuts =
            GroupCuts::new(&self.schema, self.layout.keys()).map_err(|e| self.refused(e))?;
        let mut open = OpenBatch {
            rows: Vec::new(),
            memory: MemoryConsumer::new(format!("LanceNdSink {}", self.location))
                .register(context.memory_pool()),
        };
        let mut rows = 0u64;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            rows += batch.num_rows() as u64;
            let mut begin = 0;
            for start in cuts.starts(&batch).map_err(|e| self.refused(e))? {
                open.take(batch.slice(begin, start - begin))?;
                open = self.write_batch(open, &mut write, &written).await?;
                begin = start;
            }
            open.take(batch.slice(begin, batch.num_rows() - begin))?;
        }
        self.write_batch(open, &mut write, &written).await?;
        write.commit().await?;
        if let Some(table) = &self.table {
            table.refresh().await.map_err(|e| {
                self.refused(format!(
                    "the rows were committed, but the table could not be read again: {e}"
                ))
            })?;
        }
        Ok(rows)
    }
}

impl LanceNdSink {
    /// Lays the rows of `open` (one batch's, if any) on their grid and writes them; gives
    /// back an empty batch with the memory let go.
    async fn write_batch(
        &self,
        open: OpenBatch,
        write: &mut StagedWrite,
        written: &Count,
    ) -> DfResult<OpenBatch> {
        let OpenBatch { rows, mut memory } = open;
        if rows.is_empty() {
            return Ok(OpenBatch { rows, memory });
        }
        let layout = Arc::clone(&self.layout);
        let schema = Arc::clone(&self.schema);
        let (batch, memory) = tokio::task::spawn_blocking(move || {
            // Held twice while they are joined.
            memory.try_grow(memory.size())?;
            let group = concat_batches(&schema, &rows)?;
            drop(rows);
            memory.shrink(memory.size() / 2);
            let batch = layout.batch(&group, &mut memory);
            Ok::<_, DataFusionError>((batch, memory))
        })
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))??;
        let batch = batch.map_err(|e| self.refused(e))?;
        write.add(std::slice::from_ref(&batch)).await?;
        written.add(1);
        memory.free();
        Ok(OpenBatch {
            rows: Vec::new(),
            memory,
        })
    }
}
