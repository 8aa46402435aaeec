//! The columns of a batch of one chunk's selected rows: decoded on demand from the chunk's
//! element bytes, narrowed by the row filter before the other columns are decoded.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray};

use crate::error::{BoxError, Error, Result};
use crate::zarr::decode::error::DecodeError;
use crate::zarr::decode::fields::decode_field;
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::element::{field_offsets, ElementType};
use crate::zarr::metadata::schema::ColumnSource;
use crate::zarr::plan::chunk_selection::{ChunkSelection, RowIndex};
use crate::zarr::plan::gather::Gather;
use crate::zarr::plan::row_filter::RowFilter;

/// What a table makes of a chunk's elements.
pub(crate) struct ColumnsWanted<'a> {
    /// The stored element.
    pub element: &'a ElementType,
    /// The output columns.
    pub columns: &'a [ColumnSource],
    /// The `__global_attrs__` value, when the table has the column.
    pub global_attrs: Option<&'a GlobalAttrs>,
    /// Turns a decoding failure into the error naming the chunk.
    pub chunk_error: &'a dyn Fn(BoxError) -> Error,
}

/// The columns of a batch of one chunk's selected rows, decoded on demand and kept for reuse.
pub(crate) struct ChunkColumns<'a> {
    wanted: ColumnsWanted<'a>,
    read: &'a ChunkSelection,
    /// Where the chunk's selected rows lie, for the dimension columns (`None` when none is
    /// wanted).
    index: Option<&'a RowIndex>,
    /// The batch's rows, numbered among the chunk's selected rows.
    batch: Range<usize>,
    bytes: &'a [u8],
    /// Where the batch's elements lie in `bytes`.
    gather: Gather,
    rows: usize,
    /// Dimension index columns, each computed once when first needed.
    dims: Vec<Option<ArrayRef>>,
    /// Columns already decoded (for the row filter), reused when also projected.
    decoded: Vec<(ColumnSource, ArrayRef)>,
}

impl<'a> ChunkColumns<'a> {
    /// The batch `batch` of `read`'s selected rows, whose elements lie at `gather` (of the
    /// batch's rows only) in `bytes`.
    pub(crate) fn new(
        wanted: ColumnsWanted<'a>,
        read: &'a ChunkSelection,
        index: Option<&'a RowIndex>,
        batch: Range<usize>,
        bytes: &'a [u8],
        gather: Gather,
    ) -> Self {
        ChunkColumns {
            wanted,
            read,
            index,
            rows: batch.len(),
            batch,
            bytes,
            gather,
            dims: vec![None; read.shape.len()],
            decoded: Vec::new(),
        }
    }

    /// The batch's index column of dimension `d`, made when first asked for (before the
    /// filter narrows the rows: the column then narrows with them).
    fn dimension_column(&mut self, d: usize) -> Result<ArrayRef> {
        if let Some(Some(column)) = self.dims.get(d) {
            return Ok(Arc::clone(column));
        }
        if self.rows != self.batch.len() {
            return Err(Error::Internal(format!(
                "dimension column {d} asked for after the filter"
            )));
        }
        let index = (self.index)
            .ok_or_else(|| Error::Internal("dimension columns without a row index".into()))?;
        let slot = (self.dims.get_mut(d))
            .ok_or_else(|| Error::Internal(format!("no dimension column {d}")))?;
        let column = self
            .read
            .axis_values_in(index, d, self.batch.clone(), None)?;
        *slot = Some(Arc::clone(&column));
        Ok(column)
    }

    /// `values` (one per index of dimension `d`) on each row: repeated without an index
    /// column where the rows lie in one index, unless the filter has narrowed them.
    pub(crate) fn axis_values(&mut self, d: usize, values: &ArrayRef) -> Result<ArrayRef> {
        let index = (self.index)
            .ok_or_else(|| Error::Internal("dimension columns without a row index".into()))?;
        if self.rows == self.batch.len() && self.dims.get(d).is_some_and(Option::is_none) {
            return self
                .read
                .axis_values_in(index, d, self.batch.clone(), Some(values));
        }
        let indices = self.dimension_column(d)?;
        arrow::compute::take(values.as_ref(), indices.as_ref(), None)
            .map_err(|e| Error::arrow("values of an axis", e))
    }

    /// Rows left after the row filter.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn get(&mut self, source: ColumnSource) -> Result<ArrayRef> {
        if let Some((_, array)) = self.decoded.iter().find(|(s, _)| *s == source) {
            return Ok(Arc::clone(array));
        }
        let error = |e: DecodeError| (self.wanted.chunk_error)(Box::new(e));
        match source {
            ColumnSource::Dimension(d) => self.dimension_column(d),
            ColumnSource::Field(i) => {
                let ElementType::Struct(fields) = self.wanted.element else {
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
            ColumnSource::GlobalAttrs => match self.wanted.global_attrs {
                Some(attrs) => attrs.repeated(self.rows),
                None => Err(Error::Internal("no global attributes".into())),
            },
            ColumnSource::Element => {
                decode_field(self.wanted.element, self.bytes, &self.gather, 0, "value")
                    .map_err(error)
            }
        }
    }

    /// Decodes the filter's columns and evaluates it, leaving the rows as they are: the rows it
    /// keeps (its columns stay decoded for the columns asked for next).
    pub(crate) fn mask(&mut self, filter: &RowFilter) -> Result<BooleanArray> {
        let inputs = (filter.columns.iter())
            .map(|source| self.get(*source))
            .collect::<Result<Vec<_>>>()?;
        let mask = filter.keep(inputs.clone(), self.rows)?;
        for (source, array) in filter.columns.iter().zip(inputs) {
            if !self.decoded.iter().any(|(s, _)| s == source) {
                self.decoded.push((*source, array));
            }
        }
        Ok(mask)
    }

    /// Decodes the filter's columns, evaluates it, and narrows the rows to the matches.
    pub(crate) fn apply(&mut self, filter: &RowFilter) -> Result<()> {
        // Dimension columns are computed for all rows, so they must exist before the rows
        // are narrowed.
        let wanted_dims: Vec<usize> = (self.wanted.columns.iter())
            .filter_map(|c| match c {
                ColumnSource::Dimension(d) => Some(*d),
                _ => None,
            })
            .collect();
        for d in wanted_dims {
            self.dimension_column(d)?;
        }
        let inputs = filter
            .columns
            .iter()
            .map(|source| self.get(*source))
            .collect::<Result<Vec<_>>>()?;
        let mask = filter.keep(inputs.clone(), self.rows)?;
        // Filter columns the output also wants are kept, narrowed to the matches; the byte
        // positions of the matches are only needed to decode the other projected fields.
        let projected = |c: &ColumnSource| c.reads_elements() && self.wanted.columns.contains(c);
        let decodes_more = self
            .wanted
            .columns
            .iter()
            .any(|c| projected(c) && !filter.columns.contains(c));
        if decodes_more {
            self.gather = self.gather.filter(&mask);
        } else {
            self.gather = Gather::Positions(Vec::new());
        }
        self.rows = mask.true_count();
        for d in self.dims.iter_mut().flatten() {
            *d = arrow::compute::filter(d, &mask)
                .map_err(|e| Error::arrow("filtering dimension columns", e))?;
        }
        self.decoded = filter
            .columns
            .iter()
            .zip(inputs)
            .filter(|(source, _)| projected(source))
            .map(|(source, array)| {
                let kept = arrow::compute::filter(&array, &mask)
                    .map_err(|e| Error::arrow("filtering the row filter's columns", e))?;
                Ok((*source, kept))
            })
            .collect::<Result<_>>()?;
        Ok(())
    }
}
