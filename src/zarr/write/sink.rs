//! [`ZarrSink`]: a query's rows written as a Zarr v3 array of the `struct` data type, one
//! element per row, chunk by chunk as the batches arrive. A chunk is packed on the task that
//! receives its rows, then compressed and written on a blocking thread while the next one
//! fills; only the chunks in flight are held (reserved from the session's memory pool), so a
//! result of any size is written in bounded memory. The store becomes visible at its location
//! only when complete (`target.rs`).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::common::Result as DfResult;
use datafusion::datasource::sink::DataSink;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::layout::Layout;
use super::options::{Compression, ZarrWriteOptions, GZIP_LEVEL, ZSTD_LEVEL};
use super::target::{Commit, ObjectWriter, Target};
use crate::error::{Error, Result};

/// The name of the array's dimension, which ndfusion reads the element index back as: the
/// name it gives an unnamed dimension, so that a table's rows copied without it read back the
/// same.
const DIMENSION: &str = "dim_0";

/// The name the array's dimension takes when a column is named [`DIMENSION`] (the rows of a
/// table ndfusion read, `COPY (SELECT * FROM t WHERE ...)`): that column's values are kept as
/// a field, whatever they are, and the dimension is named as pandas' `reset_index` names an
/// index, `index` (`index_1`, `index_2`, ... when a column has that name too).
const RENAMED_DIMENSION: &str = "index";

/// The dimension name of an array whose fields are `schema`'s columns: one no column has.
fn dimension_name(schema: &Schema) -> String {
    let taken = |name: &str| schema.fields().iter().any(|f| f.name() == name);
    if !taken(DIMENSION) {
        return DIMENSION.to_string();
    }
    // At most one name per column is taken: the search ends within the schema's width.
    (0..=schema.fields().len())
        .map(|i| match i {
            0 => RENAMED_DIMENSION.to_string(),
            i => format!("{RENAMED_DIMENSION}_{i}"),
        })
        .find(|name| !taken(name))
        .unwrap_or_else(|| RENAMED_DIMENSION.to_string())
}

/// Bytes of elements a chunk holds by default: zarr-python's and xarray's guidance is chunks
/// of a few MiB, large enough that a request is worth it, small enough to read a part.
const TARGET_CHUNK_BYTES: usize = 2 << 20;

/// The largest chunk a write makes: compressors (blosc, numcodecs) refuse buffers past 2 GiB.
const MAX_CHUNK_BYTES: usize = (1 << 31) - 1;

/// Chunks compressed and written while the next one fills, when the pool has room.
const CHUNKS_IN_FLIGHT: usize = 2;

/// Writes a query's rows as a struct array at one location.
#[derive(Debug)]
pub(crate) struct ZarrSink {
    location: String,
    options: ZarrWriteOptions,
    schema: SchemaRef,
    layout: Layout,
    /// The array's dimension: [`DIMENSION`], unless a column has that name.
    dimension: String,
    chunk_rows: usize,
    metrics: ExecutionPlanMetricsSet,
}

