//! A dataset variable: a member array, the grid axes it spans, and how a box of it becomes
//! Arrow columns (the fields of a struct variable, or its values CF-decoded).
//!
//! A box of fixed-size elements is read by the array's chunk reader (`read/box_reader.rs`:
//! the chunks it touches, under the array's read strategy, missing ones as the fill value),
//! concurrently and off the async workers; variable-length strings by zarrs' array-subset
//! retrieval. The columns are then gathered from the box's elements, broadcast over the axes
//! the variable lacks, on the blocking thread that assembles the block.
//!
//! A `|S1` variable whose last dimension only such variables use (netCDF's character arrays)
//! is read as xarray's `concat_characters` reads it: one byte string per cell of the other
//! dimensions (`Binary`, or `Utf8` with an `_Encoding` attribute), the character dimension gone.

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, UInt64Array};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use zarrs::array::{Array as ZarrsArray, ArrayBytes, ArraySubset};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

use crate::error::{Error, Result};
use crate::zarr::decode::cf::{CfDecoder, CfOptions};
use crate::zarr::decode::fields::decode_field;
use crate::zarr::metadata::element::{field_offsets, ByteOrder, ElementType, ScalarKind};
use crate::zarr::metadata::node::{Member, MemberArray};
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::gather::Gather;
use crate::zarr::read::array::ZarrArray;
use crate::zarr::read::bounded_codecs::with_bounded_codecs;
use crate::zarr::read::box_reader::{read_box, read_box_local, BoxElements};
use crate::zarr::read::chunk_reader::ChunkReader;
use crate::zarr::read::metrics::ChunkMetrics;
use crate::zarr::store::ZarrStore;

/// Where a variable's values come from.
pub(crate) enum Source {
    /// Fixed-size elements, decoded by ndfusion; `cf` for non-struct variables. `element` is
    /// the stored element, or the joined characters of a character array.
    Fixed {
        reader: Arc<ChunkReader>,
        element: ElementType,
        cf: Option<CfDecoder>,
    },
    /// Variable-length strings, decoded by zarrs.
    Strings(Box<StringSource>, Option<CfDecoder>),
}

/// zarrs' views of a string array: async, and blocking for local stores. With `item`, the
/// elements are lists of numbers (`ndfusion.vlen`), each its items little-endian.
pub(crate) struct StringSource {
    zarrs: ZarrsArray<dyn AsyncReadableStorageTraits>,
    blocking: Option<ZarrsArray<dyn ReadableStorageTraits>>,
    item: Option<DataType>,
}

/// One column a variable contributes.
#[derive(Debug, Clone)]
pub(crate) struct VariableColumn {
    pub name: String,
    pub data_type: DataType,
    /// The top-level struct field, or `None` for the whole element.
    pub field: Option<usize>,
}

pub(crate) struct Variable {
    pub name: String,
    /// The location of the variable, for messages (`<group>/<name>`).
    pub location: String,
    pub dimension_names: Vec<String>,
    /// The grid axis of each of the variable's dimensions, in the variable's order.
    pub axes: Vec<usize>,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// The length of the character dimension a character array joins (the stored array's
    /// last dimension, which `shape` and `dimension_names` leave out).
    pub joined_chars: Option<u64>,
    pub source: Source,
    pub columns: Vec<VariableColumn>,
}

impl std::fmt::Debug for Variable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variable")
            .field("name", &self.name)
            .field("dimensions", &self.dimension_names)
            .field("shape", &self.shape)
            .finish()
    }
}

impl Variable {
    /// Whether column `c` may hold a NULL: where its decoding masks missing values or
    /// decodes times, a string's, or a datetime element's (NaT).
    pub(crate) fn may_be_null(&self, c: usize) -> bool {
        match &self.source {
            Source::Fixed { element, cf, .. } => {
                let leaf = match (self.columns[c].field, element) {
                    (Some(i), ElementType::Struct(fields)) => &fields[i].ty,
                    _ => element,
                };
                leaf.nullable() || cf.as_ref().is_some_and(CfDecoder::may_make_null)
            }
            Source::Strings(..) => true,
        }
    }

