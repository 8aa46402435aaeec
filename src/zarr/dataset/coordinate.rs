//! A dimension coordinate: the (decoded) values of a 1-D array named like its dimension, read
//! whole when the dataset opens. When they are monotonic, comparisons with a literal become
//! index ranges by binary search ([`AxisLookup`]).

use std::cmp::Ordering;
use std::ops::Range;

use arrow::array::{Array, ArrayRef};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;

use crate::zarr::plan::grid_statistics::{is_nan, value_order, ValueOrder};
use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::pruning::AxisLookup;

/// Which way the values run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Non-decreasing.
    Increasing,
    /// Non-increasing.
    Decreasing,
    /// Neither, or with NULL or NaN: filters on it run in the scan.
    Unordered,
}

#[derive(Debug, Clone)]
pub(crate) struct Coordinate {
    pub values: ArrayRef,
    pub order: Order,
    /// The same, and whether no two neighbours are equal: what a scan's statistics and order
    /// see.
    pub value_order: ValueOrder,
}

impl Coordinate {
    pub(crate) fn new(values: ArrayRef) -> Self {
        let value_order = value_order(&values);
        let order = match value_order {
            ValueOrder::Ascending { .. } => Order::Increasing,
            ValueOrder::Descending { .. } => Order::Decreasing,
            ValueOrder::Unordered => Order::Unordered,
        };
        Coordinate {
            values,
            order,
            value_order,
        }
    }

    /// The value at `i` as EXPLAIN shows it.
    pub(crate) fn display(&self, i: u64) -> String {
        let options = FormatOptions::default().with_null("NULL");
        ArrayFormatter::try_new(self.values.as_ref(), &options)
            .map(|f| f.value(i as usize).to_string())
            .unwrap_or_default()
    }

