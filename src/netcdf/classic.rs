//! A netCDF-3 file (CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data) laid out as the
//! Zarr v2 group xarray would see: one array per variable, its attributes with
//! `_ARRAY_DIMENSIONS`, the file's attributes on the group, and chunks that are byte ranges of
//! the file. The header is parsed by `netcdf-reader`; where each chunk's bytes are is
//! computed here, so a chunk key costs nothing to hold and the store reads only the rows a
//! query selects.
//!
//! A variable's data is a run of *rows* (its first dimension): one after another for a fixed
//! variable, one per record for a record variable, the records of all record variables
//! interleaved (`stride` bytes apart). A chunk is up to 1 MiB of rows along the first
//! dimension and the whole of the others; its rows are read as one span of the file when the
//! bytes between them are few, else one read per row (a small coordinate among large record
//! variables: 4 bytes every 200 KB), so no read is much larger than what it is for.

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use netcdf_reader::classic::header::{parse_header, ClassicHeader};
use netcdf_reader::{NcAttrValue, NcAttribute, NcFormat, NcType, NcVariable};
use serde_json::{json, Map, Value};

use super::layout::{Layout, Source};
use crate::zarr::decode::cf::ATTRIBUTE_TYPES;

/// Bytes of a variable's data a chunk holds at most (fewer rows when a row is larger).
const CHUNK_BYTES: u64 = 1 << 20;

/// Rows of a record variable read one by one (the other record variables' bytes between them
/// too many to read along) a chunk holds at most: the reads a chunk makes.
const READS_PER_CHUNK: u64 = 1024;

/// Bytes between two pieces of the file read along with them rather than apart, at least: a
/// few hundred bytes cost less than another read.
pub(crate) const SMALL_GAP: u64 = 512;

/// Where one variable's rows are in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rows {
    /// The offset of the first row.
    pub begin: u64,
    /// Bytes of one row (the elements of the dimensions after the first).
    pub row_bytes: u64,
    /// Bytes from one row to the next: `row_bytes` for a fixed variable, the record size for
    /// a record variable.
    pub stride: u64,
    /// How many rows there are (the first dimension's length; 1 for a scalar).
    pub rows: u64,
    /// Rows per chunk (at least 1).
    pub per_chunk: u64,
    /// The variable's rank (a chunk key has this many indices; a scalar's is `0`).
    pub rank: usize,
}

impl Rows {
    /// `rows` rows of `row_bytes` bytes, `stride` bytes apart from `begin`, of a variable of
    /// rank `rank`, in chunks of up to 1 MiB; rows far apart (more than 3 rows or SMALL_GAP
    /// bytes between them) are read one by one, so a chunk holds at most READS_PER_CHUNK of
    /// them.
    pub(crate) fn new(begin: u64, row_bytes: u64, stride: u64, rows: u64, rank: usize) -> Self {
        let apart = stride - row_bytes > SMALL_GAP.max(row_bytes.saturating_mul(3));
        let mut per_chunk = (CHUNK_BYTES / row_bytes.max(1)).max(1);
        if apart {
            per_chunk = per_chunk.min(READS_PER_CHUNK);
        }
        Rows {
            begin,
            row_bytes,
            stride,
            rows,
            per_chunk: per_chunk.min(rows.max(1)),
            rank,
        }
    }

    /// The rows chunk `index` (along the first dimension) holds: at most `per_chunk`, fewer
    /// at the end; `None` past the last chunk.
    pub(crate) fn chunk(&self, index: u64) -> Option<std::ops::Range<u64>> {
        let first = index.checked_mul(self.per_chunk)?;
        (first < self.rows).then(|| first..first.saturating_add(self.per_chunk).min(self.rows))
    }

    /// The byte ranges of the file that hold bytes `range` of chunk `index` (as the chunk
    /// lays its rows out: one after another), in order, adjacent ones joined; bytes past the
    /// last row are in none (they read as zeros). A range inside one row is a range of that
    /// row, so a selection of a few cells of each record reads those cells.
    pub(crate) fn pieces(
        &self,
        index: u64,
        range: std::ops::Range<u64>,
    ) -> Vec<std::ops::Range<u64>> {
        let (Some(held), row) = (self.chunk(index), self.row_bytes) else {
            return Vec::new();
        };
        if row == 0 {
            return Vec::new();
        }
        let real = (held.end - held.start) * row;
        let (mut at, end) = (range.start.min(real), range.end.min(real));
        let mut out: Vec<std::ops::Range<u64>> = Vec::new();
        while at < end {
            let (r, within) = (at / row, at % row);
            let take = (row - within).min(end - at);
            // Inside the file: checked when the layout was made.
            let start = self.begin + (held.start + r) * self.stride + within;
            match out.last_mut() {
                Some(last) if last.end == start => last.end += take,
                _ => out.push(start..start + take),
            }
            at += take;
        }
        out
    }

