//! A netCDF-4 file (HDF5 underneath) laid out as the Zarr v3 group xarray would see: one
//! array per variable, whose chunks are the variable's HDF5 chunks as they are stored and
//! whose codecs are its HDF5 filters (deflate is `zlib`, shuffle `numcodecs.shuffle`, ...),
//! so the Zarr reader decodes them, bounded, as it decodes any chunk. The netCDF data model
//! (dimensions from dimension scales, visible attributes, the variables netCDF-C shows) is
//! `netcdf-reader`'s; where each chunk is, is `hdf5-reader`'s reading of the chunk index,
//! done when a query first needs one of the variable's chunks (`lazy_index.rs`). Nothing
//! here reads a chunk.
//!
//! Zarr v3 rather than v2 (the netCDF-3 layout's): its fill value is the one of unwritten
//! chunks, not the CF `_FillValue` (which stays an attribute), and its codec chain can say
//! "shuffle, then deflate" after the bytes codec.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use hdf5_reader::group::Group;
use hdf5_reader::messages::datatype::Datatype;
use hdf5_reader::messages::fill_value::FillValueMessage;
use hdf5_reader::messages::filter_pipeline::FilterDescription;
use hdf5_reader::messages::layout::DataLayout;
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::storage::DynStorage;
use hdf5_reader::{ByteOrder, Dataset, Hdf5File, OpenOptions};
use netcdf_reader::nc4::Nc4File;
use netcdf_reader::{NcAttrValue, NcGroup, NcOpenOptions, NcType, NcVariable};
use serde_json::{json, Map, Value};

use super::block_cache::BlockCache;
use super::classic::{attributes_json, Rows};
use super::layout::{ChunkIndex, Layout, Source};
use super::lazy_index::{IndexRead, LazyIndex};
use super::numpy_type::NumpyType;
use super::value_bits::{value_bits, ValueBits};
use crate::limits::METADATA_BYTES;
use crate::zarr::metadata::data_type::VLEN_LIST;
use crate::zarr::metadata::element::MAX_ELEMENT_BYTES;

/// Bytes of the blocks metadata is read in (headers and index nodes are small and near one
/// another: one read serves many), and how many blocks are kept. Chunk index nodes (a few
/// KiB) lie between the chunks they index: larger blocks would fetch chunk bytes with each
/// (64 KiB blocks read 7% of a 2.7 MB file of 100 chunks to open it, 16 KiB blocks 1.8%).
const BLOCK_BYTES: usize = 16 << 10;
const BLOCKS_KEPT: usize = 256;

/// Stored chunks one table may index: a chunk index is read whole when the table opens
/// (a few tens of bytes a chunk, within the metadata limit); an implicit index costs no
/// reads, so its grid is bounded here.
const MAX_CHUNKS: u64 = 4 << 20;

/// The layout of the netCDF-4 file `cached` reads (its [`cached`] view) — of its root group,
/// or of `group` (`obs/deep`) — its metadata read within what the storage allows
/// (`metadata_bytes` for one object header). Blocking: call it off the async workers.
///
/// A group shows its own variables and attributes, as xarray's `group=` does: the
/// dimensions it uses from its parents are its grid, their coordinate variables are not.
///
/// With `wanted` (the table's `variables` option), a variable ndfusion cannot read (its type
/// or filter) is left out when the table cannot need it (`can_leave_out`); otherwise every
/// variable xarray shows must be readable. Those of types netCDF4-python does not read
/// xarray does not show: they are left out unless `wanted` names them
/// (`left_out_by_netcdf4_python`).
pub(crate) fn nc4_layout(
    cached: DynStorage,
    metadata_bytes: u64,
    group: Option<&str>,
    wanted: Option<&[String]>,
) -> Result<Layout, String> {
    let file_len = cached.len();
    let header_limit = usize::try_from(metadata_bytes).unwrap_or(usize::MAX);
    let options = NcOpenOptions {
        max_object_header_bytes: header_limit,
        ..NcOpenOptions::default()
    };
    let nc = Nc4File::from_storage_with_options(Arc::clone(&cached), options)
        .map_err(|e| format!("its netCDF-4 metadata: {e}"))?;
    let h5 = Hdf5File::from_storage_with_options(
        cached,
        OpenOptions::default().with_max_object_header_bytes(header_limit),
    )
    .map_err(|e| format!("its HDF5 metadata: {e}"))?;
    let base = h5.superblock().base_address;
    let (variables, globals) = match group {
        None => (
            nc.variables().map_err(|e| format!("its variables: {e}"))?,
            nc.global_attributes()
                .map_err(|e| format!("its attributes: {e}"))?,
        ),
        Some(path) => {
            // netcdf-reader builds the whole tree of groups, recursively: bounded first.
            let root = (h5.root_group()).map_err(|e| format!("its root group: {e}"))?;
            group_tree(root)?;
            let group = find_group(&nc, path)?;
            (group.variables.as_slice(), group.attributes.as_slice())
        }
    };

    let mut out = Layout::default();
    let mut consolidated = Map::new();
    let needed = named_by_others(variables);
    // A variable's path in the HDF5 file.
    let h5_path = |name: &str| match group {
        Some(g) => format!("/{}/{name}", g.trim_matches('/')),
        None => format!("/{name}"),
    };
    for var in variables {
        let name = &var.name;
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(format!("a variable is named '{name}'"));
        }
        if out.variables.contains_key(name) {
            return Err(format!("two variables are named '{name}'"));
        }
        let named = wanted.is_some_and(|w| w.iter().any(|v| v == name));
        if let (Some(why), false) = (left_out_by_netcdf4_python(&var.dtype), named) {
            // Said only of a table of every variable: one naming its variables shows no
            // others anyway.
            if wanted.is_none() {
                out.left_out.push(format!(
                    "variable '{name}' left out: its type is {why}, which netCDF4-python \
                     (xarray's default engine) leaves out; name it in `variables` to read it"
                ));
            }
            continue;
        }
        let read = match var.dtype {
            NcType::String => {
                let path = match group {
                    Some(g) => format!("{}/{name}", g.trim_matches('/')),
                    None => name.clone(),
                };
                string_variable(&nc, &path, var, metadata_bytes)
            }
            NcType::VLen { .. } => vlen_variable(&h5, &h5_path(name), var, metadata_bytes),
            _ => variable(&h5, &h5_path(name), var, base, file_len),
        };
        let (zarr_json, source) = match read {
            Ok(read) => read,
            Err(_) if can_leave_out(name, wanted, &needed) => continue,
            Err(why) => return Err(format!("variable '{name}': {why}")),
        };
        out.documents.insert(
            format!("{name}/zarr.json"),
            zarr_json.to_string().into_bytes(),
        );
        consolidated.insert(name.clone(), zarr_json);
        out.variables.insert(name.clone(), source);
        out.order.push(name.clone());
    }
    let root = json!({
        "zarr_format": 3,
        "node_type": "group",
        "attributes": Value::Object(attributes_json(globals, None)),
        "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": consolidated},
    });
    out.documents
        .insert("zarr.json".into(), root.to_string().into_bytes());
    Ok(out)
}

