//! Reading one chunk into a RecordBatch: fetch its encoded bytes asynchronously, then run the
//! codec chain and the field decoders on a blocking thread so the async workers stay free.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions};
use arrow::compute::prep_null_mask_filter;
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use zarrs::array::{ArraySubset, ArrayToBytesCodecTraits, CodecOptions};
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::Bytes;

use super::array::ZarrArray;
use super::decode::{check_bounds, decode_field, Gather};
use super::element::{field_offsets, ElementType};
use super::row_filter::RowFilter;
use super::schema::ColumnSource;
use super::selection::ChunkRead;
use super::zstd_prefix::decode_prefix;
use crate::error::{Error, Result};

/// Per-partition counters shown by EXPLAIN ANALYZE.
#[derive(Debug, Clone)]
pub struct ChunkMetrics {
    pub chunks_fetched: Count,
    pub chunks_missing: Count,
    pub chunks_skipped: Count,
    /// Chunks of which only the box holding the selected rows was fetched and decoded.
    pub chunks_read_in_part: Count,
    /// Chunks fetched whole but decompressed only up to their last selected row (zstd).
    pub chunks_decoded_in_part: Count,
    /// Encoded bytes of whole chunks, decoded bytes of chunks read in part.
    pub bytes_read: Count,
    pub decode_time: Time,
}

impl ChunkMetrics {
    pub fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        ChunkMetrics {
            chunks_fetched: MetricBuilder::new(metrics).counter("chunks_fetched", partition),
            chunks_missing: MetricBuilder::new(metrics).counter("chunks_missing", partition),
            chunks_skipped: MetricBuilder::new(metrics).counter("chunks_skipped", partition),
            chunks_decoded_in_part: MetricBuilder::new(metrics)
                .counter("chunks_decoded_in_part", partition),
            chunks_read_in_part: MetricBuilder::new(metrics)
                .counter("chunks_read_in_part", partition),
            bytes_read: MetricBuilder::new(metrics).counter("bytes_read", partition),
            decode_time: MetricBuilder::new(metrics).subset_time("decode_time", partition),
        }
    }
}

/// What to produce from each chunk: the projected columns and their schema.
#[derive(Debug)]
pub struct ChunkReader {
    pub array: Arc<ZarrArray>,
    pub columns: Vec<ColumnSource>,
    pub schema: SchemaRef,
    /// Evaluated per chunk before the other columns are decoded.
    pub filter: Option<Arc<RowFilter>>,
    /// How much of a plain chunk to read at a time ([`PIECE_BYTES`]).
    pub piece_bytes: u64,
}

/// Bytes of a plain chunk read and gathered at a time: small enough that the kernel's copy is
/// still in the core's cache when the fields are gathered from it (BENCHMARKS.md).
pub const PIECE_BYTES: u64 = 1 << 20;

impl ChunkReader {
    /// Fetches and decodes one chunk's selected rows, as one batch or (read in pieces) several.
    /// A chunk absent from the store reads as the fill value.
    pub async fn read(
        self: Arc<Self>,
        read: ChunkRead,
        metrics: ChunkMetrics,
    ) -> Result<Vec<RecordBatch>> {
        // Nothing to decode when only dimension columns (or none, for count(*)) are wanted,
        // by the output and by the row filter.
        let filter_columns = self.filter.iter().flat_map(|f| f.columns.iter());
        let needs_values = self
            .columns
            .iter()
            .chain(filter_columns)
            .any(|c| !matches!(c, ColumnSource::Dimension(_)));
        if needs_values && self.array.partial_reads {
            let part = read.bounding_box();
            if part.is_some() || self.array.plain_chunks {
                let (start, shape) =
                    part.unwrap_or_else(|| (vec![0; read.shape.len()], read.shape.clone()));
                return on_blocking_thread(move || {
                    let _timer = metrics.decode_time.timer();
                    self.read_in_pieces(&read, &start, &shape, &metrics)
                })
                .await;
            }
        }
        let encoded = if needs_values {
            let encoded = self
                .array
                .array
                .async_retrieve_encoded_chunk(&read.indices)
                .await
                .map_err(|e| self.chunk_error(&read, e.to_string()))?;
            match &encoded {
                Some(bytes) => {
                    metrics.chunks_fetched.add(1);
                    metrics.bytes_read.add(bytes.len());
                }
                None => metrics.chunks_missing.add(1),
            }
            encoded
        } else {
            None
        };
        on_blocking_thread(move || {
            let _timer = metrics.decode_time.timer();
            Ok(vec![self.decode(&read, encoded, needs_values, &metrics)?])
        })
        .await
    }