    /// Bytes of an encoded chunk: `per_chunk` rows (the last chunk's missing rows are zeros).
    pub(crate) fn chunk_bytes(&self) -> u64 {
        self.per_chunk * self.row_bytes
    }
}

/// Why a file is not a netCDF-3 file ndfusion reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClassicError {
    /// The header runs past the bytes read: read more and try again.
    #[error("the header is longer than {0} bytes")]
    ShortHeader(usize),
    #[error("{0}")]
    Invalid(String),
}

/// The format `magic` (the file's first 4 bytes) names, when it is a netCDF-3 one.
pub(crate) fn classic_format(magic: &[u8]) -> Option<NcFormat> {
    match magic {
        [b'C', b'D', b'F', 1] => Some(NcFormat::Classic),
        [b'C', b'D', b'F', 2] => Some(NcFormat::Offset64),
        [b'C', b'D', b'F', 5] => Some(NcFormat::Cdf5),
        _ => None,
    }
}

/// The layout of the netCDF-3 file whose first bytes are `header` and which holds `file_len`
/// bytes.
pub(crate) fn classic_layout(
    header: &[u8],
    format: NcFormat,
    file_len: u64,
) -> Result<Layout, ClassicError> {
    let parsed = match parse_header(header, format) {
        Ok(parsed) => parsed,
        Err(netcdf_reader::Error::UnexpectedEof { .. }) if (header.len() as u64) < file_len => {
            return Err(ClassicError::ShortHeader(header.len()))
        }
        Err(netcdf_reader::Error::UnexpectedEof { .. }) => {
            return Err(ClassicError::Invalid(format!(
                "the file ends inside its header ({file_len} bytes): truncated?"
            )))
        }
        Err(e) => return Err(ClassicError::Invalid(format!("its header: {e}"))),
    };
    // CDF-1/2 write 0xFFFFFFFF records while a file is being written ("streaming"): the
    // records are then as many as the file holds.
    let streaming = format != NcFormat::Cdf5 && header.get(4..8) == Some(&[0xFF; 4][..]);
    from_header(parsed, streaming, file_len)
}

fn from_header(
    header: ClassicHeader,
    streaming: bool,
    file_len: u64,
) -> Result<Layout, ClassicError> {
    let invalid = ClassicError::Invalid;
    let stride = netcdf_reader::classic::data::compute_record_stride(&header.variables)
        .map_err(|e| invalid(e.to_string()))?;
    let record_start = (header.variables.iter())
        .filter(|v| v.is_record_var)
        .map(|v| v.data_offset)
        .min();
    let records = match (streaming, record_start) {
        (true, Some(start)) if stride > 0 => file_len.saturating_sub(start) / stride,
        (true, _) => 0,
        (false, _) => header.numrecs,
    };

    let mut documents = BTreeMap::new();
    let mut consolidated = Map::new();
    let mut variables = HashMap::new();
    let mut order = Vec::new();
    let group_attrs = attributes_json(&header.global_attributes, None);
    let mut add = |key: String, value: Value, consolidated: &mut Map<String, Value>| {
        documents.insert(key.clone(), value.to_string().into_bytes());
        consolidated.insert(key, value);
    };
    add(
        ".zgroup".into(),
        json!({"zarr_format": 2}),
        &mut consolidated,
    );
    add(
        ".zattrs".into(),
        Value::Object(group_attrs),
        &mut consolidated,
    );
    for var in &header.variables {
        let name = &var.name;
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(invalid(format!("a variable is named '{name}'")));
        }
        if variables.contains_key(name) {
            return Err(invalid(format!("two variables are named '{name}'")));
        }
        let rows = rows_of(var, stride, records, file_len).map_err(invalid)?;
        let dtype = zarr_dtype(&var.dtype)
            .ok_or_else(|| invalid(format!("variable '{name}' has type {:?}", var.dtype)))?;
        let shape: Vec<u64> = (var.dimensions.iter().enumerate())
            .map(|(i, d)| match (i, var.is_record_var) {
                (0, true) => records,
                _ => d.size,
            })
            .collect();
        let mut chunks = shape.clone();
        if let Some(first) = chunks.first_mut() {
            *first = rows.per_chunk;
        }
        let zarray = json!({
            "zarr_format": 2,
            "shape": shape,
            "chunks": chunks,
            "dtype": dtype,
            "fill_value": null,
            "order": "C",
            "compressor": null,
            "filters": null,
            "dimension_separator": ".",
        });
        let dims: Vec<&str> = var.dimensions.iter().map(|d| d.name.as_str()).collect();
        let attrs = attributes_json(&var.attributes, Some((&dims, &var.dtype)));
        add(format!("{name}/.zarray"), zarray, &mut consolidated);
        add(
            format!("{name}/.zattrs"),
            Value::Object(attrs),
            &mut consolidated,
        );
        variables.insert(name.clone(), Source::Rows(rows));
        order.push(name.clone());
    }
    let zmetadata = json!({"zarr_consolidated_format": 1, "metadata": consolidated});
    documents.insert(".zmetadata".into(), zmetadata.to_string().into_bytes());
    Ok(Layout {
        documents,
        variables,
        order,
        left_out: Vec::new(),
    })
}

