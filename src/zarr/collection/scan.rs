//! The scan of a collection, as a [`ScanSource`]: EXPLAIN shows it as
//! `ZarrCollectionScanExec`. The chosen members are split into contiguous runs, one per
//! partition; each member's plan (a Zarr array or dataset scan) runs its partitions in turn,
//! and its batches get the collection's columns (NULL where the member lacks one) and its
//! `__global_attrs__`.

use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::Result;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::metrics::{Count, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};
use futures::{StreamExt, TryStreamExt};

use crate::scan::{
    column_names, nth_partition, OpenPartition, PartitionUnits, ScanShape, ScanSource, UnitRead,
};
use crate::zarr::metadata::attributes::GlobalAttrs;

const NAME: &str = "ZarrCollectionScanExec";

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

/// The scan of a collection's chosen members.
#[derive(Debug)]
pub(crate) struct CollectionScan {
    pattern: String,
    schema: SchemaRef,
    members: Vec<Arc<MemberScan>>,
    /// Member indices per partition.
    partitions: Vec<Vec<usize>>,
    total_members: usize,
    limit: Option<usize>,
}

impl CollectionScan {
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
        CollectionScan {
            pattern,
            schema,
            members: members.into_iter().map(Arc::new).collect(),
            partitions,
            total_members,
            limit,
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

impl ScanSource for CollectionScan {
    fn shape(&self) -> ScanShape<'_> {
        ScanShape::new(NAME, &self.schema, self.partitions.len())
    }

    fn fmt_details(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names = column_names(&self.schema);
        write!(
            f,
            "pattern={}, projection=[{}], partitions={}, members={}/{}",
            self.pattern,
            names,
            self.partitions.len(),
            self.members.len(),
            self.total_members
        )?;
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }

    fn open(&self, open: OpenPartition<'_>) -> Result<PartitionUnits> {
        let (partition, context, metrics) = (open.index, open.context, open.metrics);
        let members = nth_partition(&self.partitions, partition, NAME)?;
        let members: Vec<Arc<MemberScan>> = members
            .iter()
            .map(|&m| Arc::clone(&self.members[m]))
            .collect();
        let unit_count = members.len();
        let read: Count = MetricBuilder::new(metrics).counter("members_read", partition);
        let schema = Arc::clone(&self.schema);
        let context = Arc::clone(context);
        let units = members.into_iter().map(move |member| -> UnitRead {
            read.add(1);
            let parts = member.plan.properties().partitioning.partition_count();
            let (context, schema, plan) = (
                Arc::clone(&context),
                Arc::clone(&schema),
                Arc::clone(&member.plan),
            );
            let batches = futures::stream::iter(0..parts)
                .map(move |i| plan.execute(i, Arc::clone(&context)))
                .try_flatten()
                .map(move |batch| adapt(&member, &schema, batch?));
            Box::pin(futures::future::ready(Ok(batches.boxed())))
        });
        // One member at a time: each member's own scan keeps its reads in flight and reserves
        // their memory.
        Ok(PartitionUnits::sequential(units, unit_count, self.limit))
    }

    fn metrics(&self, own: MetricsSet) -> MetricsSet {
        // The collection's own counters and the members' scans', summed by name.
        let mut set = own;
        for member in &self.members {
            if let Some(metrics) = member.plan.metrics() {
                for metric in metrics.iter() {
                    set.push(Arc::clone(metric));
                }
            }
        }
        set.aggregate_by_name()
    }

    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>> {
        let rows = match partition {
            None => self.rows_of(&(0..self.members.len()).collect::<Vec<_>>()),
            Some(p) => self.rows_of(nth_partition(&self.partitions, p, NAME)?),
        };
        Ok(match (rows, self.limit, partition) {
            (Some(n), Some(limit), None) => Precision::Exact(n.min(limit)),
            (Some(n), _, _) => Precision::Exact(n),
            (None, _, _) => Precision::Absent,
        })
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