/// Groups a file may nest, and groups it may hold: walking a file's groups (netcdf-reader
/// builds the whole tree recursively when a group is read; `STORED AS HDF5` looks for a
/// file's one dataset) is bounded by these, not by the file.
const MAX_GROUP_DEPTH: usize = 32;
const MAX_GROUPS: usize = 100_000;

/// A group of a file, found by [`group_tree`].
pub(crate) struct TreeGroup {
    /// Its path (`/`, `/obs`, `/obs/deep`).
    pub path: String,
    /// The names of the datasets in it.
    pub datasets: Vec<String>,
}

/// Every group below `root`, parents before children in the order HDF5 lists them, walked
/// without recursion; groups reached twice (hard links) once. An error past
/// [`MAX_GROUP_DEPTH`] levels or [`MAX_GROUPS`] groups.
pub(crate) fn group_tree(root: Group) -> Result<Vec<TreeGroup>, String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut pending = vec![("/".to_string(), root, 0usize)];
    while let Some((path, group, depth)) = pending.pop() {
        if !seen.insert(group.address()) {
            continue;
        }
        if depth > MAX_GROUP_DEPTH || seen.len() > MAX_GROUPS {
            return Err(format!(
                "its groups nest deeper than {MAX_GROUP_DEPTH} levels or number more than \
                 {MAX_GROUPS} (at '{path}')"
            ));
        }
        let (groups, datasets) =
            (group.member_names()).map_err(|e| format!("group '{path}': {e}"))?;
        // Pushed last first: the first child is walked next.
        for name in groups.iter().rev() {
            let child = group
                .group(name)
                .map_err(|e| format!("group '{path}': {e}"))?;
            let child_path = format!("{}/{name}", path.trim_end_matches('/'));
            pending.push((child_path, child, depth + 1));
        }
        out.push(TreeGroup { path, datasets });
    }
    Ok(out)
}

/// The block-cached view of a file that its metadata is read through (headers and index
/// nodes are small and near one another: one block read serves many).
pub(crate) fn cached(storage: DynStorage) -> DynStorage {
    Arc::new(BlockCache::new(storage, BLOCK_BYTES, BLOCKS_KEPT))
}

/// The group at `path` (`obs/deep`), or an error naming the groups there are.
fn find_group<'a>(nc: &'a Nc4File, path: &str) -> Result<&'a NcGroup, String> {
    let root = nc.root_group().map_err(|e| format!("its groups: {e}"))?;
    let mut group = root;
    let mut walked = String::new();
    for name in path.split('/').filter(|n| !n.is_empty()) {
        let Some(child) = group.groups.iter().find(|g| g.name == name) else {
            let there: Vec<&str> = group.groups.iter().map(|g| g.name.as_str()).collect();
            let within = match walked.is_empty() {
                true => "the root group".to_string(),
                false => format!("group '{walked}'"),
            };
            return Err(format!(
                "'path' names the group '{path}', but {within} has no group '{name}' ({})",
                match there.is_empty() {
                    true => "it has no groups".to_string(),
                    false => format!("its groups: {}", there.join(", ")),
                }
            ));
        };
        walked = match walked.is_empty() {
            true => name.to_string(),
            false => format!("{walked}/{name}"),
        };
        group = child;
    }
    Ok(group)
}

/// The names every variable's dimensions, `coordinates` and `bounds` attributes give: the
/// variables a dataset may need besides those it shows.
fn named_by_others(variables: &[NcVariable]) -> HashSet<String> {
    let mut named = HashSet::new();
    for var in variables {
        named.extend(var.dimensions.iter().map(|d| d.name.clone()));
        for attribute in &var.attributes {
            if let ("coordinates" | "bounds", NcAttrValue::Chars(text)) =
                (attribute.name.as_str(), &attribute.value)
            {
                named.extend(text.split_whitespace().map(str::to_string));
            }
        }
    }
    named
}

