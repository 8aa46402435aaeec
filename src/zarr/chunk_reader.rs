//! Reading one chunk into a RecordBatch: fetch its encoded bytes asynchronously, then run the
//! codec chain and the field decoders on a blocking thread so the async workers stay free.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions};
use zarrs::storage::Bytes;

use super::array::ZarrArray;
use super::decode::{check_bounds, decode_field, Gather};
use super::element::{field_offsets, ElementType};
use super::schema::ColumnSource;
use super::selection::ChunkRead;
use crate::error::{Error, Result};

/// Per-partition counters shown by EXPLAIN ANALYZE.
#[derive(Debug, Clone)]
pub struct ChunkMetrics {
    pub chunks_fetched: Count,
    pub chunks_missing: Count,
    pub bytes_read: Count,
    pub decode_time: Time,
}

impl ChunkMetrics {
    pub fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        ChunkMetrics {
            chunks_fetched: MetricBuilder::new(metrics).counter("chunks_fetched", partition),
            chunks_missing: MetricBuilder::new(metrics).counter("chunks_missing", partition),
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
}

impl ChunkReader {
    /// Fetches and decodes one chunk. A chunk absent from the store reads as the fill value.
    pub async fn read(
        self: Arc<Self>,
        read: ChunkRead,
        metrics: ChunkMetrics,
    ) -> Result<RecordBatch> {
        // Nothing to decode when only dimension columns (or none, for count(*)) are wanted.
        let needs_values = self
            .columns
            .iter()
            .any(|c| !matches!(c, ColumnSource::Dimension(_)));
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
        let reader = Arc::clone(&self);
        tokio::task::spawn_blocking(move || {
            let _timer = metrics.decode_time.timer();
            reader.decode(&read, encoded, needs_values)
        })
        .await
        .map_err(|e| Error::Internal(format!("chunk decoding task failed: {e}")))?
    }

    fn chunk_error(&self, read: &ChunkRead, reason: String) -> Error {
        Error::Chunk {
            path: self.array.location.clone(),
            key: self.array.array.chunk_key(&read.indices).to_string(),
            reason,
        }
    }

    fn decode(
        &self,
        read: &ChunkRead,
        encoded: Option<Bytes>,
        needs_values: bool,
    ) -> Result<RecordBatch> {
        let meta = &self.array.meta;
        let element_size = meta.element.size();
        let (bytes, gather): (Cow<[u8]>, Gather) = match encoded {
            Some(encoded) => {
                let shape = read
                    .shape
                    .iter()
                    .map(|&n| {
                        NonZeroU64::new(n)
                            .ok_or_else(|| Error::Internal("empty chunk shape".into()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let array = &self.array.array;
                let decoded = array
                    .codecs()
                    .decode(
                        Cow::Owned(encoded.into()),
                        &shape,
                        array.data_type(),
                        array.fill_value(),
                        &CodecOptions::default(),
                    )
                    .map_err(|e| self.chunk_error(read, e.to_string()))?;
                let raw = decoded
                    .into_fixed()
                    .map_err(|e| self.chunk_error(read, e.to_string()))?;
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
        if needs_values {
            check_bounds(&bytes, &gather, element_size).map_err(|e| self.chunk_error(read, e))?;
        }

        let dims = if self
            .columns
            .iter()
            .any(|c| matches!(c, ColumnSource::Dimension(_)))
        {
            read.dimension_columns()
        } else {
            vec![]
        };
        let struct_fields = match &meta.element {
            ElementType::Struct(fields) if meta.is_struct => Some((fields, field_offsets(fields))),
            _ => None,
        };
        let columns = self
            .columns
            .iter()
            .map(|source| -> Result<ArrayRef> {
                match source {
                    ColumnSource::Dimension(d) => Ok(Arc::clone(&dims[*d])),
                    ColumnSource::Field(i) => {
                        let (fields, offsets) = struct_fields.as_ref().ok_or_else(|| {
                            Error::Internal("field column of a non-struct array".into())
                        })?;
                        let field = &fields[*i];
                        decode_field(&field.ty, &bytes, &gather, offsets[*i], &field.name)
                            .map_err(|e| self.chunk_error(read, e))
                    }
                    ColumnSource::Element => {
                        decode_field(&meta.element, &bytes, &gather, 0, "value")
                            .map_err(|e| self.chunk_error(read, e))
                    }
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(read.rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }
}