    /// Reads the box of the chunk at `start` of `shape` (the whole chunk, or the part holding
    /// the selected rows) on this thread: for uncompressed chunks only the box's byte ranges
    /// are read, for sharded ones only the inner chunks it touches.
    ///
    /// Plain chunks are read in pieces of about `piece_bytes`, each gathered while the read
    /// has left it in this core's cache; a piece spanning whole trailing dimensions is one run
    /// of the chunk's bytes, read straight into the buffer the fields are gathered from. Their
    /// stored size is checked first, so a truncated chunk is an error even where its missing
    /// bytes lie outside the box.
    fn read_in_pieces(
        &self,
        read: &ChunkRead,
        start: &[u64],
        shape: &[u64],
        metrics: &ChunkMetrics,
    ) -> Result<Vec<RecordBatch>> {
        let element_size = self.array.meta.element.size();
        let array = &self.array.blocking_array;
        let key = array.chunk_key(&read.indices);
        let error = |e: &dyn std::fmt::Display| self.chunk_error(read, e.to_string());
        let plain = self.array.plain_chunks;
        if plain {
            let expected = self.decoded_len(&read.shape);
            match self
                .array
                .blocking_store
                .size_key(&key)
                .map_err(|e| error(&e))?
            {
                None => {
                    metrics.chunks_missing.add(1);
                    return Ok(vec![self.decode(read, None, true, metrics)?]);
                }
                Some(n) if n != expected => {
                    return Err(error(&format!(
                        "uncompressed chunk holds {n} bytes, expected {expected}"
                    )))
                }
                Some(_) => {}
            }
        }
        if shape == read.shape.as_slice() {
            metrics.chunks_fetched.add(1);
        } else {
            metrics.chunks_read_in_part.add(1);
        }
        let max_elements = if plain {
            (self.piece_bytes / element_size.max(1) as u64).max(1)
        } else {
            u64::MAX
        };
        let runs = plain && shape.get(1..) == read.shape.get(1..);
        let decoder = if runs {
            None
        } else {
            Some(
                array
                    .partial_decoder(&read.indices)
                    .map_err(|e| error(&e))?,
            )
        };
        let slice_bytes = read.shape.iter().skip(1).product::<u64>() * element_size as u64;
        let options = CodecOptions::default();
        read.pieces(start, shape, max_elements)
            .into_iter()
            .map(|piece| {
                let piece_start: Vec<u64> = (piece.origin.iter().zip(&read.origin))
                    .map(|(p, o)| p - o)
                    .collect();
                let (fetched, decoded);
                let bytes: &[u8] = match &decoder {
                    None => {
                        let offset = piece_start.first().map_or(0, |&i| i * slice_bytes);
                        let length = self.decoded_len(&piece.shape);
                        let range = ByteRange::FromStart(offset, Some(length));
                        fetched = self
                            .array
                            .blocking_store
                            .get_partial(&key, range)
                            .map_err(|e| error(&e))?
                            .ok_or_else(|| error(&"chunk removed while it was read"))?;
                        &fetched
                    }
                    Some(decoder) => {
                        let ranges: Vec<_> = (piece_start.iter().zip(&piece.shape))
                            .map(|(&s, &n)| s..s + n)
                            .collect();
                        decoded = decoder
                            .partial_decode(&ArraySubset::new_with_ranges(&ranges), &options)
                            .map_err(|e| error(&e))?
                            .into_fixed()
                            .map_err(|e| error(&e))?;
                        &decoded
                    }
                };
                metrics.bytes_read.add(bytes.len());
                let gather = piece.gather(element_size);
                self.batch(&piece, bytes, gather, true)
            })
            .collect()
    }

    /// Bytes of `shape`'s elements, decoded (and stored, for plain chunks).
    fn decoded_len(&self, shape: &[u64]) -> u64 {
        shape.iter().product::<u64>() * self.array.meta.element.size() as u64
    }

    /// The front of a zstd chunk up to its last selected element, when the selection ends
    /// before the chunk does; `None` when the whole chunk must be decompressed.
    fn decode_front(&self, read: &ChunkRead, encoded: &[u8]) -> Result<Option<Vec<u8>>> {
        if !self.array.zstd_chunks {
            return Ok(None);
        }
        let end = read.end_element() as usize * self.array.meta.element.size();
        decode_prefix(encoded, end, self.decoded_len(&read.shape) as usize)
            .map_err(|e| self.chunk_error(read, e))
    }