    /// Opens member `member` of the group at `location`; its axes are set later. With
    /// `join_chars`, a `|S1` member's last dimension is joined into byte strings.
    pub(crate) fn open(
        store: &ZarrStore,
        location: &str,
        member: Member,
        cf: CfOptions,
        join_chars: bool,
        piece_bytes: usize,
    ) -> Result<Self> {
        let var_location = format!("{}/{}", location.trim_end_matches('/'), member.name);
        let invalid = |reason: String| Error::InvalidMetadata {
            path: member.path.clone(),
            reason,
        };
        let mut dimension_names = member.array.dimension_names().to_vec();
        let mut shape = member.array.shape().to_vec();
        let mut chunk_shape = member.array.chunk_shape().to_vec();
        let mut joined_chars = None;
        let (source, columns) = match member.array {
            MemberArray::Fixed(meta) => {
                let columns: Vec<VariableColumn>;
                let mut cf_decoder = None;
                let mut element = meta.element.clone();
                if join_chars && is_char(&element) {
                    if let Some(n) = shape.pop() {
                        dimension_names.pop();
                        chunk_shape.pop();
                        joined_chars = Some(n);
                        let chars = usize::try_from(n)
                            .ok()
                            .filter(|&n| n <= MAX_JOINED_CHARS)
                            .ok_or_else(|| {
                                invalid(format!(
                                    "a character dimension of {n} characters (at most \
                                     {MAX_JOINED_CHARS} are joined into one string)"
                                ))
                            })?;
                        element = ElementType::Scalar {
                            kind: ScalarKind::NullTerminatedBytes(chars),
                            order: ByteOrder::Little,
                        };
                    }
                }
                match &element {
                    ElementType::Struct(fields) if meta.is_struct && !meta.numpy_dtype => {
                        columns = fields
                            .iter()
                            .enumerate()
                            .map(|(i, f)| VariableColumn {
                                name: f.name.clone(),
                                data_type: f.ty.arrow_type(),
                                field: Some(i),
                            })
                            .collect();
                    }
                    element => {
                        let stored = element.arrow_type();
                        cf_decoder = CfDecoder::new(&member.name, &stored, &meta.attributes, cf)
                            .map_err(|e| invalid(e.to_string()))?;
                        let mut data_type = cf_decoder
                            .as_ref()
                            .map_or(stored, |d| d.output_type().clone());
                        if data_type == DataType::Binary && encoded(&meta.attributes) {
                            data_type = DataType::Utf8;
                        }
                        columns = vec![VariableColumn {
                            name: member.name.clone(),
                            data_type,
                            field: None,
                        }];
                    }
                }
                let array = ZarrArray::new(store.clone(), &member.name, &var_location, meta)?;
                let reader = ChunkReader {
                    array: Arc::new(array),
                    piece_bytes,
                };
                (
                    Source::Fixed {
                        reader: Arc::new(reader),
                        element,
                        cf: cf_decoder,
                    },
                    columns,
                )
            }
            MemberArray::Strings(meta) => {
                let node = format!("/{}", member.name);
                let cap = store.limits().string_chunk_bytes;
                let (zarrs, blocking) = with_bounded_codecs(cap, || {
                    let zarrs = ZarrsArray::new_with_metadata(
                        store.zarrs_storage(),
                        &node,
                        meta.zarrs_metadata.clone(),
                    )
                    .map_err(|e| invalid(e.to_string()))?;
                    let blocking = match store.blocking() {
                        Some(fs) => Some(
                            ZarrsArray::new_with_metadata(
                                fs as Arc<dyn ReadableStorageTraits>,
                                &node,
                                meta.zarrs_metadata.clone(),
                            )
                            .map_err(|e| invalid(e.to_string()))?,
                        ),
                        None => None,
                    };
                    Ok::<_, Error>((zarrs, blocking))
                })?;
                // Lists are not CF-decoded (xarray leaves vlen values as they are).
                let (data_type, cf_decoder) = match &meta.item {
                    Some(item) => (DataType::new_list(item.clone(), false), None),
                    None => (
                        DataType::Utf8,
                        CfDecoder::new(&member.name, &DataType::Utf8, &meta.attributes, cf)
                            .map_err(|e| invalid(e.to_string()))?,
                    ),
                };
                let columns = vec![VariableColumn {
                    name: member.name.clone(),
                    data_type,
                    field: None,
                }];
                let item = meta.item.clone();
                let source = StringSource {
                    zarrs,
                    blocking,
                    item,
                };
                (Source::Strings(Box::new(source), cf_decoder), columns)
            }
        };
        Ok(Variable {
            name: member.name,
            location: var_location,
            dimension_names,
            axes: vec![],
            shape,
            chunk_shape,
            joined_chars,
            source,
            columns,
        })
    }

    /// Reads the whole variable (a dimension coordinate) as its first column.
    pub(crate) async fn read_all(self: &Arc<Self>, metrics: &ChunkMetrics) -> Result<ArrayRef> {
        let start = vec![0; self.shape.len()];
        let values = self.read_box(&start, &self.shape, metrics).await?;
        let n: u64 = self.shape.iter().product();
        let gather = Gather::Strided {
            start: 0,
            stride: self.element_size(),
            count: n as usize,
        };
        self.column(&values, &gather, 0)
    }

