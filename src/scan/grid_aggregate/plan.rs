//! [`GridPlan`]: what a partial aggregate over a grid scan folds, decided at planning, or why
//! it stays DataFusion's. An aggregate is folded when
//!
//! - its input is one grid scan ([`ScanExec::grid`]), through projections (inlined),
//!   filters (masks, like the scan's own row filter) and tables looked up by grid position
//!   (`input.rs`);
//! - each group key reads the column of one axis, or several keys one axis together, and
//!   evaluates at every index of it ([`GridSource::per_index`]); no grouping sets;
//! - each aggregate is one of [`FOLDED`], not DISTINCT, without ORDER BY, with fixed-width
//!   states (DataFusion's own groups accumulator then folds it, so its answers are
//!   DataFusion's);
//! - the dense groups are no more than the cells read (a sparse union of boxes stays a
//!   hash aggregate).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{internal_err, Result};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::ExecutionPlan;

use super::axis_groups::AxisGroups;
use super::dense::Along;
use super::input::{Folding, Input};
use super::lookup::Lookup;
use crate::scan::GridSource;

/// The aggregate functions folded: those whose state per group is a few fixed-width values.
pub(crate) const FOLDED: [&str; 11] = [
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "var",
    "var_pop",
    "stddev",
    "stddev_pop",
    "bool_and",
    "bool_or",
];

/// Dense groups of a plan, at most: beyond, the plan stays DataFusion's.
const MAX_GROUPS: u64 = 1 << 32;

/// A partial aggregate's fold over a grid scan.
pub(crate) struct GridPlan {
    /// The grid's axes and their groups.
    pub axes: Vec<AxisGroups>,
    /// Per group key (in the aggregate's order): its axis and its place among that axis's
    /// keys.
    pub keys: Vec<(usize, usize)>,
    /// Per aggregate: its arguments over the fold's columns.
    pub arguments: Vec<Vec<Arc<dyn PhysicalExpr>>>,
    /// Per aggregate: its FILTER over the fold's columns.
    pub filters: Vec<Option<Arc<dyn PhysicalExpr>>>,
    /// A filter between the aggregate and the scan, over the fold's columns.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The grid scan read.
    pub scan: Arc<dyn ExecutionPlan>,
    /// The scan's output columns the fold reads.
    pub columns: Vec<usize>,
    /// Their schema.
    pub schema: SchemaRef,
    /// Tables a cell finds its row of by its grid position (a join with a climatology).
    pub lookups: Vec<Lookup>,
    /// The lookups' values the fold reads (a lookup, a value of it); a slice's batch has
    /// them after `columns`.
    pub looked_up: Vec<(usize, usize)>,
    /// Sub-expressions that read one axis alone, evaluated per index; a slice's batch has
    /// them after the looked up values.
    pub broadcasts: Vec<Broadcast>,
    /// The schema of a slice's batch: `schema`'s columns, the looked up values, then the
    /// broadcasts.
    pub fold_schema: SchemaRef,
    /// Per scan partition, per axis: the groups its cells reach.
    pub windows: Vec<Vec<Range<u32>>>,
    /// Per scan partition: how the last axis's groups follow one another in its runs.
    pub along: Vec<Along>,
    /// Bytes of the accumulators per group (states and the group's mark).
    pub group_bytes: u64,
}

/// A sub-expression of the fold's arguments or filters that reads one axis alone
/// (`cos(radians(lat))` in `sum(temp * cos(radians(lat)))`): evaluated at planning once per
/// index of its axis, then laid on each slice's cells by where they lie, so a cell costs a
/// copy instead of an evaluation (10^8 cosines become 100).
#[derive(Debug)]
pub(crate) struct Broadcast {
    /// The sub-expression, over the scan's columns.
    pub expr: Arc<dyn PhysicalExpr>,
    pub axis: usize,
    /// One value per index of the axis.
    pub values: ArrayRef,
}

impl fmt::Debug for GridPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GridPlan")
            .field("shape", &self.shape())
            .field("columns", &self.columns)
            .finish()
    }
}

