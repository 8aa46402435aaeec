//! [`PartitionFold`]: one scan partition's cells folded into dense accumulators, as the
//! partition's units decode them. A cell's group is its position in the partition's window
//! of groups (per axis, the groups its indices reach), so a batch's group indices come from
//! its runs along the last axis (a table lookup per cell, no hash); the arguments are
//! evaluated on the batch as arrays, and DataFusion's own groups accumulators (the ones its
//! hash aggregate uses) take them with those indices.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use arrow::compute::{and, prep_null_mask_filter};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{Count, Time};

use super::plan::GridPlan;
use crate::error::Error;
use crate::scan::{CellFold, CellRuns};

/// Counters of a partition's fold (EXPLAIN ANALYZE).
#[derive(Debug, Clone)]
pub(crate) struct FoldMetrics {
    /// Cells handed to the fold (before any filter).
    pub cells: Count,
    /// Time spent placing cells, evaluating arguments and accumulating.
    pub time: Time,
}

/// One partition's accumulators and what places its cells.
pub(crate) struct PartitionFold {
    plan: Arc<GridPlan>,
    /// Per axis: each index's group in the window, times the axis's stride in it.
    offsets: Vec<Vec<usize>>,
    /// Groups of the window.
    groups: usize,
    /// Taken when the fold finishes.
    state: Mutex<Option<FoldState>>,
    /// What names the aggregate in errors.
    name: String,
    metrics: FoldMetrics,
}

/// What the fold's units share.
struct FoldState {
    /// One per aggregate, over the window's groups.
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    /// The groups a row reached (after the filters: a group exists when a row of it passed).
    seen: Vec<bool>,
    reservation: MemoryReservation,
}

impl fmt::Debug for PartitionFold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionFold")
            .field("groups", &self.groups)
            .finish()
    }
}

/// What a partition's fold leaves: its accumulators and the groups reached.
pub(crate) struct Folded {
    pub accumulators: Vec<Box<dyn GroupsAccumulator>>,
    pub seen: Vec<bool>,
    pub reservation: MemoryReservation,
}

impl PartitionFold {
    /// The fold of partition `p` of `plan`, its accumulators made from `aggregates` (the
    /// partial aggregate's) and sized now: their bytes are reserved first, from
    /// `reservation` (an error when the pool is short).
    pub(crate) fn new(
        plan: &Arc<GridPlan>,
        p: usize,
        aggregates: &[Arc<AggregateFunctionExpr>],
        reservation: MemoryReservation,
        name: String,
        metrics: FoldMetrics,
    ) -> Result<Self> {
        let Some(window) = plan.windows.get(p) else {
            return Err(DataFusionError::Internal(format!(
                "{name}: no partition {p} in the plan"
            )));
        };
        let groups = usize::try_from(plan.partition_groups(p))
            .map_err(|_| DataFusionError::Internal(format!("{name}: too many groups")))?;
        reservation.try_grow(groups.saturating_mul(plan.group_bytes as usize))?;
        let mut offsets = Vec::with_capacity(window.len());
        let mut stride = groups;
        for (axis, w) in plan.axes.iter().zip(window) {
            let len = (w.end - w.start) as usize;
            stride /= len.max(1);
            // Indices outside the window are never read by this partition; they get a group
            // past the end, which the check of each batch catches.
            let outside = groups;
            offsets.push(
                (axis.ids().iter())
                    .map(|&id| match w.contains(&id) {
                        true => (id - w.start) as usize * stride,
                        false => outside,
                    })
                    .collect(),
            );
        }
        let mut accumulators = (aggregates.iter())
            .map(|a| a.create_groups_accumulator())
            .collect::<Result<Vec<_>>>()?;
        // Sized now, with no row: the memory is taken before the scan starts.
        for (accumulator, arguments) in accumulators.iter_mut().zip(&plan.arguments) {
            let empty = (arguments.iter())
                .map(|e| Ok(arrow::array::new_empty_array(&e.data_type(&plan.schema)?)))
                .collect::<Result<Vec<_>>>()?;
            accumulator.update_batch(&empty, &[], Some(&dense()), groups)?;
        }
        let bytes = accumulators.iter().map(|a| a.size()).sum::<usize>() + groups;
        reservation.try_resize(bytes)?;
        Ok(PartitionFold {
            plan: Arc::clone(plan),
            offsets,
            groups,
            state: Mutex::new(Some(FoldState {
                accumulators,
                seen: vec![false; groups],
                reservation,
            })),
            name,
            metrics,
        })
    }

