//! What a grid aggregate gives, a batch of groups at a time as the stream is read: the groups
//! a row reached (in C order of their positions: each axis's groups in the order its
//! indices first reach them), their keys (each axis's groups' key values), and their states
//! (a partial aggregate) or final values (DataFusion's accumulators' final step over each
//! partition's own groups, and over the slabs of first-axis indices several partitions
//! reach, their states merged by position). Each batch has arrays of its own: a slice of one
//! big batch would be counted whole by every operator that holds it.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use arrow::array::{new_empty_array, Array, ArrayRef, RecordBatch, UInt32Array, UInt64Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{concat, take};
use arrow::datatypes::SchemaRef;
use datafusion::common::{internal_err, DataFusionError, Result};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

use super::fold::{tracking, Folded};
use super::plan::{GridPlan, Segment};

/// Batches made one at a time as they are asked for.
pub(crate) type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Groups with their final values, made one run at a time as they are asked for.
type GroupRuns = Box<dyn Iterator<Item = Result<Groups>> + Send>;

/// A run of groups a row reached, with their final values.
struct Groups {
    /// Per axis, each group's group along it (numbered over the whole axis).
    ids: Vec<Vec<u32>>,
    /// Per aggregate, each group's final value.
    values: Vec<ArrayRef>,
}

/// A grid aggregate's final values laid out on its grid: what `COPY` writes as a dataset
/// without a row made per group (`nd/on_grid.rs`).
pub(crate) struct DenseFinals {
    /// Per aggregate, the value of every group of the plan's shape, in C order of their
    /// positions; NULL where no row reached the group.
    pub values: Vec<ArrayRef>,
    /// The groups a row reached.
    pub reached: BooleanBuffer,
}

/// Partition `p`'s partial aggregate: the keys and states of the groups of `folded` a row
/// reached.
pub(crate) fn partial_batches(
    plan: Arc<GridPlan>,
    p: usize,
    mut folded: Folded,
    schema: SchemaRef,
    batch_size: usize,
) -> Batches {
    let reached = reached(&plan, &folded.seen);
    let (origin, shape) = window(&plan, p);
    chunked(reached, batch_size, move |_, groups| {
        let positions: Vec<usize> = groups.iter().map(|&g| g as usize).collect();
        let mut columns = key_columns(&plan, &axis_ids(groups, &origin, &shape))?;
        columns.extend(folded.states(&positions)?);
        Ok(RecordBatch::try_new(Arc::clone(&schema), columns)?)
    })
}

/// The final aggregate over the partitions' folds (`folded[p]`): the final aggregate's
/// functions `finals`, whose partial states have `state_counts` arrays each.
pub(crate) struct Finals {
    pub plan: Arc<GridPlan>,
    pub finals: Vec<Arc<AggregateFunctionExpr>>,
    pub state_counts: Vec<usize>,
    pub schema: SchemaRef,
    pub batch_size: usize,
}

/// The groups of partition `p` (positions in its window, ascending) a row reached, and where
/// those of each first-axis index start.
struct Reached {
    groups: Vec<u64>,
    origin: Vec<u32>,
    shape: Vec<u32>,
}

impl Reached {
    /// Those of first-axis indices `first` (of the whole shape).
    fn along(&self, first: Range<u32>) -> &[u64] {
        let (Some(&o), Some(&n)) = (self.origin.first(), self.shape.first()) else {
            // No axes: one group.
            return &self.groups;
        };
        let stride: u64 = self.shape[1..].iter().map(|&n| u64::from(n)).product();
        let local = |g: u32| u64::from(g.saturating_sub(o).min(n)) * stride;
        let (from, to) = (local(first.start), local(first.end));
        let a = self.groups.partition_point(|&g| g < from);
        let b = self.groups.partition_point(|&g| g < to);
        &self.groups[a..b]
    }
}

impl Finals {
    /// The final values of every group a row reached, in C order of their positions, a
    /// batch at a time as the stream asks. Each partition's own groups (first-axis indices
    /// no other partition's window reaches) are finished on their own, a batch at a time;
    /// only a slab of a first-axis index several partitions reach (the month two
    /// partitions' days share) has their states merged first, into accumulators of that
    /// slab alone. No accumulator of the whole shape is made.
    pub(crate) fn batches(self, folded: Vec<Folded>) -> Result<Batches> {
        let (plan, schema) = (Arc::clone(&self.plan), Arc::clone(&self.schema));
        let groups = self.groups(folded)?;
        Ok(Box::new(groups.map(move |groups| {
            let groups = groups?;
            let mut columns = key_columns(&plan, &groups.ids)?;
            columns.extend(groups.values);
            Ok(RecordBatch::try_new(Arc::clone(&schema), columns)?)
        })))
    }

