//! What a grid scan knows of its axis columns before reading a byte: per axis, the indices a
//! scan (or one partition of it) selects, and from them the exact minimum, maximum, distinct
//! and null counts of the axis's column, an Int64 index or a dimension coordinate's values.
//!
//! DataFusion's aggregate-statistics rule answers `min`, `max` and `count` from exact
//! statistics without running the scan, so every value here is exact only when it is: a
//! row filter or a limit makes them bounds (`to_inexact` in the scan).

use std::cmp::Ordering;
use std::ops::Range;

use arrow::array::{Array, ArrayRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;

use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::selection::Selection;

/// Which way an axis's values run along its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueOrder {
    /// Non-decreasing (`strict`: increasing, no two equal).
    Ascending { strict: bool },
    /// Non-increasing (`strict`: decreasing).
    Descending { strict: bool },
    /// Neither, or with NULL or NaN.
    Unordered,
}

/// Which way `values` run along their index (unordered with a NULL or NaN).
pub(crate) fn value_order(values: &ArrayRef) -> ValueOrder {
    if values.null_count() > 0 {
        return ValueOrder::Unordered;
    }
    let (mut ascending, mut descending, mut strict) = (true, true, true);
    let mut previous = match value_at(values, 0) {
        Some(v) => v,
        None => return ValueOrder::Ascending { strict: true },
    };
    if is_nan(&previous) {
        return ValueOrder::Unordered;
    }
    for i in 1..values.len() as u64 {
        let Some(current) = value_at(values, i).filter(|v| !is_nan(v)) else {
            return ValueOrder::Unordered;
        };
        match previous.partial_cmp(&current) {
            Some(Ordering::Less) => descending = false,
            Some(Ordering::Greater) => ascending = false,
            Some(Ordering::Equal) => strict = false,
            None => return ValueOrder::Unordered,
        }
        previous = current;
    }
    match (ascending, descending) {
        (true, _) => ValueOrder::Ascending { strict },
        (false, true) => ValueOrder::Descending { strict },
        (false, false) => ValueOrder::Unordered,
    }
}

pub(crate) fn is_nan(v: &ScalarValue) -> bool {
    match v {
        ScalarValue::Float16(Some(x)) => x.is_nan(),
        ScalarValue::Float32(Some(x)) => x.is_nan(),
        ScalarValue::Float64(Some(x)) => x.is_nan(),
        _ => false,
    }
}

/// What an axis's column holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AxisValues<'a> {
    /// The index along the axis (Int64).
    Index,
    /// One value per index (a dataset's dimension coordinate).
    Values {
        values: &'a ArrayRef,
        order: ValueOrder,
    },
}

impl AxisValues<'_> {
    /// Which way the column runs as the index grows.
    pub(crate) fn order(&self) -> ValueOrder {
        match self {
            AxisValues::Index => ValueOrder::Ascending { strict: true },
            AxisValues::Values { order, .. } => *order,
        }
    }
}

/// An output column that is a grid axis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AxisColumn<'a> {
    /// The column's position in the scan's schema.
    pub column: usize,
    pub axis: usize,
    pub values: AxisValues<'a>,
}

/// The indices selected along one axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AxisIndices {
    /// Every selected index lies in `set`, and its first and last are selected.
    pub set: IndexSet,
    /// Whether every index of `set` is selected (else only its first and last are known to
    /// be).
    pub exact: bool,
    /// Rows per selected index (the product of the other axes' selections), when each index
    /// has the same number of rows; else `None`.
    pub rows_per_index: Option<u64>,
}