/// Why netCDF4-python 1.7.5, and so xarray's default engine, leaves a variable of type `t`
/// out of the dataset (with a warning, or silently for compounds), if it does: opaque types,
/// vlens of anything but numbers and characters, and compounds with a member that is not a
/// number, a character, an array of those or such a compound. A table shows what xarray
/// shows, so these are left out too unless the table's `variables` names them (then they are
/// read if ndfusion can: a compound with an enum member, as h5py's bools are, it can).
fn left_out_by_netcdf4_python(t: &NcType) -> Option<&'static str> {
    fn atomic(t: &NcType) -> bool {
        !matches!(
            t,
            NcType::String
                | NcType::Enum { .. }
                | NcType::Compound { .. }
                | NcType::Opaque { .. }
                | NcType::Array { .. }
                | NcType::VLen { .. }
        )
    }
    // A nesting deeper than any real file's reads as unreadable rather than recursing on.
    fn member(t: &NcType, depth: usize) -> bool {
        match t {
            NcType::Compound { fields, .. } => {
                depth < 32 && fields.iter().all(|f| member(&f.dtype, depth + 1))
            }
            NcType::Array { base, .. } => atomic(base),
            t => atomic(t),
        }
    }
    match t {
        NcType::Opaque { .. } => Some("opaque"),
        NcType::VLen { base } if !atomic(base) => Some("a vlen of a user-defined type"),
        NcType::Compound { fields, .. } if !fields.iter().all(|f| member(&f.dtype, 1)) => {
            Some("a compound with an enum, opaque, string, vlen or array-of-compound member")
        }
        _ => None,
    }
}

/// Whether variable `name` may be left out of a table that shows only `wanted`: it is not
/// among them, nor a coordinate or bounds of any variable.
fn can_leave_out(name: &str, wanted: Option<&[String]>, needed: &HashSet<String>) -> bool {
    wanted.is_some_and(|w| !w.iter().any(|v| v == name)) && !needed.contains(name)
}

/// The header messages of a dataset that say how its bytes are stored.
pub(crate) struct Stored {
    pub datatype: Datatype,
    pub layout: DataLayout,
    pub filters: Vec<FilterDescription>,
    pub fill: Option<FillValueMessage>,
    /// Where an integer type that does not use all its bits keeps its value
    /// (`value_bits.rs`); `None` for every other type.
    pub bits: Option<ValueBits>,
}

impl Stored {
    /// One stored element of `elem` bytes that unwritten chunks hold: the dataset's fill
    /// value, else HDF5's default (zeros). `elem` comes from the file: checked against the
    /// largest element ndfusion reads before anything is allocated.
    pub(crate) fn fill_bytes(&self, elem: u64) -> Result<Vec<u8>, String> {
        if elem > MAX_ELEMENT_BYTES as u64 {
            return Err(format!(
                "its elements of {elem} bytes are larger than ndfusion reads \
                 ({MAX_ELEMENT_BYTES} bytes)"
            ));
        }
        let mut fill = match self.fill.as_ref().and_then(|f| f.value.as_ref()) {
            Some(value) if value.len() as u64 == elem => value.clone(),
            Some(value) => {
                return Err(format!(
                    "its fill value holds {} bytes, an element {elem}",
                    value.len()
                ))
            }
            None => vec![0; elem as usize],
        };
        // Stored as the elements are: its value bits where the type keeps them.
        if let Some(bits) = &self.bits {
            let widened = super::hdf5_codecs::whole_integers(&mut fill, bits);
            widened.map_err(|why| format!("its fill value: {why}"))?;
        }
        Ok(fill)
    }

    /// The codec, right after `bytes`, that makes whole integers of elements that keep their
    /// value in fewer bits (none when the n-bit filter's codec does it).
    pub(crate) fn value_codecs(&self) -> Vec<Value> {
        let nbit = self.filters.iter().any(|f| f.id == 5);
        match &self.bits {
            Some(bits) if !nbit => {
                super::hdf5_codecs::register();
                let config = super::hdf5_codecs::value_bits_configuration(bits);
                vec![json!({"name": super::hdf5_codecs::VALUE_BITS, "configuration": config})]
            }
            _ => Vec::new(),
        }
    }
}

/// The header messages of dataset `ds` that say how its bytes are stored.
pub(crate) fn stored(h5: &Hdf5File, ds: &Dataset) -> Result<Stored, String> {
    let header = h5
        .get_or_parse_header(ds.address())
        .map_err(|e| format!("its HDF5 header: {e}"))?;
    let (mut datatype, mut layout, mut filters, mut fill) = (None, None, Vec::new(), None);
    for message in &header.messages {
        match message {
            HdfMessage::Datatype(m) => datatype = Some(m.datatype.clone()),
            HdfMessage::DataLayout(m) => layout = Some(m.layout.clone()),
            HdfMessage::FilterPipeline(m) => filters = m.filters.clone(),
            HdfMessage::FillValue(m) => fill = Some(m.clone()),
            _ => {}
        }
    }
    Ok(Stored {
        datatype: datatype.ok_or("its HDF5 header has no datatype")?,
        layout: layout.ok_or("its HDF5 header has no data layout")?,
        filters,
        fill,
        bits: dataset_value_bits(ds)?,
    })
}

/// Where dataset `ds`'s integers keep their value, when not in all their bits; an error for
/// any other number that does not use all its bits (`value_bits.rs`).
fn dataset_value_bits(ds: &Dataset) -> Result<Option<ValueBits>, String> {
    let raw = (ds.raw_datatype()).map_err(|e| format!("its HDF5 type: {e}"))?;
    value_bits(&raw)
}

