//! [`LanceNdSink`]: a query's rows appended to a lance-nd table as nd record batches, in one
//! Lance commit (`write_nd_batches`), by `COPY ... STORED AS LANCE_ND` and `INSERT INTO`.
//!
//! A batch is one table row and the commit takes all of them, so the rows are held until the
//! write: what they and their batches take is reserved from the session's memory pool, and a
//! result larger than the pool is an error before anything is written, never a process out of
//! memory. Grouping and gridding run on a blocking thread, off the async workers.

use std::sync::Arc;

use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::sink::DataSink;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;

use super::rows::RowsLayout;
use crate::error::Error;
use crate::lance_nd::table::Reading;
use crate::lance_nd::writer::{write_nd_batches, WriteOptions};

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

#[async_trait]
impl DataSink for LanceNdSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Takes every row, makes the batches, and appends them in one commit: called once per
    /// statement. Nothing is committed when the query fails or is cancelled first.
    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let memory = MemoryConsumer::new(format!("LanceNdSink {}", self.location))
            .register(context.memory_pool());
        let mut received = Vec::new();
        let mut rows = 0u64;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            memory.try_grow(batch.get_array_memory_size())?;
            rows += batch.num_rows() as u64;
            received.push(batch);
        }
        let layout = Arc::clone(&self.layout);
        let schema = Arc::clone(&self.schema);
        let (batches, memory) = tokio::task::spawn_blocking(move || {
            let mut memory = memory;
            // Held twice while they are joined.
            memory.try_grow(memory.size())?;
            let all = concat_batches(&schema, &received)?;
            drop(received);
            memory.shrink(memory.size() / 2);
            let batches = layout.batches(&all, &mut memory);
            Ok::<_, DataFusionError>((batches, memory))
        })
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))??;
        let batches = batches.map_err(|e| self.refused(e))?;
        MetricBuilder::new(&self.metrics)
            .global_counter("nd_batches")
            .add(batches.len());
        write_nd_batches(&self.location, &batches, &self.options).await?;
        drop(memory);
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