    /// The whole chunk through zarrs' codec chain.
    fn decode_whole(&self, read: &ChunkRead, encoded: Bytes) -> Result<Cow<'static, [u8]>> {
        let shape = read
            .shape
            .iter()
            .map(|&n| NonZeroU64::new(n).ok_or_else(|| Error::Internal("empty chunk shape".into())))
            .collect::<Result<Vec<_>>>()?;
        let array = &self.array.array;
        array
            .codecs()
            .decode(
                Cow::Owned(encoded.into()),
                &shape,
                array.data_type(),
                array.fill_value(),
                &CodecOptions::default(),
            )
            .map_err(|e| self.chunk_error(read, e.to_string()))?
            .into_fixed()
            .map_err(|e| self.chunk_error(read, e.to_string()))
    }

    fn chunk_error(&self, read: &ChunkRead, reason: String) -> Error {
        Error::Chunk {
            path: self.array.location.clone(),
            key: self.array.array.chunk_key(&read.indices).to_string(),
            reason,
        }
    }

    /// The batch of a chunk fetched whole (`None`: absent from the store).
    fn decode(
        &self,
        read: &ChunkRead,
        encoded: Option<Bytes>,
        needs_values: bool,
        metrics: &ChunkMetrics,
    ) -> Result<RecordBatch> {
        let meta = &self.array.meta;
        let element_size = meta.element.size();
        let (bytes, gather): (Cow<[u8]>, Gather) = match encoded {
            Some(encoded) => {
                let raw = match self.decode_front(read, &encoded)? {
                    Some(front) => {
                        metrics.chunks_decoded_in_part.add(1);
                        Cow::Owned(front)
                    }
                    None => self.decode_whole(read, encoded)?,
                };
                (raw, read.gather(element_size))
            }
            // Absent chunk: every row reads the one fill element.
            None => (
                Cow::Borrowed(meta.fill_value.as_slice()),
                Gather::Strided {
                    start: 0,
                    stride: 0,
                    count: read.rows,
                },
            ),
        };
        self.batch(read, &bytes, gather, needs_values)
    }

    /// The projected columns of `read`'s rows, found in `bytes` at `gather`.
    fn batch(
        &self,
        read: &ChunkRead,
        bytes: &[u8],
        gather: Gather,
        needs_values: bool,
    ) -> Result<RecordBatch> {
        let element_size = self.array.meta.element.size();
        if needs_values {
            check_bounds(bytes, &gather, element_size).map_err(|e| self.chunk_error(read, e))?;
        }
        let mut columns = ChunkColumns {
            reader: self,
            read,
            bytes,
            gather,
            rows: read.rows,
            dims: None,
            decoded: Vec::new(),
        };
        if let Some(filter) = &self.filter {
            columns.apply(filter)?;
        }
        let arrays = self
            .columns
            .iter()
            .map(|source| columns.get(*source))
            .collect::<Result<Vec<_>>>()?;
        let rows = columns.rows;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            arrays,
            &options,
        )?)
    }
}

/// Runs `f` on tokio's blocking pool: codecs and field decoding stay off the async workers.
async fn on_blocking_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("chunk decoding task failed: {e}")))?
}

/// The columns of one chunk's selected rows, decoded on demand and kept for reuse.
struct ChunkColumns<'a> {
    reader: &'a ChunkReader,
    read: &'a ChunkRead,
    bytes: &'a [u8],
    gather: Gather,
    rows: usize,
    /// Dimension index columns, computed once when first needed.
    dims: Option<Vec<ArrayRef>>,
    /// Columns already decoded (for the row filter), reused when also projected.
    decoded: Vec<(ColumnSource, ArrayRef)>,
}

