//! [`Dense`]: the accumulators of the aggregates a grid aggregate folds most, as plain arrays
//! indexed by group, updated a run of cells at a time. A run is cells along the grid's last
//! axis; in a window its groups are all one (the last axis is no key: zonal means, a
//! global aggregate), one after another (each index its own group: per-cell means), or
//! looked up per cell. The first two are reduced or added as slices (no per-cell group
//! lookup, no dependency of one cell's update on the last's through memory); DataFusion's
//! groups accumulators, which take a group index per cell, are used for the rest
//! (`fold.rs`).
//!
//! Their states are DataFusion's partial states, field by field (checked against the
//! aggregate's `state_fields` before one is used), so the final aggregate merges them as it
//! merges its own: a group with no value has NULL states (`count` 0, as DataFusion's
//! variance keeps it). Floating-point sums of a run are added four at a time: another order
//! than DataFusion's, as its hash aggregate's order is its own.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, BooleanArray, Float64Array, Int64Array,
    PrimitiveArray, UInt64Array,
};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::common::{internal_err, Result};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

/// How the groups of a run's cells follow one another along the last axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Along {
    /// All in one group.
    Same,
    /// One group each, consecutive.
    Consecutive,
    /// Looked up per cell.
    Looked,
}

/// A run of a batch's rows: `len` cells from row `row`, the first in group `first`; cell `k`
/// of it is in group `base + last[start + k]` (`last`: the last axis's groups in the window,
/// times its stride of 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub row: usize,
    pub len: usize,
    pub first: usize,
    pub base: usize,
    pub start: usize,
}

/// Where a batch's cells go.
pub(crate) struct Placement<'a> {
    pub runs: &'a [Run],
    pub along: Along,
    /// The last axis's group of each index in the window.
    pub last: &'a [usize],
}

impl Placement<'_> {
    /// Calls `f(group, row)` for each cell, in row order.
    pub(crate) fn each(&self, mut f: impl FnMut(usize, usize)) {
        for run in self.runs {
            match self.along {
                Along::Same => (0..run.len).for_each(|k| f(run.first, run.row + k)),
                Along::Consecutive => (0..run.len).for_each(|k| f(run.first + k, run.row + k)),
                Along::Looked => {
                    let along = &self.last[run.start..run.start + run.len];
                    for (k, &g) in along.iter().enumerate() {
                        f(run.base + g, run.row + k)
                    }
                }
            }
        }
    }

    /// The groups the cells `keep` keeps (all: `None`) reach, marked in `seen`.
    pub(crate) fn mark(&self, seen: &mut [bool], keep: Option<&BooleanBuffer>) {
        match (keep, self.along) {
            (None, Along::Same) => self.runs.iter().for_each(|r| seen[r.first] = true),
            (None, Along::Consecutive) => {
                for run in self.runs {
                    seen[run.first..run.first + run.len].fill(true);
                }
            }
            (None, Along::Looked) => self.each(|g, _| seen[g] = true),
            (Some(keep), _) => self.each(|g, row| seen[g] |= keep.value(row)),
        }
    }
}

/// What a dense accumulator keeps per group.
#[derive(Debug)]
enum State {
    /// `count`: non-NULL values (rows, for `count(*)`).
    Count(Vec<i64>),
    /// `sum` of floats, and each group's values counted (NULL where none).
    SumF64(Vec<f64>, Vec<u64>),
    SumI64(Vec<i64>, Vec<u64>),
    SumU64(Vec<u64>, Vec<u64>),
    /// `avg`: sums and counts.
    Avg(Vec<f64>, Vec<u64>),
    /// `var`, `var_pop`, `stddev`, `stddev_pop`: Welford's counts, means and M2.
    Variance(Vec<u64>, Vec<f64>, Vec<f64>),
    /// `bool_and` (`and`) or `bool_or`, and the values counted.
    Bool {
        values: Vec<bool>,
        counts: Vec<u64>,
        and: bool,
    },
    /// `min` or `max` of a primitive type.
    MinMax(Box<dyn MinMax>),
}

/// One aggregate's dense accumulator.
#[derive(Debug)]
pub(crate) struct Dense {
    state: State,
}

