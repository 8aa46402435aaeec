//! What a location holds: a Zarr array, or a group whose member arrays form a dataset. A group's
//! members come from its consolidated metadata when it has some (one read opens the dataset),
//! otherwise from a listing of the group.

use futures::{StreamExt, TryStreamExt};
use serde_json::{Map, Value};
use zarrs::array::{ArrayMetadata, ArrayMetadataV2, ArrayMetadataV3};

use crate::error::{Error, Result};
use crate::zarr::metadata::array_meta::{
    default_dimension_names, dimension_names, parse_v3_value, regular_chunk_shape, u64_list,
    ArrayMeta,
};
use crate::zarr::metadata::attributes::check_attribute_count;
use crate::zarr::metadata::data_type::{vlen_list_item, VLEN_LIST};
use crate::zarr::metadata::v2::parse_v2_value;
use crate::zarr::store::ZarrStore;

/// A Zarr node.
pub(crate) enum Node {
    Array(Box<ArrayMeta>),
    Group(Group),
}

/// A group and its member arrays (child groups are not members).
pub(crate) struct Group {
    pub attributes: Map<String, Value>,
    /// By name, in store order (sorted).
    pub members: Vec<Member>,
    /// Whether the members came from consolidated metadata (else from a listing).
    pub consolidated: bool,
}

/// A member array of a group.
#[derive(Clone)]
pub(crate) struct Member {
    pub name: String,
    /// The member's metadata file, for messages.
    pub path: String,
    pub array: MemberArray,
}

/// How a member's elements are read.
#[derive(Clone)]
pub(crate) enum MemberArray {
    /// Fixed-size elements, read as raw bits and decoded by ndfusion.
    Fixed(ArrayMeta),
    /// Variable-length strings (v3 `string`, v2 `|O` with the vlen-utf8 filter), decoded by
    /// zarrs.
    Strings(StringArrayMeta),
}

impl MemberArray {
    pub(crate) fn shape(&self) -> &[u64] {
        match self {
            MemberArray::Fixed(m) => &m.shape,
            MemberArray::Strings(m) => &m.shape,
        }
    }

    pub(crate) fn chunk_shape(&self) -> &[u64] {
        match self {
            MemberArray::Fixed(m) => &m.chunk_shape,
            MemberArray::Strings(m) => &m.chunk_shape,
        }
    }

    pub(crate) fn dimension_names(&self) -> &[String] {
        match self {
            MemberArray::Fixed(m) => &m.dimension_names,
            MemberArray::Strings(m) => &m.dimension_names,
        }
    }

    pub(crate) fn attributes(&self) -> &Map<String, Value> {
        match self {
            MemberArray::Fixed(m) => &m.attributes,
            MemberArray::Strings(m) => &m.attributes,
        }
    }

    pub(crate) fn attributes_mut(&mut self) -> &mut Map<String, Value> {
        match self {
            MemberArray::Fixed(m) => &mut m.attributes,
            MemberArray::Strings(m) => &mut m.attributes,
        }
    }
}

/// A variable-length string array: zarrs keeps its own data type and codecs. Or, with `item`,
/// lists of numbers ([`VLEN_LIST`]), which zarrs decodes as `bytes`.
#[derive(Clone)]
pub(crate) struct StringArrayMeta {
    /// The item type of lists of numbers; `None` for strings.
    pub item: Option<arrow::datatypes::DataType>,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    pub dimension_names: Vec<String>,
    pub attributes: Map<String, Value>,
    pub zarrs_metadata: ArrayMetadata,
}

