//! `HDF5Table`: an HDF5 file, or a collection of them, as a DataFusion table.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::HDF5Options;
use crate::limits::Limits;
use crate::session::HDF5_FORMAT;
use crate::table_options::check_external_table;
use crate::table_source::TableSource;
use crate::zarr::ZarrTable;

/// An HDF5 file as a table. `OPTIONS ('path' '/group/dataset')` reads one dataset as a Zarr
/// array is read — a row per element, an `Int64` column per dimension (named after the
/// dimension scale attached to it, else `dim_0`, `dim_1`, ...), then a column per member of
/// a compound type (nested compounds as structs, array members as fixed-size lists,
/// fixed-length strings as bytes: h5py's NumPy dtype, by the rules of Zarr struct arrays),
/// or one column `value` (variable-length strings as `Utf8`) — with `__global_attrs__` holding the dataset's attributes. A
/// `path` naming a group reads it as a dataset table, as [`NetCDFTable`](crate::NetCDFTable)
/// reads a netCDF-4 group; a file holding one dataset needs no `path`. Filters on the
/// dimension columns select the HDF5 chunks read.
///
/// A `LOCATION` glob (`runs/*.h5`) is one table over every file it matches, as a Zarr
/// collection is.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_session_context();
/// let options = ndfusion::HDF5Options::new().with_path("/obs/records");
/// let table = ndfusion::HDF5Table::open_with("tests/data/hdf5/records.h5", options).await?;
/// ctx.register_table("records", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT count(*) FROM records").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HDF5Table {
    inner: ZarrTable,
    options: HDF5Options,
}

impl HDF5Table {
    /// Opens the HDF5 file at `location` (a path, a `file://` URL, or an object-store URL)
    /// with the default options.
    pub async fn open(location: &str) -> crate::error::Result<Self> {
        Self::open_with(location, HDF5Options::new()).await
    }

    /// Opens the file, or the files a glob matches, at `location` with `options`.
    pub async fn open_with(location: &str, options: HDF5Options) -> crate::error::Result<Self> {
        let inner = ZarrTable::open_as(location, options.as_zarr(), options.format()).await?;
        Ok(HDF5Table { inner, options })
    }

    /// One table over the files at `locations`.
    pub async fn open_many<S: AsRef<str>>(
        locations: &[S],
        options: HDF5Options,
    ) -> crate::error::Result<Self> {
        let inner = ZarrTable::open_many_as(locations, options.as_zarr(), options.format()).await?;
        Ok(HDF5Table { inner, options })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &HDF5Options {
        &self.options
    }

    /// The shape of the grid; for a collection, the number of files.
    pub fn shape(&self) -> Vec<u64> {
        self.inner.shape()
    }

    /// How the table was opened.
    pub(crate) fn source(&self) -> &Arc<TableSource> {
        self.inner.source()
    }

    /// The files read besides the table's own location (what its pattern expanded to).
    pub(crate) fn member_locations(&self) -> Vec<&str> {
        self.inner.member_locations()
    }
}

#[async_trait]
impl TableProvider for HDF5Table {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
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
        self.inner.scan(state, projection, filters, limit).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.inner.supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }
}

/// Creates a [`HDF5Table`] from `CREATE EXTERNAL TABLE ... STORED AS HDF5 LOCATION '...'
/// [OPTIONS (...)]` (see [`HDF5Options`]).
#[derive(Debug, Default)]
pub struct HDF5TableFactory;

#[async_trait]
impl TableProviderFactory for HDF5TableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        check_external_table(cmd, HDF5_FORMAT)?;
        let limits = Limits::of_session(state.config_options())?;
        let options = HDF5Options::from_sql(&cmd.options)?.with_limits(limits);
        Ok(Arc::new(
            HDF5Table::open_with(&cmd.location, options).await?,
        ))
    }
}
