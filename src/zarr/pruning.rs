//! DataFusion filter expressions on dimension columns, turned into index boxes.
//!
//! A filter converts when every comparison in it is between a dimension column and an integer
//! literal (`=`, `!=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN`), combined with AND / OR / NOT. The
//! result is exact: the boxes hold precisely the rows the filter keeps, so the filter can be
//! reported `Exact` and removed from the plan.
//!
//! NOT is pushed down to the comparisons (De Morgan). A comparison with NULL keeps no row
//! whatever the polarity, which matches SQL's three-valued logic for filters.

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};

use super::index_set::IndexSet;
use super::selection::{IndexBox, MAX_BOXES};

/// A union of (possibly overlapping) boxes.
pub type Region = Vec<IndexBox>;

/// The dimensions of the array a filter runs against.
pub struct Dimensions<'a> {
    pub names: &'a [String],
    pub shape: &'a [u64],
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

    fn dimension(&self, expr: &Expr) -> Option<usize> {
        match expr {
            Expr::Column(c) => self.names.iter().position(|n| *n == c.name),
            // A value-preserving cast of the (non-negative) index column.
            Expr::Cast(cast) if lossless_index_cast(cast.field.data_type()) => {
                self.dimension(&cast.expr)
            }
            _ => None,
        }
    }
}

fn lossless_index_cast(t: &DataType) -> bool {
    matches!(t, DataType::Int64 | DataType::UInt64)
        || matches!(t, DataType::Decimal128(p, 0) if *p >= 19)
}

/// The region `expr` selects, or `None` when it cannot be converted exactly.
pub fn filter_region(expr: &Expr, dims: &Dimensions) -> Option<Region> {
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
            let d = dims.dimension(expr)?;
            let n = dims.shape[d];
            let (Some(lo), Some(hi)) = (literal(low)?, literal(high)?) else {
                return Some(vec![]);
            };
            let set = interval(n, lo, hi.checked_add(1)?);
            Some(dims.constrain(d, negate_if(set, n, *between_negated != negated)))
        }
        Expr::InList(InList {
            expr,
            list,
            negated: in_negated,
        }) => {
            let d = dims.dimension(expr)?;
            let n = dims.shape[d];
            let values = list.iter().map(literal).collect::<Option<Vec<_>>>()?;
            let has_null = values.iter().any(Option::is_none);
            let negate = *in_negated != negated;
            if negate && has_null {
                // x NOT IN (.., NULL) is never true.
                return Some(vec![]);
            }
            let points = values.into_iter().flatten().map(|v| interval(n, v, v + 1));
            let set = points.fold(IndexSet::empty(), |acc, p| {
                IndexSet::from_ranges(n, acc.ranges().iter().chain(p.ranges()).cloned().collect())
            });
            Some(dims.constrain(d, negate_if(set, n, negate)))
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
    let (d, value, op) = match (dims.dimension(left), dims.dimension(right)) {
        (Some(d), None) => (d, literal(right)?, op),
        (None, Some(d)) => (d, literal(left)?, op.swap()?),
        _ => return None,
    };
    let n = dims.shape[d];
    let Some(v) = value else {
        return Some(vec![]);
    };
    let set = match op {
        Operator::Eq => interval(n, v, v + 1),
        Operator::NotEq => interval(n, v, v + 1).complement(n),
        Operator::Lt => interval(n, 0, v),
        Operator::LtEq => interval(n, 0, v + 1),
        Operator::Gt => interval(n, v + 1, n as i128),
        Operator::GtEq => interval(n, v, n as i128),
        _ => return None,
    };
    Some(dims.constrain(d, negate_if(set, n, negated)))
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

/// An integer literal: `Some(Some(v))`, a NULL literal: `Some(None)`, anything else: `None`.
fn literal(expr: &Expr) -> Option<Option<i128>> {
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
pub fn intersect_all(regions: Vec<Region>, dims: &Dimensions) -> Option<Region> {
    regions
        .into_iter()
        .try_fold(vec![dims.everything()], intersect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::selection::Selection;
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