/// Reads the node at the store's root. `location` names it in messages.
pub(crate) async fn read_node(store: &ZarrStore, location: &str) -> Result<Node> {
    let base = location.trim_end_matches('/');
    let max = store.limits().attributes;
    let get = |key: String| async move {
        store
            .get_document(&key)
            .await
            .map_err(|e| read_error(&format!("{base}/{key}"), e))
    };
    if let Some(text) = get("zarr.json".into()).await? {
        let path = format!("{base}/zarr.json");
        let doc = json(&path, &text)?;
        if doc.get("node_type").and_then(Value::as_str) == Some("group") {
            return read_group_v3(store, base, &path, doc)
                .await
                .map(Node::Group);
        }
        return parse_v3_value(&path, doc, max).map(|m| Node::Array(Box::new(m)));
    }
    if let Some(text) = get(".zarray".into()).await? {
        let path = format!("{base}/.zarray");
        let attrs = match get(".zattrs".into()).await? {
            Some(a) => Some(json(&format!("{base}/.zattrs"), &a)?),
            None => None,
        };
        return parse_v2_value(&path, json(&path, &text)?, attrs, max)
            .map(|m| Node::Array(Box::new(m)));
    }
    if get(".zgroup".into()).await?.is_some() {
        return read_group_v2(store, base).await.map(Node::Group);
    }
    let reason = store.why_absent().await.unwrap_or_else(|| {
        "neither zarr.json nor .zarray nor .zgroup here: LOCATION must name a Zarr array or group"
            .into()
    });
    Err(Error::NotFound {
        location: location.to_string(),
        reason,
    })
}

fn json(path: &str, bytes: &[u8]) -> Result<Value> {
    crate::zarr::metadata::json::parse(path, bytes)
}

/// A failed metadata read (not an absent file).
fn read_error(location: &str, source: crate::error::BoxError) -> Error {
    match source.downcast::<object_store::Error>() {
        Ok(e) => Error::ObjectStore {
            location: location.to_string(),
            source: *e,
        },
        Err(other) => Error::NotFound {
            location: location.to_string(),
            reason: other.to_string(),
        },
    }
}

fn attributes_of(path: &str, value: Option<&Value>, max: usize) -> Result<Map<String, Value>> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => {
            check_attribute_count(m, max).map_err(|p| p.at(path))?;
            Ok(m.clone())
        }
        Some(other) => Err(Error::InvalidMetadata {
            path: path.to_string(),
            reason: format!("attributes must be an object, found {other}"),
        }),
    }
}

/// Member documents a group's listing reads at once: each is a request, and over a network
/// one after another they cost a round trip each.
const DOCUMENTS_IN_FLIGHT: usize = 16;

/// `read` of every name, up to [`DOCUMENTS_IN_FLIGHT`] at a time, in the names' order.
async fn in_flight<T, F, Fut>(names: Vec<String>, read: F) -> Result<Vec<T>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    futures::stream::iter(names)
        .map(read)
        .buffered(DOCUMENTS_IN_FLIGHT)
        .try_collect()
        .await
}

async fn read_group_v3(store: &ZarrStore, base: &str, path: &str, doc: Value) -> Result<Group> {
    let max = store.limits().attributes;
    let attributes = attributes_of(path, doc.get("attributes"), max)?;
    let consolidated = doc
        .get("consolidated_metadata")
        .filter(|c| !c.is_null())
        .and_then(|c| c.get("metadata"))
        .and_then(Value::as_object);
    let mut members = Vec::new();
    let from_consolidated = consolidated.is_some();
    match consolidated {
        Some(nodes) => {
            for (name, node) in nodes {
                // Only direct children: nested groups' arrays are not the dataset's.
                if name.contains('/') {
                    continue;
                }
                let member_path = format!("{base}/{name}/zarr.json");
                if node.get("node_type").and_then(Value::as_str) == Some("array") {
                    members.push(member_v3(name, &member_path, node.clone(), max)?);
                }
            }
        }
        None => {
            let names = (store.list_children().await).map_err(|e| read_error(base, e))?;
            let documents = in_flight(names, |name| async move {
                let key = format!("{name}/zarr.json");
                let text = store
                    .get_document(&key)
                    .await
                    .map_err(|e| read_error(&format!("{base}/{key}"), e))?;
                Ok((name, key, text))
            })
            .await?;
            for (name, key, text) in documents {
                let Some(text) = text else {
                    continue;
                };
                let member_path = format!("{base}/{key}");
                let node = json(&member_path, &text)?;
                if node.get("node_type").and_then(Value::as_str) == Some("array") {
                    members.push(member_v3(&name, &member_path, node, max)?);
                }
            }
        }
    }
    order_members(store, &mut members);
    Ok(Group {
        attributes,
        members,
        consolidated: from_consolidated,
    })
}