impl GridPlan {
    /// The fold of `aggregate` (a partial aggregate), when it can be folded (`folding`: what
    /// a table looked up is folded by).
    pub(crate) fn new(
        aggregate: &AggregateExec,
        folding: &dyn Folding,
    ) -> Result<Option<GridPlan>> {
        if *aggregate.mode() != AggregateMode::Partial
            || !aggregate.group_expr().is_single()
            || aggregate.limit_options().is_some()
            || !aggregate.aggr_expr().iter().all(|a| folded(a))
        {
            return Ok(None);
        }
        let Some(input) = Input::of(aggregate.input(), folding)? else {
            return Ok(None);
        };
        let Some(grid) = input.scan.grid() else {
            return Ok(None);
        };
        // Everything over the scan's columns (and the lookups' values after them).
        let keys = (aggregate.group_expr().expr().iter())
            .map(|(e, _)| input.unproject(e))
            .collect::<Result<Vec<_>>>()?;
        let arguments = (aggregate.aggr_expr().iter())
            .map(|a| {
                (a.expressions().iter())
                    .map(|e| input.unproject(e))
                    .collect()
            })
            .collect::<Result<Vec<Vec<_>>>>()?;
        let filters = (aggregate.filter_expr().iter())
            .map(|f| f.as_ref().map(|e| input.unproject(e)).transpose())
            .collect::<Result<Vec<Option<_>>>>()?;
        // Each key's values per index of its axis.
        let shape = grid.shape();
        let mut per_axis: Vec<Vec<Arc<dyn arrow::array::Array>>> = vec![Vec::new(); shape.len()];
        let mut placed = Vec::with_capacity(keys.len());
        for key in &keys {
            let Some((axis, values)) = grid.per_index(key) else {
                return Ok(None);
            };
            placed.push((axis, per_axis[axis].len()));
            per_axis[axis].push(values);
        }
        let read = grid.indices(None)?;
        let axes = (per_axis.iter().enumerate())
            .map(|(a, values)| AxisGroups::new(shape[a] as usize, values, &read[a]))
            .collect::<Result<Vec<_>>>()?;
        let groups = (axes.iter()).try_fold(1u64, |n, a| n.checked_mul(u64::from(a.len())));
        // More groups than cells read (or than dense arrays are for): rows hash better.
        match groups {
            Some(groups) if groups <= MAX_GROUPS && groups <= grid.cells().max(1) => {}
            _ => return Ok(None),
        }
        let partitions = input.scan.properties().partitioning.partition_count();
        let mut windows = Vec::with_capacity(partitions);
        let mut along = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let read = grid.indices(Some(p))?;
            windows.push((axes.iter().zip(&read)).map(|(a, r)| a.window(r)).collect());
            along.push(match (axes.last(), read.last()) {
                (Some(last), Some(read)) => last.along(read),
                _ => Along::Same,
            });
        }
        // Sub-expressions of one axis, lifted out as columns after the scan's and the
        // lookups'.
        let scan_schema = input.scan.schema();
        let scanned = scan_schema.fields().len();
        let mut lifted = Lifted {
            grid,
            first: scanned + input.looked_up.len(),
            found: Vec::new(),
        };
        let arguments = (arguments.iter())
            .map(|args| args.iter().map(|e| lifted.lift(e)).collect())
            .collect::<Result<Vec<Vec<_>>>>()?;
        let filters = (filters.iter())
            .map(|f| f.as_ref().map(|e| lifted.lift(e)).transpose())
            .collect::<Result<Vec<_>>>()?;
        let predicate = (input.predicate().as_ref())
            .map(|e| lifted.lift(e))
            .transpose()?;
        // The columns the fold reads, and the expressions over them.
        let everything = (arguments.iter().flatten())
            .chain(filters.iter().flatten())
            .chain(predicate.iter());
        let mut read: Vec<usize> = everything
            .flat_map(|e| collect_columns(e).into_iter().map(|c| c.index()))
            .filter(|&c| c < lifted.first)
            .collect();
        read.sort_unstable();
        read.dedup();
        let (looked_up, columns): (Vec<usize>, Vec<usize>) =
            read.iter().partition(|&&c| c >= scanned);
        let schema = Arc::new(scan_schema.project(&columns)?);
        let mut fields: Vec<Field> = (schema.fields().iter())
            .map(|f| f.as_ref().clone())
            .collect();
        for &c in &looked_up {
            let (l, v) = input.looked_up[c - scanned];
            let field = input.lookups[l].fields[v].as_ref().clone();
            fields.push(
                field
                    .with_name(format!("__looked_up_{c}"))
                    .with_nullable(true),
            );
        }
        for (k, broadcast) in lifted.found.iter().enumerate() {
            fields.push(Field::new(
                format!("__axis_{k}"),
                broadcast.values.data_type().clone(),
                true,
            ));
        }
        let fold_schema = Arc::new(Schema::new(fields));
        // The fold's batch: the columns read, then the looked up values read, then the
        // broadcasts.
        let first = lifted.first;
        let over_fold = |e: &Arc<dyn PhysicalExpr>| remap(e, &read, first);
        let group_bytes = state_bytes(aggregate.aggr_expr())?.saturating_add(1);
        Ok(Some(GridPlan {
            axes,
            keys: placed,
            arguments: (arguments.iter())
                .map(|args| args.iter().map(over_fold).collect())
                .collect::<Result<_>>()?,
            filters: (filters.iter())
                .map(|f| f.as_ref().map(over_fold).transpose())
                .collect::<Result<_>>()?,
            predicate: predicate.as_ref().map(over_fold).transpose()?,
            scan: Arc::clone(input.plan),
            columns,
            schema,
            looked_up: (looked_up.iter())
                .map(|&c| input.looked_up[c - scanned])
                .collect(),
            lookups: input.lookups,
            broadcasts: lifted.found,
            fold_schema,
            windows,
            along,
            group_bytes,
        }))
    }

    /// Groups along each axis.
    pub(crate) fn shape(&self) -> Vec<u32> {
        self.axes.iter().map(AxisGroups::len).collect()
    }

    /// Groups in all.
    pub(crate) fn groups(&self) -> u64 {
        self.shape().iter().map(|&n| u64::from(n)).product()
    }

    /// How the whole shape's groups are finished, along the first axis (`emit.rs`).
    pub(crate) fn segments(&self) -> Vec<Segment> {
        let firsts: Vec<Option<Range<u32>>> =
            (self.windows.iter()).map(|w| w.first().cloned()).collect();
        segments(&firsts)
    }

    /// Whether no two partitions' windows reach one index of the first axis: each
    /// partition's groups are finished on their own and none merge.
    pub(crate) fn apart(&self) -> bool {
        !(self.segments().iter()).any(|s| matches!(s, Segment::Shared { .. }))
    }

    /// Groups of one index of the first axis (of a grid without axes: its one group).
    pub(crate) fn slab(&self) -> u64 {
        self.shape().iter().skip(1).map(|&n| u64::from(n)).product()
    }

    /// Groups of the accumulators the partitions' states merge into, at most: a slab, when
    /// some index of the first axis lies in several partitions' windows (`emit.rs` merges
    /// those slabs one at a time), else none.
    pub(crate) fn merged_groups(&self) -> u64 {
        match self.apart() {
            true => 0,
            false => self.slab(),
        }
    }

    /// Groups of partition `p`'s window.
    pub(crate) fn partition_groups(&self, p: usize) -> u64 {
        (self.windows.get(p).into_iter().flatten())
            .map(|w| u64::from(w.end - w.start))
            .product()
    }
}