    /// The same final values placed at their groups' positions in the plan's shape (its
    /// accumulators' memory is the caller's to reserve: a value per group of the shape).
    pub(crate) fn dense(self, folded: Vec<Folded>) -> Result<DenseFinals> {
        let shape = self.plan.shape();
        let total: usize = shape.iter().map(|&n| n as usize).product();
        let types: Vec<_> = (self.schema.fields().iter().skip(self.plan.keys.len()))
            .map(|f| f.data_type().clone())
            .collect();
        let mut rows: Vec<Vec<ArrayRef>> = vec![Vec::new(); types.len()];
        // For each position of the shape, the reached group's row among those given.
        let mut row_of: Vec<Option<u32>> = vec![None; total];
        let mut given: u32 = 0;
        for groups in self.groups(folded)? {
            let groups = groups?;
            for position in positions_in(&groups.ids, &shape) {
                let Some(slot) = row_of.get_mut(position) else {
                    return internal_err!("a group beyond the grid aggregate's shape");
                };
                *slot = Some(given);
                given = given
                    .checked_add(1)
                    .ok_or_else(|| DataFusionError::Internal("too many groups".into()))?;
            }
            for (all, value) in rows.iter_mut().zip(groups.values) {
                all.push(value);
            }
        }
        let indices = UInt32Array::from(row_of);
        let reached = match indices.nulls() {
            Some(valid) => valid.inner().clone(),
            None => BooleanBuffer::new_set(total),
        };
        let mut values = Vec::with_capacity(types.len());
        for (parts, data_type) in rows.iter().zip(&types) {
            let parts: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            let all = match parts.is_empty() {
                true => new_empty_array(data_type),
                false => concat(&parts)?,
            };
            values.push(take(all.as_ref(), &indices, None)?);
        }
        Ok(DenseFinals { values, reached })
    }

