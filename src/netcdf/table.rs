//! `NetCDFTable`: a netCDF file, or a collection of them, as a DataFusion table.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use super::NetCDFOptions;
use crate::limits::Limits;
use crate::session::NETCDF_FORMAT;
use crate::table_options::check_external_table;
use crate::table_source::TableSource;
use crate::zarr::ZarrTable;

/// A netCDF-3 file (CDF-1 classic, CDF-2 64-bit offset, CDF-5) or a netCDF-4 file (its root
/// group) as a table: what
/// `xarray.open_dataset(path).to_dataframe().reset_index()` shows — a row per cell of the grid
/// of its dimensions, a column per dimension holding its coordinate values, then the other
/// variables in the file's order, broadcast over the dimensions they lack and CF-decoded —
/// with `__global_attrs__` holding the file's attributes. It is read exactly as a Zarr group
/// is read as a dataset (see [`ZarrTable`]): filters on dimensions and monotonic coordinates
/// select the records read, and only those byte ranges of the file are fetched.
///
/// A `LOCATION` glob (`argo/**/*.nc`) is one table over every file it matches, as a Zarr
/// collection is.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_session_context();
/// let table = ndfusion::NetCDFTable::open("tests/data/netcdf/classic.nc").await?;
/// ctx.register_table("obs", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT count(*) FROM obs").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct NetCDFTable {
    inner: ZarrTable,
    options: NetCDFOptions,
}

impl NetCDFTable {
    /// Opens the netCDF file at `location` (a path, a `file://` URL, or an object-store URL)
    /// with the default options.
    pub async fn open(location: &str) -> crate::error::Result<Self> {
        Self::open_with(location, NetCDFOptions::new()).await
    }

    /// Opens the file, or the files a glob matches, at `location` with `options`.
    pub async fn open_with(location: &str, options: NetCDFOptions) -> crate::error::Result<Self> {
        let inner = ZarrTable::open_as(location, options.as_zarr(), options.format()).await?;
        Ok(NetCDFTable { inner, options })
    }

    /// One table over the files at `locations`.
    pub async fn open_many<S: AsRef<str>>(
        locations: &[S],
        options: NetCDFOptions,
    ) -> crate::error::Result<Self> {
        let inner = ZarrTable::open_many_as(locations, options.as_zarr(), options.format()).await?;
        Ok(NetCDFTable { inner, options })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &NetCDFOptions {
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
impl TableProvider for NetCDFTable {
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

/// Creates a [`NetCDFTable`] from `CREATE EXTERNAL TABLE ... STORED AS NETCDF LOCATION '...'
/// [OPTIONS (...)]` (see [`NetCDFOptions`]).
#[derive(Debug, Default)]
pub struct NetCDFTableFactory;

#[async_trait]
impl TableProviderFactory for NetCDFTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        check_external_table(cmd, NETCDF_FORMAT)?;
        let limits = Limits::of_session(state.config_options())?;
        let options = NetCDFOptions::from_sql(&cmd.options)?.with_limits(limits);
        Ok(Arc::new(
            NetCDFTable::open_with(&cmd.location, options).await?,
        ))
    }
}
