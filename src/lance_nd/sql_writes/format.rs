//! `COPY ... TO 't.lance' STORED AS LANCE_ND` as DataFusion plans it (`write_format.rs`): the
//! writer plan is a `DataSinkExec` over [`LanceNdSink`], which appends the rows as nd record
//! batches to the table there (created when nothing is there).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::physical_plan::FileSinkConfig;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;

use super::options::LanceNdCopyOptions;
use super::sink::LanceNdSink;
use crate::error::Error;
use crate::limits::Limits;
use crate::nd::rows_batch::RowsLayout;
use crate::write_format::{WriteOnly, WriteOnlyFactory, Writes};

/// Makes the format `COPY ... STORED AS LANCE_ND` writes with.
pub type LanceNdFormatFactory = WriteOnlyFactory<LanceNdWriter>;

/// lance-nd as a format DataFusion writes: nd record batches appended to a table.
pub type LanceNdFormat = WriteOnly<LanceNdWriter>;

/// What `COPY ... STORED AS LANCE_ND` writes with.
#[derive(Debug)]
pub struct LanceNdWriter {
    options: LanceNdCopyOptions,
    /// What one batch's coordinates may hold (the session's limit).
    max_coordinate_bytes: u64,
}

impl LanceNdWriter {
    /// The options the format writes with.
    pub fn options(&self) -> &LanceNdCopyOptions {
        &self.options
    }
}

#[async_trait]
impl Writes for LanceNdWriter {
    const EXTENSION: &'static str = "lance_nd";
    const STORED_AS: &'static str = "LANCE_ND";

    fn from_sql(options: &HashMap<String, String>, limits: Limits) -> DfResult<Self> {
        Ok(LanceNdWriter {
            options: LanceNdCopyOptions::from_sql(options)?,
            max_coordinate_bytes: limits.coordinate_bytes,
        })
    }

    fn defaults(limits: Limits) -> Self {
        LanceNdWriter {
            options: LanceNdCopyOptions::new(),
            max_coordinate_bytes: limits.coordinate_bytes,
        }
    }

    /// The sink, checked before the query runs: a dimension or `batch_by` column the query
    /// does not have is an error now, not after the query's work.
    async fn writer_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        conf: FileSinkConfig,
        _order_requirements: Option<LexRequirement>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let location = conf.original_url.as_str();
        let refused = |reason: String| {
            DataFusionError::from(Error::Write {
                location: location.to_string(),
                reason,
            })
        };
        if !conf.table_partition_cols.is_empty() {
            return Err(refused(
                "a lance-nd table is one table: PARTITIONED BY does not apply; batch_by \
                 makes one table row per value"
                    .into(),
            ));
        }
        let schema = conf.output_schema().clone();
        let layout = RowsLayout::for_copy(
            &schema,
            self.options.dimensions(),
            self.options.batch_by(),
            self.max_coordinate_bytes,
        )
        .map_err(|e| refused(e.to_string()))?;
        let options = self.options.write_options();
        let sink = LanceNdSink::new(location, layout, options, schema, None);
        let order = sink.required_ordering();
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), order)))
    }
}
