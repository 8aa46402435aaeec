//! [`Input`]: what a folded aggregate reads, walked down from the aggregate to one grid
//! scan. On the way there may be projections (inlined), filters (masks over the cells, like
//! the scan's own row filter), and tables each cell finds its row of by its grid position
//! ([`Lookup`]): an inner join with an aggregate on that aggregate's every key, or a window
//! aggregate over whole partitions (an aggregate of the window's input by its partition
//! keys, looked up). Every column on the way is then an expression over the scan's columns
//! followed by the lookups' values.

use std::sync::Arc;

use arrow::datatypes::FieldRef;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{JoinType, NullEquality, Result};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::window::PlainAggregateWindowExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, WindowExpr};

use super::lookup::Lookup;
use crate::scan::{GridSource, ScanExec};

/// What the walk asks of grid aggregates, which it meets (a join's table) and makes (a
/// window's): `exec.rs` answers, handed in so that the walk does not import the exec built
/// over it (a grid aggregate's input may hold grid aggregates).
pub(crate) trait Folding {
    /// The number of group keys of `plan`, when it is a grid aggregate that gives final
    /// values (one row per group, the keys first).
    fn final_keys(&self, plan: &Arc<dyn ExecutionPlan>) -> Option<usize>;

    /// `aggregate` (a final aggregate over a partial one) as one grid aggregate, when it
    /// folds.
    fn single(&self, aggregate: Arc<AggregateExec>) -> Result<Option<Arc<dyn ExecutionPlan>>>;
}

/// The input of a folded aggregate (see the module).
pub(crate) struct Input<'a> {
    pub scan: &'a ScanExec,
    /// The scan's grid.
    grid: &'a dyn GridSource,
    /// The scan as a plan.
    pub plan: &'a Arc<dyn ExecutionPlan>,
    /// The input's output columns, over the scan's columns then the lookups' values.
    columns: Vec<Arc<dyn PhysicalExpr>>,
    /// The filters on the way, over the same.
    pub predicates: Vec<Arc<dyn PhysicalExpr>>,
    pub lookups: Vec<Lookup>,
    /// Per lookup value (columns from the scan's last on): its lookup and its place among
    /// that lookup's values.
    pub looked_up: Vec<(usize, usize)>,
}