/// Where `var`'s rows are, checked to lie inside the file's `file_len` bytes.
fn rows_of(var: &NcVariable, stride: u64, records: u64, file_len: u64) -> Result<Rows, String> {
    let name = &var.name;
    let elem = var
        .dtype
        .size()
        .map_err(|e| format!("variable '{name}': {e}"))? as u64;
    let overflow = || format!("variable '{name}' is larger than 2^64 bytes");
    let rank = var.dimensions.len();
    let row_bytes = (var.dimensions.iter().skip(1))
        .try_fold(elem, |n, d| n.checked_mul(d.size))
        .ok_or_else(overflow)?;
    let (rows, stride) = match (rank, var.is_record_var) {
        (0, _) => (1, row_bytes),
        (_, true) => (records, stride),
        (_, false) => (var.dimensions[0].size, row_bytes),
    };
    if rows > 0 {
        let end = (rows - 1)
            .checked_mul(stride)
            .and_then(|n| n.checked_add(row_bytes))
            .and_then(|n| n.checked_add(var.data_offset))
            .ok_or_else(overflow)?;
        if end > file_len {
            return Err(format!(
                "variable '{name}' needs bytes {}..{end}, but the file holds {file_len} \
                 (truncated?)",
                var.data_offset
            ));
        }
    }
    Ok(Rows::new(var.data_offset, row_bytes, stride, rows, rank))
}

/// The Zarr v2 data type of a netCDF-3 type (big-endian, as the file stores it).
fn zarr_dtype(t: &NcType) -> Option<&'static str> {
    Some(match t {
        NcType::Byte => "|i1",
        NcType::Char => "|S1",
        NcType::Short => ">i2",
        NcType::Int => ">i4",
        NcType::Float => ">f4",
        NcType::Double => ">f8",
        NcType::UByte => "|u1",
        NcType::UShort => ">u2",
        NcType::UInt => ">u4",
        NcType::Int64 => ">i8",
        NcType::UInt64 => ">u8",
        _ => return None,
    })
}

