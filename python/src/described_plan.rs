//! What a scan crossing the FFI is called: datafusion-python prints a foreign plan as
//! `FFI_ExecutionPlan: <name>, ...`, and only `name()` crosses, so the name carries what
//! EXPLAIN shows in Rust (`ZarrScanExec: array=..., chunks=2/9, selection=...`).

use std::fmt;
use std::sync::Arc;

use datafusion::common::{Result, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{
    displayable, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
};

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
        self.inner.execute(partition, context)
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.inner.partition_statistics(partition)
    }
}