impl Dense {
    /// The dense accumulator of `aggregate` over `groups` groups, when its function and
    /// argument type have one and its states are the ones DataFusion gives; else `None`.
    pub(crate) fn new(
        aggregate: &AggregateFunctionExpr,
        argument: &DataType,
        groups: usize,
    ) -> Result<Option<Self>> {
        let zeros_u64 = || vec![0u64; groups];
        let state = match (aggregate.fun().name(), argument) {
            ("count", _) => State::Count(vec![0; groups]),
            ("sum", DataType::Float64) => State::SumF64(vec![0.0; groups], zeros_u64()),
            ("sum", DataType::Int64) => State::SumI64(vec![0; groups], zeros_u64()),
            ("sum", DataType::UInt64) => State::SumU64(vec![0; groups], zeros_u64()),
            ("avg", DataType::Float64) => State::Avg(vec![0.0; groups], zeros_u64()),
            ("var" | "var_pop" | "stddev" | "stddev_pop", DataType::Float64) => {
                State::Variance(zeros_u64(), vec![0.0; groups], vec![0.0; groups])
            }
            ("bool_and" | "bool_or", DataType::Boolean) => {
                let and = aggregate.fun().name() == "bool_and";
                State::Bool {
                    values: vec![and; groups],
                    counts: zeros_u64(),
                    and,
                }
            }
            (name @ ("min" | "max"), t) => match min_max(t, name == "max", groups) {
                Some(m) => State::MinMax(m),
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        let dense = Dense { state };
        // Its states must be the aggregate's, type by type.
        let theirs = aggregate.state_fields()?;
        let ours = dense.state_types();
        let same = theirs.len() == ours.len()
            && (theirs.iter().zip(&ours)).all(|(f, t)| f.data_type() == t);
        Ok(same.then_some(dense))
    }

    fn state_types(&self) -> Vec<DataType> {
        match &self.state {
            State::Count(_) => vec![DataType::Int64],
            State::SumF64(..) => vec![DataType::Float64],
            State::SumI64(..) => vec![DataType::Int64],
            State::SumU64(..) => vec![DataType::UInt64],
            State::Avg(..) => vec![DataType::UInt64, DataType::Float64],
            State::Variance(..) => vec![DataType::UInt64, DataType::Float64, DataType::Float64],
            State::Bool { .. } => vec![DataType::Boolean],
            State::MinMax(m) => vec![m.data_type().clone()],
        }
    }

    /// Bytes held.
    pub(crate) fn size(&self) -> usize {
        let n = |v: usize, width: usize| v * width;
        match &self.state {
            State::Count(c) => n(c.len(), 8),
            State::SumF64(s, c) => n(s.len(), 8) + n(c.len(), 8),
            State::SumI64(s, c) => n(s.len(), 8) + n(c.len(), 8),
            State::SumU64(s, c) => n(s.len(), 8) + n(c.len(), 8),
            State::Avg(s, c) => n(s.len(), 8) + n(c.len(), 8),
            State::Variance(c, m, m2) => n(c.len() + m.len() + m2.len(), 8),
            State::Bool { values, counts, .. } => values.len() + n(counts.len(), 8),
            State::MinMax(m) => m.size(),
        }
    }

    /// Folds `values` (one per row of the batch; for `count(*)` a literal) at the rows
    /// `valid` keeps (with the values' own NULLs left out), placed by `placement`.
    pub(crate) fn update(
        &mut self,
        values: &ArrayRef,
        valid: Option<&BooleanBuffer>,
        placement: &Placement,
    ) -> Result<()> {
        let valid = combined(values.logical_nulls().as_ref(), valid);
        let valid = valid.as_ref();
        match &mut self.state {
            State::Count(counts) => fold(&mut Counting(counts), &[(); 0], valid, placement, true),
            // An average's states are a sum's: a count and a sum.
            State::SumF64(sums, counts) | State::Avg(sums, counts) => {
                let values = primitive::<Float64Type>(values)?;
                let op = &mut FloatSum { sums, counts };
                fold(op, values, valid, placement, false)
            }
            State::SumI64(sums, counts) => {
                let values = primitive::<Int64Type>(values)?;
                let op = &mut WrappingSum { sums, counts };
                fold(op, values, valid, placement, false)
            }
            State::SumU64(sums, counts) => {
                let values = primitive::<UInt64Type>(values)?;
                let op = &mut WrappingSum { sums, counts };
                fold(op, values, valid, placement, false)
            }
            State::Variance(counts, means, m2s) => {
                let values = primitive::<Float64Type>(values)?;
                let op = &mut Welford { counts, means, m2s };
                fold(op, values, valid, placement, false)
            }
            State::Bool {
                values: acc,
                counts,
                and,
            } => {
                let Some(values) = values.as_boolean_opt() else {
                    return internal_err!("a boolean aggregate got {}", values.data_type());
                };
                let bits: Vec<bool> = values.values().iter().collect();
                let op = &mut Logic {
                    values: acc,
                    counts,
                    and: *and,
                };
                fold(op, &bits, valid, placement, false)
            }
            State::MinMax(m) => m.update(values, valid, placement)?,
        }
        Ok(())
    }

    /// The states of `groups`, as DataFusion's partial aggregate gives them.
    pub(crate) fn state(&self, groups: &[usize]) -> Result<Vec<ArrayRef>> {
        let pick = |v: &[f64]| -> Vec<f64> { groups.iter().map(|&g| v[g]).collect() };
        let counted = |counts: &[u64]| -> Vec<u64> { groups.iter().map(|&g| counts[g]).collect() };
        // NULL where a group had no value.
        let nulls =
            |counts: &[u64]| NullBuffer::from(counts.iter().map(|&c| c > 0).collect::<Vec<_>>());
        Ok(match &self.state {
            State::Count(counts) => {
                let counts = groups.iter().map(|&g| counts[g]);
                vec![Arc::new(Int64Array::from_iter_values(counts))]
            }
            State::SumF64(sums, counts) | State::Avg(sums, counts) => {
                let counts = counted(counts);
                let n = nulls(&counts);
                let sums = Arc::new(Float64Array::new(pick(sums).into(), Some(n.clone())));
                match &self.state {
                    State::Avg(..) => {
                        vec![Arc::new(UInt64Array::new(counts.into(), Some(n))), sums]
                    }
                    _ => vec![sums],
                }
            }
            State::SumI64(sums, counts) => {
                let counts = counted(counts);
                let sums: Vec<i64> = groups.iter().map(|&g| sums[g]).collect();
                vec![Arc::new(Int64Array::new(sums.into(), Some(nulls(&counts))))]
            }
            State::SumU64(sums, counts) => {
                let counts = counted(counts);
                let sums: Vec<u64> = groups.iter().map(|&g| sums[g]).collect();
                vec![Arc::new(UInt64Array::new(
                    sums.into(),
                    Some(nulls(&counts)),
                ))]
            }
            State::Variance(counts, means, m2s) => vec![
                Arc::new(UInt64Array::from(counted(counts))),
                Arc::new(Float64Array::from(pick(means))),
                Arc::new(Float64Array::from(pick(m2s))),
            ],
            State::Bool { values, counts, .. } => {
                let counts = counted(counts);
                let values = groups.iter().map(|&g| values[g]).collect::<Vec<_>>();
                vec![Arc::new(BooleanArray::new(
                    BooleanBuffer::from(values),
                    Some(nulls(&counts)),
                ))]
            }
            State::MinMax(m) => vec![m.state(groups)],
        })
    }
}

/// `values` as a primitive array of `T`.
fn primitive<T: ArrowPrimitiveType>(values: &ArrayRef) -> Result<&[T::Native]> {
    match values.as_primitive_opt::<T>() {
        Some(p) => Ok(p.values()),
        None => internal_err!("a dense accumulator got {}", values.data_type()),
    }
}

/// The rows both `nulls` (valid rows) and `valid` keep.
fn combined(nulls: Option<&NullBuffer>, valid: Option<&BooleanBuffer>) -> Option<BooleanBuffer> {
    match (nulls.filter(|n| n.null_count() > 0), valid) {
        (None, None) => None,
        (Some(n), None) => Some(n.inner().clone()),
        (None, Some(v)) => Some(v.clone()),
        (Some(n), Some(v)) => Some(n.inner() & v),
    }
}

/// How an accumulator takes values: one at a time, or a run's at once.
trait Op<T: Copy> {
    fn add(&mut self, group: usize, value: T);
    /// `values` all into `group`.
    fn add_same(&mut self, group: usize, values: &[T]) {
        values.iter().for_each(|&v| self.add(group, v));
    }
    /// `values[k]` into `first + k`.
    fn add_consecutive(&mut self, first: usize, values: &[T]) {
        (values.iter().enumerate()).for_each(|(k, &v)| self.add(first + k, v));
    }
}

/// Folds `values` (ignored when `counting`: an op of rows) at the rows `valid` keeps.
fn fold<T: Copy + Default, O: Op<T>>(
    op: &mut O,
    values: &[T],
    valid: Option<&BooleanBuffer>,
    placement: &Placement,
    counting: bool,
) {
    let value = |row: usize| match counting {
        true => T::default(),
        false => values[row],
    };
    match valid {
        None => {
            for run in placement.runs {
                let rows = run.row..run.row + run.len;
                match (placement.along, counting) {
                    (Along::Same, false) => op.add_same(run.first, &values[rows]),
                    (Along::Consecutive, false) => op.add_consecutive(run.first, &values[rows]),
                    (Along::Same, true) => op.add_same(run.first, &vec![T::default(); run.len]),
                    _ => {
                        let one = Placement {
                            runs: std::slice::from_ref(run),
                            ..*placement
                        };
                        one.each(|g, row| op.add(g, value(row)));
                    }
                }
            }
        }
        Some(valid) => placement.each(|g, row| {
            if valid.value(row) {
                op.add(g, value(row))
            }
        }),
    }
}

/// `count`.
struct Counting<'a>(&'a mut [i64]);

impl Op<()> for Counting<'_> {
    fn add(&mut self, group: usize, _: ()) {
        self.0[group] += 1;
    }
    fn add_same(&mut self, group: usize, values: &[()]) {
        self.0[group] += values.len() as i64;
    }
}