/// A variable's `zarr.json` and where its chunks are.
fn variable(
    h5: &Hdf5File,
    path: &str,
    var: &NcVariable,
    base: u64,
    file_len: u64,
) -> Result<(Value, Source), String> {
    let dataset = h5
        .dataset(path)
        .map_err(|e| format!("its HDF5 dataset: {e}"))?;
    // netcdf-reader names variables by their HDF5 links; a different object would be read
    // with another's layout.
    if dataset.address() != var.data_offset {
        return Err(format!(
            "the HDF5 dataset at '{path}' is not the variable netCDF reads"
        ));
    }
    let stored = stored(h5, &dataset)?;
    let (data_type, mut all_codecs, fill, elem) = match (&var.dtype, &stored.datatype) {
        // A compound is h5py's structured dtype: the dataset shows it as one `Struct` column,
        // as xarray shows netCDF4-python's records.
        (NcType::Compound { .. }, Datatype::Compound { .. }) => {
            let element = NumpyType::of(&stored.datatype)?;
            let fill = element.fill_value(&stored)?;
            let codecs = element.element_codecs();
            (element.data_type(), codecs, fill, element.stored_bytes)
        }
        _ => {
            let (data_type, endian, elem) = zarr_type(&var.dtype, &stored.datatype)?;
            let fill = fill_value(&stored, &data_type, endian, elem)?;
            let mut codecs = vec![json!({"name": "bytes", "configuration": {"endian": endian}})];
            codecs.extend(stored.value_codecs());
            (data_type, codecs, fill, elem)
        }
    };
    let shape: Vec<u64> = var.dimensions.iter().map(|d| d.size).collect();
    let Placed {
        chunks,
        source,
        codecs,
    } = place(h5, &stored, &shape, elem, base, file_len)?;
    all_codecs.extend(codecs);
    let dims: Vec<&str> = var.dimensions.iter().map(|d| d.name.as_str()).collect();
    let mut attributes = attributes_json(&var.attributes, Some((&dims, &var.dtype)));
    attributes.remove("_ARRAY_DIMENSIONS");
    let zarr_json = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": fill,
        "codecs": all_codecs,
        "attributes": attributes,
        "dimension_names": dims,
    });
    Ok((zarr_json, source))
}

/// An `NC_STRING` variable's `zarr.json` and its strings. HDF5 keeps each string in a global
/// heap, the dataset holding references to them: netcdf-reader resolves them when the table
/// opens, through the file's metadata budget (a variable of more strings than the budget's
/// references is an error naming the limit), and they are served as one chunk of Zarr's
/// `string` type (`vlen-utf8`), which the dataset reader decodes as it decodes Zarr's.
fn string_variable(
    nc: &Nc4File,
    path: &str,
    var: &NcVariable,
    metadata_bytes: u64,
) -> Result<(Value, Source), String> {
    // Each string is a 16-byte reference in the dataset, and at least its length in a heap.
    let count = read_whole_count(var, 16, metadata_bytes, "strings")?;
    let strings = nc
        .read_variable_as_strings(path)
        .map_err(|e| format!("its strings: {e}"))?;
    let shape: Vec<u64> = var.dimensions.iter().map(|d| d.size).collect();
    let chunk = strings_chunk(&strings, &shape, count, metadata_bytes)?;
    let zarr_json = whole_variable_json(var, json!("string"), "vlen-utf8");
    Ok((zarr_json, Source::Inline(chunk.into())))
}

/// The one `vlen-utf8` chunk of the `count` strings of an array of `shape` (netCDF-4
/// `NC_STRING`, HDF5 variable-length strings), read whole: an error when there are not
/// `count` of them, or when they hold more bytes than the metadata limit allows.
pub(crate) fn strings_chunk(
    strings: &[String],
    shape: &[u64],
    count: u64,
    metadata_bytes: u64,
) -> Result<Vec<u8>, String> {
    if strings.len() as u64 != count {
        return Err(format!(
            "it holds {} strings, its shape {shape:?} needs {count}",
            strings.len()
        ));
    }
    let bytes: u64 = strings.iter().map(|s| s.len() as u64).sum();
    if bytes > metadata_bytes {
        return Err(format!(
            "its strings hold {bytes} bytes, more than the metadata limit allows \
             ({METADATA_BYTES})"
        ));
    }
    let mut chunk = VlenChunk::new(count, "strings")?;
    for text in strings {
        chunk.push(text.as_bytes())?;
    }
    Ok(chunk.bytes)
}

/// A vlen variable's `zarr.json` and its lists: each element is a reference into a global
/// heap, as an `NC_STRING`'s is, so the lists are read when the table opens, through the
/// file's metadata budget (references and items counted against it), and served as one chunk
/// of ndfusion's `ndfusion.vlen` type (`vlen-bytes`, each element its items little-endian),
/// which the dataset reader shows as a `List` column, as xarray shows netCDF4-python's
/// arrays of numbers.
fn vlen_variable(
    h5: &Hdf5File,
    path: &str,
    var: &NcVariable,
    metadata_bytes: u64,
) -> Result<(Value, Source), String> {
    let dataset = h5
        .dataset(path)
        .map_err(|e| format!("its HDF5 dataset: {e}"))?;
    // A vlen's items that keep their value in fewer bits are an error.
    dataset_value_bits(&dataset)?;
    let Datatype::VarLen { base, .. } = dataset.dtype() else {
        return Err(format!("its HDF5 type is not vlen: {:?}", dataset.dtype()));
    };
    let (item, order, width) = match base.as_ref() {
        Datatype::FixedPoint {
            size,
            signed,
            byte_order,
        } if matches!(size, 1 | 2 | 4 | 8) => {
            let kind = if *signed { "int" } else { "uint" };
            (
                format!("{kind}{}", size * 8),
                *byte_order,
                usize::from(*size),
            )
        }
        Datatype::FloatingPoint { size, byte_order } if matches!(size, 4 | 8) => (
            format!("float{}", size * 8),
            *byte_order,
            usize::from(*size),
        ),
        other => {
            return Err(format!(
                "its type is a vlen of {other:?}, which ndfusion does not read yet (vlens of \
                 numbers are)"
            ))
        }
    };
    let reference = dataset.vlen_reference_size() as u64;
    let count = read_whole_count(var, reference, metadata_bytes, "lists")?;
    let references = dataset
        .read_raw_bytes()
        .map_err(|e| format!("its lists: {e}"))?;
    if references.len() as u64 != count * reference {
        return Err(format!(
            "it holds {} bytes of references, its {count} lists need {}",
            references.len(),
            count * reference
        ));
    }
    let mut budget = metadata_bytes.saturating_sub(references.len() as u64);
    let mut chunk = VlenChunk::new(count, "lists")?;
    for one in references.chunks_exact(reference as usize) {
        let mut items = dataset
            .resolve_vlen_reference_bytes(one, width)
            .map_err(|e| format!("its lists: {e}"))?;
        budget = budget.checked_sub(items.len() as u64).ok_or_else(|| {
            format!("its lists hold more bytes than the metadata limit allows ({METADATA_BYTES})")
        })?;
        if order == ByteOrder::BigEndian {
            items.chunks_exact_mut(width).for_each(<[u8]>::reverse);
        }
        chunk.push(&items)?;
    }
    let data_type = json!({"name": VLEN_LIST, "configuration": {"item": item}});
    let zarr_json = whole_variable_json(var, data_type, "vlen-bytes");
    Ok((zarr_json, Source::Inline(chunk.bytes.into())))
}

