//! `LanceNdTable`: a lance-nd table as a DataFusion table, every nd record batch materialized
//! onto its grid.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::Result;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;
use lance::Dataset;

use super::filter::{is_global_attrs_filter, stats_filter};
use super::scan::{LanceNdScanExec, OutputColumn};
use super::table::{open_lance_nd, LanceNdError, STATS_PREFIX};
use crate::nd::arrow_encoding::{
    decode_dims, is_nd_array_field, nd_array_parts, GLOBAL_ATTRS_COLUMN,
};
use crate::scan_util::{check_external_table, project_columns, strip_file_scheme};

/// A lance-nd table as a table: an Int64 index column for each dimension name that has no
/// array of the same name, one column per array (its values broadcast onto the row's grid,
/// NULL where the row lacks the array), and `__global_attrs__` repeated on every cell.
#[derive(Debug)]
pub struct LanceNdTable {
    uri: String,
    dataset: Arc<Dataset>,
    schema: SchemaRef,
    columns: Vec<OutputColumn>,
    /// Every array of the table, with its value type.
    arrays: Vec<(String, DataType)>,
    /// Arrays with a `__stats__:<array>` column.
    stats: HashSet<String>,
}

impl LanceNdTable {
    /// Opens the lance-nd table at `uri`. The dimension names come from the data: the
    /// `dim_names` of every array of every row are read (not their values).
    pub async fn open(uri: &str) -> Result<Self, LanceNdError> {
        let dataset = open_lance_nd(uri).await?;
        let table_schema = Schema::from(dataset.schema());
        let mut arrays = Vec::new();
        for field in table_schema
            .fields()
            .iter()
            .filter(|f| is_nd_array_field(f))
        {
            let (value_type, _) =
                nd_array_parts(field).map_err(|e| LanceNdError::Schema(format!("{uri}: {e}")))?;
            arrays.push((field.name().clone(), value_type));
        }
        let stats = table_schema
            .fields()
            .iter()
            .filter_map(|f| f.name().strip_prefix(STATS_PREFIX).map(str::to_string))
            .collect();
        let dims = dimension_names(&dataset, uri, &arrays).await?;

        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for d in dims.iter().filter(|d| !arrays.iter().any(|(a, _)| a == *d)) {
            if d == GLOBAL_ATTRS_COLUMN {
                return Err(LanceNdError::Schema(format!(
                    "{uri}: a dimension is named {GLOBAL_ATTRS_COLUMN}"
                )));
            }
            fields.push(Field::new(d, DataType::Int64, true));
            columns.push(OutputColumn::Index(d.clone()));
        }
        for (name, value_type) in &arrays {
            fields.push(Field::new(name, value_type.clone(), true));
            columns.push(OutputColumn::Array(name.clone()));
        }
        if let Ok(global) = table_schema.field_with_name(GLOBAL_ATTRS_COLUMN) {
            fields.push(Field::new(
                GLOBAL_ATTRS_COLUMN,
                global.data_type().clone(),
                true,
            ));
            columns.push(OutputColumn::GlobalAttrs);
        }
        Ok(LanceNdTable {
            uri: uri.to_string(),
            dataset: Arc::new(dataset),
            schema: Arc::new(Schema::new(fields)),
            columns,
            arrays,
            stats,
        })
    }
}

/// Every dimension name of every array in the table, in order of first appearance.
async fn dimension_names(
    dataset: &Dataset,
    uri: &str,
    arrays: &[(String, DataType)],
) -> Result<Vec<String>, LanceNdError> {
    if arrays.is_empty() {
        return Ok(vec![]);
    }
    let projection: Vec<String> = arrays
        .iter()
        .flat_map(|(a, _)| [format!("{a}.dim_names"), format!("{a}.dim_sizes")])
        .collect();
    let mut scanner = dataset.scan();
    scanner
        .project(&projection)
        .map_err(|e| LanceNdError::lance(uri, e))?;
    let mut stream = scanner
        .try_into_stream()
        .await
        .map_err(|e| LanceNdError::lance(uri, e))?;
    let mut names: Vec<String> = Vec::new();
    let mut row = 0;
    while let Some(batch) = stream
        .try_next()
        .await
        .map_err(|e| LanceNdError::lance(uri, e))?
    {
        for (a, _) in arrays {
            let (Some(n), Some(s)) = (
                batch.column_by_name(&format!("{a}.dim_names")),
                batch.column_by_name(&format!("{a}.dim_sizes")),
            ) else {
                return Err(LanceNdError::Schema(format!(
                    "{uri}: array '{a}' has no dim_names / dim_sizes"
                )));
            };
            for r in 0..batch.num_rows() {
                let dims = decode_dims(n, s, r).map_err(|e| {
                    LanceNdError::Data(format!("{uri}: row {}: {}", row + r, e.in_array(a)))
                })?;
                for d in dims {
                    if !names.contains(&d.name) {
                        names.push(d.name);
                    }
                }
            }
        }
        row += batch.num_rows();
    }
    Ok(names)
}

#[async_trait]
impl TableProvider for LanceNdTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let (schema, columns) = project_columns(&self.schema, &self.columns, projection)?;
        let has_stats = |a: &str| self.stats.contains(a);
        let filters: Vec<Expr> = filters.iter().cloned().map(unnormalize_col).collect();
        let exact: Vec<Expr> = filters
            .iter()
            .filter(|f| is_global_attrs_filter(f))
            .cloned()
            .collect();
        let skipping: Vec<Expr> = filters
            .iter()
            .filter_map(|f| stats_filter(f, &has_stats))
            .collect();
        Ok(Arc::new(LanceNdScanExec::new(
            self.uri.clone(),
            Arc::clone(&self.dataset),
            schema,
            columns,
            self.arrays.clone(),
            conjunction(exact),
            conjunction(skipping),
            limit,
        )))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let has_stats = |a: &str| self.stats.contains(a);
        Ok(filters
            .iter()
            .map(|f| {
                let f = unnormalize_col((*f).clone());
                if is_global_attrs_filter(&f) {
                    TableProviderFilterPushDown::Exact
                } else if stats_filter(&f, &has_stats).is_some() {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }
}

/// `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND LOCATION '...'`; register as `LANCE_ND`.
#[derive(Debug, Default)]
pub struct LanceNdTableFactory;

#[async_trait]
impl TableProviderFactory for LanceNdTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        check_external_table(cmd, "LANCE_ND")?;
        let location = strip_file_scheme(&cmd.location);
        Ok(Arc::new(LanceNdTable::open(location).await?))
    }
}