    /// `[first..last]` of the values over each index range.
    pub(crate) fn describe(&self, ranges: &[Range<u64>]) -> String {
        ranges
            .iter()
            .map(|r| {
                if r.end - r.start == 1 {
                    self.display(r.start)
                } else {
                    format!("{}..{}", self.display(r.start), self.display(r.end - 1))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn scalar(values: &ArrayRef, i: usize) -> Option<ScalarValue> {
    ScalarValue::try_from_array(values, i).ok()
}

/// Whether casting from `from` to `to` keeps non-decreasing values non-decreasing: between
/// numbers (widening, or truncating to integers), and between dates and times.
fn keeps_order(from: &DataType, to: &DataType) -> bool {
    let number = |t: &DataType| t.is_integer() || t.is_floating() || t.is_decimal();
    let temporal = |t: &DataType| t.is_temporal();
    (number(from) && number(to)) || (temporal(from) && temporal(to))
}

impl AxisLookup for Coordinate {
    fn select(
        &self,
        op: Operator,
        literal: &ScalarValue,
        cast_to: Option<&DataType>,
    ) -> Option<IndexSet> {
        if self.order == Order::Unordered {
            return None;
        }
        // Compare in the literal's type: the values cast as the filter casts the column, or
        // the literal cast to the values' type when that loses nothing. A cast that may
        // reorder the values (numbers to text: '10' < '5') cannot use their order: the filter
        // then runs in the scan.
        let (values, literal) = match cast_to {
            Some(t) if !keeps_order(self.values.data_type(), t) => return None,
            Some(t) => (cast(&self.values, t).ok()?, literal.cast_to(t).ok()?),
            None => {
                let t = self.values.data_type();
                let exact = literal.cast_to(t).ok()?;
                let back = exact.cast_to(&literal.data_type()).ok()?;
                if back != *literal {
                    return None;
                }
                (self.values.clone(), exact)
            }
        };
        if values.null_count() > 0 || is_nan(&literal) {
            return None;
        }
        let n = values.len() as u64;
        // Increasing: the first index whose value is >= (or >) the literal; decreasing: the
        // first whose value is <= (or <).
        let first = |strict: bool| -> Option<u64> {
            let (mut lo, mut hi) = (0usize, values.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let ord = scalar(&values, mid)?.partial_cmp(&literal)?;
                let past = match (self.order, strict) {
                    (Order::Increasing, false) => ord != Ordering::Less,
                    (Order::Increasing, true) => ord == Ordering::Greater,
                    (_, false) => ord != Ordering::Greater,
                    (_, true) => ord == Ordering::Less,
                };
                if past {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            Some(lo as u64)
        };
        let up = self.order == Order::Increasing;
        let set = match op {
            Operator::Eq | Operator::NotEq => {
                let (a, b) = (first(false)?, first(true)?);
                let eq = IndexSet::interval(n, a, b);
                if op == Operator::Eq {
                    eq
                } else {
                    eq.complement(n)
                }
            }
            // value >= x: increasing, from the first value >= x; decreasing, up to the first
            // value < x.
            Operator::GtEq if up => IndexSet::interval(n, first(false)?, n),
            Operator::GtEq => IndexSet::interval(n, 0, first(true)?),
            Operator::Gt if up => IndexSet::interval(n, first(true)?, n),
            Operator::Gt => IndexSet::interval(n, 0, first(false)?),
            Operator::Lt if up => IndexSet::interval(n, 0, first(false)?),
            Operator::Lt => IndexSet::interval(n, first(true)?, n),
            Operator::LtEq if up => IndexSet::interval(n, 0, first(true)?),
            Operator::LtEq => IndexSet::interval(n, first(false)?, n),
            _ => return None,
        };
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, StringArray};
    use std::sync::Arc;

    fn indices(set: Option<IndexSet>) -> Vec<u64> {
        set.unwrap().indices().collect()
    }

    #[test]
    fn binary_search_matches_a_scan_both_ways() {
        let up = [1.0, 2.0, 2.0, 3.5, 7.0];
        for values in [up.to_vec(), up.iter().rev().copied().collect::<Vec<_>>()] {
            let c = Coordinate::new(Arc::new(Float64Array::from(values.clone())));
            assert_ne!(c.order, Order::Unordered);
            for x in [0.5, 1.0, 2.0, 2.5, 3.5, 7.0, 9.0] {
                let lit = ScalarValue::Float64(Some(x));
                for (op, f) in [
                    (
                        Operator::Eq,
                        (|v: f64, x: f64| v == x) as fn(f64, f64) -> bool,
                    ),
                    (Operator::NotEq, |v, x| v != x),
                    (Operator::Lt, |v, x| v < x),
                    (Operator::LtEq, |v, x| v <= x),
                    (Operator::Gt, |v, x| v > x),
                    (Operator::GtEq, |v, x| v >= x),
                ] {
                    let want: Vec<u64> = (0..values.len() as u64)
                        .filter(|&i| f(values[i as usize], x))
                        .collect();
                    assert_eq!(
                        indices(c.select(op, &lit, None)),
                        want,
                        "{op} {x} {values:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn casts_that_reorder_values_decline() {
        // As text, 10 < 5 and 100 < 2: the numeric order says nothing of the cast values.
        let c = Coordinate::new(Arc::new(arrow::array::Int64Array::from(vec![
            5, 10, 15, 20,
        ])));
        let text = ScalarValue::Utf8(Some("5".into()));
        assert!(c
            .select(Operator::GtEq, &text, Some(&DataType::Utf8))
            .is_none());
        let c = Coordinate::new(Arc::new(Float64Array::from(vec![9.0, 10.0, 11.0, 100.0])));
        let two = ScalarValue::Utf8(Some("2".into()));
        assert!(c
            .select(Operator::Lt, &two, Some(&DataType::Utf8))
            .is_none());
        // Numbers to numbers keep their order.
        assert_eq!(
            indices(c.select(
                Operator::Lt,
                &ScalarValue::Int64(Some(11)),
                Some(&DataType::Int64)
            )),
            vec![0, 1]
        );
    }

    #[test]
    fn unordered_values_and_inexact_literals_decline() {
        let c = Coordinate::new(Arc::new(Float64Array::from(vec![1.0, f64::NAN, 3.0])));
        assert_eq!(c.order, Order::Unordered);
        let s = Coordinate::new(Arc::new(StringArray::from(vec!["north", "east"])));
        assert_eq!(s.order, Order::Decreasing);
        let ints = Coordinate::new(Arc::new(arrow::array::Int64Array::from(vec![1, 2, 3])));
        assert!(ints
            .select(Operator::Gt, &ScalarValue::Float64(Some(1.5)), None)
            .is_none());
        assert_eq!(
            indices(ints.select(
                Operator::Gt,
                &ScalarValue::Float64(Some(1.5)),
                Some(&DataType::Float64)
            )),
            vec![1, 2]
        );
    }
}