/// The elements of a variable read whole when the table opens (strings, lists), each
/// `reference` bytes in the dataset: at most what the metadata limit holds of them.
fn read_whole_count(
    var: &NcVariable,
    reference: u64,
    metadata_bytes: u64,
    what: &str,
) -> Result<u64, String> {
    let shape: Vec<u64> = var.dimensions.iter().map(|d| d.size).collect();
    whole_count(&shape, reference, metadata_bytes, what)
}

/// The elements of an array of `shape` read whole when the table opens, each `reference`
/// bytes in the dataset: at most what the metadata limit holds of them.
pub(crate) fn whole_count(
    shape: &[u64],
    reference: u64,
    metadata_bytes: u64,
    what: &str,
) -> Result<u64, String> {
    let count = (shape.iter()).try_fold(1u64, |n, &d| n.checked_mul(d));
    let max = metadata_bytes / reference.max(1);
    count.filter(|&n| n <= max).ok_or_else(|| {
        format!(
            "its {shape:?} {what} are read when the table opens, and are more than the \
             metadata limit allows ({max}; {METADATA_BYTES})"
        )
    })
}

/// One chunk of variable-length elements as numcodecs' `vlen-utf8` and `vlen-bytes` lay
/// them out: the element count, then each element's length and bytes (u32 little-endian).
struct VlenChunk {
    bytes: Vec<u8>,
    what: &'static str,
}

impl VlenChunk {
    fn new(count: u64, what: &'static str) -> Result<Self, String> {
        let count = u32::try_from(count).map_err(|_| format!("its {what} are too many"))?;
        let mut bytes = Vec::with_capacity(4 + 4 * count as usize);
        bytes.extend_from_slice(&count.to_le_bytes());
        Ok(VlenChunk { bytes, what })
    }

    fn push(&mut self, element: &[u8]) -> Result<(), String> {
        let len = u32::try_from(element.len())
            .map_err(|_| format!("its {} are longer than 4 GiB", self.what))?;
        self.bytes.extend_from_slice(&len.to_le_bytes());
        self.bytes.extend_from_slice(element);
        Ok(())
    }
}

/// The `zarr.json` of a variable read whole into one chunk of `data_type`, decoded by the
/// array-to-bytes `codec`.
fn whole_variable_json(var: &NcVariable, data_type: Value, codec: &str) -> Value {
    let shape: Vec<u64> = var.dimensions.iter().map(|d| d.size).collect();
    let dims: Vec<&str> = var.dimensions.iter().map(|d| d.name.as_str()).collect();
    let mut attributes = attributes_json(&var.attributes, Some((&dims, &var.dtype)));
    attributes.remove("_ARRAY_DIMENSIONS");
    whole_array_json(&shape, &dims, data_type, codec, attributes)
}

/// The `zarr.json` of an array of `shape` read whole into one chunk of `data_type`, decoded
/// by the array-to-bytes `codec`.
pub(crate) fn whole_array_json(
    shape: &[u64],
    dims: &[&str],
    data_type: Value,
    codec: &str,
    attributes: Map<String, Value>,
) -> Value {
    // One chunk of the whole variable (a dimension of length 0 has chunks of 1).
    let chunks: Vec<u64> = shape.iter().map(|&d| d.max(1)).collect();
    json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": "",
        "codecs": [{"name": codec}],
        "attributes": attributes,
        "dimension_names": dims,
    })
}

/// Where a dataset's chunks are, and the codecs that decode them.
pub(crate) struct Placed {
    /// The Zarr chunk shape (HDF5's chunks; runs of rows for contiguous storage).
    pub chunks: Vec<u64>,
    pub source: Source,
    /// The Zarr v3 codecs after `bytes` (`filter_codecs`).
    pub codecs: Vec<Value>,
}

