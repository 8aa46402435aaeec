//! Filters evaluated inside the scan, chunk by chunk, before the other columns are decoded.
//!
//! Field filters (`temp > 3`) run here, exactly (DataFusion does not apply them again): the
//! columns the filter needs are decoded, the filter runs (NULL keeps no row, as in a
//! FilterExec), and the projected columns are decoded only at the matching rows. Dimension
//! filters whose boxes grow too large also run here.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::PhysicalExpr;

use crate::zarr::metadata::schema::ColumnSource;

/// A filter over a table whose columns come from sources `S`.
#[derive(Debug)]
pub(crate) struct RowFilter<S = ColumnSource> {
    /// The predicate, over `schema`.
    pub predicate: Arc<dyn PhysicalExpr>,
    /// The columns the predicate reads, in `schema` order.
    pub columns: Vec<S>,
    pub schema: SchemaRef,
    /// The logical predicate, for EXPLAIN.
    pub display: String,
}

impl<S> RowFilter<S> {
    /// The rows the filter keeps, given its columns (`inputs`, in `columns` order) of `rows`
    /// rows; NULL keeps no row, as in a FilterExec. A failure is the query's filter's.
    pub(crate) fn keep(
        &self,
        inputs: Vec<ArrayRef>,
        rows: usize,
    ) -> crate::error::Result<BooleanArray> {
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let batch =
            RecordBatch::try_new_with_options(Arc::clone(&self.schema), inputs, &options)
                .map_err(|e| crate::error::Error::arrow("assembling the row filter's input", e))?;
        let failed = |source| crate::error::Error::Filter {
            filter: self.display.clone(),
            source,
        };
        let mask = self
            .predicate
            .evaluate(&batch)
            .and_then(|v| v.into_array(rows))
            .map_err(failed)?;
        let mask = mask.as_boolean_opt().ok_or_else(|| {
            failed(datafusion::error::DataFusionError::Plan(format!(
                "the filter gives {}, not booleans",
                mask.data_type()
            )))
        })?;
        Ok(if mask.null_count() > 0 {
            prep_null_mask_filter(mask)
        } else {
            mask.clone()
        })
    }
}

impl<S: Clone> RowFilter<S> {
    /// Builds the filter for `expr` over a table with `table_schema` whose columns come from
    /// `sources`.
    pub(crate) fn try_new(
        expr: Expr,
        table_schema: &Schema,
        sources: &[S],
        state: &dyn Session,
    ) -> Result<Self> {
        let expr = unnormalize_col(expr);
        let referenced: Vec<usize> = {
            let names: Vec<String> = expr.column_refs().iter().map(|c| c.name.clone()).collect();
            (0..table_schema.fields().len())
                .filter(|&i| names.contains(table_schema.field(i).name()))
                .collect()
        };
        let schema = Arc::new(table_schema.project(&referenced)?);
        let df_schema = DFSchema::try_from(Arc::clone(&schema))?;
        let display = expr.to_string();
        let predicate = state.create_physical_expr(expr, &df_schema)?;
        Ok(RowFilter {
            predicate,
            columns: referenced.iter().map(|&i| sources[i].clone()).collect(),
            schema,
            display,
        })
    }
}