/// Four partial sums: a run's sum without one add waiting on the last.
fn sum4(values: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 4];
    let chunks = values.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..4 {
            lanes[i] += c[i];
        }
    }
    let mut sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for &v in rest {
        sum += v;
    }
    sum
}

/// `sum` and `avg` of floats.
struct FloatSum<'a> {
    sums: &'a mut [f64],
    counts: &'a mut [u64],
}

impl Op<f64> for FloatSum<'_> {
    fn add(&mut self, group: usize, value: f64) {
        self.sums[group] += value;
        self.counts[group] += 1;
    }
    fn add_same(&mut self, group: usize, values: &[f64]) {
        self.sums[group] += sum4(values);
        self.counts[group] += values.len() as u64;
    }
    fn add_consecutive(&mut self, first: usize, values: &[f64]) {
        let sums = &mut self.sums[first..first + values.len()];
        sums.iter_mut().zip(values).for_each(|(s, v)| *s += v);
        let counts = &mut self.counts[first..first + values.len()];
        counts.iter_mut().for_each(|c| *c += 1);
    }
}

/// `sum` of integers, wrapping as DataFusion's does.
struct WrappingSum<'a, T> {
    sums: &'a mut [T],
    counts: &'a mut [u64],
}

impl<T: Copy + num_wrapping::Wrapping> Op<T> for WrappingSum<'_, T> {
    fn add(&mut self, group: usize, value: T) {
        self.sums[group] = self.sums[group].wrapping_plus(value);
        self.counts[group] += 1;
    }
}

