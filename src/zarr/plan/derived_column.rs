//! Columns a scan computes from what it knows at planning instead of per row: an expression
//! of one grid axis, per index of the axis (`axis_expression.rs`), or an expression of
//! `__global_attrs__` alone (`__global_attrs__.station`), one value for the whole array or
//! collection member. The scan's statistics say exactly what a constant is, so DataFusion
//! answers `min`, `max` and `count` of it without reading a chunk.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Field, FieldRef, Schema, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{Error, Result};
use crate::zarr::plan::axis_expression::AxisExpression;

/// A column a scan makes after its own.
#[derive(Debug, Clone)]
pub(crate) enum DerivedColumn {
    /// One value per index of an axis.
    Axis(AxisExpression),
    /// One value on every row.
    Constant(ConstantColumn),
}

impl DerivedColumn {
    pub(crate) fn field(&self) -> &FieldRef {
        match self {
            DerivedColumn::Axis(a) => &a.field,
            DerivedColumn::Constant(c) => &c.field,
        }
    }

    /// The axis whose indices the column's values follow.
    pub(crate) fn axis(&self) -> Option<usize> {
        match self {
            DerivedColumn::Axis(a) => Some(a.axis),
            DerivedColumn::Constant(_) => None,
        }
    }

    /// The column on `rows` rows; `axis_values(axis, values)` gives an axis's per-index
    /// `values` on each row.
    pub(crate) fn values(
        &self,
        rows: usize,
        axis_values: impl FnOnce(usize, &ArrayRef) -> Result<ArrayRef>,
    ) -> Result<ArrayRef> {
        match self {
            DerivedColumn::Axis(a) => axis_values(a.axis, &a.values),
            DerivedColumn::Constant(c) => c.repeated(rows),
        }
    }
}

/// An expression of `__global_attrs__` alone, evaluated once.
#[derive(Debug, Clone)]
pub(crate) struct ConstantColumn {
    pub value: ScalarValue,
    pub field: FieldRef,
}

impl ConstantColumn {
    /// `expr` (over a scan's output `schema`, named `name`) when every column it reads is
    /// `attrs_column`, whose one value is `attrs`; else `None`.
    pub(crate) fn evaluate(
        expr: &Arc<dyn PhysicalExpr>,
        name: &str,
        schema: &SchemaRef,
        attrs_column: usize,
        attrs: &ArrayRef,
    ) -> Option<ConstantColumn> {
        let read = collect_columns(expr);
        if read.is_empty() || read.iter().any(|c| c.index() != attrs_column) {
            return None;
        }
        let nullable: Vec<Field> = (schema.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let arrays = (schema.fields().iter().enumerate())
            .map(|(i, f)| match i == attrs_column {
                true => Arc::clone(attrs),
                false => new_null_array(f.data_type(), 1),
            })
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(1));
        let batch =
            RecordBatch::try_new_with_options(Arc::new(Schema::new(nullable)), arrays, &options)
                .ok()?;
        let values = expr.evaluate(&batch).ok()?.into_array(1).ok()?;
        let data_type = expr.data_type(schema).ok()?;
        if values.data_type() != &data_type {
            return None;
        }
        let value = ScalarValue::try_from_array(&values, 0).ok()?;
        let field = Field::new(name, data_type, expr.nullable(schema).ok()?);
        Some(ConstantColumn {
            value,
            field: Arc::new(field),
        })
    }

    fn repeated(&self, rows: usize) -> Result<ArrayRef> {
        self.value
            .to_array_of_size(rows)
            .map_err(|e| Error::Internal(format!("repeating {}: {e}", self.field.name())))
    }

    /// The column's statistics over `rows` rows: the value is the minimum and the maximum
    /// of any rows there are.
    pub(crate) fn statistics(&self, rows: Precision<usize>) -> ColumnStatistics {
        let mut stats = ColumnStatistics::new_unknown();
        if self.value.is_null() {
            stats.null_count = rows;
            return stats;
        }
        stats.null_count = Precision::Exact(0);
        match rows {
            Precision::Exact(0) => stats.distinct_count = Precision::Exact(0),
            Precision::Exact(_) => {
                stats.min_value = Precision::Exact(self.value.clone());
                stats.max_value = Precision::Exact(self.value.clone());
                stats.distinct_count = Precision::Exact(1);
            }
            // Perhaps no row at all: the value bounds what there is.
            _ => {
                stats.min_value = Precision::Inexact(self.value.clone());
                stats.max_value = Precision::Inexact(self.value.clone());
            }
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array, StringArray, StructArray};
    use arrow::datatypes::{DataType, Fields};
    use datafusion::functions::core::expr_fn::get_field;
    use datafusion::physical_expr::create_physical_expr;
    use datafusion::physical_expr::execution_props::ExecutionProps;
    use datafusion::prelude::col;

    fn attrs() -> (SchemaRef, ArrayRef) {
        let fields = Fields::from(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("depth", DataType::Int64, true),
        ]);
        let value = StructArray::new(
            fields.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a1"])) as ArrayRef,
                Arc::new(Int64Array::from(vec![Some(40)])),
            ],
            None,
        );
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Int64, false),
            Field::new("__global_attrs__", DataType::Struct(fields), false),
        ]));
        (schema, Arc::new(value))
    }

    fn physical(expr: datafusion::prelude::Expr, schema: &SchemaRef) -> Arc<dyn PhysicalExpr> {
        let df_schema = datafusion::common::DFSchema::try_from(schema.as_ref().clone()).unwrap();
        create_physical_expr(&expr, &df_schema, &ExecutionProps::new()).unwrap()
    }

    #[test]
    fn an_expression_of_the_attributes_is_one_value() {
        let (schema, value) = attrs();
        let expr = physical(get_field(col("__global_attrs__"), "depth"), &schema);
        let c = ConstantColumn::evaluate(&expr, "depth", &schema, 1, &value).unwrap();
        assert_eq!(c.value, ScalarValue::Int64(Some(40)));
        let stats = c.statistics(Precision::Exact(5));
        assert_eq!(
            stats.max_value,
            Precision::Exact(ScalarValue::Int64(Some(40)))
        );
        assert_eq!(stats.null_count, Precision::Exact(0));
        let over_nothing = c.statistics(Precision::Exact(0));
        assert_eq!(over_nothing.min_value, Precision::Absent);
        let perhaps = c.statistics(Precision::Inexact(5));
        assert!(!perhaps.min_value.is_exact().unwrap());
        let column = DerivedColumn::Constant(c)
            .values(3, |_, _| unreachable!())
            .unwrap();
        assert_eq!(column.len(), 3);
    }

    #[test]
    fn an_expression_reading_another_column_is_not_constant() {
        let (schema, value) = attrs();
        let expr = physical(
            get_field(col("__global_attrs__"), "depth") + col("x"),
            &schema,
        );
        assert!(ConstantColumn::evaluate(&expr, "e", &schema, 1, &value).is_none());
        let plain = physical(col("x"), &schema);
        assert!(ConstantColumn::evaluate(&plain, "x", &schema, 1, &value).is_none());
    }
}
