//! [`PartitionFold`]: one scan partition's cells folded into dense accumulators, as the
//! partition's units decode them. A cell's group is its position in the partition's window
//! of groups (per axis, the groups its indices reach), so a batch's group indices come from
//! its runs along the last axis (a table lookup per cell, no hash); the arguments are
//! evaluated on the batch as arrays, and DataFusion's own groups accumulators (the ones its
//! hash aggregate uses) take them with those indices.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use arrow::array::{
    new_empty_array, Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions,
    UInt32Array, UInt64Array,
};
use arrow::compute::{and, prep_null_mask_filter, take};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{Count, Time};

use super::dense::{Along, Dense, Placement, Run};
use super::lookup::LookupTable;
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

/// Rows folded at a time: a slice's arguments are a few hundred KiB, in cache while the
/// accumulators take them.
const SLICE_ROWS: usize = 1 << 16;

/// One partition's accumulators and what places its cells.
pub(crate) struct PartitionFold {
    plan: Arc<GridPlan>,
    /// Per axis: each index's group in the window, times the axis's stride in it (`None`:
    /// an axis without keys, every index in its one group, 0).
    offsets: Vec<Option<Vec<usize>>>,
    /// How the groups of the last axis follow one another in this partition's runs.
    along: Along,
    /// Groups of the window.
    groups: usize,
    /// The tables cells find their rows in, laid out (the plan's lookups, in order).
    lookups: Vec<Arc<LookupTable>>,
    /// Taken when the fold finishes.
    state: Mutex<Option<FoldState>>,
    /// What names the aggregate in errors.
    name: String,
    metrics: FoldMetrics,
}

/// One aggregate's accumulator: a dense one (`dense.rs`), or DataFusion's groups accumulator
/// (given a group per cell), whose states, once taken, are kept whole.
pub(crate) enum Folder {
    Dense(Dense),
    DataFusion(Box<dyn GroupsAccumulator>),
    Taken(Vec<ArrayRef>),
}

impl Folder {
    fn size(&self) -> usize {
        match self {
            Folder::Dense(d) => d.size(),
            Folder::DataFusion(a) => a.size(),
            Folder::Taken(states) => states.iter().map(|s| s.get_array_memory_size()).sum(),
        }
    }
}

/// What the fold's units share.
struct FoldState {
    /// One per aggregate, over the window's groups.
    folders: Vec<Folder>,
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
    folders: Vec<Folder>,
    pub seen: Vec<bool>,
    pub reservation: MemoryReservation,
}

impl Folded {
    /// The aggregates' states of `groups` (positions in the window), as DataFusion's partial
    /// aggregate gives them, in order: asked for a batch of groups at a time.
    pub(crate) fn states(&mut self, groups: &[usize]) -> Result<Vec<ArrayRef>> {
        let all = self.seen.len();
        let indices = UInt64Array::from_iter_values(groups.iter().map(|&g| g as u64));
        let mut arrays = Vec::new();
        for folder in &mut self.folders {
            // DataFusion's accumulator gives all its states at once.
            if let Folder::DataFusion(accumulator) = folder {
                let states = accumulator.state(EmitTo::All)?;
                if let Some(state) = states.iter().find(|s| s.len() != all) {
                    return Err(DataFusionError::Internal(format!(
                        "an accumulator of {all} groups gave {}",
                        state.len()
                    )));
                }
                *folder = Folder::Taken(states);
            }
            match folder {
                Folder::Dense(dense) => arrays.extend(dense.state(groups)?),
                Folder::Taken(states) => {
                    for state in states.iter() {
                        arrays.push(take(state.as_ref(), &indices, None)?);
                    }
                }
                Folder::DataFusion(_) => {
                    return Err(DataFusionError::Internal("states not taken".into()))
                }
            }
        }
        Ok(arrays)
    }

    /// The accumulators' memory, given back.
    pub(crate) fn free(&mut self) {
        self.folders.clear();
        self.reservation.free();
    }
}