mod num_wrapping {
    pub(crate) trait Wrapping {
        fn wrapping_plus(self, other: Self) -> Self;
    }
    impl Wrapping for i64 {
        fn wrapping_plus(self, other: i64) -> i64 {
            self.wrapping_add(other)
        }
    }
    impl Wrapping for u64 {
        fn wrapping_plus(self, other: u64) -> u64 {
            self.wrapping_add(other)
        }
    }
}

/// Welford's update, as DataFusion's variance makes it.
fn welford(count: u64, mean: f64, m2: f64, value: f64) -> (u64, f64, f64) {
    let count = count + 1;
    let delta = value - mean;
    let mean = delta / count as f64 + mean;
    (count, mean, m2 + delta * (value - mean))
}

/// Chan's merge of two groups' (count, mean, M2), as DataFusion's variance merges them.
fn chan(a: (u64, f64, f64), b: (u64, f64, f64)) -> (u64, f64, f64) {
    if a.0 == 0 {
        return b;
    }
    let count = a.0 + b.0;
    let mean = a.1 * a.0 as f64 / count as f64 + b.1 * b.0 as f64 / count as f64;
    let delta = a.1 - b.1;
    (
        count,
        mean,
        a.2 + b.2 + delta * delta * a.0 as f64 * b.0 as f64 / count as f64,
    )
}

