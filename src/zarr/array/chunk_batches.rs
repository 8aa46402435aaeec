//! [`ChunkBatches`]: an array table's chunk reads as streams of record batches of the
//! projected columns, the row filter applied per batch before the other columns are decoded.
//! A chunk's batches are made one at a time (`rows_made` rows each) on the thread that decoded
//! the chunk, and handed to the scan as it takes them (`scan/batch_channel.rs`): a chunk of
//! 10^8 rows (or a missing one, read as its fill value) holds a few batches and their
//! dimension columns, not 10^8 rows of them.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::{BoxError, Error, Result};
use crate::scan::{held_bytes, rows_made, spawn_batches, BatchSender, FoldTarget, UnitBatches};
use crate::zarr::decode::columns::{ChunkColumns, ColumnsWanted};
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::schema::ColumnSource;
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::derived_column::DerivedColumn;
use crate::zarr::plan::gather::Gather;
use crate::zarr::plan::row_filter::RowFilter;
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::chunk_reader::{ChunkReader, ChunkSink};
use crate::zarr::read::grid_scan::ReadRuns;
use crate::zarr::read::metrics::ChunkMetrics;
use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};

/// What to produce from each chunk: the projected columns and their schema.
#[derive(Debug)]
pub(crate) struct ChunkBatches {
    pub reader: Arc<ChunkReader>,
    pub columns: Vec<ColumnSource>,
    pub schema: SchemaRef,
    /// Evaluated per batch before the other columns are decoded.
    pub filter: Option<Arc<RowFilter>>,
    /// The `__global_attrs__` value, when the table has the column.
    pub global_attrs: Option<GlobalAttrs>,
    /// Rows per batch (before the row filter).
    pub batch_rows: usize,
    /// Columns after `columns`: expressions of a dimension evaluated per index, or of the
    /// global attributes (constants).
    pub derived: Vec<DerivedColumn>,
}

impl ChunkBatches {
    /// The same reads of the columns `keep` (positions in this output), then `derived`.
    pub(crate) fn with_derived(&self, derived: Vec<DerivedColumn>, keep: &[usize]) -> Self {
        let fields = (keep.iter().map(|&i| Arc::clone(&self.schema.fields()[i])))
            .chain(derived.iter().map(|d| Arc::clone(d.field())));
        ChunkBatches {
            reader: Arc::clone(&self.reader),
            columns: keep.iter().map(|&i| self.columns[i]).collect(),
            schema: Arc::new(Schema::new(fields.collect::<Vec<_>>())),
            filter: self.filter.clone(),
            global_attrs: self.global_attrs.clone(),
            batch_rows: self.batch_rows,
            derived,
        }
    }

    /// Whether element bytes are needed at all: not when only dimension columns (or none, for
    /// `count(*)`) are wanted, by the output and by the row filter.
    fn needs_values(&self) -> bool {
        let filter_columns = self.filter.iter().flat_map(|f| f.columns.iter());
        self.columns
            .iter()
            .chain(filter_columns)
            .any(ColumnSource::reads_elements)
    }

    /// The decoded bytes of one chunk, when its element bytes are read at all.
    pub(crate) fn chunk_read_bytes(&self) -> u64 {
        match self.needs_values() {
            true => self.reader.array.meta.chunk_bytes(),
            false => 0,
        }
    }

    /// What one chunk's read may hold at once when the scan selects `selection`: the fetched
    /// and the decoded chunk (when element bytes are needed at all; a missing chunk holds
    /// none, but that is known only once it is fetched), the positions of its selected
    /// elements and their C-order numbers (8 bytes each, when they are not one run in every
    /// chunk), and its batches not yet taken by the scan (`held_bytes`).
    pub(crate) fn unit_bytes(&self, selection: &Selection) -> u64 {
        let meta = &self.reader.array.meta;
        let elements = (meta.chunk_shape.iter()).fold(1u64, |n, &d| n.saturating_mul(d));
        let stored = self.chunk_read_bytes().saturating_mul(2);
        let positions = match selection.runs_in_chunks(&meta.shape, &meta.chunk_shape) {
            true => 0,
            false => elements.saturating_mul(16),
        };
        // A row's columns: 8 bytes each for the output, its element for the decoded fields.
        let row_bytes = ((self.columns.len() + self.derived.len()) as u64)
            .saturating_mul(8)
            .saturating_add(meta.element.size() as u64);
        stored
            .saturating_add(positions)
            .saturating_add(held_bytes(elements.saturating_mul(row_bytes)))
    }