/// Where the chunks of the dataset `stored` describes (of `shape`, elements of `elem`
/// bytes) are in the file: its compact bytes, its contiguous rows, or its chunk index read
/// whole; every range checked to lie inside the file's `file_len` bytes.
pub(crate) fn place(
    h5: &Hdf5File,
    stored: &Stored,
    shape: &[u64],
    elem: u64,
    base: u64,
    file_len: u64,
) -> Result<Placed, String> {
    let rank = shape.len();
    let overflow = || "its size overflows 2^64 bytes".to_string();
    let inside = |at: u64, len: u64| in_file(at, len, base, file_len);
    let (chunks, source, codecs) = match &stored.layout {
        DataLayout::Compact { data } => {
            let want = (shape.iter()).try_fold(elem, |n, &d| n.checked_mul(d));
            if want != Some(data.len() as u64) {
                return Err(format!(
                    "its compact data holds {} bytes, its shape needs {want:?}",
                    data.len()
                ));
            }
            (
                shape.to_vec(),
                Source::Inline(data.clone().into()),
                Vec::new(),
            )
        }
        DataLayout::Contiguous { address, size } => {
            let row_bytes = (shape.iter().skip(1)).try_fold(elem, |n, &d| n.checked_mul(d));
            let row_bytes = row_bytes.ok_or_else(overflow)?;
            let rows = shape.first().copied().unwrap_or(1);
            let total = row_bytes.checked_mul(rows).ok_or_else(overflow)?;
            if is_undefined(*address, h5.superblock().offset_size) {
                // Never written: every element is the fill value.
                let index = ChunkIndex {
                    grid: vec![1; rank],
                    stored: HashMap::new(),
                    filters: Vec::new(),
                    typesize: elem,
                };
                (
                    shape.to_vec(),
                    Source::Chunks(Box::new(LazyIndex::unwritten(index))),
                    Vec::new(),
                )
            } else {
                if *size < total {
                    return Err(format!(
                        "its contiguous data holds {size} bytes, its shape needs {total}"
                    ));
                }
                let range = inside(*address, total)?;
                let rows = Rows::new(range.start, row_bytes, row_bytes, rows, rank);
                let mut chunks = shape.to_vec();
                if let Some(first) = chunks.first_mut() {
                    *first = rows.per_chunk;
                }
                (chunks, Source::Rows(rows), Vec::new())
            }
        }
        DataLayout::Chunked {
            address,
            dims,
            chunk_indexing,
            ..
        } => {
            let mut chunk_shape: Vec<u64> = dims.iter().map(|&d| u64::from(d)).collect();
            // Layout messages of version 4 (files written with the latest format) give the
            // element size as one more dimension.
            let mut dims = &dims[..];
            if chunk_shape.len() == rank + 1 && chunk_shape.last() == Some(&elem) {
                chunk_shape.pop();
                dims = &dims[..rank];
            }
            if chunk_shape.len() != rank || chunk_shape.contains(&0) {
                return Err(format!(
                    "its chunks {chunk_shape:?} do not fit its shape {shape:?}"
                ));
            }
            let codecs = filter_codecs(&stored.filters, &stored.datatype, elem)?;
            let grid: Vec<u64> = (shape.iter().zip(&chunk_shape))
                .map(|(&n, &c)| n.div_ceil(c))
                .collect();
            let cells = (grid.iter()).try_fold(1u64, |n, &g| n.checked_mul(g));
            if cells.is_none_or(|n| n > MAX_CHUNKS) && rank > 0 {
                return Err(format!(
                    "it has more than {MAX_CHUNKS} chunks ({grid:?} of {chunk_shape:?})"
                ));
            }
            let chunk_bytes = (chunk_shape.iter()).try_fold(elem, |n, &d| n.checked_mul(d));
            let chunk_bytes = chunk_bytes.ok_or_else(overflow)?;
            let empty = ChunkIndex {
                grid,
                stored: HashMap::new(),
                filters: stored.filters.iter().map(|f| f.id).collect(),
                typesize: elem,
            };
            let index = match is_undefined(*address, h5.superblock().offset_size) {
                // Never written: every chunk is the fill value.
                true => LazyIndex::unwritten(empty),
                // Read when a query first needs a chunk (`lazy_index.rs`).
                false => LazyIndex::pending(IndexRead {
                    address: *address,
                    dims: dims.to_vec(),
                    indexing: chunk_indexing.clone(),
                    shape: shape.to_vec(),
                    chunk_shape: chunk_shape.clone(),
                    chunk_bytes,
                    offset_size: h5.superblock().offset_size,
                    length_size: h5.superblock().length_size,
                    base,
                    file_len,
                    empty,
                }),
            };
            (chunk_shape, Source::Chunks(Box::new(index)), codecs)
        }
    };
    Ok(Placed {
        chunks,
        source,
        codecs,
    })
}

/// Whether `address` is HDF5's undefined address (all ones in the file's offset size): no
/// Bytes `len` at HDF5 address `at` (relative to the superblock's `base`) as a range of the
/// file of `file_len` bytes: an error when they are not all inside it.
pub(crate) fn in_file(at: u64, len: u64, base: u64, file_len: u64) -> Result<Range<u64>, String> {
    let overflow = || "its size overflows 2^64 bytes".to_string();
    let start = at.checked_add(base).ok_or_else(overflow)?;
    let end = start.checked_add(len).ok_or_else(overflow)?;
    if end > file_len {
        return Err(format!(
            "its data needs bytes {start}..{end}, but the file holds {file_len} (truncated?)"
        ));
    }
    Ok(start..end)
}

/// storage was allocated.
pub(crate) fn is_undefined(address: u64, offset_size: u8) -> bool {
    let bits = u32::from(offset_size) * 8;
    address == u64::MAX || (bits < 64 && address == (1u64 << bits) - 1)
}

