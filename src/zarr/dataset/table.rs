//! `DatasetTable`: a Zarr group (a dataset) as a DataFusion table.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::model::{Dataset, DatasetOptions};
use super::scan::{BlockReader, DatasetScan};
use crate::zarr::metadata::node::Group;
use crate::zarr::options::ZarrOptions;
use crate::zarr::plan::filter_plan::{plan_filters, FilterPlan};
use crate::zarr::plan::pruning::{AxisLookup, Dimensions};
use crate::zarr::plan::row_filter::RowFilter;
use crate::zarr::read::grid_scan::GridSettings;
use crate::zarr::store::ZarrStore;

#[derive(Debug)]
pub(crate) struct DatasetTable {
    dataset: Arc<Dataset>,
    options: ZarrOptions,
}

impl DatasetTable {
    pub(crate) async fn open(
        store: ZarrStore,
        location: &str,
        group: Group,
        options: ZarrOptions,
    ) -> crate::error::Result<Self> {
        let dataset_options = DatasetOptions {
            variables: options.variables().map(<[String]>::to_vec),
            cf: options.cf(),
            piece_bytes: options.piece_bytes(),
        };
        let dataset = Dataset::open(store, location, group, &dataset_options).await?;
        Ok(DatasetTable {
            dataset: Arc::new(dataset),
            options,
        })
    }

    pub(crate) fn shape(&self) -> Vec<u64> {
        self.dataset.shape()
    }

    pub(crate) fn attributes(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.dataset.attributes
    }
}

#[async_trait]
impl TableProvider for DatasetTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.dataset.schema)
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
        let dataset = &self.dataset;
        let names = dataset.axis_names();
        let shape = dataset.shape();
        let lookups: Vec<Option<&dyn AxisLookup>> = dataset
            .axes
            .iter()
            .map(|a| a.coordinate.as_ref().map(|c| c as &dyn AxisLookup))
            .collect();
        let dims = Dimensions {
            names: &names,
            shape: &shape,
            lookups: &lookups,
        };
        let FilterPlan {
            selection,
            row_filters,
        } = plan_filters(filters, &dims, dataset.global_attrs.as_ref(), state)?;
        let all: Vec<usize> = (0..dataset.columns.len()).collect();
        let filter = conjunction(row_filters)
            .map(|expr| RowFilter::try_new(expr, &dataset.schema, &all, state))
            .transpose()?
            .map(Arc::new);
        let projection = projection.cloned().unwrap_or(all);
        let schema = Arc::new(dataset.schema.project(&projection)?);
        let batch_rows = self.options.batch_size(state.config().batch_size());
        let reader = BlockReader::new(Arc::clone(dataset), projection, schema, filter, batch_rows);
        let settings = GridSettings::new(state, selection, limit, &self.options);
        Ok(DatasetScan::plan(reader, settings))
    }

    /// Every filter is exact: dimension filters select blocks and cells, attribute filters are
    /// decided at planning, the others run in the scan.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Exact; filters.len()])
    }

    fn statistics(&self) -> Option<Statistics> {
        let rows = usize::try_from(self.dataset.rows()).ok()?;
        Some(Statistics::new_unknown(&self.dataset.schema).with_num_rows(Precision::Exact(rows)))
    }
}
