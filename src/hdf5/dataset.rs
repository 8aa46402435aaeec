//! One HDF5 dataset laid out as a Zarr array at the root of the file's store: the array h5py
//! reads (`f[path][()]`), element for element. Its data type is the NumPy dtype h5py gives
//! it (`netcdf/numpy_type.rs`), so the array table reads a compound by the rules of Zarr
//! struct arrays; its chunks, filters and fill value are placed as a netCDF-4 variable's are
//! (`netcdf/nc4.rs::place`).

use hdf5_reader::group::Group;
use hdf5_reader::messages::datatype::{
    CompoundField, Datatype, StringPadding, StringSize, VarLenKind,
};
use hdf5_reader::{Dataset, Hdf5File};
use netcdf_reader::NcMetadataMode;
use serde_json::{json, Map, Value};

use crate::limits::METADATA_BYTES;
use crate::netcdf::classic::attributes_json;
use crate::netcdf::layout::{Layout, Source};
use crate::netcdf::nc4::{place, stored, strings_chunk, whole_array_json, whole_count, Placed};
use crate::netcdf::numpy_type::NumpyType;

/// The layout of dataset `ds` (at `path`, in group `parent`) of `h5`, a file of `file_len`
/// bytes: `zarr.json` at the root and the dataset's chunks under the root's keys.
pub(crate) fn dataset_layout(
    h5: &Hdf5File,
    parent: &Group,
    ds: &Dataset,
    path: &str,
    file_len: u64,
    metadata_bytes: u64,
) -> Result<Layout, String> {
    let at = |why: String| format!("dataset '{path}': {why}");
    if is_vlen_string(ds.dtype()) {
        return string_dataset_layout(h5, parent, ds, metadata_bytes).map_err(at);
    }
    let stored = stored(h5, ds).map_err(at)?;
    if let Datatype::Compound { size, fields } = &stored.datatype {
        if fields.iter().any(|f| is_vlen_string(&f.datatype)) {
            return compound_with_strings_layout(h5, parent, ds, fields, *size, metadata_bytes)
                .map_err(at);
        }
    }
    let element = NumpyType::of(&stored.datatype).map_err(at)?;
    if matches!(stored.datatype, Datatype::Array { .. }) {
        return Err(at(
            "its type is an HDF5 array type, which ndfusion does not read as a \
                       table yet (array members of a compound type are read)"
                .into(),
        ));
    }
    let shape = ds.shape().to_vec();
    let base = h5.superblock().base_address;
    let Placed {
        chunks,
        source,
        codecs,
    } = place(h5, &stored, &shape, element.stored_bytes, base, file_len).map_err(at)?;
    let fill = element.fill_value(&stored).map_err(at)?;
    let dims = dimension_names(h5, parent, ds).map_err(at)?;
    let attributes =
        netcdf_reader::nc4::attributes::extract_variable_attributes(ds, NcMetadataMode::Strict)
            .map_err(|e| at(format!("its attributes: {e}")))?;
    let mut codecs_all = element.element_codecs();
    codecs_all.extend(stored.value_codecs());
    codecs_all.extend(codecs);
    let zarr_json = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": element.data_type(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": fill,
        "codecs": codecs_all,
        "attributes": Value::Object(attributes_json(&attributes, None)),
        "dimension_names": dims,
    });
    Ok(root_array(zarr_json, source))
}

/// The layout of a dataset of variable-length strings: a group whose one variable, `value`,
/// holds them, so the dataset reader shows it (one `Utf8` column, as h5py's `asstr()`
/// decodes them) with the array table's columns (`dim_0`, ..., `value`, `__global_attrs__`:
/// the dataset's attributes, on the group so that no CF rule applies to them, as h5py applies
/// none). Each element is a reference into a global heap, so the strings are read when the
/// table opens, as a netCDF-4 `NC_STRING` variable's are: the references counted against the
/// metadata limit first, the strings' bytes after.
fn string_dataset_layout(
    h5: &Hdf5File,
    parent: &Group,
    ds: &Dataset,
    metadata_bytes: u64,
) -> Result<Layout, String> {
    let shape = ds.shape().to_vec();
    // A reference: the string's length, its heap collection's address, its index there.
    let reference = 8 + u64::from(h5.superblock().offset_size);
    let count = whole_count(&shape, reference, metadata_bytes, "strings")?;
    let strings = ds.read_strings().map_err(|e| format!("its strings: {e}"))?;
    let chunk = strings_chunk(&strings, &shape, count, metadata_bytes)?;
    let dims = dimension_names(h5, parent, ds)?;
    let dims: Vec<&str> = dims.iter().map(String::as_str).collect();
    let array = whole_array_json(&shape, &dims, json!("string"), "vlen-utf8", Map::new());
    let mut layout = Layout::default();
    layout
        .documents
        .insert("zarr.json".into(), attributes_group(ds)?);
    layout
        .documents
        .insert("value/zarr.json".into(), array.to_string().into_bytes());
    layout
        .variables
        .insert("value".into(), Source::Inline(chunk.into()));
    layout.order.push("value".into());
    Ok(layout)
}