impl<'a> Input<'a> {
    /// The input `plan`, when it reaches one grid scan through what a fold can read.
    pub(crate) fn of(
        plan: &'a Arc<dyn ExecutionPlan>,
        folding: &dyn Folding,
    ) -> Result<Option<Self>> {
        if let Some(scan) = plan.downcast_ref::<ScanExec>() {
            let Some(grid) = scan.grid() else {
                return Ok(None);
            };
            let schema = scan.schema();
            let columns = (schema.fields().iter().enumerate())
                .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
                .collect();
            return Ok(Some(Input {
                scan,
                grid,
                plan,
                columns,
                predicates: Vec::new(),
                lookups: Vec::new(),
                looked_up: Vec::new(),
            }));
        }
        if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
            let Some(mut input) = Input::of(projection.input(), folding)? else {
                return Ok(None);
            };
            input.columns = (projection.expr().iter())
                .map(|p| input.unproject(&p.expr))
                .collect::<Result<_>>()?;
            return Ok(Some(input));
        }
        if let Some(filter) = plan.downcast_ref::<FilterExec>() {
            if filter.projection().is_some() {
                return Ok(None);
            }
            let Some(mut input) = Input::of(filter.input(), folding)? else {
                return Ok(None);
            };
            let predicate = input.unproject(filter.predicate())?;
            input.predicates.push(predicate);
            return Ok(Some(input));
        }
        if let Some(join) = plan.downcast_ref::<HashJoinExec>() {
            return Input::joined(join, folding);
        }
        if let Some(window) = plan.downcast_ref::<WindowAggExec>() {
            return Input::windowed(window.input(), window.window_expr(), folding);
        }
        if let Some(window) = plan.downcast_ref::<BoundedWindowAggExec>() {
            return Input::windowed(window.input(), window.window_expr(), folding);
        }
        Ok(None)
    }

    /// `expr` (over this input's output) over the scan's columns and the lookups' values.
    pub(crate) fn unproject(&self, expr: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        Arc::clone(expr)
            .transform_up(|e| match e.downcast_ref::<Column>() {
                Some(c) => match self.columns.get(c.index()) {
                    Some(column) => Ok(Transformed::yes(Arc::clone(column))),
                    None => datafusion::common::internal_err!("no column {c} in a fold's input"),
                },
                None => Ok(Transformed::no(e)),
            })
            .data()
    }

    /// The filters on the way, as one predicate.
    pub(crate) fn predicate(&self) -> Option<Arc<dyn PhysicalExpr>> {
        (self.predicates.iter().cloned())
            .reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::And, b)))
    }

    /// An inner join of the scan's cells with a table that has one row per key tuple (an
    /// aggregate grouped by exactly the join's keys on its side): that table looked up.
    fn joined(join: &'a HashJoinExec, folding: &dyn Folding) -> Result<Option<Self>> {
        let plain = *join.join_type() == JoinType::Inner
            && join.filter().is_none()
            && !join.contains_projection()
            && join.null_equality() == NullEquality::NullEqualsNothing
            && join.fetch().is_none();
        if !plain {
            return Ok(None);
        }
        for cells_left in [true, false] {
            let (cells, table) = match cells_left {
                true => (join.left(), join.right()),
                false => (join.right(), join.left()),
            };
            // The table's side of each key: a column of it.
            let mut table_keys = Vec::with_capacity(join.on().len());
            for (left, right) in join.on() {
                let (cell_key, table_key) = match cells_left {
                    true => (left, right),
                    false => (right, left),
                };
                match table_key.downcast_ref::<Column>() {
                    Some(c) => table_keys.push((c.index(), cell_key)),
                    None => break,
                }
            }
            let columns: Vec<usize> = table_keys.iter().map(|(c, _)| *c).collect();
            if table_keys.len() != join.on().len() || !one_row_per_key(table, &columns, folding) {
                continue;
            }
            let Some(mut input) = Input::of(cells, folding)? else {
                continue;
            };
            let keys = (table_keys.iter())
                .map(|(c, e)| Ok((*c, input.unproject(e)?)))
                .collect::<Result<Vec<_>>>()?;
            let label = format!("join on {} keys", columns.len());
            let Some(lookup) = Lookup::new(input.grid, Arc::clone(table), &keys, false, label)?
            else {
                continue;
            };
            // The table's columns: its keys are the cells' (equal, of one type); the rest
            // are looked up.
            let table_columns = input.look_up(lookup, &keys);
            let cell_columns = std::mem::take(&mut input.columns);
            input.columns = match cells_left {
                true => cell_columns.into_iter().chain(table_columns).collect(),
                false => table_columns.into_iter().chain(cell_columns).collect(),
            };
            return Ok(Some(input));
        }
        Ok(None)
    }

    /// Window aggregates over whole partitions of `input` (no ORDER BY, a frame of the whole
    /// partition): each an aggregate of `input` by the partition keys, looked up.
    fn windowed(
        input: &'a Arc<dyn ExecutionPlan>,
        windows: &[Arc<dyn WindowExpr>],
        folding: &dyn Folding,
    ) -> Result<Option<Self>> {
        let Some(mut cells) = Input::of(input, folding)? else {
            return Ok(None);
        };
        let mut columns = cells.columns.clone();
        for window in windows {
            let Some(table) = whole_partition_aggregate(input, window, folding)? else {
                return Ok(None);
            };
            let keys = (window.partition_by().iter().enumerate())
                .map(|(k, e)| Ok((k, cells.unproject(e)?)))
                .collect::<Result<Vec<_>>>()?;
            let label = format!("window by {} keys", keys.len());
            let Some(lookup) = Lookup::new(cells.grid, table, &keys, true, label)? else {
                return Ok(None);
            };
            let table_columns = cells.look_up(lookup, &keys);
            // The aggregate's value, after its keys.
            match table_columns.get(keys.len()) {
                Some(value) => columns.push(Arc::clone(value)),
                None => return Ok(None),
            }
        }
        cells.columns = columns;
        Ok(Some(cells))
    }

    /// `lookup` added: the columns of its table, each key the cells' expression it equals,
    /// each value a new column after the scan's.
    fn look_up(
        &mut self,
        lookup: Lookup,
        keys: &[(usize, Arc<dyn PhysicalExpr>)],
    ) -> Vec<Arc<dyn PhysicalExpr>> {
        let first = self.scan.schema().fields().len();
        let l = self.lookups.len();
        let width = lookup.table.schema().fields().len();
        let columns = (0..width)
            .map(|c| match keys.iter().find(|(k, _)| *k == c) {
                Some((_, e)) => Arc::clone(e),
                None => {
                    let v = lookup
                        .value_columns
                        .iter()
                        .position(|&v| v == c)
                        .unwrap_or(0);
                    let field: &FieldRef = &lookup.fields[v];
                    let at = first + self.looked_up.len();
                    self.looked_up.push((l, v));
                    Arc::new(Column::new(field.name(), at)) as Arc<dyn PhysicalExpr>
                }
            })
            .collect();
        self.lookups.push(lookup);
        columns
    }
}