    /// The batches of one chunk's selected rows, made as the stream is read; or with `fold`,
    /// its cells handed to the fold (the stream then yields none).
    pub(crate) fn read(
        self: Arc<Self>,
        read: ChunkSelection,
        metrics: ChunkMetrics,
        fold: Option<FoldTarget>,
    ) -> UnitBatches {
        spawn_batches(|tx| async move {
            let sink = Arc::new(BatchSink {
                batches: Arc::clone(&self),
                tx,
                fold,
            });
            if self.needs_values() {
                return Arc::clone(&self.reader)
                    .read(read, metrics, sink)
                    .await
                    .map(drop);
            }
            tokio::task::spawn_blocking(move || {
                sink.take(&read, Cow::Borrowed(&[]), Gather::Positions(vec![]))
            })
            .await
            .unwrap_or_else(|e| Err(Error::Internal(format!("chunk batch task failed: {e}"))))
        })
    }

    /// The batches of `read`'s rows, found in `bytes` at `gather`, each handed to `emit`; or
    /// with `fold`, each batch of the fold's columns (unfiltered, the row filter's verdict
    /// beside it) handed to the fold where its cells lie.
    fn batches(
        &self,
        read: &ChunkSelection,
        bytes: &[u8],
        gather: &Gather,
        fold: Option<&FoldTarget>,
        mut emit: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let chunk_error = |e: BoxError| self.reader.chunk_error(read, e);
        // Where the rows lie, when a dimension column is wanted or a fold places them
        // (several boxes: 8 bytes a row).
        let filter_columns = self.filter.iter().flat_map(|f| f.columns.iter());
        let wants_dims = fold.is_some()
            || self.derived.iter().any(|d| d.axis().is_some())
            || (self.columns.iter().chain(filter_columns))
                .any(|c| matches!(c, ColumnSource::Dimension(_)));
        let index = wants_dims.then(|| read.row_index());
        let batch_rows = rows_made(self.batch_rows);
        for start in (read.skip..read.rows).step_by(batch_rows) {
            let rows = start..(start + batch_rows).min(read.rows);
            let wanted = ColumnsWanted {
                element: &self.reader.array.meta.element,
                columns: &self.columns,
                global_attrs: self.global_attrs.as_ref(),
                chunk_error: &chunk_error,
            };
            let gather = gather.slice(rows.clone());
            let mut columns =
                ChunkColumns::new(wanted, read, index.as_ref(), rows.clone(), bytes, gather);
            if let (Some(target), Some(index)) = (fold, &index) {
                let keep = (self.filter.as_ref())
                    .map(|filter| columns.mask(filter))
                    .transpose()?;
                let arrays = (target.columns.iter())
                    .map(|&i| match self.columns.get(i) {
                        Some(source) => columns.get(*source),
                        None => (self.derived.get(i - self.columns.len()))
                            .ok_or_else(|| Error::Internal(format!("no output column {i}")))?
                            .values(rows.len(), |axis, values| columns.axis_values(axis, values)),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
                let batch =
                    RecordBatch::try_new_with_options(Arc::clone(&target.schema), arrays, &options)
                        .map_err(|e| Error::arrow("assembling a chunk's cells", e))?;
                let runs = ReadRuns { read, index, rows };
                target.fold.fold(&runs, &batch, keep.as_ref())?;
                continue;
            }
            if let Some(filter) = &self.filter {
                // Dimension columns exist before the rows are narrowed (so the filter narrows
                // them too) when a derived column is made from them.
                for axis in self.derived.iter().filter_map(DerivedColumn::axis) {
                    columns.get(ColumnSource::Dimension(axis))?;
                }
                columns.apply(filter)?;
                if columns.rows() == 0 {
                    continue;
                }
            }
            let mut arrays = (self.columns.iter())
                .map(|source| columns.get(*source))
                .collect::<Result<Vec<_>>>()?;
            for d in &self.derived {
                let rows = columns.rows();
                arrays.push(d.values(rows, |axis, values| columns.axis_values(axis, values))?);
            }
            let options = RecordBatchOptions::new().with_row_count(Some(columns.rows()));
            let batch =
                RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)
                    .map_err(|e| Error::arrow("assembling a chunk's batch", e))?;
            emit(batch)?;
        }
        Ok(())
    }
}

/// One chunk read's sink: its batches go to the scan as they are made (or its cells to the
/// fold).
struct BatchSink {
    batches: Arc<ChunkBatches>,
    tx: Arc<BatchSender>,
    fold: Option<FoldTarget>,
}

impl ChunkSink for BatchSink {
    type Out = ();

    fn take(&self, part: &ChunkSelection, bytes: Cow<'_, [u8]>, gather: Gather) -> Result<()> {
        let fold = self.fold.as_ref();
        (self.batches).batches(part, &bytes, &gather, fold, |batch| self.tx.send(batch))
    }
}