async fn read_group_v2(store: &ZarrStore, base: &str) -> Result<Group> {
    let max = store.limits().attributes;
    let get = |key: String| async move {
        store
            .get_document(&key)
            .await
            .map_err(|e| read_error(&format!("{base}/{key}"), e))
    };
    let attributes = match get(".zattrs".into()).await? {
        Some(text) => {
            let path = format!("{base}/.zattrs");
            attributes_of(&path, Some(&json(&path, &text)?), max)?
        }
        None => Map::new(),
    };
    let mut members = Vec::new();
    let consolidated = match get(".zmetadata".into()).await? {
        Some(text) => {
            let path = format!("{base}/.zmetadata");
            let doc = json(&path, &text)?;
            let nodes = doc
                .get("metadata")
                .and_then(Value::as_object)
                .ok_or_else(|| Error::InvalidMetadata {
                    path: path.clone(),
                    reason: "no \"metadata\" object".into(),
                })?;
            for (key, zarray) in nodes {
                let Some(name) = key.strip_suffix("/.zarray") else {
                    continue;
                };
                if name.contains('/') {
                    continue;
                }
                let zattrs = nodes.get(&format!("{name}/.zattrs")).cloned();
                let member_path = format!("{base}/{name}/.zarray");
                members.push(member_v2(name, &member_path, zarray.clone(), zattrs, max)?);
            }
            true
        }
        None => {
            let names = (store.list_children().await).map_err(|e| read_error(base, e))?;
            let documents = in_flight(names, |name| async move {
                let zarray = get(format!("{name}/.zarray")).await?;
                // An array's attributes (not asked for what is not an array).
                let zattrs = match zarray {
                    Some(_) => get(format!("{name}/.zattrs")).await?,
                    None => None,
                };
                Ok((name, zarray, zattrs))
            })
            .await?;
            for (name, text, zattrs) in documents {
                let Some(text) = text else {
                    continue;
                };
                let member_path = format!("{base}/{name}/.zarray");
                let zattrs = match zattrs {
                    Some(a) => Some(json(&format!("{base}/{name}/.zattrs"), &a)?),
                    None => None,
                };
                members.push(member_v2(
                    &name,
                    &member_path,
                    json(&member_path, &text)?,
                    zattrs,
                    max,
                )?);
            }
            false
        }
    };
    order_members(store, &mut members);
    Ok(Group {
        attributes,
        members,
        consolidated,
    })
}

fn member_v3(name: &str, path: &str, doc: Value, max: usize) -> Result<Member> {
    let data_type = doc.get("data_type");
    let lists = data_type.is_some_and(|t| t.get("name").and_then(Value::as_str) == Some(VLEN_LIST));
    let array = if lists || data_type.and_then(Value::as_str) == Some("string") {
        MemberArray::Strings(strings_v3(path, doc, max)?)
    } else {
        MemberArray::Fixed(parse_v3_value(path, doc, max)?)
    };
    Ok(Member {
        name: name.to_string(),
        path: path.to_string(),
        array,
    })
}