/// A run of the whole shape's groups, by their index along the first axis, finished in
/// one way: the groups of one partition alone, or a slab (one first-axis index) that several
/// partitions reach, whose states merge first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Own { partition: usize, first: Range<u32> },
    Shared { first: u32, partitions: Vec<usize> },
}

/// The segments of partitions whose windows along the first axis are `firsts` (`None`: a
/// grid without axes, one slab every partition reaches), in the first axis's order.
pub(crate) fn segments(firsts: &[Option<Range<u32>>]) -> Vec<Segment> {
    let end = (firsts.iter().flatten()).map(|w| w.end).max().unwrap_or(1);
    let mut segments: Vec<Segment> = Vec::new();
    for g in 0..end {
        let reaching: Vec<usize> = (firsts.iter().enumerate())
            .filter(|(_, w)| w.as_ref().is_none_or(|w| w.contains(&g)))
            .map(|(p, _)| p)
            .collect();
        match reaching.as_slice() {
            [] => {}
            [p] => match segments.last_mut() {
                Some(Segment::Own { partition, first }) if partition == p && first.end == g => {
                    first.end = g + 1
                }
                _ => segments.push(Segment::Own {
                    partition: *p,
                    first: g..g + 1,
                }),
            },
            _ => segments.push(Segment::Shared {
                first: g,
                partitions: reaching,
            }),
        }
    }
    segments
}

