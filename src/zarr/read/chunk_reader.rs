//! Reading one chunk's selected cells by the array's [`ReadStrategy`] and store: bytes are
//! fetched asynchronously (or read on the decoding thread, for local pieces), then the codec
//! chain runs on a blocking thread so the async workers stay free, and a [`ChunkSink`] makes
//! its output of the decoded element bytes there: record batches for an array table
//! (`array/chunk_batches.rs`), a variable's box for a dataset (`read/box_reader.rs`).

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use zarrs::array::{ArraySubset, ArrayToBytesCodecTraits, CodecOptions};
use zarrs::storage::byte_range::ByteRange;
use zarrs::storage::{Bytes, ReadableStorageTraits, StoreKey};

use crate::error::{BoxError, Error, Result};
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::gather::Gather;
use crate::zarr::read::array::{ReadStrategy, ZarrArray};
use crate::zarr::read::metrics::ChunkMetrics;
use crate::zarr::read::shard_index::ShardIndex;
use crate::zarr::read::zstd_frame::decode_prefix;
use crate::zarr::store::{LocalStore, RangesRead, ZarrStore};

/// A chunk's shape as zarrs' codecs take it.
fn chunk_shape(shape: &[u64]) -> Result<Vec<NonZeroU64>> {
    (shape.iter())
        .map(|&n| NonZeroU64::new(n).ok_or_else(|| Error::Internal("empty chunk shape".into())))
        .collect()
}

/// What a read makes of the decoded bytes it reaches: called on a blocking thread, once per
/// piece of the chunk, pieces in C order of the selection.
pub(crate) trait ChunkSink: Send + Sync + 'static {
    type Out: Send + 'static;

    /// `part`'s selected elements, at `gather` in `bytes` (checked to lie inside them). The
    /// bytes come owned when the read made them (a decoded chunk), so a sink that keeps them
    /// whole need not copy them.
    fn take(
        &self,
        part: &ChunkSelection,
        bytes: Cow<'_, [u8]>,
        gather: Gather,
    ) -> Result<Self::Out>;
}

/// Reads the chunks of one array.
#[derive(Debug)]
pub(crate) struct ChunkReader {
    pub array: Arc<ZarrArray>,
    /// How much of a plain local chunk to read at a time.
    pub piece_bytes: usize,
}

impl ChunkReader {
    /// Reads one chunk's selected cells into `sink`, as one piece or (read in pieces) several.
    /// A chunk absent from the store reads as the fill value.
    pub(crate) async fn read<S: ChunkSink>(
        self: Arc<Self>,
        read: ChunkSelection,
        metrics: ChunkMetrics,
        sink: Arc<S>,
    ) -> Result<Vec<S::Out>> {
        if !self.array.store.is_remote() {
            return on_blocking_thread(move || self.read_local(&read, &metrics, &*sink)).await;
        }
        // The box of the chunk holding every selected element (`None`: the whole chunk).
        let part = read.bounding_box();
        match self.array.strategy {
            ReadStrategy::Plain if !read.shape.is_empty() => {
                return self.read_plain_remote(read, metrics, sink).await
            }
            ReadStrategy::PartialDecoder if part.is_some() => {
                let (start, shape) = part.unwrap_or_else(|| whole(&read));
                return self
                    .read_through_decoder(read, start, shape, metrics, sink)
                    .await;
            }
            _ => {}
        }
        let key = self.array.chunk_key(&read.indices);
        let encoded = self
            .array
            .store
            .get_chunk(&key, self.stored_limit(&read)?)
            .await
            .map_err(|e| self.chunk_error(&read, e))?;
        self.count_fetch(&encoded, &metrics);
        on_blocking_thread(move || {
            let _timer = metrics.decode_time.timer();
            Ok(vec![self.decode(&read, encoded, &metrics, &*sink)?])
        })
        .await
    }