    /// The accumulators and the groups reached, once every unit has been folded.
    pub(crate) fn finish(&self) -> Result<Folded> {
        let Some(state) = self.lock()?.take() else {
            return Err(DataFusionError::Internal(
                "a grid fold finished twice".into(),
            ));
        };
        Ok(Folded {
            accumulators: state.accumulators,
            seen: state.seen,
            reservation: state.reservation,
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<FoldState>>> {
        (self.state.lock()).map_err(|_| DataFusionError::Internal("a grid fold panicked".into()))
    }

    /// The group of each of the batch's rows.
    fn group_indices(&self, runs: &dyn CellRuns, rows: usize) -> Result<Vec<usize>> {
        let mut groups = vec![0usize; rows];
        let offsets = &self.offsets;
        let mut outside = false;
        if let Some((last, leading)) = offsets.split_last() {
            runs.for_each_run(&mut |row, at, len| {
                let base = (leading.iter().zip(at))
                    .map(|(o, &i)| o.get(i as usize).copied().unwrap_or(usize::MAX))
                    .fold(0usize, usize::saturating_add);
                let start = at.get(leading.len()).copied().unwrap_or(u64::MAX) as usize;
                let along = last.get(start..start.saturating_add(len));
                let into = groups.get_mut(row..row + len);
                match (along, into) {
                    (Some(along), Some(into)) => {
                        for (g, &o) in into.iter_mut().zip(along) {
                            *g = base.saturating_add(o);
                        }
                    }
                    _ => outside = true,
                }
            });
        }
        if outside || groups.iter().any(|&g| g >= self.groups) {
            return Err(DataFusionError::Internal(format!(
                "{}: a cell outside the partition's groups",
                self.name
            )));
        }
        Ok(groups)
    }

    fn fold_batch(
        &self,
        runs: &dyn CellRuns,
        columns: &RecordBatch,
        keep: Option<&BooleanArray>,
    ) -> Result<()> {
        let rows = columns.num_rows();
        let groups = self.group_indices(runs, rows)?;
        let plan = &self.plan;
        let keep = match (&plan.predicate, keep) {
            (Some(predicate), keep) => {
                let mask = boolean(predicate, columns)?;
                Some(match keep {
                    Some(keep) => and(keep, &mask)?,
                    None => mask,
                })
            }
            (None, keep) => keep.cloned(),
        };
        let arguments = (plan.arguments.iter())
            .map(|args| {
                (args.iter())
                    .map(|e| e.evaluate(columns)?.into_array(rows))
                    .collect::<Result<Vec<ArrayRef>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let filters = (plan.filters.iter())
            .map(|f| match (f, &keep) {
                (Some(f), Some(keep)) => Ok(Some(and(keep, &boolean(f, columns)?)?)),
                (Some(f), None) => Ok(Some(boolean(f, columns)?)),
                (None, keep) => Ok(keep.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut state = self.lock()?;
        let Some(FoldState {
            accumulators,
            seen,
            reservation,
        }) = &mut *state
        else {
            return Err(DataFusionError::Internal(format!(
                "{}: cells after the fold finished",
                self.name
            )));
        };
        for ((accumulator, args), filter) in accumulators.iter_mut().zip(&arguments).zip(&filters) {
            accumulator.update_batch(args, &groups, filter.as_ref(), self.groups)?;
        }
        match &keep {
            Some(keep) => {
                for (&g, kept) in groups.iter().zip(keep.values().iter()) {
                    seen[g] |= kept;
                }
            }
            None => groups.iter().for_each(|&g| seen[g] = true),
        }
        // Dense accumulators keep their size; one that grows is held to the pool.
        let bytes = accumulators.iter().map(|a| a.size()).sum::<usize>() + seen.len();
        if bytes > reservation.size() {
            reservation.try_resize(bytes)?;
        }
        Ok(())
    }
}

/// The filter of an accumulator's first (empty) update, which makes it track every group's
/// values from the start. DataFusion's accumulators assume groups are numbered as a hash
/// table meets them, each with a row: after an update with no NULL and no filter they take
/// every group up to the count given as having a value (`NullState`'s `SeenValues::All`),
/// which a dense numbering would make of groups no value reached (a NaN average instead
/// of NULL). A filter on that first update makes them keep a bit per group instead.
pub(crate) fn dense() -> BooleanArray {
    BooleanArray::from(Vec::<bool>::new())
}

/// `expr` on `columns` as a mask: NULL keeps no row, as in a FilterExec.
fn boolean(expr: &Arc<dyn PhysicalExpr>, columns: &RecordBatch) -> Result<BooleanArray> {
    let values = expr.evaluate(columns)?.into_array(columns.num_rows())?;
    let Some(mask) = values.as_boolean_opt() else {
        return Err(DataFusionError::Internal(format!(
            "a filter gives {}, not booleans",
            values.data_type()
        )));
    };
    Ok(match mask.null_count() {
        0 => mask.clone(),
        _ => prep_null_mask_filter(mask),
    })
}

impl CellFold for PartitionFold {
    fn fold(
        &self,
        runs: &dyn CellRuns,
        columns: &RecordBatch,
        keep: Option<&BooleanArray>,
    ) -> crate::error::Result<()> {
        let _timer = self.metrics.time.timer();
        self.metrics.cells.add(columns.num_rows());
        self.fold_batch(runs, columns, keep)
            .map_err(|source| Error::Aggregate {
                aggregate: self.name.clone(),
                source,
            })
    }
}

/// Each accumulator's state (or final value) over all of `groups` groups: its arrays,
/// checked to cover every group.
pub(crate) fn emitted(
    accumulators: &mut [Box<dyn GroupsAccumulator>],
    groups: usize,
    state: bool,
) -> Result<Vec<ArrayRef>> {
    let mut arrays = Vec::new();
    for accumulator in accumulators {
        let out = match state {
            true => accumulator.state(EmitTo::All)?,
            false => vec![accumulator.evaluate(EmitTo::All)?],
        };
        if out.iter().any(|a| a.len() != groups) {
            return Err(DataFusionError::Internal(format!(
                "an accumulator of {groups} groups gave another number"
            )));
        }
        arrays.extend(out);
    }
    Ok(arrays)
}