impl ZarrSink {
    /// A sink for rows of `schema`: an error naming the column a struct field cannot hold,
    /// or the `chunks` option at fault.
    pub(crate) fn new(
        location: &str,
        options: ZarrWriteOptions,
        schema: SchemaRef,
    ) -> Result<Self> {
        options.zarr_version()?;
        let layout = Layout::of(&schema).map_err(|e| Error::Write {
            location: location.to_string(),
            reason: e.to_string(),
        })?;
        let dimension = dimension_name(&schema);
        let chunk_rows = match options.chunk_length(&[&dimension], &dimension)? {
            Some(n) => n,
            None => (TARGET_CHUNK_BYTES / layout.size()).max(1),
        };
        if chunk_rows.saturating_mul(layout.size()) > MAX_CHUNK_BYTES {
            return Err(Error::InvalidOption {
                option: "chunks".into(),
                reason: format!(
                    "{chunk_rows} elements of {} bytes make a chunk larger than {MAX_CHUNK_BYTES} bytes",
                    layout.size()
                ),
            });
        }
        Ok(ZarrSink {
            location: location.to_string(),
            options,
            schema,
            layout,
            dimension,
            chunk_rows,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// `zarr.json` of the array of `rows` elements: the commit.
    fn metadata(&self, rows: u64) -> Commit {
        let codecs = codecs(self.options.compression(), false);
        let doc = json!({
            "zarr_format": 3,
            "node_type": "array",
            "shape": [rows],
            "data_type": self.layout.data_type(),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [self.chunk_rows]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": self.layout.fill_value(),
            "codecs": codecs,
            "attributes": {},
            "dimension_names": [self.dimension],
        });
        Commit::new(
            "zarr.json",
            serde_json::to_vec_pretty(&doc).unwrap_or_default(),
        )
    }

    /// Chunks in flight the pool can hold beside the one filling (each holds its bytes and,
    /// briefly, its compressed copy); `reservation` is grown to match. An error when the pool
    /// cannot hold one chunk.
    fn reserve(&self, reservation: &mut MemoryReservation) -> Result<usize> {
        let chunk = self.chunk_rows * self.layout.size();
        for in_flight in (0..=CHUNKS_IN_FLIGHT).rev() {
            if reservation.try_grow(chunk * (1 + 2 * in_flight)).is_ok() {
                return Ok(in_flight.max(1));
            }
        }
        Err(Error::Write {
            location: self.location.clone(),
            reason: format!(
                "the memory pool cannot hold one chunk of {chunk} bytes ({} elements of {} \
                 bytes); write smaller chunks (OPTIONS ('chunks' '{}=N')) or raise \
                 the memory limit",
                self.chunk_rows,
                self.layout.size(),
                self.dimension
            ),
        })
    }

    /// Writes the rows, then puts the store in place (or, on an error, removes what was
    /// written: `Target::finish`).
    async fn write(
        &self,
        data: SendableRecordBatchStream,
        ctx: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let target = Target::create(
            &self.location,
            self.options.storage(),
            self.options.overwrite(),
        )
        .await?;
        let mut reservation =
            MemoryConsumer::new(format!("ZarrSink {}", self.location)).register(ctx.memory_pool());
        let mut writes = JoinSet::new();
        let outcome = (self
            .write_chunks(data, &target, &mut reservation, &mut writes)
            .await)
            .map(|rows| (rows, self.metadata(rows)));
        target.finish(outcome, &mut writes).await
    }

    /// Packs the rows into chunks and starts each chunk's write as it fills; the rows
    /// written once every write has finished.
    async fn write_chunks(
        &self,
        mut data: SendableRecordBatchStream,
        target: &Target,
        reservation: &mut MemoryReservation,
        writes: &mut JoinSet<Result<usize>>,
    ) -> DfResult<u64> {
        let writer = target.writer();
        let in_flight = self.reserve(reservation)?;
        let size = self.layout.size();
        let chunk_bytes = self.chunk_rows * size;
        let compression = self.options.compression();
        let chunks_written = MetricBuilder::new(&self.metrics).global_counter("chunks_written");
        let bytes_written = MetricBuilder::new(&self.metrics).global_counter("bytes_written");
        let mut chunk = vec![0u8; chunk_bytes];
        let mut filled = 0; // elements in `chunk`
        let mut rows: u64 = 0;
        let mut index: u64 = 0;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            let mut at = 0;
            while at < batch.num_rows() {
                let take = (self.chunk_rows - filled).min(batch.num_rows() - at);
                let columns: Vec<ArrayRef> =
                    batch.columns().iter().map(|c| c.slice(at, take)).collect();
                let out = &mut chunk[filled * size..(filled + take) * size];
                self.layout
                    .encode(&columns, out, rows)
                    .map_err(|e| Error::Write {
                        location: self.location.clone(),
                        reason: e.to_string(),
                    })?;
                (filled, at, rows) = (filled + take, at + take, rows + take as u64);
                if filled == self.chunk_rows {
                    while writes.len() >= in_flight {
                        let written = joined(writes.join_next().await)?;
                        chunks_written.add(1);
                        bytes_written.add(written);
                    }
                    let full = std::mem::replace(&mut chunk, vec![0u8; chunk_bytes]);
                    writes.spawn(write_chunk(
                        writer.clone(),
                        format!("c/{index}"),
                        full,
                        compression,
                    ));
                    (filled, index) = (0, index + 1);
                }
            }
        }
        if filled > 0 {
            // The last chunk is stored whole, as every chunk of a regular grid is; the
            // elements past the array's end are zeros, never read.
            writes.spawn(write_chunk(
                writer.clone(),
                format!("c/{index}"),
                chunk,
                compression,
            ));
        }
        while let Some(done) = writes.join_next().await {
            let written = joined(Some(done))?;
            chunks_written.add(1);
            bytes_written.add(written);
        }
        Ok(rows)
    }
}

/// The Zarr 3 codecs of an array's chunks: its values' bytes (little-endian, or `vlen-utf8`
/// for strings), then the compressor.
pub(super) fn codecs(compression: Compression, vlen_utf8: bool) -> Value {
    let serializer = match vlen_utf8 {
        true => json!({"name": "vlen-utf8", "configuration": {}}),
        false => json!({"name": "bytes", "configuration": {"endian": "little"}}),
    };
    let mut codecs = vec![serializer];
    match compression {
        Compression::Zstd => codecs.push(
            json!({"name": "zstd", "configuration": {"level": ZSTD_LEVEL, "checksum": false}}),
        ),
        Compression::Gzip => {
            codecs.push(json!({"name": "gzip", "configuration": {"level": GZIP_LEVEL}}))
        }
        Compression::None => {}
    }
    Value::Array(codecs)
}

/// The bytes a finished chunk write wrote, or its error.
pub(super) fn joined(done: Option<Result<Result<usize>, tokio::task::JoinError>>) -> Result<usize> {
    match done {
        Some(Ok(written)) => written,
        Some(Err(e)) => Err(Error::Internal(format!("a chunk write stopped: {e}"))),
        None => Ok(0),
    }
}

/// Compresses a chunk and writes it at `key` (`c/0`, `temp/c/0/1`); the bytes written.
pub(super) async fn write_chunk(
    writer: ObjectWriter,
    key: String,
    chunk: Vec<u8>,
    compression: Compression,
) -> Result<usize> {
    let local = writer.is_local();
    let (key, writer, stored) = tokio::task::spawn_blocking(move || {
        let stored = compress(chunk, compression)?;
        if local {
            writer.put_local(&key, &stored)?;
        }
        Ok::<_, Error>((key, writer, stored))
    })
    .await
    .map_err(|e| Error::Internal(format!("compressing a chunk: {e}")))??;
    let written = stored.len();
    if !local {
        writer.put_remote(&key, stored).await?;
    }
    Ok(written)
}

fn compress(chunk: Vec<u8>, compression: Compression) -> Result<Vec<u8>> {
    let failed = |e: std::io::Error| Error::Internal(format!("compressing a chunk: {e}"));
    match compression {
        Compression::None => Ok(chunk),
        Compression::Zstd => zstd::bulk::compress(&chunk, ZSTD_LEVEL).map_err(failed),
        Compression::Gzip => {
            use std::io::Write;
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(chunk.len() / 4),
                flate2::Compression::new(GZIP_LEVEL),
            );
            encoder.write_all(&chunk).map_err(failed)?;
            encoder.finish().map_err(failed)
        }
    }
}

impl DisplayAs for ZarrSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ZarrSink: location={}, struct array of {} fields, {} elements a chunk, options: {}",
            self.location,
            self.schema.fields().len(),
            self.chunk_rows,
            self.options
        )
    }
}

#[async_trait]
impl DataSink for ZarrSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Writes every row, then puts the store at its location: called once per statement.
    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        self.write(data, context).await
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field};

    use super::*;

    #[test]
    fn the_dimension_takes_a_name_no_column_has() {
        let schema = |names: &[&str]| {
            Schema::new(
                (names.iter())
                    .map(|n| Field::new(*n, DataType::Int64, false))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(dimension_name(&schema(&["id", "value"])), "dim_0");
        assert_eq!(dimension_name(&schema(&["dim_0", "value"])), "index");
        assert_eq!(
            dimension_name(&schema(&["index", "dim_0", "index_1"])),
            "index_2"
        );
    }
}
