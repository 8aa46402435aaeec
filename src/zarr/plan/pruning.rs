//! DataFusion filter expressions on dimension columns, turned into index boxes.
//!
//! A filter converts when every comparison in it is between a dimension column and a literal
//! (`=`, `!=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN`), combined with AND / OR / NOT. An index
//! column compares with integer literals; a column of coordinate values asks its
//! [`AxisLookup`] (a binary search over monotonic values). The result is exact: the boxes hold
//! precisely the rows the filter keeps, so the filter can be reported `Exact` and removed.
//!
//! NOT is pushed down to the comparisons (De Morgan). A comparison with NULL keeps no row
//! whatever the polarity, which matches SQL's three-valued logic for filters.

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::Cast;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::selection::{IndexBox, MAX_BOXES};

/// A union of (possibly overlapping) boxes.
pub(crate) type Region = Vec<IndexBox>;

/// What a comparison of a dimension's values with a literal selects.
pub(crate) trait AxisLookup {
    /// The indices where `value(i) op literal` holds, the values first cast to `cast` when the
    /// filter casts the column; `None` when that cannot be told exactly from the values (the
    /// filter then runs in the scan).
    fn select(
        &self,
        op: Operator,
        literal: &ScalarValue,
        cast: Option<&DataType>,
    ) -> Option<IndexSet>;
}

/// The dimensions of the array a filter runs against.
pub(crate) struct Dimensions<'a> {
    pub names: &'a [String],
    pub shape: &'a [u64],
    /// Per dimension, the lookup of its values when its column shows coordinate values
    /// rather than indices (empty: every column is an index).
    pub lookups: &'a [Option<&'a dyn AxisLookup>],
}

/// A dimension column in a filter: which dimension, and the type the filter casts it to.
struct DimensionRef<'e> {
    d: usize,
    cast: Option<&'e DataType>,
}

impl Dimensions<'_> {
    fn everything(&self) -> IndexBox {
        self.shape.iter().map(|&n| IndexSet::full(n)).collect()
    }

    /// A box constraining only dimension `d`.
    fn constrain(&self, d: usize, set: IndexSet) -> Region {
        let mut b = self.everything();
        b[d] = set;
        vec![b]
    }

    fn lookup(&self, d: usize) -> Option<&dyn AxisLookup> {
        self.lookups.get(d).copied().flatten()
    }

    fn dimension<'e>(&self, expr: &'e Expr) -> Option<DimensionRef<'e>> {
        match expr {
            Expr::Column(c) => self
                .names
                .iter()
                .position(|n| *n == c.name)
                .map(|d| DimensionRef { d, cast: None }),
            Expr::Cast(Cast { expr, field }) => match expr.as_ref() {
                Expr::Column(_) => {
                    let inner = self.dimension(expr)?;
                    match self.lookup(inner.d) {
                        // Coordinate values are compared after the same cast.
                        Some(_) => Some(DimensionRef {
                            d: inner.d,
                            cast: Some(field.data_type()),
                        }),
                        // A value-preserving cast of the (non-negative) index column.
                        None if lossless_index_cast(field.data_type()) => Some(inner),
                        None => None,
                    }
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The indices of dimension `d` where `column op literal` holds; `Some(empty)` for NULL.
    fn select(&self, dim: &DimensionRef, op: Operator, literal: &Expr) -> Option<IndexSet> {
        let n = self.shape[dim.d];
        match self.lookup(dim.d) {
            Some(lookup) => {
                let Expr::Literal(value, _) = literal else {
                    return None;
                };
                if value.is_null() {
                    return Some(IndexSet::empty());
                }
                lookup.select(op, value, dim.cast)
            }
            None => {
                let Some(v) = integer_literal(literal)? else {
                    return Some(IndexSet::empty());
                };
                Some(match op {
                    Operator::Eq => interval(n, v, v + 1),
                    Operator::NotEq => interval(n, v, v + 1).complement(n),
                    Operator::Lt => interval(n, 0, v),
                    Operator::LtEq => interval(n, 0, v + 1),
                    Operator::Gt => interval(n, v + 1, n as i128),
                    Operator::GtEq => interval(n, v, n as i128),
                    _ => return None,
                })
            }
        }
    }
}

fn lossless_index_cast(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::UInt64)
        || matches!(t, DataType::Decimal128(p, 0) if *p >= 19)
}

/// The region `expr` selects, or `None` when it cannot be converted exactly.
pub(crate) fn filter_region(expr: &Expr, dims: &Dimensions) -> Option<Region> {
    region(expr, dims, false)
}

fn region(expr: &Expr, dims: &Dimensions, negated: bool) -> Option<Region> {
    match expr {
        Expr::Not(inner) => region(inner, dims, !negated),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And | Operator::Or => {
                let l = region(left, dims, negated)?;
                let r = region(right, dims, negated)?;
                // NOT (a AND b) = NOT a OR NOT b, and the other way round.
                if (*op == Operator::And) != negated {
                    intersect(l, r)
                } else {
                    union(l, r)
                }
            }
            _ => comparison(left, *op, right, dims, negated),
        },
        Expr::Between(Between {
            expr,
            negated: between_negated,
            low,
            high,
        }) => {
            let dim = dims.dimension(expr)?;
            let n = dims.shape[dim.d];
            let lo = dims.select(&dim, Operator::GtEq, low)?;
            let hi = dims.select(&dim, Operator::LtEq, high)?;
            if is_null(low) || is_null(high) {
                return Some(vec![]);
            }
            let set = lo.intersect(&hi);
            Some(dims.constrain(dim.d, negate_if(set, n, *between_negated != negated)))
        }
        Expr::InList(InList {
            expr,
            list,
            negated: in_negated,
        }) => {
            let dim = dims.dimension(expr)?;
            let n = dims.shape[dim.d];
            let points = list
                .iter()
                .map(|v| dims.select(&dim, Operator::Eq, v))
                .collect::<Option<Vec<_>>>()?;
            let negate = *in_negated != negated;
            if negate && list.iter().any(is_null) {
                // x NOT IN (.., NULL) is never true.
                return Some(vec![]);
            }
            // One sort of every point's ranges (folding them in one by one was quadratic).
            let ranges = points
                .iter()
                .flat_map(|p| p.ranges().iter().cloned())
                .collect();
            let set = IndexSet::from_ranges(n, ranges);
            Some(dims.constrain(dim.d, negate_if(set, n, negate)))
        }
        _ => None,
    }
}

