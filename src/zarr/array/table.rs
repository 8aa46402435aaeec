//! `ArrayTable`: one Zarr array as a DataFusion table.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use datafusion::logical_expr::utils::conjunction;

use crate::scan::project_columns;
use crate::zarr::array::chunk_batches::ChunkBatches;
use crate::zarr::array::scan::ArrayScan;
use crate::zarr::metadata::array_meta::ArrayMeta;
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::schema::{table_columns, ColumnSource};
use crate::zarr::options::ZarrOptions;
use crate::zarr::plan::filter_plan::{plan_filters, FilterPlan};
use crate::zarr::plan::pruning::Dimensions;
use crate::zarr::plan::row_filter::RowFilter;
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::array::ZarrArray;
use crate::zarr::read::chunk_reader::ChunkReader;
use crate::zarr::read::grid_scan::GridSettings;
use crate::zarr::store::ZarrStore;

/// A Zarr array as a table: one row per element, an Int64 index column per dimension, then one
/// column per top-level struct field (or one `value` column), then `__global_attrs__`.
#[derive(Debug)]
pub(crate) struct ArrayTable {
    array: Arc<ZarrArray>,
    schema: SchemaRef,
    columns: Vec<ColumnSource>,
    global_attrs: Option<GlobalAttrs>,
    options: ZarrOptions,
}

impl ArrayTable {
    /// The table of the array `meta` at the root of `store`.
    pub(crate) fn new(
        store: ZarrStore,
        location: &str,
        meta: ArrayMeta,
        options: ZarrOptions,
    ) -> crate::error::Result<Self> {
        let array = ZarrArray::new(store, "", location, meta)?;
        let global_attrs = GlobalAttrs::from_json(&array.meta.attributes);
        let (schema, columns) =
            table_columns(&array.meta, global_attrs.as_ref()).map_err(|p| p.at(location))?;
        Ok(ArrayTable {
            array: Arc::new(array),
            schema,
            columns,
            global_attrs,
            options,
        })
    }

    /// The array's attributes.
    pub(crate) fn attributes(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.array.meta.attributes
    }

    /// The array's shape.
    pub(crate) fn shape(&self) -> &[u64] {
        &self.array.meta.shape
    }

    fn dimensions(&self) -> Dimensions<'_> {
        Dimensions {
            names: &self.array.meta.dimension_names,
            shape: &self.array.meta.shape,
            lookups: &[],
        }
    }

    fn row_count(&self) -> usize {
        Selection::all(&self.array.meta.shape).len() as usize
    }
}

#[async_trait]
impl TableProvider for ArrayTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let _meta = &self.array.meta;
        let dims = self.dimensions();
        let FilterPlan {
            selection,
            row_filters,
        } = plan_filters(filters, &dims, self.global_attrs.as_ref(), state)?;
        let filter = conjunction(row_filters)
            .map(|expr| RowFilter::try_new(expr, &self.schema, &self.columns, state))
            .transpose()?
            .map(Arc::new);
        let (schema, columns) = project_columns(&self.schema, &self.columns, projection)?;
        let reader = ChunkBatches {
            reader: Arc::new(ChunkReader {
                array: Arc::clone(&self.array),
                piece_bytes: self.options.piece_bytes(),
            }),
            columns,
            schema,
            filter,
            global_attrs: self.global_attrs.clone(),
            batch_rows: self.options.batch_size(state.config().batch_size()),
            derived: Vec::new(),
        };
        let settings = GridSettings::new(state, selection, limit, &self.options);
        Ok(ArrayScan::plan(reader, settings))
    }

    /// Every filter is exact: dimension filters select chunks and rows, any other filter runs
    /// per chunk as the row filter (`row_filter.rs`), which drops exactly the rows DataFusion's
    /// FilterExec would. So no FilterExec repeats it, and the columns it reads are decoded
    /// only for the filter, not output.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Exact; filters.len()])
    }

    fn statistics(&self) -> Option<Statistics> {
        Some(
            Statistics::new_unknown(&self.schema).with_num_rows(Precision::Exact(self.row_count())),
        )
    }
}
