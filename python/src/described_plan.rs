//! A scan crossing the FFI. What it is called: datafusion-python prints a foreign plan as
//! `FFI_ExecutionPlan: <name>, ...`, and only `name()` crosses, so the name carries what
//! EXPLAIN shows in Rust (`ZarrScanExec: array=..., chunks=2/9, selection=...`). And how
//! large its batches are: each batch crosses the FFI on its own (its arrays exported and
//! imported through the C data interface, the stream polled through the FFI), so the scan
//! runs with batches of at least [`FFI_BATCH_ROWS`] rows.

use std::fmt;
use std::sync::Arc;

use datafusion::common::{Result, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{
    displayable, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
};

/// The fewest rows per batch a scan hands to datafusion-python, unless its session asks for
/// more or the table's `batch_size` option says otherwise: at datafusion-python's default
/// of 8,192 a full scan took 1.20-1.23x the CLI's time, at 65,536 1.14x (BENCHMARKS.md, "From
/// Python"). The CLI needs no such floor (its batches cross nothing).
pub(crate) const FFI_BATCH_ROWS: usize = 65_536;

#[derive(Debug)]
pub(crate) struct DescribedPlan {
    inner: Arc<dyn ExecutionPlan>,
    name: String,
}

impl DescribedPlan {
    pub(crate) fn new(inner: Arc<dyn ExecutionPlan>) -> Self {
        let name = displayable(inner.as_ref()).one_line().to_string();
        DescribedPlan {
            name: name.trim_end().to_string(),
            inner,
        }
    }
}

impl DisplayAs for DescribedPlan {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.fmt_as(t, f)
    }
}

impl ExecutionPlan for DescribedPlan {
    fn name(&self) -> &str {
        &self.name
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inner.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).with_new_children(children)?;
        Ok(Arc::new(DescribedPlan::new(inner)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let config = context.session_config();
        if config.batch_size() >= FFI_BATCH_ROWS {
            return self.inner.execute(partition, context);
        }
        let config = config.clone().with_batch_size(FFI_BATCH_ROWS);
        let larger = TaskContext::new(
            context.task_id(),
            context.session_id(),
            config,
            context.scalar_functions().clone(),
            context.higher_order_functions().clone(),
            context.aggregate_functions().clone(),
            context.window_functions().clone(),
            context.runtime_env(),
        );
        self.inner.execute(partition, Arc::new(larger))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.inner.partition_statistics(partition)
    }
}
