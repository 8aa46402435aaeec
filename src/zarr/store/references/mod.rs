//! A Kerchunk reference file (`refs.json`, written by kerchunk or VirtualiZarr) as a Zarr
//! store: its keys are inline bytes or byte ranges of other files (netCDF, HDF5, GRIB), so
//! the Zarr reader reads those files' chunks in place. The document is read once, within the
//! metadata limit; the files it points to must be inside its own folder or prefix, or granted
//! with `virtual_chunk_containers`.
//!
//! `document.rs` reads the JSON (v0, v1 with `templates` and `gen`), `parquet_refs.rs`
//! kerchunk's Parquet references (a `refs.parq` folder), `template.rs` the JSON's
//! `{{ }}` expressions, `target.rs` where each URL is and how its bytes are read.

mod document;
mod parquet_refs;
pub(crate) mod target;
mod template;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use url::Url;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, StorageError, StoreKey,
};

use super::backend::{concurrent_parts, object_ranges, storage_error, Fetched, StoreBackend};
use super::remote::RemoteBackend;
use super::LocalStore;
use crate::error::{BoxError, Error, Result};
use crate::limits::{Limits, METADATA_BYTES};
use crate::storage::{resolve, Location, Resolved, StorageOptions};
use document::{Reference, References};
use target::Target;

/// Whether `location` names a reference file rather than a Zarr node: its last part ends in
/// `.json` (a Zarr node is a folder or prefix holding `zarr.json` or `.zarray`, never named so).
pub(crate) fn is_reference_file(location: &str) -> bool {
    if parquet_refs::is_parquet_references(location) {
        return true;
    }
    let last = location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    last.len() > ".json".len()
        && last.to_ascii_lowercase().ends_with(".json")
        && last != "zarr.json"
}

/// The Zarr store a reference file describes (cheap to clone: zarrs holds one too).
#[derive(Clone)]
pub(crate) struct ReferenceBackend {
    /// The reference file as it may be shown.
    shown: String,
    keys: Arc<BTreeMap<String, Reference>>,
    /// The files keys point into, by the id in [`Reference::File`].
    targets: Arc<[Target]>,
    /// The URLs of `targets`, for messages.
    urls: Arc<[String]>,
}

impl std::fmt::Debug for ReferenceBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "References({})", self.shown)
    }
}

impl ReferenceBackend {
    /// Reads the reference file at `location` (at most the metadata limit) and opens the files
    /// it points to, each inside the file's folder or one of `granted` (URL prefixes).
    pub(crate) async fn open(
        location: &str,
        options: &StorageOptions,
        granted: &[String],
        limits: &Limits,
    ) -> Result<Self> {
        let cannot = |reason: String| Error::NotFound {
            location: location.to_string(),
            reason,
        };
        let max = limits.metadata_bytes;
        let (references, base) = match parquet_refs::is_parquet_references(location) {
            true => fetch_parquet(location, options, max).await?,
            false => {
                let (document, base) = fetch_document(location, options, max).await?;
                let references = References::parse(&document, max)
                    .map_err(|reason| cannot(format!("the reference file: {reason}")))?;
                (references, base)
            }
        };
        // The folder (or prefix) the document is in: what its references may point into.
        let home = base.join("./").map_err(|e| cannot(e.to_string()))?;
        let mut urls = Vec::with_capacity(references.urls.len());
        for url in &references.urls {
            let url = target::absolute(url, &base).map_err(&cannot)?;
            target::check_allowed(&url, home.as_str(), granted).map_err(&cannot)?;
            urls.push(url);
        }
        let targets = target::open_targets(&urls, options)?;
        Ok(ReferenceBackend {
            shown: location.to_string(),
            keys: Arc::new(references.keys),
            targets: targets.into(),
            urls: urls.iter().map(crate::storage::redact_url).collect(),
        })
    }

    /// The size of the object at `key`, without reading it; `None` when there is none.
    async fn size(&self, key: &str) -> std::result::Result<Option<u64>, BoxError> {
        match self.keys.get(key) {
            None => Ok(None),
            Some(Reference::Inline(bytes)) => Ok(Some(bytes.len() as u64)),
            Some(Reference::File {
                range: Some(range), ..
            }) => Ok(Some(range.end - range.start)),
            Some(Reference::File { url, range: None }) => {
                match self.targets[*url]
                    .size()
                    .await
                    .map_err(|e| self.context(*url, e))?
                {
                    Some(size) => Ok(Some(size)),
                    None => Err(self.missing(*url)),
                }
            }
        }
    }

