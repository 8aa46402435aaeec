//! `COPY ... TO ... STORED AS ZARR` as DataFusion plans it: the planner finds a file format
//! factory by the lower-cased `STORED AS` name (or the target's extension, `out.zarr`), asks
//! it for a [`FileFormat`] with the statement's options, and that format's
//! `create_writer_physical_plan` returns a `DataSinkExec` over [`ZarrSink`]. Reading goes
//! through `CREATE EXTERNAL TABLE ... STORED AS ZARR` (the table factory), never here.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{not_impl_err, DataFusionError, GetExt, Result as DfResult, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{
    ArrowSource, FileScanConfig, FileSinkConfig, FileSource,
};
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;
// DataFusion's object_store (0.13), not the 0.14 ndfusion reads and writes with.
use datafusion::object_store::{ObjectMeta, ObjectStore as ObjectStore13};

use super::grid_sink::GridSink;
use super::options::ZarrWriteOptions;
use super::sink::ZarrSink;
use super::target::Target;
use crate::error::Error;
use crate::limits::Limits;

/// The name `STORED AS ZARR` and `.zarr` targets are found by.
const EXTENSION: &str = "zarr";

/// Makes the format `COPY ... STORED AS ZARR` writes with.
#[derive(Debug, Default)]
pub struct ZarrFormatFactory;

impl GetExt for ZarrFormatFactory {
    fn get_ext(&self) -> String {
        EXTENSION.into()
    }
}

impl FileFormatFactory for ZarrFormatFactory {
    fn create(
        &self,
        state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> DfResult<Arc<dyn FileFormat>> {
        let options = ZarrWriteOptions::from_sql(format_options)?;
        let limits = Limits::of_session(state.config_options())?;
        Ok(Arc::new(ZarrFormat {
            options,
            max_coordinate_bytes: limits.coordinate_bytes,
        }))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(ZarrFormat {
            options: ZarrWriteOptions::new(),
            max_coordinate_bytes: Limits::from_env().unwrap_or_default().coordinate_bytes,
        })
    }
}

/// Zarr as a format DataFusion writes: a struct array of the query's rows, or a dataset on
/// the grid of its `dimensions`.
#[derive(Debug)]
pub struct ZarrFormat {
    options: ZarrWriteOptions,
    /// What a gridded write's coordinates may hold (the session's limit).
    max_coordinate_bytes: u64,
}

/// What a read through this format says: Zarr is read as a table.
fn reads_elsewhere<T>() -> DfResult<T> {
    not_impl_err!(
        "the Zarr file format only writes (COPY ... STORED AS ZARR); read Zarr with CREATE \
         EXTERNAL TABLE ... STORED AS ZARR"
    )
}

#[async_trait]
impl FileFormat for ZarrFormat {
    fn get_ext(&self) -> String {
        EXTENSION.into()
    }

    fn get_ext_with_compression(&self, _c: &FileCompressionType) -> DfResult<String> {
        Ok(EXTENSION.into())
    }

    fn compression_type(&self) -> Option<FileCompressionType> {
        None
    }

    async fn infer_schema(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore13>,
        _objects: &[ObjectMeta],
    ) -> DfResult<SchemaRef> {
        reads_elsewhere()
    }

    async fn infer_stats(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore13>,
        _table_schema: SchemaRef,
        _object: &ObjectMeta,
    ) -> DfResult<Statistics> {
        reads_elsewhere()
    }

    async fn create_physical_plan(
        &self,
        _state: &dyn Session,
        _conf: FileScanConfig,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        reads_elsewhere()
    }

    /// The sink, checked before the query runs: a column a struct field cannot hold, a bad
    /// option, or a location already taken (without `overwrite`) is an error now, not after
    /// the query's work.
    async fn create_writer_physical_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        _state: &dyn Session,
        conf: FileSinkConfig,
        order_requirements: Option<LexRequirement>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if !conf.table_partition_cols.is_empty() {
            return Err(DataFusionError::from(Error::Write {
                location: conf.original_url.clone(),
                reason: "a Zarr store is one array: PARTITIONED BY does not apply".into(),
            }));
        }
        let location = conf.original_url.as_str();
        let schema = conf.output_schema().clone();
        let (sink, order): (Arc<dyn DataSink>, _) = match self.options.dimensions() {
            None => {
                self.options.attributes()?;
                let sink = ZarrSink::new(location, self.options.clone(), schema)?;
                (Arc::new(sink), order_requirements)
            }
            Some(_) => {
                let sink = GridSink::new(
                    location,
                    self.options.clone(),
                    schema,
                    self.max_coordinate_bytes,
                )?;
                let order = sink.required_order()?;
                (Arc::new(sink), order)
            }
        };
        if !self.options.overwrite() && Target::occupied(location, self.options.storage()).await? {
            return Err(DataFusionError::from(Error::Write {
                location: location.to_string(),
                reason: "something is already there; write elsewhere, or replace it with \
                         OPTIONS ('overwrite' 'true')"
                    .into(),
            }));
        }
        Ok(Arc::new(DataSinkExec::new(input, sink, order)))
    }

    /// Never used to read: [`create_physical_plan`](Self::create_physical_plan) refuses first.
    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(ArrowSource::new_file_source(table_schema))
    }
}

impl ZarrFormat {
    /// The options the format writes with.
    pub fn options(&self) -> &ZarrWriteOptions {
        &self.options
    }
}
