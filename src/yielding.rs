//! Yield points in every operator, so that a query whose stream is dropped stops its work.
//!
//! A query is stopped by dropping its stream (Ctrl-C in the REPL, `serve`'s timeout, a
//! client's cancel, SIGTERM): DataFusion then aborts the tasks running its partitions. An
//! abort takes effect only where a task yields to tokio, and DataFusion 54 yields only where
//! batches are made by sources and exchanges (`EnsureCooperative`: each consumes a unit of
//! the task's budget per batch). Operators that make many batches from what they already hold
//! — a cross or nested-loop join of in-memory sides, an aggregate's or a sort's output, an
//! unnest — never return to the runtime: a four-way cross join of 1,000 rows kept both cores
//! busy long after Ctrl-C, and the REPL's own task, which would see the Ctrl-C, waited for a
//! free worker behind it.
//!
//! [`YieldPoints`], the session's last physical rule, wraps every operator that does not
//! yield on its own in [`Yielding`], whose stream returns to the runtime (a `Pending` that
//! wakes itself at once) once the work below it has held the core for [`SLICE`] since it last
//! returned, or the task's tokio budget is spent (a unit per batch, as `CooperativeExec`
//! spends). Time, not batches alone: a batch of a nested-loop join over 1,000 rows costs
//! 8·10^6 comparisons, so 128 of them held a core for seconds. An abort then stops the task
//! within about a slice; a batch costs one budget check and two clock reads. The wrapper
//! delegates its display, metrics and downcast identity (`downcast_delegate`) to the
//! operator: EXPLAIN, EXPLAIN ANALYZE and code inspecting the plan (the cluster codec) see the
//! operator alone. What one batch's computation holds the core for (one sort of a partition's
//! rows in memory, one batch of a join) is not cut short.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use futures::{Stream, StreamExt};

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, Statistics};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::SchedulingType;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, PlanProperties, RecordBatchStream,
};

/// How long an operator's work may hold the core before its task returns to the runtime.
/// Short, because a worker that only runs such tasks polls its I/O and signal drivers every
/// 61 returns (tokio's `event_interval`): with 10 ms slices a Ctrl-C took 0.9 s to be seen,
/// with 2 ms about a fifth of that. A return costs a few microseconds.
const SLICE: Duration = Duration::from_millis(2);

/// Wraps every operator that does not yield on its own in [`Yielding`]: the last physical
/// rule, so that no other rule meets the wrapper.
#[derive(Debug, Default)]
pub(crate) struct YieldPoints;