/// Attributes as JSON, as the Zarr reader takes them: text as strings, one number as a
/// number, several as a list, non-finite floats as `"NaN"` / `"Infinity"`; with
/// `_ARRAY_DIMENSIONS` for a variable, and the numpy types of `scale_factor` / `add_offset`
/// (xarray chooses the decoded float type from them; JSON keeps no type).
pub(crate) fn attributes_json(
    attrs: &[NcAttribute],
    var: Option<(&[&str], &NcType)>,
) -> Map<String, Value> {
    let mut out = Map::new();
    let mut types = Map::new();
    for attr in attrs {
        let (mut value, numpy) = attribute_value(&attr.value);
        // A character variable's missing value is a byte, which the Zarr reader takes as
        // base64 (the text was cut at its first NUL: the NUL fill is a NUL byte).
        if let (Some((_, NcType::Char)), NcAttrValue::Chars(text), "_FillValue" | "missing_value") =
            (var, &attr.value, attr.name.as_str())
        {
            let bytes = if text.is_empty() {
                vec![0]
            } else {
                text.as_bytes().to_vec()
            };
            value = Value::from(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        if matches!(attr.name.as_str(), "scale_factor" | "add_offset") {
            types.insert(attr.name.clone(), Value::from(numpy));
        }
        out.insert(attr.name.clone(), value);
    }
    if let Some((dims, _)) = var {
        out.insert("_ARRAY_DIMENSIONS".into(), json!(dims));
        if !types.is_empty() {
            out.insert(ATTRIBUTE_TYPES.into(), Value::Object(types));
        }
    }
    out
}

/// An attribute's value as JSON and the numpy type name of its elements.
fn attribute_value(value: &NcAttrValue) -> (Value, &'static str) {
    fn numbers<T: Copy>(values: &[T], one: impl Fn(T) -> Value) -> Value {
        match values {
            [single] => one(*single),
            many => Value::Array(many.iter().map(|v| one(*v)).collect()),
        }
    }
    let float = |f: f64| {
        if f.is_nan() {
            Value::from("NaN")
        } else if f.is_infinite() {
            Value::from(if f > 0.0 { "Infinity" } else { "-Infinity" })
        } else {
            Value::from(f)
        }
    };
    match value {
        NcAttrValue::Chars(s) => (Value::from(s.as_str()), "str"),
        NcAttrValue::Bytes(v) => (numbers(v, Value::from), "int8"),
        NcAttrValue::UBytes(v) => (numbers(v, Value::from), "uint8"),
        NcAttrValue::Shorts(v) => (numbers(v, Value::from), "int16"),
        NcAttrValue::UShorts(v) => (numbers(v, Value::from), "uint16"),
        NcAttrValue::Ints(v) => (numbers(v, Value::from), "int32"),
        NcAttrValue::UInts(v) => (numbers(v, Value::from), "uint32"),
        NcAttrValue::Int64s(v) => (numbers(v, Value::from), "int64"),
        NcAttrValue::UInt64s(v) => (numbers(v, Value::from), "uint64"),
        NcAttrValue::Floats(v) => (numbers(v, |f| float(f64::from(f))), "float32"),
        NcAttrValue::Doubles(v) => (numbers(v, float), "float64"),
        NcAttrValue::Strings(v) => (json!(v), "str"),
        // netCDF-4 only (compound, opaque, vlen): shown as netcdf-reader prints them.
        NcAttrValue::UserDefined { values, .. } => (Value::from(format!("{values:?}")), "object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_rows_along_the_first_dimension() {
        let mut rows = Rows {
            begin: 100,
            row_bytes: 8,
            stride: 20,
            rows: 5,
            per_chunk: 2,
            rank: 2,
        };
        assert_eq!(rows.chunk(0), Some(0..2));
        assert_eq!(rows.chunk(2), Some(4..5));
        assert_eq!(rows.chunk(3), None);
        assert_eq!(rows.chunk(u64::MAX), None);
        // Chunk 0 is rows 0 and 1 (bytes 0..16 of the chunk), at 100 and 120 in the file.
        assert_eq!(rows.pieces(0, 0..16), vec![100..108, 120..128]);
        assert_eq!(rows.pieces(0, 3..10), vec![103..108, 120..122]);
        // The last chunk holds one row: its second row's bytes are in no piece.
        assert_eq!(rows.pieces(2, 0..16), vec![180..188]);
        assert_eq!(rows.pieces(2, 8..16), Vec::<std::ops::Range<u64>>::new());
        assert_eq!(rows.chunk_bytes(), 16);
        // Adjacent rows (a fixed variable) are one piece.
        rows.stride = 8;
        assert_eq!(rows.pieces(1, 2..13), vec![118..129]);
    }

    #[test]
    fn formats_are_told_by_their_magic() {
        assert_eq!(classic_format(b"CDF\x01"), Some(NcFormat::Classic));
        assert_eq!(classic_format(b"CDF\x02"), Some(NcFormat::Offset64));
        assert_eq!(classic_format(b"CDF\x05"), Some(NcFormat::Cdf5));
        assert_eq!(classic_format(b"\x89HDF"), None);
        assert_eq!(classic_format(b"CD"), None);
    }
}