fn member_v2(
    name: &str,
    path: &str,
    zarray: Value,
    zattrs: Option<Value>,
    max: usize,
) -> Result<Member> {
    let strings = zarray.get("dtype").and_then(Value::as_str) == Some("|O")
        && zarray
            .get("filters")
            .and_then(Value::as_array)
            .is_some_and(|f| {
                f.iter()
                    .any(|c| c.get("id").and_then(Value::as_str) == Some("vlen-utf8"))
            });
    // Zarr v2's fill value is the CF _FillValue, in place of any _FillValue attribute (xarray's
    // `use_zarr_fill_value_as_mask`, on for v2); a null fill value leaves the attribute.
    let fill = zarray.get("fill_value").cloned().unwrap_or(Value::Null);
    let with_fill = |attributes: &mut Map<String, Value>| {
        if !fill.is_null() {
            attributes.insert("_FillValue".into(), fill.clone());
        }
    };
    let array = if strings {
        let mut meta = strings_v2(path, zarray, zattrs, max)?;
        with_fill(&mut meta.attributes);
        MemberArray::Strings(meta)
    } else {
        let mut meta = parse_v2_value(path, zarray, zattrs, max)?;
        with_fill(&mut meta.attributes);
        MemberArray::Fixed(meta)
    };
    Ok(Member {
        name: name.to_string(),
        path: path.to_string(),
        array,
    })
}

fn strings_v3(path: &str, doc: Value, max: usize) -> Result<StringArrayMeta> {
    let invalid = |reason: String| Error::InvalidMetadata {
        path: path.to_string(),
        reason,
    };
    let shape = u64_list(doc.get("shape"), "shape").map_err(|p| p.at(path))?;
    let chunk_shape =
        regular_chunk_shape(doc.get("chunk_grid"), shape.len()).map_err(|p| p.at(path))?;
    let dimension_names =
        dimension_names(doc.get("dimension_names"), shape.len()).map_err(|p| p.at(path))?;
    let attributes = attributes_of(path, doc.get("attributes"), max)?;
    let mut doc = doc;
    let item = vlen_list_item(&doc["data_type"]).map_err(invalid)?;
    if item.is_some() {
        // zarrs reads each element's items as bytes.
        doc["data_type"] = Value::from("bytes");
    }
    let v3: ArrayMetadataV3 = serde_json::from_value(doc)
        .map_err(|e| invalid(format!("metadata not accepted by zarrs: {e}")))?;
    Ok(StringArrayMeta {
        item,
        shape,
        chunk_shape,
        dimension_names,
        attributes,
        zarrs_metadata: ArrayMetadata::V3(v3),
    })
}

fn strings_v2(
    path: &str,
    zarray: Value,
    zattrs: Option<Value>,
    max: usize,
) -> Result<StringArrayMeta> {
    let invalid = |reason: String| Error::InvalidMetadata {
        path: path.to_string(),
        reason,
    };
    let shape = u64_list(zarray.get("shape"), "shape").map_err(|p| p.at(path))?;
    let chunk_shape = u64_list(zarray.get("chunks"), "chunks").map_err(|p| p.at(path))?;
    if chunk_shape.len() != shape.len() || chunk_shape.contains(&0) {
        return Err(invalid(format!(
            "chunks must be {} positive integers",
            shape.len()
        )));
    }
    let attributes = attributes_of(path, zattrs.as_ref(), max)?;
    let names = match attributes.get("_ARRAY_DIMENSIONS") {
        Some(Value::Array(names)) if names.len() == shape.len() => names
            .iter()
            .map(|n| n.as_str().map(str::to_string))
            .collect(),
        _ => vec![None; shape.len()],
    };
    let v2: ArrayMetadataV2 = serde_json::from_value(zarray)
        .map_err(|e| invalid(format!("metadata not accepted by zarrs: {e}")))?;
    Ok(StringArrayMeta {
        item: None,
        shape,
        chunk_shape,
        dimension_names: default_dimension_names(names),
        attributes,
        zarrs_metadata: ArrayMetadata::V2(v2),
    })
}

/// Members by name, or in the order the store's format keeps them (a netCDF file's).
fn order_members(store: &ZarrStore, members: &mut [Member]) {
    members.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(order) = store.member_order() {
        let at = |name: &str| order.iter().position(|n| n == name).unwrap_or(usize::MAX);
        members.sort_by_key(|m| at(&m.name));
    }
}