    /// The groups a row reached, in C order of their positions, with their final values.
    fn groups(self, folded: Vec<Folded>) -> Result<GroupRuns> {
        let plan = Arc::clone(&self.plan);
        let reached: Arc<Vec<Reached>> = Arc::new(
            (folded.iter().enumerate())
                .map(|(p, f)| {
                    let (origin, shape) = window(&plan, p);
                    Reached {
                        groups: reached(&plan, &f.seen),
                        origin,
                        shape,
                    }
                })
                .collect(),
        );
        let segments = plan.segments();
        // Each partition's fold is freed once its last segment is given.
        let mut last = vec![0usize; folded.len()];
        for (i, segment) in segments.iter().enumerate() {
            match segment {
                Segment::Own { partition, .. } => last[*partition] = i,
                Segment::Shared { partitions, .. } => {
                    partitions.iter().for_each(|&p| last[p] = i);
                }
            }
        }
        let finals = Arc::new(self);
        let folded = Arc::new(Mutex::new(folded));
        let mut left = segments.into_iter().enumerate();
        let mut current: GroupRuns = Box::new(std::iter::empty());
        let mut started = 0;
        Ok(Box::new(std::iter::from_fn(move || loop {
            if let Some(batch) = current.next() {
                return Some(batch);
            }
            let Ok(mut folds) = folded.lock() else {
                return Some(internal_err!("a grid aggregate's emission panicked"));
            };
            for (p, fold) in folds.iter_mut().enumerate() {
                if last[p] < started {
                    fold.free();
                }
            }
            drop(folds);
            let (i, segment) = left.next()?;
            started = i + 1;
            current = match finals.segment(&segment, &reached, &folded) {
                Ok(batches) => batches,
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
        })))
    }

    /// The groups of one segment: a partition's own groups a batch at a time (their states
    /// taken when the batch is asked for), or a shared slab merged, then given.
    fn segment(
        self: &Arc<Self>,
        segment: &Segment,
        reached: &Arc<Vec<Reached>>,
        folded: &Arc<Mutex<Vec<Folded>>>,
    ) -> Result<GroupRuns> {
        let lost = || DataFusionError::Internal("a grid aggregate's emission panicked".into());
        match segment {
            Segment::Own { partition, first } => {
                let p = *partition;
                let groups = reached[p].along(first.clone()).to_vec();
                let (reached, folded, finals) =
                    (Arc::clone(reached), Arc::clone(folded), Arc::clone(self));
                Ok(chunked(groups, self.batch_size, move |_, groups| {
                    let positions: Vec<usize> = groups.iter().map(|&g| g as usize).collect();
                    let states = folded.lock().map_err(|_| lost())?[p].states(&positions)?;
                    let mut accumulators = finals.accumulators(groups.len())?;
                    let order: Vec<usize> = (0..groups.len()).collect();
                    finals.merge(&mut accumulators, &states, &order, groups.len())?;
                    let r = &reached[p];
                    Ok(Groups {
                        ids: axis_ids(groups, &r.origin, &r.shape),
                        values: evaluated(&mut accumulators, groups.len())?,
                    })
                }))
            }
            Segment::Shared { first, partitions } => {
                let whole = self.plan.shape();
                let slab = usize::try_from(self.plan.slab())
                    .or_else(|_| internal_err!("a grid aggregate of too many groups"))?;
                let base = *first as usize * slab;
                let mut accumulators = self.accumulators(slab)?;
                let mut seen = vec![false; slab];
                let mut folds = folded.lock().map_err(|_| lost())?;
                for &p in partitions {
                    let r = &reached[p];
                    for chunk in r.along(*first..first + 1).chunks(self.batch_size.max(1)) {
                        let positions: Vec<usize> = chunk.iter().map(|&g| g as usize).collect();
                        let states = folds[p].states(&positions)?;
                        let global = positions_in(&axis_ids(chunk, &r.origin, &r.shape), &whole);
                        let in_slab: Vec<usize> = global.iter().map(|&g| g - base).collect();
                        self.merge(&mut accumulators, &states, &in_slab, slab)?;
                        in_slab.iter().for_each(|&g| seen[g] = true);
                    }
                }
                drop(folds);
                let values = evaluated(&mut accumulators, slab)?;
                let groups: Vec<u64> = match self.plan.keys.is_empty() {
                    // An aggregate without GROUP BY has its one row.
                    true => vec![0],
                    false => (seen.iter().enumerate())
                        .filter(|(_, &s)| s)
                        .map(|(g, _)| (base + g) as u64)
                        .collect(),
                };
                let origin = vec![0u32; whole.len()];
                Ok(chunked(groups, self.batch_size, move |_, groups| {
                    let indices =
                        UInt64Array::from_iter_values(groups.iter().map(|&g| g - base as u64));
                    Ok(Groups {
                        ids: axis_ids(groups, &origin, &whole),
                        values: (values.iter())
                            .map(|value| take(value.as_ref(), &indices, None))
                            .collect::<std::result::Result<_, _>>()?,
                    })
                }))
            }
        }
    }

    /// The final accumulators over `groups` groups, tracking each group's values from the
    /// start (`tracking`).
    fn accumulators(&self, groups: usize) -> Result<Vec<Box<dyn GroupsAccumulator>>> {
        (self.finals.iter())
            .map(|a| {
                let mut accumulator = a.create_groups_accumulator()?;
                let empty = (a.state_fields()?.iter())
                    .map(|f| new_empty_array(f.data_type()))
                    .collect::<Vec<_>>();
                accumulator.merge_batch(&empty, &[], Some(&tracking()), groups)?;
                Ok(accumulator)
            })
            .collect()
    }

    /// `states` (each aggregate's `state_counts` arrays in turn) merged into `accumulators`
    /// at `groups`.
    fn merge(
        &self,
        accumulators: &mut [Box<dyn GroupsAccumulator>],
        states: &[ArrayRef],
        groups: &[usize],
        total: usize,
    ) -> Result<()> {
        let mut at = 0;
        for (accumulator, &count) in accumulators.iter_mut().zip(&self.state_counts) {
            let Some(states) = states.get(at..at + count) else {
                return internal_err!("a grid aggregate lost states");
            };
            accumulator.merge_batch(states, groups, None, total)?;
            at += count;
        }
        Ok(())
    }
}

/// Each accumulator's final values over all `groups` groups.
fn evaluated(
    accumulators: &mut [Box<dyn GroupsAccumulator>],
    groups: usize,
) -> Result<Vec<ArrayRef>> {
    let mut values = Vec::with_capacity(accumulators.len());
    for accumulator in accumulators {
        let value = accumulator.evaluate(EmitTo::All)?;
        if value.len() != groups {
            return internal_err!("an accumulator of {groups} groups gave {}", value.len());
        }
        values.push(value);
    }
    Ok(values)
}

/// `groups` a batch of `batch_size` at a time, each made by `make(range, groups)` when asked
/// for.
fn chunked<T: 'static>(
    groups: Vec<u64>,
    batch_size: usize,
    mut make: impl FnMut(Range<usize>, &[u64]) -> Result<T> + Send + 'static,
) -> Box<dyn Iterator<Item = Result<T>> + Send> {
    let size = batch_size.max(1);
    let mut at = 0;
    Box::new(std::iter::from_fn(move || {
        if at >= groups.len() {
            return None;
        }
        let range = at..(at + size).min(groups.len());
        at = range.end;
        Some(make(range.clone(), &groups[range]))
    }))
}