fn comparison(
    left: &Expr,
    op: Operator,
    right: &Expr,
    dims: &Dimensions,
    negated: bool,
) -> Option<Region> {
    // Column on the left; a literal on the left flips the operator.
    let (dim, literal, op) = match (dims.dimension(left), dims.dimension(right)) {
        (Some(dim), None) => (dim, right, op),
        (None, Some(dim)) => (dim, left, op.swap()?),
        _ => return None,
    };
    let n = dims.shape[dim.d];
    let set = dims.select(&dim, op, literal)?;
    if is_null(literal) {
        // A comparison with NULL keeps nothing, whatever the polarity.
        return Some(vec![]);
    }
    Some(dims.constrain(dim.d, negate_if(set, n, negated)))
}

fn negate_if(set: IndexSet, n: u64, negate: bool) -> IndexSet {
    if negate {
        set.complement(n)
    } else {
        set
    }
}

/// `start..end` clipped to `0..n`.
fn interval(n: u64, start: i128, end: i128) -> IndexSet {
    let clip = |v: i128| v.clamp(0, n as i128) as u64;
    IndexSet::interval(n, clip(start), clip(end))
}

fn is_null(expr: &Expr) -> bool {
    matches!(expr, Expr::Literal(v, _) if v.is_null())
}

/// An integer literal: `Some(Some(v))`, a NULL literal: `Some(None)`, anything else: `None`.
fn integer_literal(expr: &Expr) -> Option<Option<i128>> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    if value.is_null() {
        return Some(None);
    }
    let v = match value {
        ScalarValue::Int8(Some(v)) => *v as i128,
        ScalarValue::Int16(Some(v)) => *v as i128,
        ScalarValue::Int32(Some(v)) => *v as i128,
        ScalarValue::Int64(Some(v)) => *v as i128,
        ScalarValue::UInt8(Some(v)) => *v as i128,
        ScalarValue::UInt16(Some(v)) => *v as i128,
        ScalarValue::UInt32(Some(v)) => *v as i128,
        ScalarValue::UInt64(Some(v)) => *v as i128,
        ScalarValue::Decimal128(Some(v), _, 0) => *v,
        _ => return None,
    };
    Some(Some(v))
}

fn union(mut a: Region, b: Region) -> Option<Region> {
    a.extend(b);
    (a.len() <= MAX_BOXES).then_some(a)
}

fn intersect(a: Region, b: Region) -> Option<Region> {
    let mut out = Vec::new();
    for x in &a {
        for y in &b {
            let both: IndexBox = x.iter().zip(y).map(|(s, t)| s.intersect(t)).collect();
            if !both.iter().any(IndexSet::is_empty) {
                out.push(both);
            }
        }
        if out.len() > MAX_BOXES {
            return None;
        }
    }
    Some(out)
}