/// The layout of a compound dataset with variable-length string members: a group of one
/// variable per member, so the dataset reader shows the columns the array table shows a
/// compound (`dim_0`, ..., a column per member, nested compounds as structs). A string
/// member's elements are references into global heaps, so the dataset is read when the
/// table opens, as a string dataset is: its elements counted against the metadata limit
/// first, the strings' bytes after. A string member becomes one `vlen-utf8` chunk (h5py's
/// bytes, decoded as UTF-8, as `asstr()` decodes a string dataset); any other member, one
/// chunk of its packed bytes, typed as h5py types it (an array member a subarray: a
/// fixed-size list per record).
fn compound_with_strings_layout(
    h5: &Hdf5File,
    parent: &Group,
    ds: &Dataset,
    fields: &[CompoundField],
    size: u32,
    metadata_bytes: u64,
) -> Result<Layout, String> {
    let shape = ds.shape().to_vec();
    let count = whole_count(&shape, u64::from(size).max(1), metadata_bytes, "records")?;
    let raw = ds
        .read_raw_bytes()
        .map_err(|e| format!("its records: {e}"))?;
    let size = size as usize;
    if size == 0 || raw.len() as u64 != count.saturating_mul(size as u64) {
        return Err(format!(
            "its records hold {} bytes, {count} records of {size} bytes were expected",
            raw.len()
        ));
    }
    let dims = dimension_names(h5, parent, ds)?;
    let dim_names: Vec<&str> = dims.iter().map(String::as_str).collect();
    let reference = ds.vlen_reference_size();
    let mut text_bytes = 0u64;
    let mut layout = Layout::default();
    for (i, field) in fields.iter().enumerate() {
        let name = field.name.as_str();
        let member = |why: String| format!("member '{name}': {why}");
        if name.is_empty() || name.contains('/') || name.starts_with("__") {
            return Err(member(
                "a member name ndfusion cannot make a column of".into(),
            ));
        }
        if fields[..i].iter().any(|f| f.name == name) || dims.iter().any(|d| d == name) {
            return Err(member(
                "its name is another member's or a dimension's".into(),
            ));
        }
        let offset = field.byte_offset as usize;
        let (array, chunk) = if is_vlen_string(&field.datatype) {
            if offset + reference > size {
                return Err(member(format!("it ends past the record's {size} bytes")));
            }
            let mut strings = Vec::with_capacity(count as usize);
            for record in raw.chunks_exact(size) {
                let text = member_text(ds, &field.datatype, &record[offset..offset + reference])
                    .map_err(member)?;
                text_bytes += text.len() as u64;
                if text_bytes > metadata_bytes {
                    return Err(format!(
                        "its strings hold more than {metadata_bytes} bytes, more than the \
                         metadata limit allows ({METADATA_BYTES})"
                    ));
                }
                strings.push(text);
            }
            let chunk = strings_chunk(&strings, &shape, count, metadata_bytes)?;
            let array =
                whole_array_json(&shape, &dim_names, json!("string"), "vlen-utf8", Map::new());
            (array, chunk)
        } else {
            let element = NumpyType::of_member(&field.datatype).map_err(member)?;
            let len = element.stored_bytes as usize;
            if offset + len > size {
                return Err(member(format!("it ends past the record's {size} bytes")));
            }
            let mut chunk = Vec::with_capacity(count as usize * len);
            for record in raw.chunks_exact(size) {
                chunk.extend_from_slice(&record[offset..offset + len]);
            }
            let mut array =
                whole_array_json(&shape, &dim_names, element.data_type(), "bytes", Map::new());
            array["codecs"] = element.element_codecs().into();
            array["fill_value"] = element.zero_fill();
            (array, chunk)
        };
        layout
            .documents
            .insert(format!("{name}/zarr.json"), array.to_string().into_bytes());
        layout
            .variables
            .insert(name.to_string(), Source::Inline(chunk.into()));
        layout.order.push(name.to_string());
    }
    layout
        .documents
        .insert("zarr.json".into(), attributes_group(ds)?);
    Ok(layout)
}

