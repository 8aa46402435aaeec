//! The scan of a collection, as a [`ScanSource`]: EXPLAIN shows it as
//! `ZarrCollectionScanExec`. The chosen members are split into contiguous runs, one per
//! partition; each member's plan (a Zarr array or dataset scan) runs its partitions in turn,
//! and its batches get the collection's columns (NULL where the member lacks one) and its
//! `__global_attrs__`.

use std::fmt;
use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, FieldRef, Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{Result, ScalarValue, Statistics};
use datafusion::error::DataFusionError;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{Count, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayFormatType, ExecutionPlan};
use futures::{StreamExt, TryStreamExt};

use super::member_ranges::{as_collection_statistics, ColumnOrigin};
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;
use crate::scan::{
    column_names, nth_partition, OpenPartition, PartitionTarget, PartitionUnits, ScanExec,
    ScanShape, ScanSource, SortKey, UnitRead,
};
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::plan::derived_column::{ConstantColumn, DerivedColumn};

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
    /// An expression of the member's attributes, evaluated at planning.
    Constant(ConstantColumn),
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
    /// The partitions aimed for; on a cluster, the members' bytes a task reads.
    target: PartitionTarget,
    /// The decoded bytes the members' scans read, when each knows.
    read_bytes: Option<u64>,
    /// Members last to first, each read backwards (a sort pushed into the scan).
    reversed: bool,
}

