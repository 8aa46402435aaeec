//! What a grid aggregate gives, a batch of groups at a time as the stream is read: the groups
//! a row reached (in C order of their positions: each axis's groups in the order its
//! indices first reach them), their keys (each axis's groups' key values), and their states
//! (a partial aggregate) or final values (the partitions' states merged by position, then
//! DataFusion's accumulators' final step). Each batch has arrays of its own: a slice of one
//! big batch would be counted whole by every operator that holds it.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{new_empty_array, ArrayRef, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use datafusion::common::{internal_err, Result};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

use super::fold::{tracking, Folded};
use super::plan::GridPlan;

/// Batches made one at a time as they are asked for.
pub(crate) type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

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

impl Finals {
    /// The final values of every group a row reached. Partitions whose windows follow one
    /// another along the first axis share no group: each is finished on its own when the
    /// stream reaches it (no accumulator of the whole shape). Otherwise their states merge
    /// by position into accumulators of the whole shape first.
    pub(crate) fn batches(self, folded: Vec<Folded>) -> Result<Batches> {
        if self.plan.apart() {
            let finals = Arc::new(self);
            let batches = folded
                .into_iter()
                .enumerate()
                .flat_map(move |(p, folded)| match finals.partition(p, folded) {
                    Ok(batches) => batches,
                    Err(e) => Box::new(std::iter::once(Err(e))),
                });
            return Ok(Box::new(batches));
        }
        let plan = &self.plan;
        let total = usize::try_from(plan.groups())
            .or_else(|_| internal_err!("a grid aggregate of too many groups"))?;
        let mut accumulators = self.accumulators(total)?;
        let mut seen = vec![false; total];
        let whole = plan.shape();
        for (p, mut folded) in folded.into_iter().enumerate() {
            let (origin, shape) = window(plan, p);
            // A batch of states at a time beside the accumulators.
            for local in reached(plan, &folded.seen).chunks(self.batch_size.max(1)) {
                let positions: Vec<usize> = local.iter().map(|&g| g as usize).collect();
                let states = folded.states(&positions)?;
                let global = positions_in(&axis_ids(local, &origin, &shape), &whole);
                self.merge(&mut accumulators, &states, &global, total)?;
                global.iter().for_each(|&g| seen[g] = true);
            }
            folded.free();
        }
        let values = evaluated(&mut accumulators, total)?;
        let reached = reached(plan, &seen);
        self.values(values, reached, whole)
    }

    /// Partition `p`'s groups finished on their own, a batch at a time: each batch's states
    /// merged into accumulators of its own groups, so that finishing holds no more than a
    /// batch beside the partition's fold.
    fn partition(self: &Arc<Self>, p: usize, mut folded: Folded) -> Result<Batches> {
        let plan = &self.plan;
        let reached = reached(plan, &folded.seen);
        let (origin, shape) = window(plan, p);
        let finals = Arc::clone(self);
        Ok(chunked(reached, self.batch_size, move |_, groups| {
            let positions: Vec<usize> = groups.iter().map(|&g| g as usize).collect();
            let states = folded.states(&positions)?;
            let mut accumulators = finals.accumulators(groups.len())?;
            let order: Vec<usize> = (0..groups.len()).collect();
            finals.merge(&mut accumulators, &states, &order, groups.len())?;
            let mut columns = key_columns(&finals.plan, &axis_ids(groups, &origin, &shape))?;
            columns.extend(evaluated(&mut accumulators, groups.len())?);
            Ok(RecordBatch::try_new(Arc::clone(&finals.schema), columns)?)
        }))
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

    /// The batches of `values` (one per group of the whole shape `whole`) of `reached`.
    fn values(&self, values: Vec<ArrayRef>, reached: Vec<u64>, whole: Vec<u32>) -> Result<Batches> {
        let plan = Arc::clone(&self.plan);
        let schema = Arc::clone(&self.schema);
        let origin = vec![0u32; whole.len()];
        Ok(chunked(reached, self.batch_size, move |_, groups| {
            let mut columns = key_columns(&plan, &axis_ids(groups, &origin, &whole))?;
            let indices = UInt64Array::from(groups.to_vec());
            for value in &values {
                columns.push(take(value.as_ref(), &indices, None)?);
            }
            Ok(RecordBatch::try_new(Arc::clone(&schema), columns)?)
        }))
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
fn chunked(
    groups: Vec<u64>,
    batch_size: usize,
    mut make: impl FnMut(Range<usize>, &[u64]) -> Result<RecordBatch> + Send + 'static,
) -> Batches {
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