    /// This variable's values under `read`, a box of the grid over which this variable's box
    /// is `read`'s projection.
    pub(crate) async fn read_under(
        self: &Arc<Self>,
        read: &ChunkSelection,
        metrics: &ChunkMetrics,
    ) -> Result<BoxValues> {
        let (start, shape) = self.box_under(read);
        self.read_box(&start, &shape, metrics).await
    }

    /// [`Variable::read_under`] from a local store, on this thread (a blocking one).
    pub(crate) fn read_under_local(
        &self,
        read: &ChunkSelection,
        metrics: &ChunkMetrics,
    ) -> Result<BoxValues> {
        let (start, shape) = self.box_under(read);
        self.read_box_local(&start, &shape, metrics)
    }

    fn box_under(&self, read: &ChunkSelection) -> (Vec<u64>, Vec<u64>) {
        let start = self.axes.iter().map(|&a| read.origin[a]).collect();
        let shape = self.axes.iter().map(|&a| read.shape[a]).collect();
        (start, shape)
    }

    /// Where the cells `read` selects lie in the values [`Variable::read_under`] read, in
    /// their order.
    pub(crate) fn gather_under(&self, read: &ChunkSelection) -> Gather {
        read.project_gather(&self.axes, self.element_size())
    }

    /// The columns `wanted` (indices into `columns`) of the cells at `gather` in `values`.
    /// Blocking: it decodes.
    pub(crate) fn columns_at(
        &self,
        values: &BoxValues,
        gather: &Gather,
        wanted: &[usize],
    ) -> Result<Vec<ArrayRef>> {
        wanted
            .iter()
            .map(|&c| self.column(values, gather, c))
            .collect()
    }

    fn element_size(&self) -> usize {
        match &self.source {
            Source::Fixed { element, .. } => element.size(),
            // Strings are gathered by index.
            Source::Strings(..) => 1,
        }
    }

    /// The bytes one cell takes once decoded (strings counted at 16).
    pub(crate) fn cell_bytes(&self) -> u64 {
        match &self.source {
            Source::Fixed { element, .. } => element.size() as u64,
            Source::Strings(..) => 16,
        }
    }

    /// The box `start` of `shape` in the variable's own dimension order.
    async fn read_box(
        self: &Arc<Self>,
        start: &[u64],
        shape: &[u64],
        metrics: &ChunkMetrics,
    ) -> Result<BoxValues> {
        let local = match &self.source {
            Source::Fixed { reader, .. } => !reader.array.store.is_remote(),
            Source::Strings(strings, _) => strings.blocking.is_some(),
        };
        if local {
            let (var, start, shape, metrics) = (
                Arc::clone(self),
                start.to_vec(),
                shape.to_vec(),
                metrics.clone(),
            );
            return tokio::task::spawn_blocking(move || {
                var.read_box_local(&start, &shape, &metrics)
            })
            .await
            .map_err(|e| Error::Internal(format!("variable reading task failed: {e}")))?;
        }
        let (start, shape) = self.stored_box(start, shape);
        match &self.source {
            Source::Fixed { reader, .. } => Ok(BoxValues::Fixed(
                read_box(reader, &start, &shape, metrics).await?,
            )),
            Source::Strings(strings, _) => {
                let bytes = strings
                    .zarrs
                    .async_retrieve_array_subset(&subset(&start, &shape))
                    .await
                    .map_err(|e| self.box_error(&start, &shape, Box::new(e)))?;
                self.strings(bytes, &start, &shape)
            }
        }
    }

    /// [`Variable::read_box`] from a local store, on this thread.
    fn read_box_local(
        &self,
        start: &[u64],
        shape: &[u64],
        metrics: &ChunkMetrics,
    ) -> Result<BoxValues> {
        let (start, shape) = self.stored_box(start, shape);
        match &self.source {
            Source::Fixed { reader, .. } => Ok(BoxValues::Fixed(read_box_local(
                reader, &start, &shape, metrics,
            )?)),
            Source::Strings(strings, _) => {
                let blocking = strings.blocking.as_ref().ok_or_else(|| {
                    Error::Internal(format!(
                        "{}: local strings without a local store",
                        self.location
                    ))
                })?;
                let bytes = blocking
                    .retrieve_array_subset(&subset(&start, &shape))
                    .map_err(|e| self.box_error(&start, &shape, Box::new(e)))?;
                self.strings(bytes, &start, &shape)
            }
        }
    }