    /// [`ChunkReader::read`] of a chunk in a local store, on this thread (a blocking one): the
    /// files are read where they are decoded.
    pub(crate) fn read_local<S: ChunkSink>(
        &self,
        read: &ChunkSelection,
        metrics: &ChunkMetrics,
        sink: &S,
    ) -> Result<Vec<S::Out>> {
        let _timer = metrics.decode_time.timer();
        let part = read.bounding_box();
        match self.array.strategy {
            ReadStrategy::Plain if read.shape.is_empty() => {}
            ReadStrategy::Plain => {
                let (start, shape) = part.unwrap_or_else(|| whole(read));
                return self.read_local_in_pieces(read, &start, &shape, metrics, sink);
            }
            ReadStrategy::PartialDecoder if part.is_some() => {
                let (start, shape) = part.unwrap_or_else(|| whole(read));
                return self.read_local_in_pieces(read, &start, &shape, metrics, sink);
            }
            _ => {}
        }
        let Some(store) = self.array.store.blocking() else {
            return Err(Error::Internal("local read of a remote array".into()));
        };
        let error = |e: &dyn std::fmt::Display| self.chunk_error(read, e.to_string().into());
        let key = StoreKey::new(self.array.chunk_key(&read.indices)).map_err(|e| error(&e))?;
        let encoded = ZarrStore::get_local_chunk(&store, &key, self.stored_limit(read)?)
            .map_err(|e| self.chunk_error(read, e))?;
        self.count_fetch(&encoded, metrics);
        Ok(vec![self.decode(read, encoded, metrics, sink)?])
    }

    /// Counts one request for a whole chunk and what it brought.
    fn count_fetch(&self, encoded: &Option<Bytes>, metrics: &ChunkMetrics) {
        metrics.requests.add(1);
        match encoded {
            Some(bytes) => {
                metrics.chunks_fetched.add(1);
                metrics.bytes_read.add(bytes.len());
            }
            None => metrics.chunks_missing.add(1),
        }
    }

    /// A plain chunk in an object store: one ranged request for the rows of the first
    /// dimension that hold the selection (with every trailing dimension whole, a contiguous
    /// run of the stored bytes), which also reports the stored size, checked against the
    /// chunk's decoded size.
    async fn read_plain_remote<S: ChunkSink>(
        self: Arc<Self>,
        read: ChunkSelection,
        metrics: ChunkMetrics,
        sink: Arc<S>,
    ) -> Result<Vec<S::Out>> {
        let (start, shape) = read.bounding_box().unwrap_or_else(|| whole(&read));
        let key = self.array.chunk_key(&read.indices);
        if let Some(boxed) = self.read_box_remote(&read, &key, &start, &shape).await? {
            return self
                .take_run(read, boxed, start, shape, metrics, sink)
                .await;
        }
        let slice_bytes = self.decoded_len(&read.shape[1..])?;
        let first = start[0];
        let rows = shape[0];
        let mut run_start = vec![0; read.shape.len()];
        run_start[0] = first;
        let mut run_shape = read.shape.clone();
        run_shape[0] = rows;
        let range = first * slice_bytes..(first + rows) * slice_bytes;
        let fetched = self
            .array
            .store
            .get_range(&key, range)
            .await
            .map_err(|e| self.chunk_error(&read, e))?;
        self.take_run(read, fetched, run_start, run_shape, metrics, sink)
            .await
    }

    /// The box at `start` of `shape` of an uncompressed chunk, read as its runs along the
    /// last dimension in one call, when the store reads many ranges at about the cost of one
    /// (`StoreBackend::get_ranges`) and the box is a small part of the rows it spans;
    /// `Ok(None)` otherwise (the caller reads the rows whole). What is read is the box's bytes
    /// in C order, with the chunk's size.
    async fn read_box_remote(
        &self,
        read: &ChunkSelection,
        key: &str,
        start: &[u64],
        shape: &[u64],
    ) -> Result<Option<Option<(Bytes, u64)>>> {
        /// Runs a box may be read as (a few requests' worth of ranges).
        const MAX_RUNS: u64 = 4096;
        let n = read.shape.len();
        let element = self.array.meta.element.size() as u64;
        let box_bytes = self.decoded_len(shape)?;
        let rows_bytes = self.decoded_len(&read.shape[1..])?.saturating_mul(shape[0]);
        let runs: u64 = shape[..n.saturating_sub(1)].iter().product();
        if n < 2 || box_bytes.saturating_mul(4) > rows_bytes || runs > MAX_RUNS {
            return Ok(None);
        }
        // Each run: the box's extent along the last dimension, at one index of the others.
        let run_bytes = shape[n - 1] * element;
        let mut ranges = Vec::with_capacity(runs as usize);
        let mut at = start[..n - 1].to_vec();
        for _ in 0..runs {
            let offset = (at.iter().zip(&read.shape)).fold(0u64, |o, (i, d)| o * d + i)
                * read.shape[n - 1]
                + start[n - 1];
            ranges.push(offset * element..offset * element + run_bytes);
            // The next index of the box's first n - 1 dimensions, in C order.
            for d in (0..n - 1).rev() {
                at[d] += 1;
                if at[d] < start[d] + shape[d] {
                    break;
                }
                at[d] = start[d];
            }
        }
        let got = (self.array.store)
            .get_ranges(key, ranges)
            .await
            .map_err(|e| self.chunk_error(read, e))?;
        Ok(match got {
            RangesRead::Unsupported => None,
            RangesRead::Absent => Some(None),
            RangesRead::Read(parts, stored) => {
                let mut bytes = Vec::with_capacity(box_bytes as usize);
                for part in parts {
                    bytes.extend_from_slice(&part);
                }
                Some(Some((bytes.into(), stored)))
            }
        })
    }

