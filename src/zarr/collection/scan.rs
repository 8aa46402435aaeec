//! `ZarrCollectionScanExec`: the chosen members' scans, member by member. Members are split
//! into contiguous runs, one per partition; each member's plan (a Zarr array or dataset scan)
//! runs its partitions in turn, and its batches get the collection's columns (NULL where the
//! member lacks one) and its `__global_attrs__`.

use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::scan_util::limit_rows;
use crate::table_source::OriginSlot;
use crate::zarr::attributes::GlobalAttrs;

/// Where an output column of a member's batches comes from.
#[derive(Debug, Clone)]
pub(crate) enum MemberColumn {
    /// Column `i` of the member plan's output.
    Member(usize),
    /// The member lacks the column.
    Null(DataType),
    /// The member's attributes.
    GlobalAttrs,
}

/// One chosen member: its plan and how its batches become the collection's.
#[derive(Debug, Clone)]
pub(crate) struct MemberScan {
    pub location: String,
    pub plan: Arc<dyn ExecutionPlan>,
    pub columns: Vec<MemberColumn>,
    pub attrs: Option<GlobalAttrs>,
}

#[derive(Debug)]
pub(crate) struct CollectionScanExec {
    pattern: String,
    schema: SchemaRef,
    members: Vec<MemberScan>,
    /// Member indices per partition.
    partitions: Vec<Vec<usize>>,
    total_members: usize,
    limit: Option<usize>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    /// The table's scan call that planned this, for a cluster's codec.
    origin: OriginSlot,
}

impl CollectionScanExec {
    /// The scan call that planned this scan (set by the table).
    pub(crate) fn origin(&self) -> &OriginSlot {
        &self.origin
    }

    pub(crate) fn new(
        pattern: String,
        schema: SchemaRef,
        members: Vec<MemberScan>,
        total_members: usize,
        limit: Option<usize>,
        target_partitions: usize,
    ) -> Self {
        let n = members.len();
        let parts = target_partitions.max(1).min(n).max(1);
        let mut partitions: Vec<Vec<usize>> = vec![Vec::new(); parts];
        for m in 0..n {
            partitions[m * parts / n.max(1)].push(m);
        }
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(parts),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        CollectionScanExec {
            pattern,
            schema,
            members,
            partitions,
            total_members,
            limit,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            origin: OriginSlot::default(),
        }
    }

    fn rows_of(&self, members: &[usize]) -> Option<usize> {
        members
            .iter()
            .map(|&m| {
                match self.members[m]
                    .plan
                    .partition_statistics(None)
                    .ok()?
                    .num_rows
                {
                    Precision::Exact(n) => Some(n),
                    _ => None,
                }
            })
            .sum()
    }
}

impl DisplayAs for CollectionScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "ZarrCollectionScanExec: pattern={}, projection=[{}], partitions={}, members={}/{}",
            self.pattern,
            names.join(", "),
            self.partitions.len(),
            self.members.len(),
            self.total_members
        )?;
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for CollectionScanExec {
    fn name(&self) -> &str {
        "ZarrCollectionScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    /// The members' scans are leaves of their own, not children the optimizer rewrites.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ZarrCollectionScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(members) = self.partitions.get(partition) else {
            return internal_err!("ZarrCollectionScanExec has no partition {partition}");
        };
        let members: Vec<MemberScan> = members.iter().map(|&m| self.members[m].clone()).collect();
        let read: Count = MetricBuilder::new(&self.metrics).counter("members_read", partition);
        let schema = Arc::clone(&self.schema);
        let stream = futures::stream::iter(members)
            .map(move |member| {
                read.add(1);
                let parts = member.plan.properties().partitioning.partition_count();
                let context = Arc::clone(&context);
                let schema = Arc::clone(&schema);
                let plan = Arc::clone(&member.plan);
                let adapted = Arc::new(member);
                futures::stream::iter(0..parts)
                    .map(move |i| plan.execute(i, Arc::clone(&context)))
                    .try_flatten()
                    .map(move |batch| adapt(&adapted, &schema, batch?))
            })
            .flatten();
        let stream = limit_rows(stream, self.limit);
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        // The collection's own counters and the members' scans', summed by name.
        let mut set = self.metrics.clone_inner();
        for member in &self.members {
            if let Some(metrics) = member.plan.metrics() {
                for metric in metrics.iter() {
                    set.push(Arc::clone(metric));
                }
            }
        }
        Some(set.aggregate_by_name())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows = match partition {
            None => self.rows_of(&(0..self.members.len()).collect::<Vec<_>>()),
            Some(p) => match self.partitions.get(p) {
                Some(members) => self.rows_of(members),
                None => return internal_err!("ZarrCollectionScanExec has no partition {p}"),
            },
        };
        let rows = match (rows, self.limit, partition) {
            (Some(n), Some(limit), None) => Precision::Exact(n.min(limit)),
            (Some(n), _, _) => Precision::Exact(n),
            (None, _, _) => Precision::Absent,
        };
        Ok(Arc::new(
            Statistics::new_unknown(&self.schema).with_num_rows(rows),
        ))
    }
}

/// A member's batch with the collection's columns.
fn adapt(member: &MemberScan, schema: &SchemaRef, batch: RecordBatch) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let columns = member
        .columns
        .iter()
        .map(|c| -> Result<ArrayRef> {
            Ok(match c {
                MemberColumn::Member(i) => Arc::clone(batch.column(*i)),
                MemberColumn::Null(t) => new_null_array(t, rows),
                MemberColumn::GlobalAttrs => match &member.attrs {
                    Some(attrs) => attrs.repeated(rows)?,
                    None => {
                        return Err(DataFusionError::Internal(format!(
                            "{}: no global attributes",
                            member.location
                        )))
                    }
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?)
}