    /// Bytes `within` (relative to the object, inside its size) of the object at `key`;
    /// `None` when there is no such key.
    async fn read(
        &self,
        key: &str,
        within: Range<u64>,
    ) -> std::result::Result<Option<Bytes>, BoxError> {
        match self.keys.get(key) {
            None => Ok(None),
            Some(Reference::Inline(bytes)) => {
                let end = within.end.min(bytes.len() as u64) as usize;
                let start = (within.start as usize).min(end);
                Ok(Some(bytes.slice(start..end)))
            }
            Some(Reference::File { url, range }) => {
                let start = range.as_ref().map_or(0, |r| r.start);
                let absolute = start.saturating_add(within.start)..start.saturating_add(within.end);
                match self.targets[*url]
                    .read(absolute)
                    .await
                    .map_err(|e| self.context(*url, e))?
                {
                    Some(bytes) => Ok(Some(bytes)),
                    None => Err(self.missing(*url)),
                }
            }
        }
    }

    /// `range` of the object at `key` clipped to its `size`, or an error when it starts past it.
    fn clip(key: &str, range: Range<u64>, size: u64) -> std::result::Result<Range<u64>, BoxError> {
        if range.start > size || range.start > range.end {
            return Err(format!(
                "bytes {}..{} of '{key}', which holds {size}",
                range.start, range.end
            )
            .into());
        }
        Ok(range.start..range.end.min(size))
    }

    fn context(&self, url: usize, e: BoxError) -> BoxError {
        format!(
            "{}: {}",
            self.urls[url],
            crate::error::with_root_cause(e.as_ref())
        )
        .into()
    }

    fn missing(&self, url: usize) -> BoxError {
        format!(
            "{}, which a reference points to, does not exist",
            self.urls[url]
        )
        .into()
    }
}

/// The Parquet references in the folder `location` (`parquet_refs.rs`): `.zmetadata` and every
/// record file, all within `max` bytes; and the URL relative references resolve against (the
/// folder, as if it were a reference file: its paths are relative to where it is).
async fn fetch_parquet(
    location: &str,
    options: &StorageOptions,
    max: u64,
) -> Result<(References, Url)> {
    let cannot = |reason: String| Error::NotFound {
        location: location.to_string(),
        reason,
    };
    let root = location.trim_end_matches('/');
    let (zmetadata, at) = fetch_document(&format!("{root}/.zmetadata"), options, max).await?;
    let mut plan = parquet_refs::Plan::parse(&zmetadata, max)
        .map_err(|reason| cannot(format!("the references: {reason}")))?;
    let mut left = max.saturating_sub(zmetadata.len() as u64);
    for array in 0..plan.arrays.len() {
        let files: Vec<String> = plan.arrays[array].files(plan.record_size()).collect();
        for (index, file) in files.iter().enumerate() {
            let (bytes, _) = fetch_document(&format!("{root}/{file}"), options, left).await?;
            left = left.saturating_sub(bytes.len() as u64);
            plan.add_record(array, index as u64, bytes)
                .map_err(|reason| cannot(format!("{file}: {reason}")))?;
        }
    }
    let folder = at.join("./").map_err(|e| cannot(e.to_string()))?;
    let base =
        Url::parse(folder.as_str().trim_end_matches('/')).map_err(|e| cannot(e.to_string()))?;
    Ok((plan.references, base))
}

