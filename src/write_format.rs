//! The file formats `COPY ... STORED AS <kind>` writes with. DataFusion's COPY planner finds a
//! [`FileFormatFactory`](datafusion::datasource::file_format::FileFormatFactory) by the
//! lower-cased `STORED AS` name (or the target's extension), asks it for a [`FileFormat`] with
//! the statement's options, and calls that format's `create_writer_physical_plan`. ndfusion's
//! kinds are read through their table factories (`CREATE EXTERNAL TABLE`), never as files,
//! so [`WriteOnly`] refuses every read and leaves the writer plan to the kind's [`Writes`].

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{not_impl_err, GetExt, Result as DfResult, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{
    ArrowSource, FileScanConfig, FileSinkConfig, FileSource,
};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;
// DataFusion's object_store (0.13), not the 0.14 ndfusion reads and writes with.
use datafusion::object_store::{ObjectMeta, ObjectStore as ObjectStore13};

use crate::limits::Limits;

/// What a kind's COPY format does: plan the writer of a query's rows.
#[async_trait]
pub trait Writes: std::fmt::Debug + Send + Sync + 'static {
    /// The lower-cased `STORED AS` name (`zarr`), which is also the target extension the
    /// planner falls back to.
    const EXTENSION: &'static str;
    /// The `STORED AS` name, for messages (`ZARR`).
    const STORED_AS: &'static str;

    /// A writer with the statement's `OPTIONS`, under the session's `limits`.
    fn from_sql(options: &HashMap<String, String>, limits: Limits) -> DfResult<Self>
    where
        Self: Sized;

    /// A writer with no options.
    fn defaults(limits: Limits) -> Self
    where
        Self: Sized;

    /// The plan that writes `input`'s rows (a `DataSinkExec`), checked before the query runs:
    /// a bad option or column is an error now, not after the query's work.
    async fn writer_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        conf: FileSinkConfig,
        order_requirements: Option<LexRequirement>,
    ) -> DfResult<Arc<dyn ExecutionPlan>>;
}

/// Makes a kind's [`WriteOnly`] format with a statement's options: what a session registers
/// for `COPY ... STORED AS <kind>`.
#[derive(Debug)]
pub struct WriteOnlyFactory<W: Writes>(PhantomData<W>);

impl<W: Writes> Default for WriteOnlyFactory<W> {
    fn default() -> Self {
        WriteOnlyFactory(PhantomData)
    }
}

impl<W: Writes> GetExt for WriteOnlyFactory<W> {
    fn get_ext(&self) -> String {
        W::EXTENSION.into()
    }
}

impl<W: Writes> FileFormatFactory for WriteOnlyFactory<W> {
    fn create(
        &self,
        state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> DfResult<Arc<dyn FileFormat>> {
        let limits = Limits::of_session(state.config_options())?;
        Ok(Arc::new(WriteOnly(W::from_sql(format_options, limits)?)))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(WriteOnly(W::defaults(
            Limits::from_env().unwrap_or_default(),
        )))
    }
}

/// A kind's [`Writes`] as the [`FileFormat`] DataFusion's COPY planner asks for.
#[derive(Debug)]
pub struct WriteOnly<W: Writes>(pub(crate) W);

impl<W: Writes> WriteOnly<W> {
    /// What writes.
    pub fn writer(&self) -> &W {
        &self.0
    }
}

/// What a read through a write-only format says.
fn reads_elsewhere<W: Writes, T>() -> DfResult<T> {
    not_impl_err!(
        "the {0} file format only writes (COPY ... STORED AS {0}); read it with CREATE \
         EXTERNAL TABLE ... STORED AS {0}",
        W::STORED_AS
    )
}

#[async_trait]
impl<W: Writes> FileFormat for WriteOnly<W> {
    fn get_ext(&self) -> String {
        W::EXTENSION.into()
    }

    fn get_ext_with_compression(&self, _c: &FileCompressionType) -> DfResult<String> {
        Ok(W::EXTENSION.into())
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
        reads_elsewhere::<W, _>()
    }

    async fn infer_stats(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore13>,
        _table_schema: SchemaRef,
        _object: &ObjectMeta,
    ) -> DfResult<Statistics> {
        reads_elsewhere::<W, _>()
    }

    async fn create_physical_plan(
        &self,
        _state: &dyn Session,
        _conf: FileScanConfig,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        reads_elsewhere::<W, _>()
    }

    async fn create_writer_physical_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        _state: &dyn Session,
        conf: FileSinkConfig,
        order_requirements: Option<LexRequirement>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.0.writer_plan(input, conf, order_requirements).await
    }

    /// Never used to read: [`create_physical_plan`](Self::create_physical_plan) refuses first.
    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(ArrowSource::new_file_source(table_schema))
    }
}