    /// The box of the stored array: a character array's box spans its whole character
    /// dimension, so each cell's characters lie side by side, one joined element.
    fn stored_box(&self, start: &[u64], shape: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let (mut start, mut shape) = (start.to_vec(), shape.to_vec());
        if let Some(n) = self.joined_chars {
            start.push(0);
            shape.push(n);
        }
        (start, shape)
    }

    /// Variable-length strings (or lists) zarrs decoded, as a string (or list) array.
    fn strings(
        &self,
        bytes: ArrayBytes<'static>,
        start: &[u64],
        shape: &[u64],
    ) -> Result<BoxValues> {
        let variable = bytes
            .into_variable()
            .map_err(|e| self.box_error(start, shape, Box::new(e)))?;
        if let Source::Strings(strings, _) = &self.source {
            if let Some(item) = &strings.item {
                let lists = lists(item, variable.offsets(), variable.bytes())
                    .map_err(|e| self.box_error(start, shape, e.into()))?;
                return Ok(BoxValues::Strings(lists));
            }
        }
        let offsets: Vec<i32> = variable
            .offsets()
            .iter()
            .map(|&o| i32::try_from(o))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                self.box_error(start, shape, "strings of more than 2 GiB in one box".into())
            })?;
        let strings = StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from(variable.bytes().to_vec()),
            None,
        )
        .map_err(|e| self.box_error(start, shape, Box::new(e)))?;
        Ok(BoxValues::Strings(Arc::new(strings)))
    }

    fn column(&self, values: &BoxValues, gather: &Gather, c: usize) -> Result<ArrayRef> {
        let column = &self.columns[c];
        let decode_error = |e: &dyn std::fmt::Display| Error::InvalidMetadata {
            path: self.location.clone(),
            reason: e.to_string(),
        };
        match (values, &self.source) {
            (BoxValues::Fixed(elements), Source::Fixed { element, cf, .. }) => {
                let size = element.size();
                // A uniform box (a missing chunk) is its one element, at every cell.
                let repeated;
                let (bytes, gather) = match elements {
                    BoxElements::Packed(bytes) => (bytes, gather),
                    BoxElements::Uniform(one) => {
                        repeated = Gather::Strided {
                            start: 0,
                            stride: 0,
                            count: gather.len(),
                        };
                        (one, &repeated)
                    }
                };
                gather
                    .check_bounds(bytes, size)
                    .map_err(|e| Error::Internal(format!("{}: {e}", self.location)))?;
                let raw = match (column.field, element) {
                    (Some(i), ElementType::Struct(fields)) => {
                        let offset = field_offsets(fields)[i];
                        decode_field(&fields[i].ty, bytes, gather, offset, &fields[i].name)
                    }
                    _ => decode_field(element, bytes, gather, 0, &self.name),
                }
                .map_err(|e| decode_error(&e))?;
                let decoded = match cf {
                    Some(cf) => cf.decode(&raw).map_err(|e| decode_error(&e))?,
                    None => raw,
                };
                // `_Encoding`: the bytes are text (xarray's EncodedStringCoder).
                if column.data_type == DataType::Utf8 && decoded.data_type() == &DataType::Binary {
                    return arrow::compute::cast(&decoded, &DataType::Utf8)
                        .map_err(|e| decode_error(&format!("the bytes are not UTF-8 text: {e}")));
                }
                Ok(decoded)
            }
            (BoxValues::Strings(strings), Source::Strings(_, cf)) => {
                let indices: UInt64Array = match gather {
                    Gather::Strided {
                        start,
                        stride,
                        count,
                    } => (0..*count).map(|i| (start + i * stride) as u64).collect(),
                    Gather::Positions(p) => p.iter().map(|&i| i as u64).collect(),
                };
                let values = arrow::compute::take(strings.as_ref(), &indices, None)
                    .map_err(|e| Error::arrow(format!("gathering '{}'", self.name), e))?;
                match cf {
                    Some(cf) => cf.decode(&values).map_err(|e| decode_error(&e)),
                    None => Ok(values),
                }
            }
            _ => Err(Error::Internal("variable values of the wrong kind".into())),
        }
    }

    /// A failed read of a box, naming the chunks it touches.
    fn box_error(&self, start: &[u64], shape: &[u64], source: crate::error::BoxError) -> Error {
        let chunk_shape = match (&self.source, self.joined_chars) {
            (Source::Fixed { reader, .. }, Some(_)) => reader.array.meta.chunk_shape.clone(),
            _ => self.chunk_shape.clone(),
        };
        let chunks: Vec<std::ops::Range<u64>> = start
            .iter()
            .zip(shape)
            .zip(&chunk_shape)
            .map(|((&s, &n), &c)| s / c..(s + n.max(1)).div_ceil(c))
            .collect();
        let key = |indices: &[u64]| match &self.source {
            Source::Fixed { reader, .. } => reader.array.chunk_key(indices),
            Source::Strings(strings, _) => strings.zarrs.chunk_key(indices).to_string(),
        };
        let count: u64 = chunks.iter().map(|r| r.end - r.start).product();
        let first: Vec<u64> = chunks.iter().map(|r| r.start).collect();
        let last: Vec<u64> = chunks.iter().map(|r| r.end.saturating_sub(1)).collect();
        let key = if count <= 1 {
            key(&first)
        } else {
            format!("{} .. {} ({count} chunks)", key(&first), key(&last))
        };
        Error::Chunk {
            path: self.location.clone(),
            key,
            source,
        }
    }
}

