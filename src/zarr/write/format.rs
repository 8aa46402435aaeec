//! `COPY ... TO ... STORED AS ZARR` as DataFusion plans it (`write_format.rs`): the writer
//! plan is a `DataSinkExec` over [`ZarrSink`] (a struct array) or [`GridSink`] (a dataset on
//! the grid of `dimensions`).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::physical_plan::FileSinkConfig;
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;

use super::grid_sink::GridSink;
use super::options::ZarrWriteOptions;
use super::sink::ZarrSink;
use super::target::Target;
use crate::error::Error;
use crate::limits::Limits;
use crate::write_format::{WriteOnly, WriteOnlyFactory, Writes};

/// Makes the format `COPY ... STORED AS ZARR` writes with.
pub type ZarrFormatFactory = WriteOnlyFactory<ZarrWriter>;

/// Zarr as a format DataFusion writes: a struct array of the query's rows, or a dataset on
/// the grid of its `dimensions`.
pub type ZarrFormat = WriteOnly<ZarrWriter>;

/// What `COPY ... STORED AS ZARR` writes with.
#[derive(Debug)]
pub struct ZarrWriter {
    options: ZarrWriteOptions,
    /// What a gridded write's coordinates may hold (the session's limit).
    max_coordinate_bytes: u64,
}

impl ZarrWriter {
    /// The options the format writes with.
    pub fn options(&self) -> &ZarrWriteOptions {
        &self.options
    }
}

#[async_trait]
impl Writes for ZarrWriter {
    const EXTENSION: &'static str = "zarr";
    const STORED_AS: &'static str = "ZARR";

    fn from_sql(options: &HashMap<String, String>, limits: Limits) -> DfResult<Self> {
        Ok(ZarrWriter {
            options: ZarrWriteOptions::from_sql(options)?,
            max_coordinate_bytes: limits.coordinate_bytes,
        })
    }

    fn defaults(limits: Limits) -> Self {
        ZarrWriter {
            options: ZarrWriteOptions::new(),
            max_coordinate_bytes: limits.coordinate_bytes,
        }
    }

    /// The sink, checked before the query runs: a column a struct field cannot hold, a bad
    /// option, or a location already taken (without `overwrite`) is an error now, not after
    /// the query's work.
    async fn writer_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
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
}
