//! A dataset variable: a member array, the grid axes it spans, and how a box of it becomes
//! Arrow columns (the fields of a struct variable, or its values CF-decoded).
//!
//! A box is read with zarrs' array-subset retrieval, which fetches and decodes the chunks it
//! touches (missing ones as the fill value) and returns the box's elements in C order; the
//! columns are then gathered from those bytes, broadcast over the axes the variable lacks.
//! Reads run on a blocking thread (remote ones wait there for their requests).

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, UInt64Array};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use zarrs::array::{Array as ZarrsArray, ArrayBytes, ArraySubset};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

use crate::error::{Error, Result};
use crate::zarr::array::ZarrArray;
use crate::zarr::cf::{CfDecoder, CfOptions};
use crate::zarr::chunk_read::ChunkRead;
use crate::zarr::decode::{check_bounds, decode_field, Gather};
use crate::zarr::element::{field_offsets, ElementType};
use crate::zarr::node::{Member, MemberArray};
use crate::zarr::store::ZarrStore;

/// Where a variable's values come from.
pub(crate) enum Source {
    /// Fixed-size elements, decoded by ndfusion; `cf` for non-struct variables.
    Fixed {
        array: Box<ZarrArray>,
        cf: Option<CfDecoder>,
    },
    /// Variable-length strings, decoded by zarrs.
    Strings(Box<StringSource>),
}