/// Lists of `item` numbers from variable-length elements (`offsets` into `bytes`, each
/// element its items little-endian): one copy of the items, whose bytes must be whole items.
fn lists(
    item: &DataType,
    offsets: &[usize],
    bytes: &[u8],
) -> std::result::Result<ArrayRef, String> {
    let width = item
        .primitive_width()
        .ok_or_else(|| format!("list items of type {item} are not numbers"))?;
    let items: Vec<i32> = (offsets.iter())
        .map(|&o| {
            (o % width == 0)
                .then(|| i32::try_from(o / width).ok())
                .flatten()
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            format!("a list's bytes are not whole {width}-byte items, or more than 2^31 items")
        })?;
    let end = offsets.last().copied().unwrap_or(0);
    let values = bytes.get(..end).ok_or("list offsets past the bytes")?;
    let values = arrow::array::ArrayData::builder(item.clone())
        .len(end / width)
        .add_buffer(Buffer::from(values))
        .align_buffers(true)
        .build()
        .map_err(|e| e.to_string())?;
    let field = Arc::new(arrow::datatypes::Field::new_list_field(item.clone(), false));
    let offsets = OffsetBuffer::new(ScalarBuffer::from(items));
    let lists =
        arrow::array::ListArray::try_new(field, offsets, arrow::array::make_array(values), None)
            .map_err(|e| e.to_string())?;
    Ok(Arc::new(lists))
}

/// Character dimensions longer than this are not joined (an input may claim any length).
const MAX_JOINED_CHARS: usize = 1 << 20;

/// Whether an element is one byte of a netCDF character array (`|S1`).
pub(crate) fn is_char(element: &ElementType) -> bool {
    matches!(
        element,
        ElementType::Scalar {
            kind: ScalarKind::NullTerminatedBytes(1),
            ..
        }
    )
}

/// Whether bytes carry an `_Encoding` attribute (xarray then decodes them to text).
fn encoded(attributes: &serde_json::Map<String, serde_json::Value>) -> bool {
    attributes
        .get("_Encoding")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "utf-8" | "utf8" | "ascii"))
}

/// A box of a variable's values in C order.
pub(crate) enum BoxValues {
    Fixed(BoxElements),
    Strings(ArrayRef),
}

/// The zarrs subset of the box at `start` of `shape`.
fn subset(start: &[u64], shape: &[u64]) -> ArraySubset {
    let ranges: Vec<_> = start.iter().zip(shape).map(|(&s, &n)| s..s + n).collect();
    ArraySubset::new_with_ranges(&ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int16Type;

    #[test]
    fn lists_take_whole_items_and_refuse_parts_of_one() {
        // [1, -2], [], [3]: int16 little-endian.
        let bytes = [1, 0, 0xfe, 0xff, 3, 0];
        let read = lists(&DataType::Int16, &[0, 4, 4, 6], &bytes).unwrap();
        let read = read.as_list::<i32>();
        assert_eq!(read.len(), 3);
        let first = read.value(0);
        assert_eq!(first.as_primitive::<Int16Type>().values(), &[1, -2]);
        assert!(read.value(1).is_empty());
        // A list of 3 bytes holds no whole int16s (a crafted store, or a damaged file).
        let err = lists(&DataType::Int16, &[0, 3], &bytes).unwrap_err();
        assert!(err.contains("not whole 2-byte items"), "{err}");
        let err = lists(&DataType::Int16, &[0, 8], &bytes).unwrap_err();
        assert!(err.contains("past the bytes"), "{err}");
        let err = lists(&DataType::Utf8, &[0], &bytes).unwrap_err();
        assert!(err.contains("not numbers"), "{err}");
    }
}
