//! DataFusion filters turned into Lance filters for a lance-nd scan, decided once per filter
//! by [`classify`]:
//!
//! - Filters that read only `__global_attrs__` (comparisons, IN, LIKE, IS NULL, BETWEEN,
//!   AND / OR / NOT over its fields) go to Lance as they are: exact, and able to use a scalar
//!   index on `__global_attrs__.<key>`.
//! - Comparisons of an array's values with a literal become tests on its `__stats__:<array>`
//!   column ({min, max} per row), when the table has one: rows that cannot match are skipped.
//!   Such a filter stays inexact: DataFusion still evaluates it on every cell.

use datafusion::common::Column;
use datafusion::logical_expr::expr::{InList, Like, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown};

use super::format::STATS_PREFIX;
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;

/// What a lance-nd scan does with one filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FilterUse {
    /// Lance evaluates it, exactly (it reads only `__global_attrs__`).
    Lance(Expr),
    /// Lance skips rows by this `__stats__` test; DataFusion still evaluates the filter.
    Stats(Expr),
    /// DataFusion alone evaluates it.
    Unused,
}

impl FilterUse {
    pub(crate) fn pushdown(&self) -> TableProviderFilterPushDown {
        match self {
            FilterUse::Lance(_) => TableProviderFilterPushDown::Exact,
            FilterUse::Stats(_) => TableProviderFilterPushDown::Inexact,
            FilterUse::Unused => TableProviderFilterPushDown::Unsupported,
        }
    }
}

/// Decides what the scan does with `filter`; `has_stats` tells which arrays have statistics.
pub(crate) fn classify(filter: &Expr, has_stats: &dyn Fn(&str) -> bool) -> FilterUse {
    let filter = unnormalize_col(filter.clone());
    if is_global_attrs_filter(&filter) {
        FilterUse::Lance(filter)
    } else if let Some(test) = stats_filter(&filter, has_stats) {
        FilterUse::Stats(test)
    } else {
        FilterUse::Unused
    }
}

/// Whether Lance can evaluate `expr` exactly: it reads only `__global_attrs__`, through
/// operators Lance's SQL filter has.
fn is_global_attrs_filter(expr: &Expr) -> bool {
    let refs = expr.column_refs();
    !refs.is_empty() && refs.iter().all(|c| c.name == GLOBAL_ATTRS_COLUMN) && supported(expr)
}

fn supported(expr: &Expr) -> bool {
    match expr {
        Expr::Column(_) | Expr::Literal(..) => true,
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            matches!(
                op,
                Operator::Eq
                    | Operator::NotEq
                    | Operator::Lt
                    | Operator::LtEq
                    | Operator::Gt
                    | Operator::GtEq
                    | Operator::And
                    | Operator::Or
            ) && supported(left)
                && supported(right)
        }
        Expr::Not(e) | Expr::IsNull(e) | Expr::IsNotNull(e) => supported(e),
        Expr::Between(Between {
            expr, low, high, ..
        }) => supported(expr) && supported(low) && supported(high),
        Expr::InList(InList { expr, list, .. }) => supported(expr) && list.iter().all(supported),
        Expr::Like(Like {
            expr,
            pattern,
            escape_char: None,
            case_insensitive: false,
            ..
        }) => supported(expr) && supported(pattern),
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            func.name() == "get_field" && args.iter().all(supported)
        }
        Expr::Cast(c) => supported(&c.expr),
        _ => false,
    }
}

/// The `__stats__` test that a row must pass for `expr` (a comparison of array `a` with a
/// literal) to hold on any of its cells; `None` when `expr` has no such form or the table has
/// no statistics for the array.
fn stats_filter(expr: &Expr, has_stats: &dyn Fn(&str) -> bool) -> Option<Expr> {
    let stat = |array: &str, which: &str| {
        let column = Expr::Column(Column::new_unqualified(format!("{STATS_PREFIX}{array}")));
        datafusion::functions::core::expr_fn::get_field(column, which)
    };
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (array, value, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), v @ Expr::Literal(..)) => (c.name.as_str(), v.clone(), *op),
                (v @ Expr::Literal(..), Expr::Column(c)) => {
                    (c.name.as_str(), v.clone(), op.swap()?)
                }
                _ => return None,
            };
            if !has_stats(array) {
                return None;
            }
            let (min, max) = (stat(array, "min"), stat(array, "max"));
            match op {
                Operator::Eq => Some(min.lt_eq(value.clone()).and(max.gt_eq(value))),
                Operator::Lt => Some(min.lt(value)),
                Operator::LtEq => Some(min.lt_eq(value)),
                Operator::Gt => Some(max.gt(value)),
                Operator::GtEq => Some(max.gt_eq(value)),
                _ => None,
            }
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => match (expr.as_ref(), low.as_ref(), high.as_ref()) {
            (Expr::Column(c), l @ Expr::Literal(..), h @ Expr::Literal(..))
                if has_stats(&c.name) =>
            {
                Some(
                    stat(&c.name, "max")
                        .gt_eq(l.clone())
                        .and(stat(&c.name, "min").lt_eq(h.clone())),
                )
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::functions::core::expr_fn::get_field;
    use datafusion::prelude::{col, lit};

    #[test]
    fn global_attribute_filters_are_recognised() {
        let id = get_field(col(GLOBAL_ATTRS_COLUMN), "id");
        assert!(is_global_attrs_filter(&id.clone().eq(lit("a"))));
        assert!(is_global_attrs_filter(
            &id.clone()
                .in_list(vec![lit("a"), lit("b")], false)
                .or(id.clone().is_null())
        ));
        assert!(is_global_attrs_filter(&id.clone().like(lit("a%"))));
        assert!(!is_global_attrs_filter(&id.clone().eq(col("temperature"))));
        assert!(!is_global_attrs_filter(&col("temperature").gt(lit(1.0))));
    }

    #[test]
    fn each_filter_is_classified_once_for_planning_and_scanning() {
        let has = |a: &str| a == "v";
        let id = get_field(col(GLOBAL_ATTRS_COLUMN), "id").eq(lit("a"));
        assert_eq!(classify(&id, &has), FilterUse::Lance(id.clone()));
        assert!(matches!(
            classify(&col("v").gt(lit(1)), &has),
            FilterUse::Stats(_)
        ));
        assert_eq!(classify(&col("w").gt(lit(1)), &has), FilterUse::Unused);
        assert_eq!(
            classify(&id, &has).pushdown(),
            TableProviderFilterPushDown::Exact
        );
    }

    #[test]
    fn value_comparisons_use_statistics() {
        let has = |a: &str| a == "v";
        let f = stats_filter(&col("v").gt(lit(2.5)), &has).unwrap();
        assert_eq!(
            f.to_string(),
            "get_field(__stats__:v, Utf8(\"max\")) > Float64(2.5)"
        );
        let f = stats_filter(&lit(2.5).eq(col("v")), &has).unwrap();
        assert!(f.to_string().contains("min") && f.to_string().contains("max"));
        assert!(stats_filter(&col("w").gt(lit(2.5)), &has).is_none());
        assert!(stats_filter(&col("v").not_eq(lit(2.5)), &has).is_none());
    }
}