impl CollectionScan {
    pub(crate) fn new(
        pattern: String,
        schema: SchemaRef,
        members: Vec<MemberScan>,
        total_members: usize,
        limit: Option<usize>,
        target: PartitionTarget,
    ) -> Self {
        let n = members.len();
        let read_bytes = (members.iter())
            .map(|m| m.plan.downcast_ref::<ScanExec>()?.read_bytes())
            .try_fold(0u64, |all, member| Some(all.saturating_add(member?)));
        // Sized by the members' average: a member is not split across partitions.
        let target = target.with_unit_bytes(read_bytes.map_or(0, |b| b / n.max(1) as u64));
        let parts = target.partitions_for(n as u64) as usize;
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
            target,
            read_bytes,
            reversed: false,
        }
    }

    /// The same collection scan over `members` (this one's, changed), stopping at `limit`.
    fn with_members(
        &self,
        members: Vec<MemberScan>,
        limit: Option<usize>,
        reversed: bool,
    ) -> Arc<dyn ScanSource> {
        self.with_columns(Arc::clone(&self.schema), members, limit, reversed)
    }

    /// The same with other columns (`schema`, and `members`' columns to match).
    fn with_columns(
        &self,
        schema: SchemaRef,
        members: Vec<MemberScan>,
        limit: Option<usize>,
        reversed: bool,
    ) -> Arc<dyn ScanSource> {
        let mut scan = CollectionScan::new(
            self.pattern.clone(),
            schema,
            members,
            self.total_members,
            limit,
            self.target,
        );
        scan.reversed = reversed;
        Arc::new(scan)
    }

    /// The sort keys every member's scan keeps, as the collection's columns, while the
    /// members follow one another in the leading key: all the keys when no two members'
    /// ranges of it touch, the leading key alone when neighbours share an end value, none
    /// when their ranges overlap (or a member's range is unknown).
    fn member_order(&self) -> Vec<SortKey> {
        let Some(first) = self.members.first() else {
            return Vec::new();
        };
        let mut keys = member_keys(first);
        for member in &self.members[1..] {
            let theirs = member_keys(member);
            let common = keys.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
            keys.truncate(common);
        }
        let Some(lead) = keys.first().copied() else {
            return keys;
        };
        let mut touching = false;
        for pair in self.members.windows(2) {
            let (Some(a), Some(b)) = (range_of(&pair[0], lead), range_of(&pair[1], lead)) else {
                return Vec::new();
            };
            // Ascending: a's largest before b's smallest; descending: b's largest before a's
            // smallest.
            let (before, after) = if lead.descending {
                (&b.1, &a.0)
            } else {
                (&a.1, &b.0)
            };
            match before.partial_cmp(after) {
                Some(std::cmp::Ordering::Less) => {}
                Some(std::cmp::Ordering::Equal) => touching = true,
                _ => return Vec::new(),
            }
        }
        if touching {
            keys.truncate(1);
        }
        keys
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
        ScanShape::new(NAME, &self.schema, self.partitions.len(), "members")
    }

    fn fmt_details(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names = column_names(&self.schema);
        write!(
            f,
            "pattern={}, projection=[{}], partitions={}{}, members={}/{}",
            self.pattern,
            names,
            self.partitions.len(),
            self.target.describe(self.members.len() as u64),
            self.members.len(),
            self.total_members
        )?;
        if self.reversed {
            write!(f, ", reversed")?;
        }
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
        let reversed = self.reversed;
        let units = members.into_iter().map(move |member| -> UnitRead {
            read.add(1);
            let parts = member.plan.properties().partitioning.partition_count();
            // A member's partitions are runs of its plan in order; read backwards, the last
            // run comes first.
            let order: Box<dyn Iterator<Item = usize> + Send> = if reversed {
                Box::new((0..parts).rev())
            } else {
                Box::new(0..parts)
            };
            let (context, schema, plan) = (
                Arc::clone(&context),
                Arc::clone(&schema),
                Arc::clone(&member.plan),
            );
            let batches = futures::stream::iter(order)
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

    fn takes_limits(&self) -> bool {
        true
    }

    fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// Each member's scan stops at the limit too (a member read backwards reads its last
    /// chunks only).
    fn with_limit(&self, limit: Option<usize>) -> Option<Arc<dyn ScanSource>> {
        let members = (self.members.iter())
            .map(|m| MemberScan {
                plan: m
                    .plan
                    .with_fetch(limit)
                    .unwrap_or_else(|| Arc::clone(&m.plan)),
                ..MemberScan::clone(m)
            })
            .collect();
        Some(self.with_members(members, limit, self.reversed))
    }

    /// Read backwards, the members' scans keep the reversed keys and come last to first: the
    /// same check holds.
    fn orderings(&self) -> Vec<Vec<SortKey>> {
        let keys = self.member_order();
        if keys.is_empty() {
            Vec::new()
        } else {
            vec![keys]
        }
    }

    /// The members last to first, each member's scan read backwards.
    fn reversed(&self) -> Option<Arc<dyn ScanSource>> {
        if self.member_order().is_empty() {
            return None;
        }
        let mut members = Vec::with_capacity(self.members.len());
        for member in self.members.iter().rev() {
            let plan = member.plan.downcast_ref::<ScanExec>()?.reversed()?;
            members.push(MemberScan {
                plan,
                ..MemberScan::clone(member)
            });
        }
        Some(self.with_members(members, self.limit, !self.reversed))
    }

    /// Expressions of `__global_attrs__` alone, each evaluated once per member (so the
    /// statistics know every member's value); the members' plans are unchanged.
    fn with_derived_columns(
        &self,
        exprs: &[(Arc<dyn PhysicalExpr>, String)],
        keep: &[usize],
    ) -> Option<Arc<dyn ScanSource>> {
        let attrs_column = match exprs.is_empty() {
            true => None,
            false => Some(self.schema.index_of(GLOBAL_ATTRS_COLUMN).ok()?),
        };
        let mut fields: Vec<FieldRef> = (keep.iter())
            .map(|&i| Arc::clone(&self.schema.fields()[i]))
            .collect();
        let mut members = Vec::with_capacity(self.members.len());
        for (m, member) in self.members.iter().enumerate() {
            let mut constants = Vec::with_capacity(exprs.len());
            if let Some(attrs_column) = attrs_column {
                let attrs = member.attrs.as_ref()?.value();
                for (expr, name) in exprs {
                    let c =
                        ConstantColumn::evaluate(expr, name, &self.schema, attrs_column, &attrs);
                    constants.push(c?);
                }
            }
            if m == 0 {
                fields.extend(constants.iter().map(|c| Arc::clone(&c.field)));
            }
            let columns = (keep.iter().map(|&i| member.columns[i].clone()))
                .chain(constants.into_iter().map(MemberColumn::Constant))
                .collect();
            members.push(MemberScan {
                columns,
                ..MemberScan::clone(member)
            });
        }
        if members.is_empty() && !exprs.is_empty() {
            return None;
        }
        let schema = Arc::new(Schema::new(fields));
        Some(self.with_columns(schema, members, self.limit, self.reversed))
    }

    /// The members' statistics merged: exact bounds of a column when every member's are
    /// (a member lacking the column leaves its bounds unknown).
    fn statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        let members: Vec<usize> = match partition {
            None => (0..self.members.len()).collect(),
            Some(p) => nth_partition(&self.partitions, p, NAME)?.clone(),
        };
        let per_member = (members.iter())
            .map(|&m| member_statistics(&self.members[m], &self.schema))
            .collect::<Result<Vec<_>>>()?;
        let merged = Statistics::try_merge_iter(&per_member, &self.schema)?;
        let rows = self.num_rows(partition)?;
        Ok(match self.limit {
            Some(_) => merged.to_inexact().with_num_rows(rows),
            None => merged.with_num_rows(rows),
        })
    }

    fn read_bytes(&self) -> Option<u64> {
        self.read_bytes
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

/// The order a member's scan keeps, as the collection's columns (up to the first key that is
/// not one of them).
fn member_keys(member: &MemberScan) -> Vec<SortKey> {
    let Some(ordering) = member.plan.properties().output_ordering() else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for expr in ordering.iter() {
        let Some(column) = expr.expr.downcast_ref::<Column>() else {
            break;
        };
        let own = column.index();
        let Some(at) =
            (member.columns.iter()).position(|c| matches!(c, MemberColumn::Member(i) if *i == own))
        else {
            break;
        };
        keys.push(SortKey {
            column: at,
            descending: expr.options.descending,
        });
    }
    keys
}

/// The smallest and largest value of `key`'s column in `member` (bounds the member's scan
/// knows from its metadata).
fn range_of(member: &MemberScan, key: SortKey) -> Option<(ScalarValue, ScalarValue)> {
    let MemberColumn::Member(i) = member.columns.get(key.column)? else {
        return None;
    };
    let stats = member.plan.partition_statistics(None).ok()?;
    let column = stats.column_statistics.get(*i)?;
    let min = column.min_value.get_value()?.clone();
    let max = column.max_value.get_value()?.clone();
    (!min.is_null() && !max.is_null()).then_some((min, max))
}

/// A member's statistics as the collection's columns.
fn member_statistics(member: &MemberScan, schema: &SchemaRef) -> Result<Statistics> {
    let own = member.plan.partition_statistics(None)?;
    let origins = member.columns.iter().map(|c| match c {
        MemberColumn::Member(i) => ColumnOrigin::Member(*i),
        MemberColumn::Null(_) => ColumnOrigin::Missing,
        MemberColumn::GlobalAttrs => ColumnOrigin::Attributes,
        MemberColumn::Constant(c) => ColumnOrigin::Constant(c),
    });
    Ok(as_collection_statistics(&own, schema, origins))
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
                MemberColumn::Constant(c) => DerivedColumn::Constant(c.clone())
                    .values(rows, |_, _| unreachable!("a constant reads no axis"))?,
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
