//! What `STORED AS HDF5` opens in a file: the dataset `path` names (an array), the group it
//! names (a dataset table, read as a netCDF-4 group is), or, without `path`, the file's one
//! dataset.

use std::sync::Arc;

use hdf5_reader::storage::DynStorage;
use hdf5_reader::{Hdf5File, OpenOptions};

use super::dataset::{dataset_layout, list_datasets};
use crate::error::{Error, Result};
use crate::netcdf::layout::Layout;
use crate::netcdf::nc4::{cached, nc4_layout};
use crate::netcdf::store::{
    hdf5_metadata, hdf5_signature, open_existing, read, store_over, HDF5_MAGIC,
};
use crate::storage::StorageOptions;
use crate::zarr::store::ZarrStore;

/// Datasets a file without `path` may be searched for (the error lists them when there are
/// several).
const MAX_LISTED: usize = 10_000;

/// The store of what `path` names in the HDF5 file at `location` (see the module's doc).
pub(crate) async fn open_hdf5(
    location: &str,
    options: &StorageOptions,
    path: Option<&str>,
    wanted: Option<&[String]>,
) -> Result<ZarrStore> {
    let limits = options.limits()?;
    let cannot = |reason: String| Error::NotFound {
        location: location.to_string(),
        reason,
    };
    let (file, len) = open_existing(location, options).await?;
    let head = read(&file, 0..HDF5_MAGIC.len().min(len as usize) as u64)
        .await
        .map_err(&cannot)?;
    if hdf5_signature(&file, &head, len).await.is_none() {
        let hint = match crate::netcdf::file_format_hint(&head) {
            Some(hint) => format!(" ({hint})"),
            None => String::new(),
        };
        return Err(cannot(format!(
            "not an HDF5 file: HDF5's signature is not at its start, nor after a user block \
             of 512 bytes, 1 KiB, ... 512 KiB{hint}"
        )));
    }
    let max = limits.metadata_bytes;
    let (path, wanted) = (path.map(str::to_string), wanted.map(<[String]>::to_vec));
    let layout = hdf5_metadata(&file, len, max, move |storage| {
        layout(storage, max, path.as_deref(), wanted.as_deref())
    });
    let layout = layout.await.map_err(&cannot)?;
    Ok(store_over(location, file, layout, limits))
}

/// The layout of what `path` names. Blocking: call it off the async workers.
fn layout(
    storage: DynStorage,
    metadata_bytes: u64,
    path: Option<&str>,
    wanted: Option<&[String]>,
) -> std::result::Result<Layout, String> {
    let file_len = storage.len();
    // One cache for everything read here and by the netCDF-4 layout of a group.
    let cached = cached(storage);
    let header_limit = usize::try_from(metadata_bytes).unwrap_or(usize::MAX);
    let h5 = Hdf5File::from_storage_with_options(
        Arc::clone(&cached),
        OpenOptions::default().with_max_object_header_bytes(header_limit),
    )
    .map_err(|e| format!("its HDF5 metadata: {e}"))?;
    let root = h5
        .root_group()
        .map_err(|e| format!("its root group: {e}"))?;
    let path = match path {
        Some(path) => path.to_string(),
        None => {
            let found = list_datasets(root.clone(), MAX_LISTED)?;
            match found.as_slice() {
                [one] => one.clone(),
                [] => return Err("it holds no dataset".into()),
                many => {
                    let shown: Vec<&str> = many.iter().take(8).map(String::as_str).collect();
                    let more = match many.len() > 8 {
                        true => format!(", and {} more", many.len() - 8),
                        false => String::new(),
                    };
                    return Err(format!(
                        "it holds {} datasets ({}{more}): name one with OPTIONS ('path' \
                         '/group/dataset'), or a group with 'path' to read it as a dataset table",
                        many.len(),
                        shown.join(", ")
                    ));
                }
            }
        }
    };
    // The group holding the last part of `path`, and that part.
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let Some((last, parents)) = parts.split_last() else {
        // The root group, as a dataset table.
        return nc4_layout(cached, metadata_bytes, None, wanted);
    };
    let mut parent = root;
    let mut walked = String::new();
    for part in parents {
        walked = format!("{walked}/{part}");
        parent = parent.group(part).map_err(|_| {
            format!("'path' names '{path}', but there is no group '{walked}' in it")
        })?;
    }
    let (groups, datasets) = parent
        .member_names()
        .map_err(|e| format!("group '/{}': {e}", parents.join("/")))?;
    if datasets.iter().any(|d| d == last) {
        let ds = parent
            .dataset(last)
            .map_err(|e| format!("dataset '{path}': {e}"))?;
        dataset_layout(&h5, &parent, &ds, &path, file_len, metadata_bytes)
    } else if groups.iter().any(|g| g == last) {
        nc4_layout(cached, metadata_bytes, Some(&path), wanted)
    } else {
        let mut there: Vec<String> = groups.iter().map(|g| format!("{g}/")).collect();
        there.extend(datasets);
        there.truncate(20);
        Err(format!(
            "'path' names '{path}', but '/{}' holds no '{last}' (it holds: {})",
            parents.join("/"),
            match there.is_empty() {
                true => "nothing".to_string(),
                false => there.join(", "),
            }
        ))
    }
}