    /// Decodes `fetched`, the rows (or box) at `run_start` of `run_shape` of an uncompressed
    /// chunk and the chunk's stored size, into `sink`; an absent chunk reads as the fill value.
    async fn take_run<S: ChunkSink>(
        self: Arc<Self>,
        read: ChunkSelection,
        fetched: Option<(Bytes, u64)>,
        run_start: Vec<u64>,
        run_shape: Vec<u64>,
        metrics: ChunkMetrics,
        sink: Arc<S>,
    ) -> Result<Vec<S::Out>> {
        metrics.requests.add(1);
        let Some((bytes, stored)) = fetched else {
            metrics.chunks_missing.add(1);
            return on_blocking_thread(move || {
                Ok(vec![self.decode(&read, None, &metrics, &*sink)?])
            })
            .await;
        };
        let expected = self.decoded_len(&read.shape)?;
        if stored != expected {
            return Err(self.chunk_error(
                &read,
                format!("uncompressed chunk holds {stored} bytes, expected {expected}").into(),
            ));
        }
        if run_shape == read.shape {
            metrics.chunks_fetched.add(1);
        } else {
            metrics.chunks_read_in_part.add(1);
        }
        metrics.bytes_read.add(bytes.len());
        on_blocking_thread(move || {
            let _timer = metrics.decode_time.timer();
            let run = read.within(&run_start, &run_shape);
            let gather = run.gather(self.array.meta.element.size());
            Ok(vec![self.take(
                &*sink,
                &run,
                Cow::Borrowed(&bytes),
                gather,
            )?])
        })
        .await
    }

    /// A chunk in an object store read in part through zarrs' async partial decoder (sharded
    /// arrays: the shard index, then only the inner chunks the box touches). zarrs decodes
    /// inner chunks where the decoder is polled, so it is driven on a blocking thread: the
    /// requests wait there, the decompression stays off the async workers.
    async fn read_through_decoder<S: ChunkSink>(
        self: Arc<Self>,
        read: ChunkSelection,
        start: Vec<u64>,
        shape: Vec<u64>,
        metrics: ChunkMetrics,
        sink: Arc<S>,
    ) -> Result<Vec<S::Out>> {
        if let Some(index) = &self.array.shard_index {
            self.check_remote_shard_index(&read, index, &metrics)
                .await?;
        }
        let runtime = tokio::runtime::Handle::current();
        on_blocking_thread(move || {
            let _timer = metrics.decode_time.timer();
            let error = |e: &dyn std::fmt::Display| self.chunk_error(&read, e.to_string().into());
            let ranges: Vec<_> = start.iter().zip(&shape).map(|(&s, &n)| s..s + n).collect();
            let decoded = runtime.block_on(async {
                let decoder = self
                    .array
                    .zarrs
                    .async_partial_decoder(&read.indices)
                    .await
                    .map_err(|e| error(&e))?;
                decoder
                    .partial_decode(
                        &ArraySubset::new_with_ranges(&ranges),
                        &CodecOptions::default(),
                    )
                    .await
                    .map_err(|e| error(&e))?
                    .into_fixed()
                    .map(std::borrow::Cow::into_owned)
                    .map_err(|e| error(&e))
            })?;
            metrics.requests.add(1);
            metrics.chunks_read_in_part.add(1);
            metrics.bytes_read.add(decoded.len());
            let part = read.within(&start, &shape);
            let gather = part.gather(self.array.meta.element.size());
            Ok(vec![self.take(
                &*sink,
                &part,
                Cow::Owned(decoded),
                gather,
            )?])
        })
        .await
    }