/// The reference document at `location` (refused past `max` bytes before its body is read)
/// and the URL its relative references resolve against.
async fn fetch_document(
    location: &str,
    options: &StorageOptions,
    max: u64,
) -> Result<(Bytes, Url)> {
    let cannot = |reason: String| Error::NotFound {
        location: location.to_string(),
        reason,
    };
    let too_large = |size: u64| {
        cannot(format!(
            "the reference file is {size} bytes, more than the {max} a metadata document may \
             have ({METADATA_BYTES})"
        ))
    };
    // A local-looking path in a store the application gave is read from that store, and its
    // references resolve as local paths do (into the same store).
    let base = match Location::parse(location)? {
        Location::Local(path) => {
            let absolute = std::path::absolute(&path).map_err(|e| cannot(e.to_string()))?;
            Url::from_file_path(&absolute).map_err(|()| cannot("not an absolute path".into()))?
        }
        Location::Remote { url, .. } => url,
    };
    // The document is read as a store's object: the key of its file in its folder (local),
    // or the object at the store path itself (remote).
    let fetched = match resolve(location, options)? {
        Resolved::Local(path) => {
            let (folder, file) = match (path.parent(), path.file_name()) {
                (Some(folder), Some(file)) => (folder, file.to_string_lossy().to_string()),
                _ => return Err(cannot("not a file".into())),
            };
            let folder = if folder.as_os_str().is_empty() {
                Path::new(".")
            } else {
                folder
            };
            let store = LocalStore::new(folder).map_err(|e| cannot(e.to_string()))?;
            Arc::new(store).get_at_most(&file, max).await
        }
        Resolved::Remote(remote) => RemoteBackend(remote).get_at_most("", max).await,
    };
    let bytes = match fetched.map_err(|e| cannot(crate::error::with_root_cause(e.as_ref())))? {
        Some(Fetched::Bytes(bytes)) => bytes,
        Some(Fetched::TooLarge(size)) => return Err(too_large(size)),
        None => return Err(cannot("no such file".into())),
    };
    Ok((bytes, base))
}

#[async_trait::async_trait]
impl StoreBackend for ReferenceBackend {
    /// Reads go to other files, possibly remote: always asynchronous.
    fn is_remote(&self) -> bool {
        true
    }

    async fn get_at_most(
        &self,
        key: &str,
        max: u64,
    ) -> std::result::Result<Option<Fetched>, BoxError> {
        match self.size(key).await? {
            None => Ok(None),
            Some(size) if size > max => Ok(Some(Fetched::TooLarge(size))),
            Some(size) => Ok(self.read(key, 0..size).await?.map(Fetched::Bytes)),
        }
    }

    async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> std::result::Result<Option<(Bytes, u64)>, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        let range = Self::clip(key, range, size)?;
        Ok(self.read(key, range).await?.map(|b| (b, size)))
    }

    async fn get_suffix(
        &self,
        key: &str,
        n: u64,
    ) -> std::result::Result<Option<(Bytes, u64)>, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        Ok(self
            .read(key, size.saturating_sub(n)..size)
            .await?
            .map(|b| (b, size)))
    }

    /// The first parts of keys that have more than one (`temp` of `temp/.zarray`).
    async fn list_children(&self) -> std::result::Result<Vec<String>, BoxError> {
        // Keys are sorted, so a child's keys are together.
        let mut children: Vec<String> = (self.keys.keys())
            .filter_map(|key| key.split_once('/').map(|(first, _)| first.to_string()))
            .collect();
        children.dedup();
        Ok(children)
    }

    async fn why_absent(&self) -> Option<String> {
        Some(
            "the reference file has no Zarr metadata at its root (zarr.json, .zgroup or \
             .zarray)"
                .into(),
        )
    }

    fn reads_beyond(&self) -> Vec<String> {
        self.urls.to_vec()
    }

    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        Arc::new(ReferenceStorage(self.clone()))
    }
}

/// The references as zarrs reads them: an `Array`'s chunk keys, codecs and partial decoders.
struct ReferenceStorage(ReferenceBackend);

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for ReferenceStorage {
    async fn get(&self, key: &StoreKey) -> std::result::Result<MaybeBytes, StorageError> {
        let key = key.as_str();
        match self.0.size(key).await.map_err(storage_error)? {
            None => Ok(None),
            Some(size) => self.0.read(key, 0..size).await.map_err(storage_error),
        }
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> std::result::Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let key = key.as_str();
        let Some(size) = self.0.size(key).await.map_err(storage_error)? else {
            return Ok(None);
        };
        let ranges = object_ranges(key, byte_ranges, size)?;
        concurrent_parts(ranges.into_iter().map(|range| self.0.read(key, range))).await
    }

    async fn size_key(&self, key: &StoreKey) -> std::result::Result<Option<u64>, StorageError> {
        self.0.size(key.as_str()).await.map_err(storage_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_files_are_told_by_their_name() {
        assert!(is_reference_file("data/refs.json"));
        assert!(is_reference_file("s3://bucket/run/REFS.JSON"));
        assert!(!is_reference_file("data/ocean.zarr"));
        assert!(!is_reference_file("data/zarr.json/"));
        assert!(!is_reference_file(".json"));
    }
}
