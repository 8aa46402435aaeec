//! [`ChunkBatches`]: an array table's chunk reads as record batches of the projected columns,
//! the row filter applied per chunk before the other columns are decoded.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;

use crate::error::{BoxError, Error, Result};
use crate::zarr::decode::columns::{ChunkColumns, ColumnsWanted};
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::schema::ColumnSource;
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::gather::Gather;
use crate::zarr::plan::row_filter::RowFilter;
use crate::zarr::read::chunk_reader::{ChunkReader, ChunkSink};
use crate::zarr::read::metrics::ChunkMetrics;

/// What to produce from each chunk: the projected columns and their schema.
#[derive(Debug)]
pub(crate) struct ChunkBatches {
    pub reader: Arc<ChunkReader>,
    pub columns: Vec<ColumnSource>,
    pub schema: SchemaRef,
    /// Evaluated per chunk before the other columns are decoded.
    pub filter: Option<Arc<RowFilter>>,
    /// The `__global_attrs__` value, when the table has the column.
    pub global_attrs: Option<GlobalAttrs>,
}

impl ChunkBatches {
    /// Whether element bytes are needed at all: not when only dimension columns (or none, for
    /// `count(*)`) are wanted, by the output and by the row filter.
    fn needs_values(&self) -> bool {
        let filter_columns = self.filter.iter().flat_map(|f| f.columns.iter());
        self.columns
            .iter()
            .chain(filter_columns)
            .any(ColumnSource::reads_elements)
    }

    /// The batches of one chunk's selected rows.
    pub(crate) async fn read(
        self: Arc<Self>,
        read: ChunkSelection,
        metrics: ChunkMetrics,
    ) -> Result<Vec<RecordBatch>> {
        if self.needs_values() {
            return Arc::clone(&self.reader).read(read, metrics, self).await;
        }
        tokio::task::spawn_blocking(move || {
            Ok(vec![self.batch(&read, &[], Gather::Positions(vec![]))?])
        })
        .await
        .map_err(|e| Error::Internal(format!("chunk decoding task failed: {e}")))?
    }

    /// The projected columns of `read`'s rows, found in `bytes` at `gather`.
    fn batch(&self, read: &ChunkSelection, bytes: &[u8], gather: Gather) -> Result<RecordBatch> {
        let chunk_error = |e: BoxError| self.reader.chunk_error(read, e);
        let wanted = ColumnsWanted {
            element: &self.reader.array.meta.element,
            columns: &self.columns,
            global_attrs: self.global_attrs.as_ref(),
            chunk_error: &chunk_error,
        };
        let mut columns = ChunkColumns::new(wanted, read, bytes, gather);
        if let Some(filter) = &self.filter {
            columns.apply(filter)?;
        }
        let arrays = self
            .columns
            .iter()
            .map(|source| columns.get(*source))
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(columns.rows()));
        RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)
            .map_err(|e| Error::arrow("assembling a chunk's batch", e))
    }
}

impl ChunkSink for ChunkBatches {
    type Out = RecordBatch;

    fn take(
        &self,
        part: &ChunkSelection,
        bytes: Cow<'_, [u8]>,
        gather: Gather,
    ) -> Result<RecordBatch> {
        self.batch(part, &bytes, gather)
    }
}