    /// Reads the box of a local chunk at `start` of `shape` (the whole chunk, or the part
    /// holding the selected rows) on this thread: for uncompressed chunks only the box's byte
    /// ranges are read, for sharded ones only the inner chunks it touches.
    ///
    /// Plain chunks are read in pieces of about `piece_bytes`, each gathered while the read
    /// has left it in this core's cache; a piece spanning whole trailing dimensions is one run
    /// of the chunk's bytes, read straight into the buffer the fields are gathered from. Their
    /// stored size is checked first, so a truncated chunk is an error even where its missing
    /// bytes lie outside the box.
    fn read_local_in_pieces<S: ChunkSink>(
        &self,
        read: &ChunkSelection,
        start: &[u64],
        shape: &[u64],
        metrics: &ChunkMetrics,
        sink: &S,
    ) -> Result<Vec<S::Out>> {
        let element_size = self.array.meta.element.size();
        let (Some(array), Some(store)) = (&self.array.blocking_zarrs, self.array.store.blocking())
        else {
            return Err(Error::Internal("local read of a remote array".into()));
        };
        let key = array.chunk_key(&read.indices);
        let error = |e: &dyn std::fmt::Display| self.chunk_error(read, e.to_string().into());
        let plain = self.array.strategy == ReadStrategy::Plain;
        if plain {
            let expected = self.decoded_len(&read.shape)?;
            metrics.requests.add(1);
            match store.size_key(&key).map_err(|e| error(&e))? {
                None => {
                    metrics.chunks_missing.add(1);
                    return Ok(vec![self.decode(read, None, metrics, sink)?]);
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
            (self.piece_bytes / element_size.max(1)).max(1) as u64
        } else {
            u64::MAX
        };
        let runs = plain && shape.get(1..) == read.shape.get(1..);
        let decoder = if runs {
            None
        } else {
            if let Some(index) = &self.array.shard_index {
                self.check_local_shard_index(read, index, &store, &key)?;
            }
            Some(
                array
                    .partial_decoder(&read.indices)
                    .map_err(|e| error(&e))?,
            )
        };
        let slice_bytes = self.decoded_len(read.shape.get(1..).unwrap_or(&[]))?;
        let options = CodecOptions::default();
        read.pieces(start, shape, max_elements)
            .into_iter()
            .map(|piece| {
                let piece_start: Vec<u64> = (piece.origin.iter().zip(&read.origin))
                    .map(|(p, o)| p - o)
                    .collect();
                let fetched;
                let bytes: Cow<[u8]> = match &decoder {
                    None => {
                        let offset = piece_start.first().map_or(0, |&i| i * slice_bytes);
                        let length = self.decoded_len(&piece.shape)?;
                        let range = ByteRange::FromStart(offset, Some(length));
                        metrics.requests.add(1);
                        fetched = store
                            .get_partial(&key, range)
                            .map_err(|e| error(&e))?
                            .ok_or_else(|| error(&"chunk removed while it was read"))?;
                        Cow::Borrowed(&fetched)
                    }
                    Some(decoder) => {
                        let ranges: Vec<_> = (piece_start.iter().zip(&piece.shape))
                            .map(|(&s, &n)| s..s + n)
                            .collect();
                        decoder
                            .partial_decode(&ArraySubset::new_with_ranges(&ranges), &options)
                            .map_err(|e| error(&e))?
                            .into_fixed()
                            .map_err(|e| error(&e))?
                    }
                };
                metrics.bytes_read.add(bytes.len());
                let gather = piece.gather(element_size);
                self.take(sink, &piece, bytes, gather)
            })
            .collect()
    }

    /// Checks the index of a remote shard before zarrs' partial decoder reads it: one request
    /// for the index, which also says the shard's size (zarrs then requests the index again;
    /// a missing shard has none: it reads as the fill value).
    async fn check_remote_shard_index(
        &self,
        read: &ChunkSelection,
        index: &ShardIndex,
        metrics: &ChunkMetrics,
    ) -> Result<()> {
        let error = |e: BoxError| self.chunk_error(read, e);
        let key = self.array.chunk_key(&read.indices);
        let store = &self.array.store;
        let len = index.len() as u64;
        metrics.requests.add(1);
        let fetched = match index.at_end() {
            true => store.get_suffix(&key, len).await,
            false => store.get_range(&key, 0..len).await,
        };
        let Some((bytes, size)) = fetched.map_err(error)? else {
            return Ok(());
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let bytes = if bytes.len() == index.len() {
            &bytes[..]
        } else {
            &[][..]
        };
        index
            .check_index(bytes, size)
            .map_err(|e| error(Box::new(e)))
    }

    /// Checks the index of a local shard before zarrs' partial decoder reads it (a missing
    /// shard has none: it reads as the fill value).
    fn check_local_shard_index(
        &self,
        read: &ChunkSelection,
        index: &ShardIndex,
        store: &LocalStore,
        key: &StoreKey,
    ) -> Result<()> {
        let error = |e: BoxError| self.chunk_error(read, e);
        let Some(len) = store.size_key(key).map_err(|e| error(Box::new(e)))? else {
            return Ok(());
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len < index.len() {
            return index.check_index(&[], len).map_err(|e| error(Box::new(e)));
        }
        let range = match index.at_end() {
            true => ByteRange::Suffix(index.len() as u64),
            false => ByteRange::FromStart(0, Some(index.len() as u64)),
        };
        let bytes = store
            .get_partial(key, range)
            .map_err(|e| error(Box::new(e)))?
            .unwrap_or_default();
        index
            .check_index(&bytes, len)
            .map_err(|e| error(Box::new(e)))
    }

    /// The most bytes a stored chunk of `read` may hold: its decoded size, plus what any codec
    /// adds (zstd, gzip and blosc add well under 1% on incompressible bytes; a shard, 16 bytes
    /// an inner chunk), with room to spare.
    fn stored_limit(&self, read: &ChunkSelection) -> Result<u64> {
        let decoded = self.decoded_len(&read.shape)?;
        let shard = self.array.shard_index.map_or(0, |index| index.overhead());
        Ok(decoded
            .saturating_add(decoded / 8)
            .saturating_add(1 << 20)
            .saturating_add(shard))
    }

    /// Bytes of `shape`'s elements, decoded (and stored, for plain chunks).
    fn decoded_len(&self, shape: &[u64]) -> Result<u64> {
        let element_size = self.array.meta.element.size() as u64;
        shape
            .iter()
            .try_fold(element_size, |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                Error::Internal(format!("chunk of shape {shape:?} overflows 64-bit sizes"))
            })
    }

    /// The front of a zstd chunk up to its last selected element, when the selection ends
    /// before the chunk does; `None` when the whole chunk must be decompressed.
    fn decode_front(&self, read: &ChunkSelection, encoded: &[u8]) -> Result<Option<Vec<u8>>> {
        if self.array.strategy != ReadStrategy::ZstdPrefix {
            return Ok(None);
        }
        let end = read.end_element() as usize * self.array.meta.element.size();
        decode_prefix(encoded, end, self.decoded_len(&read.shape)? as usize)
            .map_err(|e| self.chunk_error(read, Box::new(e)))
    }

    /// The whole chunk through zarrs' codec chain (whose decompressors make no more than the
    /// chunk holds: `bounded_codecs.rs`), reading the encoded bytes in place; a shard's index
    /// is checked first.
    fn decode_whole<'a>(&self, read: &ChunkSelection, encoded: &'a [u8]) -> Result<Cow<'a, [u8]>> {
        if let Some(index) = &self.array.shard_index {
            index
                .check_shard(encoded)
                .map_err(|e| self.chunk_error(read, Box::new(e)))?;
        }
        let array = &self.array.zarrs;
        array
            .codecs()
            .decode(
                Cow::Borrowed(encoded),
                &chunk_shape(&read.shape)?,
                array.data_type(),
                array.fill_value(),
                &CodecOptions::default(),
            )
            .map_err(|e| self.chunk_error(read, Box::new(e)))?
            .into_fixed()
            .map_err(|e| self.chunk_error(read, Box::new(e)))
    }

    pub(crate) fn chunk_error(&self, read: &ChunkSelection, source: BoxError) -> Error {
        Error::Chunk {
            path: self.array.location.clone(),
            key: self.array.chunk_key(&read.indices),
            source,
        }
    }

    /// The output of a chunk fetched whole (`None`: absent from the store).
    fn decode<S: ChunkSink>(
        &self,
        read: &ChunkSelection,
        encoded: Option<Bytes>,
        metrics: &ChunkMetrics,
        sink: &S,
    ) -> Result<S::Out> {
        let meta = &self.array.meta;
        let element_size = meta.element.size();
        let (bytes, gather): (Cow<[u8]>, Gather) = match &encoded {
            Some(encoded) => {
                let raw = match self.decode_front(read, encoded)? {
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
        self.take(sink, read, bytes, gather)
    }

    /// `sink`'s output of `part`'s elements at `gather` in `bytes`, once they are checked to
    /// lie inside the bytes (a corrupt chunk may decode to fewer).
    fn take<S: ChunkSink>(
        &self,
        sink: &S,
        part: &ChunkSelection,
        bytes: Cow<'_, [u8]>,
        gather: Gather,
    ) -> Result<S::Out> {
        gather
            .check_bounds(&bytes, self.array.meta.element.size())
            .map_err(|e| self.chunk_error(part, e.into()))?;
        sink.take(part, bytes, gather)
    }
}

/// The box of a whole chunk, as (start, shape).
fn whole(read: &ChunkSelection) -> (Vec<u64>, Vec<u64>) {
    (vec![0; read.shape.len()], read.shape.clone())
}

/// Runs `f` on tokio's blocking pool: codecs and field decoding stay off the async workers.
async fn on_blocking_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("chunk decoding task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use arrow::array::RecordBatch;
    use arrow::compute::concat_batches;
    use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
    use futures::StreamExt;

    use super::*;
    use crate::storage::StorageOptions;
    use crate::zarr::array::chunk_batches::ChunkBatches;
    use crate::zarr::metadata::schema::table_columns;
    use crate::zarr::plan::chunk_plan::list_chunk_reads;
    use crate::zarr::plan::selection::Selection;

    async fn read_all(location: &str, piece_bytes: usize) -> RecordBatch {
        let array = Arc::new(
            ZarrArray::open(location, &StorageOptions::new())
                .await
                .unwrap(),
        );
        assert_eq!(array.strategy, ReadStrategy::Plain, "{location}");
        let (schema, columns) = table_columns(&array.meta, None).unwrap();
        let reads = list_chunk_reads(
            &array.meta.shape,
            &array.meta.chunk_shape,
            &Selection::all(&array.meta.shape),
        );
        let reader = Arc::new(ChunkBatches {
            reader: Arc::new(ChunkReader { array, piece_bytes }),
            columns,
            schema: Arc::clone(&schema),
            filter: None,
            global_attrs: None,
            batch_rows: 8192,
            derived: Vec::new(),
        });
        let metrics = ChunkMetrics::new(&ExecutionPlanMetricsSet::new(), 0);
        let mut batches = Vec::new();
        for read in reads {
            let read = Arc::clone(&reader).read(read, metrics.clone(), None);
            batches.extend(
                read.collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .map(Result::unwrap),
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
            let whole = read_all(&location, usize::MAX).await;
            let pieces = read_all(&location, 1).await;
            assert_eq!(whole.num_rows(), rows, "{name}");
            assert_eq!(whole, pieces, "{name}");
        }
    }

    #[tokio::test]
    async fn the_read_strategy_follows_the_codecs() {
        for (name, strategy) in [
            ("codec_uncompressed.zarr", ReadStrategy::Plain),
            ("codec_sharded.zarr", ReadStrategy::PartialDecoder),
            ("codec_transpose.zarr", ReadStrategy::CodecChain),
            ("struct_1d.zarr", ReadStrategy::ZstdPrefix),
        ] {
            let location = format!("{}/tests/data/zarr_v3/{name}", env!("CARGO_MANIFEST_DIR"));
            let array = ZarrArray::open(&location, &StorageOptions::new())
                .await
                .unwrap();
            assert_eq!(array.strategy, strategy, "{name}");
        }
    }
}