/// Per axis, the indices `selection` selects: the union of its boxes' sets.
pub(crate) fn selected_indices(selection: &Selection, shape: &[u64]) -> Vec<AxisIndices> {
    let boxes = selection.boxes();
    (0..shape.len())
        .map(|a| {
            let ranges = boxes.iter().flat_map(|b| b[a].ranges().iter().cloned());
            let set = IndexSet::from_ranges(shape[a], ranges.collect());
            let rows_per_index = match boxes {
                [b] => Some(
                    (b.iter().enumerate())
                        .filter(|&(d, _)| d != a)
                        .map(|(_, s)| s.len())
                        .product(),
                ),
                _ => None,
            };
            AxisIndices {
                set,
                exact: true,
                rows_per_index,
            }
        })
        .collect()
}

/// The statistics of an axis column whose rows take the indices `indices`.
pub(crate) fn axis_column_statistics(
    values: AxisValues<'_>,
    indices: &AxisIndices,
) -> ColumnStatistics {
    let mut stats = ColumnStatistics::new_unknown();
    let ranges = indices.set.ranges();
    let (Some(first), Some(last)) = (ranges.first(), ranges.last()) else {
        return stats;
    };
    match values {
        AxisValues::Index => {
            stats.null_count = Precision::Exact(0);
            stats.min_value = Precision::Exact(ScalarValue::Int64(Some(first.start as i64)));
            stats.max_value = Precision::Exact(ScalarValue::Int64(Some(last.end as i64 - 1)));
            if indices.exact {
                stats.distinct_count = Precision::Exact(indices.set.len() as usize);
            }
        }
        AxisValues::Values { values, order } => {
            let (min, max) = match order {
                // The ends of the selection hold the extremes, whatever lies between.
                ValueOrder::Ascending { .. } => (
                    value_at(values, first.start),
                    value_at(values, last.end - 1),
                ),
                ValueOrder::Descending { .. } => (
                    value_at(values, last.end - 1),
                    value_at(values, first.start),
                ),
                ValueOrder::Unordered => extremes(values, ranges),
            };
            let exact = indices.exact || order != ValueOrder::Unordered;
            let precise = |v: Option<ScalarValue>| match v {
                Some(v) if exact => Precision::Exact(v),
                Some(v) => Precision::Inexact(v),
                None => Precision::Absent,
            };
            stats.min_value = precise(min);
            stats.max_value = precise(max);
            if values.null_count() == 0 {
                stats.null_count = Precision::Exact(0);
            } else if let (true, Some(per_index)) = (indices.exact, indices.rows_per_index) {
                let nulls: u64 = ranges
                    .iter()
                    .map(|r| values.slice(r.start as usize, (r.end - r.start) as usize))
                    .map(|s| s.null_count() as u64)
                    .sum();
                stats.null_count = Precision::Exact(nulls.saturating_mul(per_index) as usize);
            }
            let strict = matches!(
                order,
                ValueOrder::Ascending { strict: true } | ValueOrder::Descending { strict: true }
            );
            if strict && indices.exact {
                stats.distinct_count = Precision::Exact(indices.set.len() as usize);
            }
        }
    }
    stats
}

/// The value at `i`; `None` past the end (Arrow panics there: a coordinate of no values, as
/// an empty result's dataset has, must open).
fn value_at(values: &ArrayRef, i: u64) -> Option<ScalarValue> {
    let i = usize::try_from(i).ok().filter(|&i| i < values.len())?;
    ScalarValue::try_from_array(values.as_ref(), i).ok()
}