impl ChunkColumns<'_> {
    fn get(&mut self, source: ColumnSource) -> Result<ArrayRef> {
        if let Some((_, array)) = self.decoded.iter().find(|(s, _)| *s == source) {
            return Ok(Arc::clone(array));
        }
        let meta = &self.reader.array.meta;
        let error = |e| self.reader.chunk_error(self.read, e);
        match source {
            ColumnSource::Dimension(d) => {
                let dims = self
                    .dims
                    .get_or_insert_with(|| self.read.dimension_columns());
                Ok(Arc::clone(&dims[d]))
            }
            ColumnSource::Field(i) => {
                let ElementType::Struct(fields) = &meta.element else {
                    return Err(Error::Internal("field column of a non-struct array".into()));
                };
                let offset = field_offsets(fields)[i];
                decode_field(
                    &fields[i].ty,
                    self.bytes,
                    &self.gather,
                    offset,
                    &fields[i].name,
                )
                .map_err(error)
            }
            ColumnSource::Element => {
                decode_field(&meta.element, self.bytes, &self.gather, 0, "value").map_err(error)
            }
        }
    }

    /// Decodes the filter's columns, evaluates it, and narrows the rows to the matches.
    fn apply(&mut self, filter: &RowFilter) -> Result<()> {
        // Dimension columns are computed for all rows, so they must exist before the rows
        // are narrowed.
        let wants_dims = self
            .reader
            .columns
            .iter()
            .any(|c| matches!(c, ColumnSource::Dimension(_)));
        if wants_dims && self.dims.is_none() {
            self.dims = Some(self.read.dimension_columns());
        }
        let inputs = filter
            .columns
            .iter()
            .map(|source| self.get(*source))
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        let batch = RecordBatch::try_new_with_options(
            Arc::clone(&filter.schema),
            inputs.clone(),
            &options,
        )?;
        let mask = filter
            .predicate
            .evaluate(&batch)
            .and_then(|v| v.into_array(self.rows))
            .map_err(|e| Error::Internal(format!("row filter {}: {e}", filter.display)))?;
        let mask = mask.as_boolean_opt().ok_or_else(|| {
            Error::Internal(format!("row filter {} is not boolean", filter.display))
        })?;
        // NULL keeps no row.
        let mask = if mask.null_count() > 0 {
            prep_null_mask_filter(mask)
        } else {
            mask.clone()
        };
        // Filter columns the output also wants are kept, narrowed to the matches; the byte
        // positions of the matches are only needed to decode the other projected fields.
        let projected = |c: &ColumnSource| {
            !matches!(c, ColumnSource::Dimension(_)) && self.reader.columns.contains(c)
        };
        let decodes_more = self
            .reader
            .columns
            .iter()
            .any(|c| projected(c) && !filter.columns.contains(c));
        if decodes_more {
            self.gather = self.gather.filter(&mask);
        } else {
            self.gather = Gather::Positions(Vec::new());
        }
        self.rows = mask.true_count();
        if let Some(dims) = &mut self.dims {
            for d in dims.iter_mut() {
                *d = arrow::compute::filter(d, &mask)?;
            }
        }
        self.decoded = filter
            .columns
            .iter()
            .zip(inputs)
            .filter(|(source, _)| projected(source))
            .map(|(source, array)| Ok((*source, arrow::compute::filter(&array, &mask)?)))
            .collect::<Result<_>>()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::compute::concat_batches;
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

    use super::*;
    use crate::zarr::schema::table_columns;
    use crate::zarr::selection::{plan_chunk_reads, Selection};

    async fn read_all(location: &str, piece_bytes: u64) -> RecordBatch {
        let array = Arc::new(ZarrArray::open(location).await.unwrap());
        assert!(array.partial_reads && array.plain_chunks, "{location}");
        let (schema, columns) = table_columns(&array.meta).unwrap();
        let reads = plan_chunk_reads(
            &array.meta.shape,
            &array.meta.chunk_shape,
            &Selection::all(&array.meta.shape),
        );
        let reader = Arc::new(ChunkReader {
            array,
            columns,
            schema: Arc::clone(&schema),
            filter: None,
            piece_bytes,
        });
        let metrics = ChunkMetrics::new(&ExecutionPlanMetricsSet::new(), 0);
        let mut batches = Vec::new();
        for read in reads {
            batches.extend(
                Arc::clone(&reader)
                    .read(read, metrics.clone())
                    .await
                    .unwrap(),
            );
        }
        concat_batches(&schema, &batches).unwrap()
    }

    #[tokio::test]
    async fn plain_chunks_read_in_pieces_give_the_rows_of_whole_reads() {
        // zarr-python fixtures: whole reads are checked against numpy by the integration
        // tests; pieces of at most one element cut every chunk into one piece per slice of its
        // first dimension (2 x 3 chunks of 5 x 7 grids: one per row of 3 elements).
        for (name, rows) in [
            ("zarr_v3/codec_uncompressed.zarr", 35),
            ("zarr_v3/codec_uncompressed_big_endian.zarr", 35),
            ("zarr_v2/codec_none.zarr", 35),
            ("zarr_v3/all_types.zarr", 6),
        ] {
            let location = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
            let whole = read_all(&location, u64::MAX).await;
            let pieces = read_all(&location, 1).await;
            assert_eq!(whole.num_rows(), rows, "{name}");
            assert_eq!(whole, pieces, "{name}");
        }
        // Compressed and sharded chunks are not plain: their stored size says nothing.
        for name in [
            "codec_sharded.zarr",
            "codec_transpose.zarr",
            "struct_1d.zarr",
        ] {
            let location = format!("{}/tests/data/zarr_v3/{name}", env!("CARGO_MANIFEST_DIR"));
            assert!(
                !ZarrArray::open(&location).await.unwrap().plain_chunks,
                "{name}"
            );
        }
    }
}