/// The `zarr.json` of the group a dataset read as variables is laid out as: the dataset's
/// attributes on the group, so that no CF rule applies to them (h5py applies none).
fn attributes_group(ds: &Dataset) -> Result<Vec<u8>, String> {
    let attributes =
        netcdf_reader::nc4::attributes::extract_variable_attributes(ds, NcMetadataMode::Strict)
            .map_err(|e| format!("its attributes: {e}"))?;
    let group = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": Value::Object(attributes_json(&attributes, None)),
    });
    Ok(group.to_string().into_bytes())
}

/// The text of one variable-length string member of a record, from its `reference` (the
/// length, the heap collection's address, the index there): "" for a reference to nothing
/// (an element never written), else the heap object, trimmed as its padding says.
fn member_text(ds: &Dataset, t: &Datatype, reference: &[u8]) -> Result<String, String> {
    if reference[..4] == [0; 4] {
        return Ok(String::new());
    }
    let bytes =
        (ds.resolve_vlen_reference_bytes(reference, 1)).map_err(|e| format!("its string: {e}"))?;
    let text = match t {
        Datatype::String {
            padding: StringPadding::SpacePad,
            ..
        } => bytes.trim_ascii_end(),
        Datatype::String {
            padding: StringPadding::NullPad,
            ..
        } => {
            let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            &bytes[..end]
        }
        _ => bytes.split(|&b| b == 0).next().unwrap_or_default(),
    };
    String::from_utf8(text.to_vec()).map_err(|_| "a string that is not UTF-8".to_string())
}

/// Whether `t` is a variable-length string (h5py's `string_dtype()`; older writers' vlen
/// sequences of characters).
fn is_vlen_string(t: &Datatype) -> bool {
    matches!(
        t,
        Datatype::String {
            size: StringSize::Variable,
            ..
        } | Datatype::VarLen {
            kind: VarLenKind::String,
            ..
        }
    )
}

/// A layout holding one array, at the root.
fn root_array(zarr_json: Value, source: Source) -> Layout {
    let mut layout = Layout::default();
    layout
        .documents
        .insert("zarr.json".into(), zarr_json.to_string().into_bytes());
    layout.variables.insert(String::new(), source);
    layout
}

/// The names of `ds`'s dimensions: the name of the dimension scale attached to each (the
/// first, when several are), else `dim_<i>`, as h5py numbers them.
fn dimension_names(h5: &Hdf5File, parent: &Group, ds: &Dataset) -> Result<Vec<String>, String> {
    let rank = ds.ndim();
    let mut names: Vec<String> = (0..rank).map(|i| format!("dim_{i}")).collect();
    let Ok(list) = ds.attribute("DIMENSION_LIST") else {
        return Ok(names);
    };
    let offset_size = h5.superblock().offset_size;
    // Each dimension's entry: a vlen of object references (length, heap address, index).
    let entry_size = 4 + usize::from(offset_size) + 4;
    for (i, entry) in list
        .raw_data
        .chunks_exact(entry_size)
        .take(rank)
        .enumerate()
    {
        let bytes = ds
            .resolve_vlen_reference_bytes(entry, usize::from(offset_size))
            .map_err(|e| format!("its DIMENSION_LIST: {e}"))?;
        let refs = hdf5_reader::reference::read_object_references(&bytes, offset_size)
            .map_err(|e| format!("its DIMENSION_LIST: {e}"))?;
        let Some(&scale) = refs.first() else {
            continue;
        };
        if let Ok(Some(name)) = parent.child_name_by_address(scale) {
            names[i] = name;
        }
    }
    Ok(names)
}

/// The paths of the datasets below `root`, groups in the order `group_tree` walks them, at
/// most `max` (an error past that).
pub(crate) fn list_datasets(root: Group, max: usize) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for group in crate::netcdf::nc4::group_tree(root)? {
        for name in group.datasets {
            if out.len() >= max {
                return Err(format!("it holds more than {max} datasets"));
            }
            out.push(format!("{}/{name}", group.path.trim_end_matches('/')));
        }
    }
    Ok(out)
}