/// The Zarr v3 data type, byte order and element size of a variable of netCDF type `nc`
/// stored as HDF5 type `h5`.
fn zarr_type(nc: &NcType, h5: &Datatype) -> Result<(Value, &'static str, u64), String> {
    let order = |o: &ByteOrder| match o {
        ByteOrder::BigEndian => "big",
        _ => "little",
    };
    let unsupported = || {
        format!(
            "its type {nc:?} is not read by ndfusion yet (numbers, characters, strings, enums \
             and compounds are)"
        )
    };
    let (name, endian): (&str, &str) = match (nc, h5) {
        // An enum is read as its base integer, as xarray reads it (`encoding["dtype"]`
        // keeps the enum; the values are the integers).
        (NcType::Enum { base, .. }, Datatype::Enum { base: stored, .. }) => {
            return zarr_type(base, stored)
        }
        (NcType::Char, Datatype::String { .. }) => {
            return Ok((
                json!({"name": "null_terminated_bytes", "configuration": {"length_bytes": 1}}),
                "little",
                1,
            ))
        }
        (NcType::Byte, Datatype::FixedPoint { byte_order, .. }) => ("int8", order(byte_order)),
        (NcType::UByte, Datatype::FixedPoint { byte_order, .. }) => ("uint8", order(byte_order)),
        (NcType::Short, Datatype::FixedPoint { byte_order, .. }) => ("int16", order(byte_order)),
        (NcType::UShort, Datatype::FixedPoint { byte_order, .. }) => ("uint16", order(byte_order)),
        (NcType::Int, Datatype::FixedPoint { byte_order, .. }) => ("int32", order(byte_order)),
        (NcType::UInt, Datatype::FixedPoint { byte_order, .. }) => ("uint32", order(byte_order)),
        (NcType::Int64, Datatype::FixedPoint { byte_order, .. }) => ("int64", order(byte_order)),
        (NcType::UInt64, Datatype::FixedPoint { byte_order, .. }) => ("uint64", order(byte_order)),
        (NcType::Float, Datatype::FloatingPoint { byte_order, .. }) => {
            ("float32", order(byte_order))
        }
        (NcType::Double, Datatype::FloatingPoint { byte_order, .. }) => {
            ("float64", order(byte_order))
        }
        _ => return Err(unsupported()),
    };
    let size = nc.size().map_err(|_| unsupported())? as u64;
    Ok((Value::from(name), endian, size))
}

/// The fill value of unwritten chunks: the dataset's, else HDF5's default (zeros), as the
/// Zarr v3 `fill_value` of `data_type` (floats as their exact bits).
fn fill_value(
    stored: &Stored,
    data_type: &Value,
    endian: &str,
    elem: u64,
) -> Result<Value, String> {
    let bytes = stored.fill_bytes(elem)?;
    let mut raw = [0u8; 8];
    if endian == "big" {
        raw[8 - bytes.len()..].copy_from_slice(&bytes);
        raw.reverse();
    } else {
        raw[..bytes.len()].copy_from_slice(&bytes);
    }
    let bits = u64::from_le_bytes(raw);
    let sign_extend = |width: u32| ((bits << (64 - width)) as i64) >> (64 - width);
    Ok(match data_type.as_str() {
        Some("int8") => json!(sign_extend(8)),
        Some("int16") => json!(sign_extend(16)),
        Some("int32") => json!(sign_extend(32)),
        Some("int64") => json!(bits as i64),
        Some("uint8" | "uint16" | "uint32" | "uint64") => json!(bits),
        Some("float32") => json!(format!("0x{:08x}", bits as u32)),
        Some("float64") => json!(format!("0x{bits:016x}")),
        _ => json!(bytes),
    })
}

/// The Zarr v3 codecs (after `bytes`) that decode what HDF5 `filters` encoded, in the order
/// they were applied; an HDF5 filter ndfusion does not decode is an error naming it.
fn filter_codecs(
    filters: &[FilterDescription],
    datatype: &Datatype,
    elem: u64,
) -> Result<Vec<Value>, String> {
    (filters.iter())
        .map(|f| {
            let param = |i: usize| f.client_data.get(i).copied();
            Ok(match f.id {
                1 => {
                    let level = param(0).unwrap_or(4).min(9);
                    json!({"name": "numcodecs.zlib", "configuration": {"level": level}})
                }
                2 => {
                    let size = param(0).map(u64::from).unwrap_or(elem);
                    json!({"name": "numcodecs.shuffle", "configuration": {"elementsize": size}})
                }
                3 => json!({"name": "numcodecs.fletcher32", "configuration": {}}),
                4 => {
                    super::hdf5_codecs::register();
                    let client_data = &f.client_data;
                    json!({"name": super::hdf5_codecs::SZIP, "configuration": {"client_data": client_data}})
                }
                5 => nbit_codec(&f.client_data, datatype)?,
                6 => {
                    super::hdf5_codecs::register();
                    let client_data = &f.client_data;
                    json!({"name": super::hdf5_codecs::SCALEOFFSET, "configuration": {"client_data": client_data}})
                }
                32015 => json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}}),
                307 => json!({"name": "numcodecs.bz2", "configuration": {"level": 9}}),
                32004 => {
                    super::hdf5_codecs::register();
                    json!({"name": super::hdf5_codecs::LZ4})
                }
                // A blosc frame says how it was made; the configuration only has to parse.
                32001 => {
                    let cname = match param(6).unwrap_or(0) {
                        0 => "blosclz",
                        1 => "lz4",
                        2 => "lz4hc",
                        4 => "zlib",
                        5 => "zstd",
                        other => return Err(format!("its blosc filter uses compressor {other}, which ndfusion does not decode")),
                    };
                    json!({"name": "blosc", "configuration": {"cname": cname, "clevel": param(4).unwrap_or(5).min(9), "shuffle": "noshuffle", "blocksize": 0}})
                }
                id => {
                    return Err(format!(
                        "its HDF5 filter {} is not one ndfusion decodes (it decodes deflate, \
                         shuffle, fletcher32, szip, nbit, scaleoffset, zstd, blosc, bzip2 \
                         and lz4)",
                        filter_name(id, f.name.as_deref())
                    ))
                }
            })
        })
        .collect()
}

/// The codec of HDF5's n-bit filter on `datatype`: integers of any precision (made whole by
/// the codec), anything else only when nothing of it is packed away (its full precision).
fn nbit_codec(client_data: &[u32], datatype: &Datatype) -> Result<Value, String> {
    super::hdf5_codecs::register();
    // [parameters, nothing packed, elements, class (1: atomic), size, order, precision, offset]
    let nothing_packed = client_data.get(1) == Some(&1);
    let full = |size: u32, precision: u32, offset: u32| {
        u64::from(precision) == u64::from(size) * 8 && offset == 0
    };
    let signed = match (datatype, client_data) {
        (Datatype::FixedPoint { signed, .. }, [_, _, _, 1, ..]) => *signed,
        (_, [_, _, _, 1, size, _, precision, offset]) if full(*size, *precision, *offset) => false,
        _ if nothing_packed => false,
        _ => {
            return Err(
                "its 'nbit' filter (id 5) packs a type other than an integer to fewer bits, \
                 which ndfusion does not decode"
                    .into(),
            )
        }
    };
    Ok(json!({
        "name": super::hdf5_codecs::NBIT,
        "configuration": {"client_data": client_data, "signed": signed},
    }))
}