/// `var`, `var_pop`, `stddev` and `stddev_pop`.
struct Welford<'a> {
    counts: &'a mut [u64],
    means: &'a mut [f64],
    m2s: &'a mut [f64],
}

impl Op<f64> for Welford<'_> {
    fn add(&mut self, g: usize, value: f64) {
        (self.counts[g], self.means[g], self.m2s[g]) =
            welford(self.counts[g], self.means[g], self.m2s[g], value);
    }
    /// The run's own mean and M2 (two passes), merged into the group's.
    fn add_same(&mut self, g: usize, values: &[f64]) {
        if values.is_empty() {
            return;
        }
        let n = values.len();
        let mean = sum4(values) / n as f64;
        let m2 = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>();
        let merged = chan(
            (self.counts[g], self.means[g], self.m2s[g]),
            (n as u64, mean, m2),
        );
        (self.counts[g], self.means[g], self.m2s[g]) = merged;
    }
}

/// `bool_and` and `bool_or`.
struct Logic<'a> {
    values: &'a mut [bool],
    counts: &'a mut [u64],
    and: bool,
}

impl Op<bool> for Logic<'_> {
    fn add(&mut self, g: usize, value: bool) {
        self.values[g] = match self.and {
            true => self.values[g] && value,
            false => self.values[g] || value,
        };
        self.counts[g] += 1;
    }
}

/// `min` or `max` of one primitive type.
trait MinMax: std::fmt::Debug + Send + Sync {
    fn data_type(&self) -> &DataType;
    fn size(&self) -> usize;
    fn update(
        &mut self,
        values: &ArrayRef,
        valid: Option<&BooleanBuffer>,
        placement: &Placement,
    ) -> Result<()>;
    fn state(&self, groups: &[usize]) -> ArrayRef;
}

/// Whether `new` replaces `current` as the minimum (`max`: the maximum). NaN is greater than
/// every number, as in arrow's and PostgreSQL's order: a maximum is NaN when a value is, a
/// minimum only when every value is.
trait Ordered: Copy + Default + Send + Sync + std::fmt::Debug + 'static {
    fn replaces(new: Self, current: Self, max: bool) -> bool;
}

macro_rules! ordered_int {
    ($($t:ty),*) => {$(
        impl Ordered for $t {
            fn replaces(new: $t, current: $t, max: bool) -> bool {
                if max { new > current } else { new < current }
            }
        }
    )*};
}
ordered_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! ordered_float {
    ($($t:ty),*) => {$(
        impl Ordered for $t {
            fn replaces(new: $t, current: $t, max: bool) -> bool {
                match (new.is_nan(), current.is_nan(), max) {
                    (_, true, true) => false,
                    (true, _, true) => true,
                    (true, _, false) => false,
                    (false, true, false) => true,
                    (false, false, true) => new > current,
                    (false, false, false) => new < current,
                }
            }
        }
    )*};
}
ordered_float!(f32, f64);

/// The dense `min`/`max` of `T`.
#[derive(Debug)]
struct Extremes<T: ArrowPrimitiveType> {
    data_type: DataType,
    values: Vec<T::Native>,
    counts: Vec<u64>,
    max: bool,
}

struct Extreme<'a, N> {
    values: &'a mut [N],
    counts: &'a mut [u64],
    max: bool,
}

impl<N: Ordered> Op<N> for Extreme<'_, N> {
    fn add(&mut self, g: usize, value: N) {
        if self.counts[g] == 0 || N::replaces(value, self.values[g], self.max) {
            self.values[g] = value;
        }
        self.counts[g] += 1;
    }
}