/// The window of partition `p`: where it starts on each axis, and its groups on each.
fn window(plan: &GridPlan, p: usize) -> (Vec<u32>, Vec<u32>) {
    let window = plan.windows.get(p).map(Vec::as_slice).unwrap_or(&[]);
    (
        window.iter().map(|w| w.start).collect(),
        window.iter().map(|w| w.end - w.start).collect(),
    )
}

/// The groups to give (positions in a window): those a row reached, in order; a plan
/// without keys gives its one group whatever happened (an aggregate without GROUP BY has a
/// row).
fn reached(plan: &GridPlan, seen: &[bool]) -> Vec<u64> {
    if plan.keys.is_empty() {
        return vec![0];
    }
    (seen.iter().enumerate())
        .filter(|(_, &s)| s)
        .map(|(g, _)| g as u64)
        .collect()
}

/// Per axis, the group (numbered over the whole axis) of each of `groups`, positions in a
/// window at `origin` of `shape`.
fn axis_ids(groups: &[u64], origin: &[u32], shape: &[u32]) -> Vec<Vec<u32>> {
    let mut stride: u64 = shape.iter().map(|&n| u64::from(n)).product();
    (origin.iter().zip(shape))
        .map(|(&o, &n)| {
            let n = u64::from(n).max(1);
            stride /= n;
            let stride = stride.max(1);
            groups
                .iter()
                .map(|g| o + ((g / stride) % n) as u32)
                .collect()
        })
        .collect()
}

/// Positions in the whole shape `whole` of groups whose groups along each axis are `ids`.
fn positions_in(ids: &[Vec<u32>], whole: &[u32]) -> Vec<usize> {
    let len = ids.first().map_or(1, Vec::len);
    let mut positions = vec![0usize; len];
    let mut stride: usize = whole.iter().map(|&n| n as usize).product();
    for (axis, &n) in whole.iter().enumerate() {
        stride /= (n as usize).max(1);
        for (g, &id) in positions.iter_mut().zip(&ids[axis]) {
            *g += id as usize * stride;
        }
    }
    positions
}

/// The key columns of groups whose groups along each axis are `ids`.
fn key_columns(plan: &GridPlan, ids: &[Vec<u32>]) -> Result<Vec<ArrayRef>> {
    (plan.keys.iter())
        .map(|&(axis, k)| {
            let (Some(values), Some(ids)) = (plan.axes[axis].key(k), ids.get(axis)) else {
                return internal_err!("axis {axis} has no key {k}");
            };
            let ids = UInt32Array::from(ids.clone());
            Ok(take(values.as_ref(), &ids, None)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_in_a_window_are_found_in_the_whole_shape() {
        // A window at (1, 2) of 2 x 3 groups in a shape of 4 x 6.
        let groups = [0, 2, 3, 5];
        let ids = axis_ids(&groups, &[1, 2], &[2, 3]);
        assert_eq!(ids, vec![vec![1, 1, 2, 2], vec![2, 4, 2, 4]]);
        assert_eq!(positions_in(&ids, &[4, 6]), vec![8, 10, 14, 16]);
    }

    #[test]
    fn groups_are_made_a_batch_at_a_time() {
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("g", arrow::datatypes::DataType::UInt64, false),
        ]));
        let made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&made);
        let mut batches = chunked(vec![7, 8, 9, 10, 11], 2, move |range, groups| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(range.len(), groups.len());
            let column: ArrayRef = Arc::new(UInt64Array::from(groups.to_vec()));
            Ok(RecordBatch::try_new(Arc::clone(&schema), vec![column])?)
        });
        assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 0, "lazily");
        let first = batches.next().unwrap().unwrap();
        assert_eq!(first.num_rows(), 2);
        assert_eq!(made.load(std::sync::atomic::Ordering::SeqCst), 1);
        let rows: Vec<usize> = batches.map(|b| b.unwrap().num_rows()).collect();
        assert_eq!(rows, vec![2, 1]);
    }
}
