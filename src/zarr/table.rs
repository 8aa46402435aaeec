//! `ZarrTable`: a Zarr array, or a Zarr group read as a dataset, as a DataFusion table.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::array_table::ArrayTable;
use super::dataset::DatasetTable;
use super::node::{read_node, Node};
use super::options::ZarrOptions;
use super::store::ZarrStore;

/// A Zarr array or group as a table.
///
/// - **An array**: one row per element, an Int64 index column per dimension, then one column per
///   top-level struct field (or one `value` column).
/// - **A group** (a dataset, as xarray writes them): one row per cell of the grid its variables
///   span, as `xarray.open_zarr(group).to_dataframe().reset_index()` shows it: a column per
///   dimension holding its coordinate values (or an Int64 index), then the data variables and
///   other coordinates, broadcast over the dimensions they lack, CF-decoded (times, fill values,
///   scale and offset).
///
/// Either has a `__global_attrs__` column when it has attributes. Filters on dimensions (on
/// coordinate values when they are monotonic) select chunks, the others run inside the scan;
/// every filter is exact, so DataFusion does not evaluate it again.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_session_context();
/// let table = ndfusion::ZarrTable::open("tests/data/zarr_v3/struct_1d.zarr").await?;
/// ctx.register_table("points", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT count(*) FROM points").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZarrTable {
    inner: Inner,
    options: ZarrOptions,
}

#[derive(Debug)]
enum Inner {
    Array(ArrayTable),
    Dataset(DatasetTable),
}

impl ZarrTable {
    /// Opens the array or group at `location` with the default [`ZarrOptions`]: a local folder
    /// path, a `file://` URL, or an object-store URL (`s3://`, `gs://`, `az://`, `abfs://`,
    /// `http(s)://`). Credentials come from the environment.
    pub async fn open(location: &str) -> crate::Result<Self> {
        Self::open_with(location, ZarrOptions::new()).await
    }

    /// Opens the array or group at `location` with `options`.
    pub async fn open_with(location: &str, options: ZarrOptions) -> crate::Result<Self> {
        let store = ZarrStore::open(location, options.storage())?;
        let inner = match read_node(&store, location).await? {
            Node::Array(meta) => {
                options.check_array_options(location)?;
                Inner::Array(ArrayTable::new(store, location, *meta, options.clone())?)
            }
            Node::Group(group) => {
                Inner::Dataset(DatasetTable::open(store, location, group, options.clone()).await?)
            }
        };
        Ok(ZarrTable { inner, options })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &ZarrOptions {
        &self.options
    }

    /// The shape of the array, or of the grid of the dataset.
    pub fn shape(&self) -> Vec<u64> {
        match &self.inner {
            Inner::Array(t) => t.shape().to_vec(),
            Inner::Dataset(t) => t.shape(),
        }
    }

    fn provider(&self) -> &dyn TableProvider {
        match &self.inner {
            Inner::Array(t) => t,
            Inner::Dataset(t) => t,
        }
    }
}

#[async_trait]
impl TableProvider for ZarrTable {
    fn schema(&self) -> SchemaRef {
        self.provider().schema()
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
        self.provider()
            .scan(state, projection, filters, limit)
            .await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.provider().supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.provider().statistics()
    }
}