/// Whether `plan` gives at most one row per value of its `columns`: among them are every
/// group key of an aggregate (passed on by projections; a column a projection computes, as
/// DataFusion computes a key that depends on another, only narrows further).
fn one_row_per_key(
    plan: &Arc<dyn ExecutionPlan>,
    columns: &[usize],
    folding: &dyn Folding,
) -> bool {
    if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
        let below: Vec<usize> = (columns.iter())
            .filter_map(|&c| {
                let e = &projection.expr().get(c)?.expr;
                e.downcast_ref::<Column>().map(Column::index)
            })
            .collect();
        return one_row_per_key(projection.input(), &below, folding);
    }
    // Rows kept as they are, in other partitions.
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        return one_row_per_key(repartition.input(), columns, folding);
    }
    if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
        return one_row_per_key(coalesce.input(), columns, folding);
    }
    let keys = if let Some(keys) = folding.final_keys(plan) {
        keys
    } else if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
        let whole = matches!(
            aggregate.mode(),
            AggregateMode::Final
                | AggregateMode::FinalPartitioned
                | AggregateMode::Single
                | AggregateMode::SinglePartitioned
        );
        if !whole || !aggregate.group_expr().is_single() || aggregate.limit_options().is_some() {
            return false;
        }
        aggregate.group_expr().expr().len()
    } else {
        return false;
    };
    keys > 0 && (0..keys).all(|k| columns.contains(&k))
}

/// `window` as a grid aggregate of `input` grouped by its partition keys (keys, then the
/// value), when it covers whole partitions and folds.
fn whole_partition_aggregate(
    input: &Arc<dyn ExecutionPlan>,
    window: &Arc<dyn WindowExpr>,
    folding: &dyn Folding,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(plain) = window.as_any().downcast_ref::<PlainAggregateWindowExpr>() else {
        return Ok(None);
    };
    let frame = window.get_window_frame();
    let whole = frame.start_bound.is_unbounded() && frame.end_bound.is_unbounded();
    if !window.order_by().is_empty() || !whole || window.partition_by().is_empty() {
        return Ok(None);
    }
    let aggregate = Arc::new(plain.get_aggregate_expr().clone());
    let keys = (window.partition_by().iter().enumerate())
        .map(|(k, e)| (Arc::clone(e), format!("__partition_{k}")))
        .collect();
    let partial = Arc::new(AggregateExec::try_new(
        AggregateMode::Partial,
        PhysicalGroupBy::new_single(keys),
        vec![Arc::clone(&aggregate)],
        vec![None],
        Arc::clone(input),
        input.schema(),
    )?);
    let last = AggregateExec::try_new(
        AggregateMode::Final,
        partial.group_expr().as_final(),
        vec![aggregate],
        vec![None],
        Arc::clone(&partial) as _,
        partial.schema(),
    )?;
    let Some(folded) = folding.single(Arc::new(last))? else {
        return Ok(None);
    };
    // The window's value has the aggregate's type.
    let value = folded
        .schema()
        .fields()
        .last()
        .map(|f| f.data_type().clone());
    match value.as_ref() == Some(window.field()?.data_type()) {
        true => Ok(Some(folded)),
        false => Ok(None),
    }
}