impl PartitionFold {
    /// The fold of partition `p` of `plan`, its accumulators made for `aggregates` (the
    /// partial aggregate's) and sized now: their bytes are reserved first, from
    /// `reservation` (an error when the pool is short).
    pub(crate) fn new(
        plan: &Arc<GridPlan>,
        p: usize,
        aggregates: &[Arc<AggregateFunctionExpr>],
        reservation: MemoryReservation,
        name: String,
        metrics: FoldMetrics,
        lookups: Vec<Arc<LookupTable>>,
    ) -> Result<Self> {
        if lookups.len() != plan.lookups.len() {
            return Err(DataFusionError::Internal(format!(
                "{name}: {} tables looked up, not {}",
                lookups.len(),
                plan.lookups.len()
            )));
        }
        let (Some(window), Some(&along)) = (plan.windows.get(p), plan.along.get(p)) else {
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
            offsets.push(axis.ids().map(|ids| {
                ids.iter()
                    .map(|&id| match w.contains(&id) {
                        true => (id - w.start) as usize * stride,
                        false => outside,
                    })
                    .collect()
            }));
        }
        let mut folders = Vec::with_capacity(aggregates.len());
        for (aggregate, arguments) in aggregates.iter().zip(&plan.arguments) {
            let types = (arguments.iter())
                .map(|e| e.data_type(&plan.fold_schema))
                .collect::<Result<Vec<_>>>()?;
            let dense = match types.as_slice() {
                [argument] => Dense::new(aggregate, argument, groups)?,
                _ => None,
            };
            folders.push(match dense {
                Some(dense) => Folder::Dense(dense),
                None => {
                    let mut accumulator = aggregate.create_groups_accumulator()?;
                    // Sized now, with no row: the memory is taken before the scan starts.
                    let empty = types.iter().map(new_empty_array).collect::<Vec<_>>();
                    accumulator.update_batch(&empty, &[], Some(&tracking()), groups)?;
                    Folder::DataFusion(accumulator)
                }
            });
        }
        let bytes = folders.iter().map(Folder::size).sum::<usize>() + groups;
        reservation.try_resize(bytes)?;
        Ok(PartitionFold {
            plan: Arc::clone(plan),
            offsets,
            along,
            groups,
            lookups,
            state: Mutex::new(Some(FoldState {
                folders,
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
            folders: state.folders,
            seen: state.seen,
            reservation: state.reservation,
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Option<FoldState>>> {
        (self.state.lock()).map_err(|_| DataFusionError::Internal("a grid fold panicked".into()))
    }

    /// Run `len` cells from `at` (grid coordinates) at `row` of a slice, with its groups;
    /// `None` when a cell lies outside the partition's window.
    fn run(&self, row: usize, at: &[u64], len: usize) -> Option<Run> {
        let Some((last, leading)) = self.offsets.split_last() else {
            // A scalar: its one cell.
            return Some(Run {
                row,
                len,
                first: 0,
                base: 0,
                start: 0,
            });
        };
        let base = (leading.iter().zip(at))
            .map(|(o, &i)| match o {
                Some(o) => o.get(i as usize).copied().unwrap_or(usize::MAX),
                None => 0,
            })
            .fold(0usize, usize::saturating_add);
        let start = at.get(leading.len()).copied().unwrap_or(u64::MAX) as usize;
        let Some(last) = last else {
            // An axis without keys: the run is in one group (`Along::Same`).
            return (base < self.groups).then_some(Run {
                row,
                len,
                first: base,
                base,
                start,
            });
        };
        let along_last = last.get(start..start.saturating_add(len))?;
        let first = base.saturating_add(*along_last.first()?);
        let end = match self.along {
            Along::Same => first.saturating_add(1),
            Along::Consecutive => first.saturating_add(len),
            Along::Looked => (along_last.iter())
                .map(|&o| base.saturating_add(o))
                .max()
                .unwrap_or(0)
                .saturating_add(1),
        };
        (end <= self.groups).then_some(Run {
            row,
            len,
            first,
            base,
            start,
        })
    }

    /// Folds a batch `SLICE_ROWS` rows at a time, so that what a slice makes (its arguments
    /// in the accumulators' types, a group per cell for DataFusion's accumulators) stays
    /// small however large the reader's batches are (a chunk of 2·10^7 cells is one).
    fn fold_batch(
        &self,
        cells: &dyn CellRuns,
        columns: &RecordBatch,
        keep: Option<&BooleanArray>,
    ) -> Result<()> {
        let rows = columns.num_rows();
        let outside = || {
            DataFusionError::Internal(format!(
                "{}: a cell outside the partition's groups",
                self.name
            ))
        };
        let mut result = Ok(());
        let mut runs = Vec::new();
        let mut slice = 0..0;
        let mut at = Vec::new();
        // Per broadcast: its axis's index at each cell of the slice.
        let broadcasts = &self.plan.broadcasts;
        let mut spread: Vec<Vec<u32>> = vec![Vec::new(); broadcasts.len()];
        // Per table looked up: each cell's position in it.
        let mut found: Vec<Vec<u32>> = vec![Vec::new(); self.lookups.len()];
        cells.for_each_run(&mut |row, first, len| {
            if result.is_err() {
                return;
            }
            if row != slice.end {
                result = Err(outside());
                return;
            }
            at.clear();
            at.extend_from_slice(first);
            let (mut row, mut len) = (row, len);
            while len > 0 && result.is_ok() {
                // The run's part inside this slice.
                let part = len.min(slice.start + SLICE_ROWS - row);
                match self.run(row - slice.start, &at, part) {
                    Some(run) => runs.push(run),
                    None => result = Err(outside()),
                }
                for (table, positions) in self.lookups.iter().zip(&mut found) {
                    if !table.extend_run(&at, part, positions) {
                        result = Err(outside());
                    }
                }
                for (broadcast, indices) in broadcasts.iter().zip(&mut spread) {
                    // Axes of at most 2^20 indices (`AxisExpression`).
                    let index = at.get(broadcast.axis).copied().unwrap_or(0) as u32;
                    match broadcast.axis + 1 == at.len() {
                        true => indices.extend(index..index + part as u32),
                        false => indices.extend(std::iter::repeat_n(index, part)),
                    }
                }
                (row, len, slice.end) = (row + part, len - part, row + part);
                if let Some(last) = at.last_mut() {
                    *last += part as u64;
                }
                if slice.len() == SLICE_ROWS {
                    result = self.fold_slice(
                        columns,
                        keep,
                        slice.clone(),
                        &runs,
                        &mut spread,
                        &mut found,
                    );
                    runs.clear();
                    slice = slice.end..slice.end;
                }
            }
        });
        result?;
        if slice.end != rows {
            return Err(outside());
        }
        if slice.is_empty() {
            return Ok(());
        }
        self.fold_slice(columns, keep, slice, &runs, &mut spread, &mut found)
    }

    /// Folds rows `slice` of a batch, placed by `runs` (rows counted from the slice's start).
    fn fold_slice(
        &self,
        batch: &RecordBatch,
        keep: Option<&BooleanArray>,
        slice: Range<usize>,
        runs: &[Run],
        spread: &mut [Vec<u32>],
        found: &mut [Vec<u32>],
    ) -> Result<()> {
        let rows = slice.len();
        let whole = slice.start == 0 && rows == batch.num_rows();
        let sliced;
        let mut columns = match whole {
            true => batch,
            false => {
                sliced = batch.slice(slice.start, rows);
                &sliced
            }
        };
        let keep = keep.map(|k| match whole {
            true => k.clone(),
            false => k.slice(slice.start, rows),
        });
        let keep = keep.as_ref();
        let last = self
            .offsets
            .last()
            .and_then(Option::as_deref)
            .unwrap_or(&[]);
        let placement = Placement {
            runs,
            along: self.along,
            last,
        };
        let plan = &self.plan;
        // A slice no row of which passes the filters reaches no group: nothing to evaluate
        // (a filter that selects a few cells of a large grid skips most of it).
        let none_kept = |k: &BooleanArray| k.true_count() == 0;
        if keep.is_some_and(none_kept) {
            spread.iter_mut().for_each(Vec::clear);
            found.iter_mut().for_each(Vec::clear);
            return Ok(());
        }
        // Cells without a row in a table looked up are not in the join.
        let positions: Vec<UInt32Array> = (found.iter_mut())
            .map(|p| UInt32Array::from(std::mem::take(p)))
            .collect();
        let mut keep = keep.cloned();
        for (table, positions) in self.lookups.iter().zip(&positions) {
            if let Some(matched) = table.matched(positions.values()) {
                keep = Some(match keep {
                    Some(keep) => and(&keep, &matched)?,
                    None => matched,
                });
            }
        }
        let keep = keep.as_ref();
        if keep.is_some_and(none_kept) {
            spread.iter_mut().for_each(Vec::clear);
            return Ok(());
        }
        // The values looked up, then the broadcasts, laid on the slice's cells after the
        // scan's columns.
        let spread_batch;
        if !spread.is_empty() || !positions.is_empty() {
            let mut arrays = columns.columns().to_vec();
            for &(l, v) in &self.plan.looked_up {
                arrays.push(self.lookups[l].values(v, &positions[l])?);
            }
            for (broadcast, indices) in self.plan.broadcasts.iter().zip(spread.iter_mut()) {
                let indices = UInt32Array::from(std::mem::take(indices));
                arrays.push(take(broadcast.values.as_ref(), &indices, None)?);
            }
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            spread_batch = RecordBatch::try_new_with_options(
                Arc::clone(&self.plan.fold_schema),
                arrays,
                &options,
            )?;
            columns = &spread_batch;
        }
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
        if keep.as_ref().is_some_and(none_kept) {
            return Ok(());
        }
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
            folders,
            seen,
            reservation,
        }) = &mut *state
        else {
            return Err(DataFusionError::Internal(format!(
                "{}: cells after the fold finished",
                self.name
            )));
        };
        // A group per cell, for DataFusion's accumulators.
        let mut per_cell: Option<Vec<usize>> = None;
        for ((folder, args), filter) in folders.iter_mut().zip(&arguments).zip(&filters) {
            match folder {
                Folder::Dense(dense) => {
                    let Some(values) = args.first() else {
                        return Err(DataFusionError::Internal("a dense fold of nothing".into()));
                    };
                    dense.update(values, filter.as_ref().map(|f| f.values()), &placement)?
                }
                Folder::Taken(_) => {
                    return Err(DataFusionError::Internal(format!(
                        "{}: cells after the states were taken",
                        self.name
                    )));
                }
                Folder::DataFusion(accumulator) => {
                    let groups = per_cell.get_or_insert_with(|| {
                        let mut groups = vec![0; rows];
                        placement.each(|g, row| groups[row] = g);
                        groups
                    });
                    accumulator.update_batch(args, groups, filter.as_ref(), self.groups)?
                }
            }
        }
        placement.mark(seen, keep.as_ref().map(|k| k.values()));
        // Dense accumulators keep their size; one that grows is held to the pool.
        let bytes = folders.iter().map(Folder::size).sum::<usize>() + seen.len();
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
pub(crate) fn tracking() -> BooleanArray {
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