impl PhysicalOptimizerRule for YieldPoints {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            // Sources and exchanges yield already (DataFusion's `EnsureCooperative` made sure
            // of it); a wrapped operator is not wrapped twice (the rule runs again over
            // writer plans: `cluster/client_writes.rs`).
            let yields = node.children().is_empty()
                || node.properties().scheduling_type == SchedulingType::Cooperative
                || (node.as_ref() as &dyn std::any::Any).is::<Yielding>();
            Ok(match yields {
                true => Transformed::no(node),
                false => Transformed::yes(Arc::new(Yielding::new(node)) as _),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "YieldPoints"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` without the [`Yielding`] around it: for an operator that keeps a child to fold
/// or look up itself rather than poll (`GridAggregateExec`'s scan and tables,
/// `GridWriteExec`'s aggregate), a wrapped child is the same child.
pub(crate) fn unwrapped(plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    match (plan.as_ref() as &dyn std::any::Any).downcast_ref::<Yielding>() {
        Some(yielding) => &yielding.inner,
        None => plan,
    }
}

/// An operator whose stream yields to the runtime once the task's budget is spent; otherwise
/// the operator itself.
#[derive(Debug)]
pub(crate) struct Yielding {
    inner: Arc<dyn ExecutionPlan>,
}

impl Yielding {
    fn new(inner: Arc<dyn ExecutionPlan>) -> Self {
        Yielding { inner }
    }
}

impl DisplayAs for Yielding {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_as(t, f)
    }
}

impl ExecutionPlan for Yielding {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.inner.as_ref())
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        self.inner.required_input_distribution()
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        self.inner.maintains_input_order()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inner.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).with_new_children(children)?;
        Ok(Arc::new(Yielding::new(inner)))
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).reset_state()?;
        Ok(Arc::new(Yielding::new(inner)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        Ok(Box::pin(YieldingStream {
            inner: self.inner.execute(partition, context)?,
            busy: Duration::ZERO,
            yielding: None,
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        self.inner.metrics()
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.inner.partition_statistics(partition)
    }

    fn fetch(&self) -> Option<usize> {
        self.inner.fetch()
    }
}

/// An operator's stream that returns to the runtime after [`SLICE`] of work, or when the
/// task's budget is spent.
struct YieldingStream {
    inner: SendableRecordBatchStream,
    /// The time spent in `inner` since it, or this stream, last returned `Pending`.
    busy: Duration,
    /// A yield under way. tokio's `yield_now` wakes the task only once it has returned to the
    /// runtime, which then runs the tasks waiting before it (a waker woken during the poll
    /// would put the task first in line again: its worker's LIFO slot).
    yielding: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Stream for YieldingStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.busy >= SLICE && self.yielding.is_none() {
            self.yielding = Some(Box::pin(tokio::task::yield_now()));
        }
        if let Some(yielding) = self.yielding.as_mut() {
            ready!(yielding.as_mut().poll(cx));
            self.yielding = None;
            self.busy = Duration::ZERO;
        }
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let start = Instant::now();
        let polled = self.inner.poll_next_unpin(cx);
        match polled.is_ready() {
            true => {
                coop.made_progress();
                self.busy += start.elapsed();
            }
            // The task returns to the runtime anyway.
            false => self.busy = Duration::ZERO,
        }
        polled
    }
}

impl RecordBatchStream for YieldingStream {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::physical_plan::displayable;
    use datafusion::physical_plan::joins::NestedLoopJoinExec;
    use datafusion::prelude::SessionContext;

    /// A join's plan: wrapped where it does not yield, shown and downcast as before.
    #[tokio::test]
    async fn operators_are_wrapped_invisibly() {
        let ctx = SessionContext::new();
        let sql = "SELECT count(*) FROM generate_series(1, 10) a, generate_series(1, 10) b \
                   WHERE a.value < b.value";
        let plan = ctx.sql(sql).await.unwrap();
        let plan = plan.create_physical_plan().await.unwrap();
        let before = displayable(plan.as_ref()).indent(true).to_string();
        let wrapped = YieldPoints
            .optimize(Arc::clone(&plan), &ConfigOptions::default())
            .unwrap();
        assert_eq!(
            displayable(wrapped.as_ref()).indent(true).to_string(),
            before
        );
        let mut found = 0;
        wrapped
            .apply(|node| {
                let any = node.as_ref() as &dyn std::any::Any;
                if node.downcast_ref::<NestedLoopJoinExec>().is_some() {
                    assert!(any.is::<Yielding>(), "a nested-loop join left unwrapped");
                    found += 1;
                }
                if node.children().is_empty() {
                    assert!(!any.is::<Yielding>(), "a source wrapped");
                }
                Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
            })
            .unwrap();
        assert_eq!(found, 1, "{before}");
        // Run again (writer plans are): nothing is wrapped twice.
        let again = YieldPoints
            .optimize(Arc::clone(&wrapped), &ConfigOptions::default())
            .unwrap();
        let twice = again.apply(|node| {
            let inner = (node.as_ref() as &dyn std::any::Any).downcast_ref::<Yielding>();
            assert!(
                inner.is_none_or(|y| !(y.inner.as_ref() as &dyn std::any::Any).is::<Yielding>())
            );
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        });
        twice.unwrap();
        let batches = datafusion::physical_plan::collect(again, ctx.task_ctx())
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap();
        assert!(text.to_string().contains("| 45 "), "{text}");
    }
}