/// Whether `aggregate` is folded: one of [`FOLDED`], plain, with fixed-width states that
/// DataFusion's groups accumulator keeps.
fn folded(aggregate: &AggregateFunctionExpr) -> bool {
    let fixed = |t: &DataType| t.primitive_width().is_some() || *t == DataType::Boolean;
    FOLDED.contains(&aggregate.fun().name())
        && !aggregate.is_distinct()
        && aggregate.order_bys().is_empty()
        && aggregate.groups_accumulator_supported()
        && (aggregate.state_fields()).is_ok_and(|f| f.iter().all(|f| fixed(f.data_type())))
}

/// Bytes per group of the aggregates' states: their widths, and a byte for each state's
/// validity.
fn state_bytes(aggregates: &[Arc<AggregateFunctionExpr>]) -> Result<u64> {
    let mut bytes = 0u64;
    for aggregate in aggregates {
        for field in aggregate.state_fields()? {
            let width = field.data_type().primitive_width().unwrap_or(1);
            bytes = bytes.saturating_add(width as u64 + 1);
        }
    }
    Ok(bytes)
}

/// `expr` over the scan's columns and the lookups' values (`read` of them), numbered as the
/// fold's batch numbers them: those read in order, then the broadcasts (from `first` on).
fn remap(
    expr: &Arc<dyn PhysicalExpr>,
    read: &[usize],
    first: usize,
) -> Result<Arc<dyn PhysicalExpr>> {
    let columns = read;
    Arc::clone(expr)
        .transform_up(|e| match e.downcast_ref::<Column>() {
            // A broadcast: after the columns read.
            Some(c) if c.index() >= first => {
                let at = columns.len() + (c.index() - first);
                Ok(Transformed::yes(Arc::new(Column::new(c.name(), at)) as _))
            }
            Some(c) => match columns.iter().position(|&i| i == c.index()) {
                Some(at) => Ok(Transformed::yes(Arc::new(Column::new(c.name(), at)) as _)),
                None => internal_err!("the grid aggregate does not read column {c}"),
            },
            None => Ok(Transformed::no(e)),
        })
        .data()
}

/// The sub-expressions of one axis found so far, over a scan whose columns end before
/// `first` (a broadcast `k` is column `first + k` until `remap`).
struct Lifted<'a> {
    grid: &'a dyn GridSource,
    first: usize,
    found: Vec<Broadcast>,
}

impl Lifted<'_> {
    /// `expr` with each outermost sub-expression that reads one axis alone (not a bare
    /// column, not a constant) and evaluates at every index of it replaced by a broadcast.
    fn lift(&mut self, expr: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        Arc::clone(expr)
            .transform_down(|e| {
                if e.downcast_ref::<Column>().is_some() || collect_columns(&e).is_empty() {
                    return Ok(Transformed::no(e));
                }
                let k = match self.found.iter().position(|b| b.expr.eq(&e)) {
                    Some(k) => k,
                    None => match self.grid.per_index(&e) {
                        Some((axis, values)) => {
                            let expr = Arc::clone(&e);
                            self.found.push(Broadcast { expr, axis, values });
                            self.found.len() - 1
                        }
                        None => return Ok(Transformed::no(e)),
                    },
                };
                let column = Arc::new(Column::new(&format!("__axis_{k}"), self.first + k));
                Ok(Transformed::new(column as _, true, TreeNodeRecursion::Jump))
            })
            .data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn only_first_axis_indices_several_partitions_reach_are_merged() {
        let own = |partition, first| Segment::Own { partition, first };
        let shared = |first, partitions| Segment::Shared { first, partitions };
        // Windows that follow one another (one reads nothing): each partition on its own.
        let apart = segments(&[Some(0..3), Some(3..4), Some(4..4)]);
        assert_eq!(apart, vec![own(0, 0..3), own(1, 3..4)]);
        // A month two partitions' days share: that slab alone is merged.
        let month = segments(&[Some(0..3), Some(2..4)]);
        assert_eq!(
            month,
            vec![own(0, 0..2), shared(2, vec![0, 1]), own(1, 3..4)]
        );
        // Out of order: given in the first axis's order.
        let swapped = segments(&[Some(3..4), Some(0..3)]);
        assert_eq!(swapped, vec![own(1, 0..3), own(0, 3..4)]);
        // A grid without axes: its one group, every partition's.
        assert_eq!(segments(&[None, None]), vec![shared(0, vec![0, 1])]);
        assert_eq!(segments(&[None]), vec![own(0, 0..1)]);
    }
}