impl<T> MinMax for Extremes<T>
where
    T: ArrowPrimitiveType + std::fmt::Debug + Send + Sync,
    T::Native: Ordered,
{
    fn data_type(&self) -> &DataType {
        &self.data_type
    }

    fn size(&self) -> usize {
        self.values.len() * std::mem::size_of::<T::Native>() + self.counts.len() * 8
    }

    fn update(
        &mut self,
        values: &ArrayRef,
        valid: Option<&BooleanBuffer>,
        placement: &Placement,
    ) -> Result<()> {
        let values = primitive::<T>(values)?;
        let op = &mut Extreme {
            values: &mut self.values,
            counts: &mut self.counts,
            max: self.max,
        };
        fold(op, values, valid, placement, false);
        Ok(())
    }

    fn state(&self, groups: &[usize]) -> ArrayRef {
        let values: Vec<T::Native> = groups.iter().map(|&g| self.values[g]).collect();
        let valid = NullBuffer::from(
            groups
                .iter()
                .map(|&g| self.counts[g] > 0)
                .collect::<Vec<_>>(),
        );
        Arc::new(
            PrimitiveArray::<T>::new(values.into(), Some(valid))
                .with_data_type(self.data_type.clone()),
        )
    }
}

/// The dense `min` (`max`) of values of `data_type` over `groups` groups, for the primitive
/// types that have one.
fn min_max(data_type: &DataType, max: bool, groups: usize) -> Option<Box<dyn MinMax>> {
    fn of<T>(data_type: &DataType, max: bool, groups: usize) -> Option<Box<dyn MinMax>>
    where
        T: ArrowPrimitiveType + std::fmt::Debug + Send + Sync,
        T::Native: Ordered,
    {
        Some(Box::new(Extremes::<T> {
            data_type: data_type.clone(),
            values: vec![T::Native::default(); groups],
            counts: vec![0; groups],
            max,
        }))
    }
    use DataType as D;
    match data_type {
        D::Int8 => of::<Int8Type>(data_type, max, groups),
        D::Int16 => of::<Int16Type>(data_type, max, groups),
        D::Int32 => of::<Int32Type>(data_type, max, groups),
        D::Int64 => of::<Int64Type>(data_type, max, groups),
        D::UInt8 => of::<UInt8Type>(data_type, max, groups),
        D::UInt16 => of::<UInt16Type>(data_type, max, groups),
        D::UInt32 => of::<UInt32Type>(data_type, max, groups),
        D::UInt64 => of::<UInt64Type>(data_type, max, groups),
        D::Float32 => of::<Float32Type>(data_type, max, groups),
        D::Float64 => of::<Float64Type>(data_type, max, groups),
        D::Date32 => of::<Date32Type>(data_type, max, groups),
        D::Date64 => of::<Date64Type>(data_type, max, groups),
        D::Timestamp(TimeUnit::Second, _) => of::<TimestampSecondType>(data_type, max, groups),
        D::Timestamp(TimeUnit::Millisecond, _) => {
            of::<TimestampMillisecondType>(data_type, max, groups)
        }
        D::Timestamp(TimeUnit::Microsecond, _) => {
            of::<TimestampMicrosecondType>(data_type, max, groups)
        }
        D::Timestamp(TimeUnit::Nanosecond, _) => {
            of::<TimestampNanosecondType>(data_type, max, groups)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int64Array, TimestampNanosecondArray};
    use arrow::datatypes::{Field, Schema};
    use datafusion::execution::FunctionRegistry;
    use datafusion::logical_expr::EmitTo;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::col;
    use datafusion::prelude::SessionContext;
    use proptest::prelude::*;

    /// `function` over a column of `data_type`, as a physical aggregate.
    fn aggregate(function: &str, data_type: &DataType) -> AggregateFunctionExpr {
        let schema = Arc::new(Schema::new(vec![Field::new("v", data_type.clone(), true)]));
        let udaf = SessionContext::new().udaf(function).unwrap();
        AggregateExprBuilder::new(udaf, vec![col("v", &schema).unwrap()])
            .schema(schema)
            .alias(function)
            .build()
            .unwrap()
    }

    /// The rows' groups: runs of `len` cells, each run's groups as `along` says.
    fn placement_groups(runs: &[Run], along: Along, last: &[usize]) -> Vec<usize> {
        let placement = Placement { runs, along, last };
        let mut groups = Vec::new();
        placement.each(|g, _| groups.push(g));
        groups
    }

    fn close(a: &ArrayRef, b: &ArrayRef) -> bool {
        if a.data_type() == &DataType::Float64 {
            let (a, b) = (
                a.as_primitive::<Float64Type>(),
                b.as_primitive::<Float64Type>(),
            );
            return a.len() == b.len()
                && (0..a.len()).all(|i| {
                    a.is_null(i) == b.is_null(i)
                        && (a.is_null(i) || {
                            let (x, y) = (a.value(i), b.value(i));
                            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
                        })
                });
        }
        a.to_data() == b.to_data()
    }

    proptest! {
        #![proptest_config(crate::proptest_config::config(64))]

        /// Any runs, NULLs and filters: a dense accumulator's states are those DataFusion's
        /// groups accumulator gives for the same cells in the same groups.
        #[test]
        fn dense_states_are_datafusions(
            lens in prop::collection::vec(1usize..7, 1..6),
            along in prop_oneof![Just(Along::Same), Just(Along::Consecutive), Just(Along::Looked)],
            values in prop::collection::vec(prop::option::weighted(0.8, -50i64..50), 40),
            nulls in any::<bool>(),
            kept in prop::collection::vec(prop::bool::weighted(0.8), 40),
            filtered in any::<bool>(),
            function in prop::sample::select(vec![
                "count", "sum", "avg", "min", "max", "var", "var_pop", "stddev", "stddev_pop",
                "bool_and", "bool_or",
            ]),
            kind in 0usize..3,
        ) {
            // Runs of a window of 4 x 7 groups along the last axis: cell k of a run lies
            // at last-axis index start + k.
            let last: Vec<usize> = vec![3, 0, 6, 2, 5, 1, 4];
            let mut runs = Vec::new();
            let mut row = 0;
            for (i, &len) in lens.iter().enumerate() {
                let base = (i % 4) * 7;
                let start = i % (8 - len);
                let first = match along {
                    Along::Same => base,
                    Along::Consecutive => base + start,
                    Along::Looked => base + last[start],
                };
                runs.push(Run { row, len, first, base, start });
                row += len;
            }
            let rows = row;
            // Without NULLs (and without a filter) runs take the fast paths.
            let values: Vec<Option<i64>> = match nulls {
                true => values,
                false => values.iter().map(|v| Some(v.unwrap_or(7))).collect(),
            };
            let last: Vec<usize> = match along {
                Along::Same => vec![0; 7],
                Along::Consecutive => (0..7).collect(),
                Along::Looked => last,
            };
            let groups = placement_groups(&runs, along, &last);
            let total = 28;
            let data_type = match (function, kind) {
                ("bool_and" | "bool_or", _) => DataType::Boolean,
                ("sum", 1) | ("min" | "max", 1) => DataType::Int64,
                ("min" | "max", 2) => DataType::Timestamp(TimeUnit::Nanosecond, None),
                _ => DataType::Float64,
            };
            let values: ArrayRef = match &data_type {
                DataType::Boolean => Arc::new(BooleanArray::from(
                    values[..rows].iter().map(|v| v.map(|v| v > 0)).collect::<Vec<_>>(),
                )),
                DataType::Int64 => Arc::new(Int64Array::from(values[..rows].to_vec())),
                DataType::Timestamp(..) => {
                    Arc::new(TimestampNanosecondArray::from(values[..rows].to_vec()))
                }
                _ => Arc::new(Float64Array::from(
                    values[..rows].iter().map(|v| v.map(|v| v as f64 / 4.0)).collect::<Vec<_>>(),
                )),
            };
            let filter = BooleanArray::from(kept[..rows].to_vec());
            let filter = filtered.then_some(&filter);
            let aggregate = aggregate(function, &data_type);
            let mut ours = Dense::new(&aggregate, &data_type, total).unwrap().expect("dense");
            let placement = Placement { runs: &runs, along, last: &last };
            ours.update(&values, filter.map(|f| f.values()), &placement).unwrap();
            let mut theirs = aggregate.create_groups_accumulator().unwrap();
            let tracking = BooleanArray::from(Vec::<bool>::new());
            let empty = arrow::array::new_empty_array(&data_type);
            theirs.update_batch(&[empty], &[], Some(&tracking), total).unwrap();
            theirs.update_batch(&[values], &groups, filter, total).unwrap();
            let all: Vec<usize> = (0..total).collect();
            let ours = ours.state(&all).unwrap();
            let theirs = theirs.state(EmitTo::All).unwrap();
            prop_assert_eq!(ours.len(), theirs.len());
            for (a, b) in ours.iter().zip(&theirs) {
                prop_assert!(close(a, b), "{function}: {a:?} against {b:?}");
            }
        }
    }
}