/// The intersection of the regions of several filters (they are ANDed).
pub(crate) fn intersect_all(regions: Vec<Region>, dims: &Dimensions) -> Option<Region> {
    regions
        .into_iter()
        .try_fold(vec![dims.everything()], intersect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::plan::selection::Selection;
    use datafusion::prelude::{col, lit};

    fn names() -> Vec<String> {
        vec!["time".into(), "station".into()]
    }

    /// Selected (time, station) pairs, in C order.
    fn selected(expr: Expr) -> Option<Vec<(u64, u64)>> {
        let names = names();
        let dims = Dimensions {
            names: &names,
            shape: &[5, 4],
            lookups: &[],
        };
        let sel = Selection::from_boxes(filter_region(&expr, &dims)?)?;
        let mut cells: Vec<(u64, u64)> = sel
            .boxes()
            .iter()
            .flat_map(|b| {
                let ts: Vec<u64> = b[0].indices().collect();
                let ss: Vec<u64> = b[1].indices().collect();
                ts.into_iter()
                    .flat_map(move |t| ss.clone().into_iter().map(move |s| (t, s)))
            })
            .collect();
        let n = cells.len();
        cells.sort();
        cells.dedup();
        assert_eq!(n, cells.len(), "boxes overlap");
        Some(cells)
    }

    /// The same filter evaluated cell by cell, as SQL would.
    fn brute(f: impl Fn(i64, i64) -> bool) -> Vec<(u64, u64)> {
        (0..5)
            .flat_map(|t| (0..4).map(move |s| (t, s)))
            .filter(|&(t, s)| f(t as i64, s as i64))
            .collect()
    }

    #[test]
    fn comparisons_ranges_and_lists() {
        assert_eq!(
            selected(col("time").eq(lit(2i64))),
            Some(brute(|t, _| t == 2))
        );
        assert_eq!(
            selected(lit(2i32).lt(col("time"))),
            Some(brute(|t, _| 2 < t))
        );
        assert_eq!(
            selected(col("station").not_eq(lit(1u8))),
            Some(brute(|_, s| s != 1))
        );
        assert_eq!(selected(col("time").lt_eq(lit(-3i64))), Some(vec![]));
        assert_eq!(selected(col("time").gt_eq(lit(u64::MAX))), Some(vec![]));
        assert_eq!(
            selected(col("time").between(lit(1i64), lit(3i64))),
            Some(brute(|t, _| (1..=3).contains(&t)))
        );
        assert_eq!(
            selected(col("station").in_list(vec![lit(3i64), lit(0i64), lit(9i64)], true)),
            Some(brute(|_, s| s != 3 && s != 0))
        );
    }

    #[test]
    fn and_or_not_combine_exactly() {
        let e = col("time").eq(lit(1i64)).or(col("station").eq(lit(2i64)));
        assert_eq!(selected(e.clone()), Some(brute(|t, s| t == 1 || s == 2)));
        assert_eq!(selected(!e), Some(brute(|t, s| !(t == 1 || s == 2))));
        let e = col("time")
            .gt(lit(0i64))
            .and(!col("station").between(lit(1i64), lit(2i64)));
        assert_eq!(
            selected(e),
            Some(brute(|t, s| t > 0 && !(1..=2).contains(&s)))
        );
    }

    #[test]
    fn null_comparisons_keep_nothing() {
        let null = Expr::Literal(ScalarValue::Int64(None), None);
        assert_eq!(selected(col("time").eq(null.clone())), Some(vec![]));
        assert_eq!(selected(!col("time").eq(null.clone())), Some(vec![]));
        let e = col("time")
            .eq(null.clone())
            .or(col("station").eq(lit(0i64)));
        assert_eq!(selected(!e), Some(vec![]));
        let e = col("time").in_list(vec![lit(1i64), null.clone()], false);
        assert_eq!(selected(e), Some(brute(|t, _| t == 1)));
        let e = col("time").in_list(vec![lit(1i64), null], true);
        assert_eq!(selected(e), Some(vec![]));
    }

    #[test]
    fn other_filters_do_not_convert() {
        assert_eq!(selected(col("temp").gt(lit(1i64))), None);
        assert_eq!(selected(col("time").gt(lit(1.5f64))), None);
        assert_eq!(selected(col("time").eq(col("station"))), None);
        assert_eq!(
            selected(col("time").eq(lit(1i64)).or(col("temp").eq(lit(1i64)))),
            None
        );
    }
}