/// An HDF5 filter as errors name it: its registered name and id.
fn filter_name(id: u16, name: Option<&str>) -> String {
    let known = match id {
        4 => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        32004 => "lz4",
        32008 => "bitshuffle",
        32013 => "zfp",
        32017 => "sz",
        _ => name.unwrap_or("unregistered"),
    };
    format!("'{known}' (id {id})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_types_netcdf4_python_leaves_out_are_left_out() {
        use netcdf_reader::NcCompoundField;
        let field = |dtype| NcCompoundField {
            name: "m".into(),
            offset: 0,
            dtype,
        };
        let compound = |dtype| NcType::Compound {
            size: 8,
            fields: vec![field(NcType::Int), field(dtype)],
        };
        let array = |base| NcType::Array {
            base: Box::new(base),
            dims: vec![2],
        };
        let vlen = |base| NcType::VLen {
            base: Box::new(base),
        };
        let opaque = || NcType::Opaque {
            size: 2,
            tag: String::new(),
        };
        let enum_ = || NcType::Enum {
            base: Box::new(NcType::Byte),
            members: vec![],
        };
        // What netCDF4-python 1.7.5 shows (checked on files h5py wrote).
        for shown in [
            NcType::Float,
            NcType::String,
            enum_(),
            vlen(NcType::Short),
            compound(NcType::Char),
            compound(array(NcType::Double)),
            compound(compound(NcType::UByte)),
        ] {
            assert_eq!(left_out_by_netcdf4_python(&shown), None, "{shown:?}");
        }
        for left_out in [
            opaque(),
            vlen(compound(NcType::Int)),
            vlen(enum_()),
            compound(enum_()),
            compound(opaque()),
            compound(compound(opaque())),
            compound(vlen(NcType::Short)),
            compound(NcType::String),
            compound(array(compound(NcType::Short))),
            compound(array(enum_())),
        ] {
            assert!(
                left_out_by_netcdf4_python(&left_out).is_some(),
                "{left_out:?}"
            );
        }
        // A nesting deeper than the bound is left out, not recursed on.
        let deep = (0..40).fold(NcType::Int, |t, _| compound(t));
        assert!(left_out_by_netcdf4_python(&deep).is_some());
    }

    #[test]
    fn variables_left_out_are_listed_for_the_log() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/netcdf/skipped.nc");
        let bytes = std::fs::read(path).unwrap();
        let storage = || -> DynStorage { Arc::new(hdf5_reader::BytesStorage::new(bytes.clone())) };
        let layout = nc4_layout(storage(), 1 << 24, None, None).unwrap();
        let left_out: Vec<&str> = (layout.left_out.iter())
            .map(|why| why.split('\'').nth(1).unwrap())
            .collect();
        assert_eq!(left_out, ["pairs", "blob", "flags", "tagged", "ragged"]);
        assert!(!layout.order.contains(&"flags".to_string()));
        let wanted = ["flags".to_string()];
        let layout = nc4_layout(storage(), 1 << 24, None, Some(&wanted)).unwrap();
        assert!(layout.left_out.is_empty(), "{:?}", layout.left_out);
        assert!(layout.order.contains(&"flags".to_string()));
    }

    #[test]
    fn fill_elements_are_checked_before_they_are_allocated() {
        let stored = Stored {
            datatype: Datatype::Opaque {
                size: u32::MAX,
                tag: String::new(),
            },
            layout: DataLayout::Compact { data: vec![] },
            filters: vec![],
            fill: None,
            bits: None,
        };
        // A compound or array type may claim 4 GiB and more an element.
        let err = stored.fill_bytes(u64::from(u32::MAX)).unwrap_err();
        assert!(err.contains("elements of 4294967295 bytes"), "{err}");
        assert_eq!(stored.fill_bytes(3).unwrap(), [0, 0, 0]);
    }

    #[test]
    fn nbit_is_read_for_integers_and_refused_for_floats_it_packs() {
        let int = Datatype::FixedPoint {
            size: 2,
            signed: true,
            byte_order: ByteOrder::LittleEndian,
        };
        let float = Datatype::FloatingPoint {
            size: 4,
            byte_order: ByteOrder::LittleEndian,
        };
        // 12 bits of 16; a float of 24 bits of 32; a float HDF5 did not pack.
        let int_12 = [8, 0, 4, 1, 2, 0, 12, 0];
        let float_24 = [8, 0, 4, 1, 4, 0, 24, 8];
        let float_32 = [8, 0, 4, 1, 4, 0, 32, 0];
        let codec = nbit_codec(&int_12, &int).unwrap();
        assert_eq!(codec["configuration"]["signed"], json!(true));
        let err = nbit_codec(&float_24, &float).unwrap_err();
        assert!(err.contains("'nbit' filter (id 5)"), "{err}");
        assert_eq!(
            nbit_codec(&float_32, &float).unwrap()["configuration"]["signed"],
            json!(false)
        );
        let nothing_packed = [8, 1, 4, 1, 4, 0, 24, 8];
        assert!(nbit_codec(&nothing_packed, &float).is_ok());
        // A crafted size does not overflow.
        let huge = [8, 0, 4, 1, u32::MAX, 0, u32::MAX, 0];
        assert!(nbit_codec(&huge, &float).is_err());
    }
}