/// The smallest and largest non-null value over `ranges` (NULL when all are null).
fn extremes(
    values: &ArrayRef,
    ranges: &[Range<u64>],
) -> (Option<ScalarValue>, Option<ScalarValue>) {
    let searched = || -> datafusion::common::Result<(ScalarValue, ScalarValue)> {
        let mut min = MinAccumulator::try_new(values.data_type())?;
        let mut max = MaxAccumulator::try_new(values.data_type())?;
        for r in ranges {
            let slice = values.slice(r.start as usize, (r.end - r.start) as usize);
            min.update_batch(std::slice::from_ref(&slice))?;
            max.update_batch(&[slice])?;
        }
        Ok((min.evaluate()?, max.evaluate()?))
    };
    match searched() {
        Ok((min, max)) => (Some(min), Some(max)),
        Err(_) => (None, None),
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int32Array};
    use std::sync::Arc;

    fn set(n: u64, ranges: &[Range<u64>]) -> IndexSet {
        IndexSet::from_ranges(n, ranges.to_vec())
    }

    #[test]
    fn a_coordinate_of_no_values_runs_one_way() {
        let empty: ArrayRef = Arc::new(Float64Array::from(Vec::<f64>::new()));
        assert_eq!(value_order(&empty), ValueOrder::Ascending { strict: true });
        assert_eq!(value_at(&empty, 0), None);
    }

    #[test]
    fn index_columns_take_their_bounds_and_counts_from_the_selection() {
        let shape = [10, 4];
        let selection = Selection::from_boxes(vec![
            vec![set(10, &[2..4]), IndexSet::full(4)],
            vec![set(10, &[7..9]), set(4, &[1..2])],
        ])
        .unwrap();
        let axes = selected_indices(&selection, &shape);
        assert_eq!(axes[0].set, set(10, &[2..4, 7..9]));
        assert_eq!(axes[0].rows_per_index, None);
        let stats = axis_column_statistics(AxisValues::Index, &axes[0]);
        assert_eq!(
            stats.min_value,
            Precision::Exact(ScalarValue::Int64(Some(2)))
        );
        assert_eq!(
            stats.max_value,
            Precision::Exact(ScalarValue::Int64(Some(8)))
        );
        assert_eq!(stats.distinct_count, Precision::Exact(4));
        assert_eq!(stats.null_count, Precision::Exact(0));
        let none = selected_indices(&Selection::none(), &shape);
        let stats = axis_column_statistics(AxisValues::Index, &none[1]);
        assert_eq!(stats.min_value, Precision::Absent);
    }

    #[test]
    fn coordinate_columns_take_the_values_at_the_selected_indices() {
        let values: ArrayRef = Arc::new(Int32Array::from(vec![50, 40, 30, 20, 10]));
        let indices = AxisIndices {
            set: set(5, &[1..3]),
            exact: true,
            rows_per_index: Some(6),
        };
        let falling = AxisValues::Values {
            values: &values,
            order: ValueOrder::Descending { strict: true },
        };
        let stats = axis_column_statistics(falling, &indices);
        assert_eq!(
            stats.min_value,
            Precision::Exact(ScalarValue::Int32(Some(30)))
        );
        assert_eq!(
            stats.max_value,
            Precision::Exact(ScalarValue::Int32(Some(40)))
        );
        assert_eq!(stats.distinct_count, Precision::Exact(2));

        // Unordered values with nulls: the extremes are searched, nulls counted per row.
        let values: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(3.0),
            None,
            Some(-1.0),
            Some(9.0),
            None,
        ]));
        let unordered = AxisValues::Values {
            values: &values,
            order: ValueOrder::Unordered,
        };
        let indices = AxisIndices {
            set: set(5, &[0..3]),
            exact: true,
            rows_per_index: Some(6),
        };
        let stats = axis_column_statistics(unordered, &indices);
        assert_eq!(
            stats.min_value,
            Precision::Exact(ScalarValue::Float64(Some(-1.0)))
        );
        assert_eq!(
            stats.max_value,
            Precision::Exact(ScalarValue::Float64(Some(3.0)))
        );
        assert_eq!(stats.null_count, Precision::Exact(6));
        assert_eq!(stats.distinct_count, Precision::Absent);
        // Only the ends known to be selected: a bound, not the value.
        let loose = AxisIndices {
            exact: false,
            ..indices
        };
        let stats = axis_column_statistics(unordered, &loose);
        assert_eq!(
            stats.max_value,
            Precision::Inexact(ScalarValue::Float64(Some(3.0)))
        );
        assert_eq!(stats.null_count, Precision::Absent);
    }
}
