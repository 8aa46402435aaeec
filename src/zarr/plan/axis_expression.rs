//! Expressions of one grid axis's column (`date_trunc('month', time)`, `floor(lat / 5)`)
//! evaluated once per index of the axis instead of once per row: a grid of 1000 days x 10^5
//! cells a day evaluates `date_trunc` 1000 times, and a scan hands out the values by index
//! as it does a coordinate's. The values are known at planning, so the order they run in is
//! too (a group key in order aggregates streaming, without hashing).

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, FieldRef, Schema, SchemaRef};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::is_volatile;

use crate::zarr::plan::grid_statistics::{value_order, AxisColumn, AxisValues, ValueOrder};

/// The longest axis an expression is evaluated over at planning.
pub(crate) const MAX_AXIS_VALUES: usize = 1 << 20;

/// An output column computed once per index of `axis`.
#[derive(Debug, Clone)]
pub(crate) struct AxisExpression {
    pub axis: usize,
    /// One value per index of the axis.
    pub values: ArrayRef,
    pub order: ValueOrder,
    pub field: FieldRef,
}

impl AxisExpression {
    /// `expr` (over a scan's output `schema`, named `name`) per index of the axis it reads,
    /// when every column it reads is that axis's column (of `columns`, on an axis of `len`
    /// indices) and it evaluates there; else `None`.
    pub(crate) fn evaluate(
        expr: &Arc<dyn PhysicalExpr>,
        name: &str,
        schema: &SchemaRef,
        columns: &[AxisColumn<'_>],
        axis_len: impl Fn(usize) -> u64,
    ) -> Option<AxisExpression> {
        // A volatile expression (`lat + random()`) has a value per row, not per index.
        if is_volatile(expr) {
            return None;
        }
        let read = collect_columns(expr);
        let mut axis = None;
        for column in &read {
            let found = columns.iter().find(|c| c.column == column.index())?;
            if axis.is_some_and(|a| a != found.axis) {
                return None;
            }
            axis = Some(found.axis);
        }
        let axis = axis?;
        // Evaluated at planning, value by value for its order: a longer axis (an index of
        // 10^9, which metadata may declare) is left to DataFusion, per row.
        let len = usize::try_from(axis_len(axis)).ok()?;
        if len > MAX_AXIS_VALUES {
            return None;
        }
        // The other columns are NULL: the expression does not read them.
        let nullable: Vec<Field> = (schema.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let arrays = (schema.fields().iter().enumerate())
            .map(|(i, f)| {
                match columns
                    .iter()
                    .find(|c| c.column == i && read.iter().any(|r| r.index() == i))
                {
                    Some(c) => axis_values(c.values, len),
                    None => new_null_array(f.data_type(), len),
                }
            })
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(len));
        let batch =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(nullable)), arrays, &options)
                .ok()?;
        let values = expr.evaluate(&batch).ok()?.into_array(len).ok()?;
        // The column is the expression's, as the plan above it was made for.
        let data_type = expr.data_type(schema).ok()?;
        if values.data_type() != &data_type {
            return None;
        }
        let field = Field::new(name, data_type, expr.nullable(schema).ok()?);
        Some(AxisExpression {
            axis,
            order: value_order(&values),
            values,
            field: Arc::new(field),
        })
    }

    /// The expression's column as the scan's statistics and order see it.
    pub(crate) fn as_axis_column(&self, column: usize) -> AxisColumn<'_> {
        AxisColumn {
            column,
            axis: self.axis,
            values: AxisValues::Values {
                values: &self.values,
                order: self.order,
            },
        }
    }
}

/// An axis column's value at every index.
fn axis_values(values: AxisValues<'_>, len: usize) -> ArrayRef {
    match values {
        AxisValues::Index => Arc::new(Int64Array::from_iter_values(0..len as i64)),
        AxisValues::Values { values, .. } => Arc::clone(values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, TimestampNanosecondArray};
    use arrow::datatypes::{DataType, TimeUnit};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{col, lit, BinaryExpr};

    #[test]
    fn an_expression_of_one_axis_is_evaluated_per_index() {
        let day = 86_400_000_000_000i64;
        let times: ArrayRef = Arc::new(TimestampNanosecondArray::from_iter_values(
            (0..4).map(|d| d * day),
        ));
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new(
                "time",
                DataType::Timestamp(TimeUnit::Nanosecond, None),
                false,
            ),
            Field::new("x", DataType::Int64, false),
            Field::new("v", DataType::Float32, true),
        ]));
        let columns = [
            AxisColumn {
                column: 0,
                axis: 0,
                values: AxisValues::Values {
                    values: &times,
                    order: ValueOrder::Ascending { strict: true },
                },
            },
            AxisColumn {
                column: 1,
                axis: 1,
                values: AxisValues::Index,
            },
        ];
        let len = |a: usize| [4, 6][a];
        // x / 4: per index of axis 1, non-decreasing with repeats.
        let x = col("x", &schema).unwrap();
        let quarter: Arc<dyn PhysicalExpr> =
            Arc::new(BinaryExpr::new(x.clone(), Operator::Divide, lit(4i64)));
        let e = AxisExpression::evaluate(&quarter, "q", &schema, &columns, len).unwrap();
        assert_eq!(e.axis, 1);
        assert_eq!(e.values.len(), 6);
        assert_eq!(e.order, ValueOrder::Ascending { strict: false });
        // Reading a data variable, or two axes: not an axis expression.
        let v = col("v", &schema).unwrap();
        assert!(AxisExpression::evaluate(&v, "v", &schema, &columns, len).is_none());
        let both: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            x,
            Operator::Plus,
            Arc::new(datafusion::physical_expr::expressions::CastExpr::new(
                col("time", &schema).unwrap(),
                DataType::Int64,
                None,
            )),
        ));
        assert!(AxisExpression::evaluate(&both, "b", &schema, &columns, len).is_none());
        // An axis longer than planning evaluates (an index of 10^9): left to DataFusion.
        let quarter_of_huge =
            AxisExpression::evaluate(&quarter, "q", &schema, &columns, |_| 1_000_000_000);
        assert!(quarter_of_huge.is_none());
    }
}