/// zarrs' views of a string array: async, and blocking for local stores.
pub(crate) struct StringSource {
    zarrs: ZarrsArray<dyn AsyncReadableStorageTraits>,
    blocking: Option<ZarrsArray<dyn ReadableStorageTraits>>,
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
    /// Opens member `member` of the group at `location`; its axes are set later.
    pub(crate) fn open(
        store: &ZarrStore,
        location: &str,
        member: Member,
        cf: CfOptions,
    ) -> Result<Self> {
        let var_location = format!("{}/{}", location.trim_end_matches('/'), member.name);
        let invalid = |reason: String| Error::InvalidMetadata {
            path: member.path.clone(),
            reason,
        };
        let dimension_names = member.array.dimension_names().to_vec();
        let shape = member.array.shape().to_vec();
        let chunk_shape = member.array.chunk_shape().to_vec();
        let (source, columns) = match member.array {
            MemberArray::Fixed(meta) => {
                let columns: Vec<VariableColumn>;
                let mut cf_decoder = None;
                match &meta.element {
                    ElementType::Struct(fields) if meta.is_struct => {
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
                            .map_err(invalid)?;
                        let data_type = cf_decoder
                            .as_ref()
                            .map_or(stored, |d| d.output_type().clone());
                        columns = vec![VariableColumn {
                            name: member.name.clone(),
                            data_type,
                            field: None,
                        }];
                    }
                }
                let array = ZarrArray::new(store.clone(), &member.name, &var_location, meta)?;
                (
                    Source::Fixed {
                        array: Box::new(array),
                        cf: cf_decoder,
                    },
                    columns,
                )
            }
            MemberArray::Strings(meta) => {
                let node = format!("/{}", member.name);
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
                            meta.zarrs_metadata,
                        )
                        .map_err(|e| invalid(e.to_string()))?,
                    ),
                    None => None,
                };
                let columns = vec![VariableColumn {
                    name: member.name.clone(),
                    data_type: DataType::Utf8,
                    field: None,
                }];
                (
                    Source::Strings(Box::new(StringSource { zarrs, blocking })),
                    columns,
                )
            }
        };
        Ok(Variable {
            name: member.name,
            location: var_location,
            dimension_names,
            axes: vec![],
            shape,
            chunk_shape,
            source,
            columns,
        })
    }

    /// Reads the whole variable (a dimension coordinate) as its first column. Blocking.
    pub(crate) fn read_all(&self) -> Result<ArrayRef> {
        let start = vec![0; self.shape.len()];
        let values = self.read_box(&start, &self.shape)?;
        let n: u64 = self.shape.iter().product();
        let gather = Gather::Strided {
            start: 0,
            stride: self.element_size(),
            count: n as usize,
        };
        self.column(&values, &gather, 0)
    }

    /// The columns `wanted` (indices into `columns`) of the cells `read` selects, `read` being
    /// a box of the grid over which this variable's box is `read`'s projection. Blocking.
    pub(crate) fn read_columns(&self, read: &ChunkRead, wanted: &[usize]) -> Result<Vec<ArrayRef>> {
        let start: Vec<u64> = self.axes.iter().map(|&a| read.origin[a]).collect();
        let shape: Vec<u64> = self.axes.iter().map(|&a| read.shape[a]).collect();
        let values = self.read_box(&start, &shape)?;
        let gather = read.project_gather(&self.axes, self.element_size());
        wanted
            .iter()
            .map(|&c| self.column(&values, &gather, c))
            .collect()
    }

    fn element_size(&self) -> usize {
        match &self.source {
            Source::Fixed { array, .. } => array.meta.element.size(),
            // Strings are gathered by index.
            Source::Strings(_) => 1,
        }
    }

    /// The box `start` of `shape` in the variable's own dimension order.
    fn read_box(&self, start: &[u64], shape: &[u64]) -> Result<BoxValues> {
        let ranges: Vec<_> = start.iter().zip(shape).map(|(&s, &n)| s..s + n).collect();
        let subset = ArraySubset::new_with_ranges(&ranges);
        let error = |e: zarrs::array::ArrayError| self.box_error(start, shape, Box::new(e));
        let bytes: ArrayBytes<'static> = match &self.source {
            Source::Fixed { array, .. } => match &array.blocking_zarrs {
                Some(blocking) => blocking.retrieve_array_subset(&subset).map_err(error)?,
                None => {
                    block_on(array.zarrs.async_retrieve_array_subset(&subset)).map_err(error)?
                }
            },
            Source::Strings(strings) => match &strings.blocking {
                Some(blocking) => blocking.retrieve_array_subset(&subset).map_err(error)?,
                None => {
                    block_on(strings.zarrs.async_retrieve_array_subset(&subset)).map_err(error)?
                }
            },
        };
        match &self.source {
            Source::Fixed { .. } => bytes
                .into_fixed()
                .map(|b| BoxValues::Fixed(b.into_owned()))
                .map_err(|e| self.box_error(start, shape, Box::new(e))),
            Source::Strings(_) => {
                let variable = bytes
                    .into_variable()
                    .map_err(|e| self.box_error(start, shape, Box::new(e)))?;
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
        }
    }

    fn column(&self, values: &BoxValues, gather: &Gather, c: usize) -> Result<ArrayRef> {
        let column = &self.columns[c];
        let decode_error = |e: String| Error::InvalidMetadata {
            path: self.location.clone(),
            reason: e,
        };
        match (values, &self.source) {
            (BoxValues::Fixed(bytes), Source::Fixed { array, cf }) => {
                let element = &array.meta.element;
                let size = element.size();
                check_bounds(bytes, gather, size)
                    .map_err(|e| Error::Internal(format!("{}: {e}", self.location)))?;
                let raw = match (column.field, element) {
                    (Some(i), ElementType::Struct(fields)) => {
                        let offset = field_offsets(fields)[i];
                        decode_field(&fields[i].ty, bytes, gather, offset, &fields[i].name)
                    }
                    _ => decode_field(element, bytes, gather, 0, &self.name),
                }
                .map_err(decode_error)?;
                match cf {
                    Some(cf) => cf.decode(&raw).map_err(decode_error),
                    None => Ok(raw),
                }
            }
            (BoxValues::Strings(strings), _) => {
                let indices: UInt64Array = match gather {
                    Gather::Strided {
                        start,
                        stride,
                        count,
                    } => (0..*count).map(|i| (start + i * stride) as u64).collect(),
                    Gather::Positions(p) => p.iter().map(|&i| i as u64).collect(),
                };
                arrow::compute::take(strings.as_ref(), &indices, None)
                    .map_err(|e| Error::arrow(format!("gathering '{}'", self.name), e))
            }
            _ => Err(Error::Internal("variable values of the wrong kind".into())),
        }
    }

    /// A failed read of a box, naming the chunks it touches.
    fn box_error(&self, start: &[u64], shape: &[u64], source: crate::error::BoxError) -> Error {
        let chunks: Vec<std::ops::Range<u64>> = start
            .iter()
            .zip(shape)
            .zip(&self.chunk_shape)
            .map(|((&s, &n), &c)| s / c..(s + n.max(1)).div_ceil(c))
            .collect();
        let key = |indices: &[u64]| match &self.source {
            Source::Fixed { array, .. } => array.chunk_key(indices),
            Source::Strings(strings) => strings.zarrs.chunk_key(indices).to_string(),
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

/// A box of a variable's values in C order.
enum BoxValues {
    Fixed(Vec<u8>),
    Strings(ArrayRef),
}

/// Drives a future to completion on this (blocking) thread.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Handle::current().block_on(future)
}
