//! Where a Zarr array's objects (metadata and chunks) are read from: a local folder, read with
//! zarrs' filesystem store on blocking threads (`local_store.rs`: byte ranges checked against
//! the file), or an object store, read asynchronously.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::storage_adapter::sync_to_async::{
    SyncToAsyncSpawnBlocking, SyncToAsyncStorageAdapter,
};
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, ReadableStorageTraits,
    StorageError, StoreKey,
};

use crate::error::{BoxError, Error, Result};
#[cfg(feature = "icechunk")]
use crate::icechunk::store::{IcechunkStorage, IcechunkStore};
use crate::limits::Limits;
use crate::zarr::local_store::LocalStore;

use crate::storage::{local_folder, resolve, RemoteStore, Resolved, StorageOptions};

/// The store of one Zarr array.
#[derive(Clone)]
pub(crate) enum ZarrStore {
    /// A local folder.
    Local(Arc<LocalStore>),
    /// A prefix of an object store.
    Remote(RemoteStore),
    /// A node of one snapshot of an Icechunk repository.
    #[cfg(feature = "icechunk")]
    Icechunk(IcechunkStore),
}

impl std::fmt::Debug for ZarrStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZarrStore::Local(_) => f.write_str("Local"),
            ZarrStore::Remote(r) => write!(f, "Remote({})", r.display("")),
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(i) => i.fmt(f),
        }
    }
}

impl ZarrStore {
    /// The store of the array at `location`. Nothing is read yet.
    pub(crate) fn open(location: &str, options: &StorageOptions) -> Result<Self> {
        // Every Zarr location opens here: a bad NDFUSION_MAX_* variable is reported first.
        Limits::current()?;
        match resolve(location, options)? {
            Resolved::Local(path) => {
                // The array's folder, holding `zarr.json` or `.zarray`.
                local_folder(location, &path, "a Zarr array folder")?;
                let store = LocalStore::new(&path).map_err(|e| Error::NotFound {
                    location: location.to_string(),
                    reason: e.to_string(),
                })?;
                Ok(ZarrStore::Local(Arc::new(store)))
            }
            Resolved::Remote(remote) => Ok(ZarrStore::Remote(remote)),
        }
    }

    /// Whether reads are asynchronous (an object store, an Icechunk session), not blocking
    /// reads of local files.
    pub(crate) fn is_remote(&self) -> bool {
        !matches!(self, ZarrStore::Local(_))
    }

    /// The whole chunk at `key`, of at most `limit` bytes (its size is checked before its
    /// body is read); `None` when there is none.
    pub(crate) async fn get_chunk(&self, key: &str, limit: u64) -> Result<Option<Bytes>, BoxError> {
        match self {
            ZarrStore::Local(fs) => {
                let fs = Arc::clone(fs);
                let key = StoreKey::new(key)?;
                Ok(tokio::task::spawn_blocking(move || fs.get_chunk(&key, limit)).await??)
            }
            ZarrStore::Remote(remote) => match remote.store.get(&remote.path(key)).await {
                Ok(result) if result.meta.size > limit => Err(Box::new(ChunkTooLarge {
                    size: result.meta.size,
                    limit,
                })),
                Ok(result) => Ok(Some(result.bytes().await?)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(Box::new(e)),
            },
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => match ice.size(key).await? {
                None => Ok(None),
                Some(size) if size > limit => Err(Box::new(ChunkTooLarge { size, limit })),
                Some(_) => ice.get(key, None).await,
            },
        }
    }

    /// The metadata document at `key` (`zarr.json`, `.zarray`, ...), at most
    /// `Limits::metadata_bytes` (64 MiB; consolidated metadata of thousands of variables is a
    /// few MiB); `None` when there is none. The size is checked before the body is read (one
    /// request remotely: the answer's length), so a huge document costs nothing.
    pub(crate) async fn get_document(&self, key: &str) -> Result<Option<Bytes>, BoxError> {
        let max = Limits::get().metadata_bytes;
        let too_large = move |size: u64| -> BoxError {
            format!(
                "the document is {size} bytes, more than the {max} a metadata document may \
                 have (NDFUSION_MAX_METADATA_BYTES)"
            )
            .into()
        };
        match self {
            ZarrStore::Local(fs) => {
                let fs = Arc::clone(fs);
                let key = StoreKey::new(key)?;
                tokio::task::spawn_blocking(move || -> Result<_, BoxError> {
                    match fs.size_key(&key)? {
                        None => Ok(None),
                        Some(size) if size > max => Err(too_large(size)),
                        Some(_) => Ok(fs.get(&key)?),
                    }
                })
                .await?
            }
            ZarrStore::Remote(remote) => match remote.store.get(&remote.path(key)).await {
                Ok(result) if result.meta.size > max => Err(too_large(result.meta.size)),
                Ok(result) => Ok(Some(result.bytes().await?)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(Box::new(e)),
            },
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => match ice.size(key).await? {
                None => Ok(None),
                Some(size) if size > max => Err(too_large(size)),
                Some(_) => ice.get(key, None).await,
            },
        }
    }

    /// Bytes `range` of the object at `key`, with the object's whole size, in one request;
    /// `None` when there is no such object.
    pub(crate) async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        match self {
            ZarrStore::Local(fs) => {
                let fs = Arc::clone(fs);
                let key = StoreKey::new(key)?;
                tokio::task::spawn_blocking(move || -> Result<_, BoxError> {
                    let Some(size) = fs.size_key(&key)? else {
                        return Ok(None);
                    };
                    let bytes = fs.get_partial(
                        &key,
                        ByteRange::FromStart(range.start, Some(range.end - range.start)),
                    )?;
                    Ok(bytes.map(|b| (b, size)))
                })
                .await?
            }
            ZarrStore::Remote(remote) => {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(range)),
                    ..GetOptions::default()
                };
                match remote.store.get_opts(&remote.path(key), options).await {
                    Ok(result) => {
                        let size = result.meta.size;
                        Ok(Some((result.bytes().await?, size)))
                    }
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(Box::new(e)),
                }
            }
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => {
                (ice.get_range(key, icechunk::format::ByteRange::Bounded(range))).await
            }
        }
    }

    /// The last `n` bytes of the remote object at `key` (all of it when shorter), with its
    /// whole size, in one request (two where the store has no suffix requests); `None` when
    /// there is no such object.
    pub(crate) async fn get_suffix(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        let remote = match self {
            ZarrStore::Remote(remote) => remote,
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => {
                return ice
                    .get_range(key, icechunk::format::ByteRange::Last(n))
                    .await
            }
            ZarrStore::Local(_) => return Err("a suffix request to a local store".into()),
        };
        let path = remote.path(key);
        let options = GetOptions {
            range: Some(GetRange::Suffix(n)),
            ..GetOptions::default()
        };
        match remote.store.get_opts(&path, options).await {
            Ok(result) => {
                let size = result.meta.size;
                Ok(Some((result.bytes().await?, size)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(object_store::Error::NotSupported { .. }) => {
                let size = remote.store.head(&path).await?.size;
                let bytes = remote
                    .store
                    .get_range(&path, size.saturating_sub(n)..size)
                    .await?;
                Ok(Some((bytes, size)))
            }
            Err(e) => Err(Box::new(e)),
        }
    }

    /// The names of the store root's children that may be nodes (folders, or key prefixes),
    /// sorted.
    pub(crate) async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        let mut names = match self {
            ZarrStore::Local(fs) => {
                let root = fs.key_to_fspath(&StoreKey::new("zarr.json")?);
                let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
                tokio::task::spawn_blocking(move || -> Result<Vec<String>, BoxError> {
                    let mut names = Vec::new();
                    for entry in std::fs::read_dir(&dir)? {
                        let entry = entry?;
                        if entry.file_type()?.is_dir() {
                            names.push(entry.file_name().to_string_lossy().to_string());
                        }
                    }
                    Ok(names)
                })
                .await??
            }
            ZarrStore::Remote(remote) => {
                let listing = remote.store.list_with_delimiter(Some(&remote.root)).await?;
                listing
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(str::to_string))
                    .collect()
            }
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => ice.list_children().await?,
        };
        names.sort();
        Ok(names)
    }

    /// Why a remote location holds no array, when the store can tell.
    pub(crate) async fn why_absent(&self) -> Option<String> {
        match self {
            ZarrStore::Local(_) => None,
            ZarrStore::Remote(remote) => remote.why_absent().await,
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(_) => Some(
                "no array or group at this path in this snapshot: the 'path' option must name \
                 one"
                .into(),
            ),
        }
    }

    /// The store as zarrs reads it: chunk keys, codecs and partial decoders of an `Array`.
    pub(crate) fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        match self {
            ZarrStore::Local(fs) => Arc::new(SyncToAsyncStorageAdapter::new(
                Arc::clone(fs),
                TokioBlockingPool,
            )),
            ZarrStore::Remote(remote) => Arc::new(ObjectStoreStorage(remote.clone())),
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(ice) => Arc::new(IcechunkStorage(ice.clone())),
        }
    }

    /// The local store, for reads made on the thread that decodes them.
    pub(crate) fn blocking(&self) -> Option<Arc<LocalStore>> {
        match self {
            ZarrStore::Local(fs) => Some(Arc::clone(fs)),
            ZarrStore::Remote(_) => None,
            #[cfg(feature = "icechunk")]
            ZarrStore::Icechunk(_) => None,
        }
    }
}

/// A stored chunk larger than its decoded size allows (what any codec adds is a few bytes per
/// block): refused before it is read.
#[derive(Debug, thiserror::Error)]
#[error("the stored chunk holds {size} bytes, more than the {limit} its decoded size allows")]
pub(crate) struct ChunkTooLarge {
    pub size: u64,
    pub limit: u64,
}

/// Runs the filesystem store's reads on tokio's blocking pool. zarrs' filesystem store reads
/// into uninitialised buffers at an offset; object_store's `LocalFileSystem` zeroes each
/// buffer before reading into it, which cost 15% of an uncompressed scan (BENCHMARKS.md).
struct TokioBlockingPool;

impl SyncToAsyncSpawnBlocking for TokioBlockingPool {
    async fn spawn_blocking<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// zarrs' async storage over an object store. Unlike `zarrs_object_store` 0.7, a read of known
/// byte ranges is one request (no HEAD first), and a suffix (a shard index) is one request.
struct ObjectStoreStorage(RemoteStore);

/// One range of an object. Stores without suffix requests (Azure) get a HEAD first.
async fn get_any_range(
    store: &dyn ObjectStore,
    path: &object_store::path::Path,
    range: GetRange,
) -> object_store::Result<Bytes> {
    let options = GetOptions {
        range: Some(range.clone()),
        ..GetOptions::default()
    };
    match store.get_opts(path, options).await {
        Err(object_store::Error::NotSupported { .. }) => {
            let size = store.head(path).await?.size;
            let bounded = match range {
                GetRange::Suffix(n) => size.saturating_sub(n)..size,
                GetRange::Offset(o) => o.min(size)..size,
                GetRange::Bounded(r) => r,
            };
            store.get_range(path, bounded).await
        }
        result => result?.bytes().await,
    }
}

fn storage_error(e: object_store::Error) -> StorageError {
    StorageError::Other(crate::error::with_root_cause(&e))
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for ObjectStoreStorage {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        match self.0.store.get(&self.0.path(key.as_str())).await {
            Ok(result) => Ok(Some(result.bytes().await.map_err(storage_error)?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let path = self.0.path(key.as_str());
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        // Offsets and lengths come from the file (a shard's index): their sum may overflow.
        let end = |offset: u64, length: u64| {
            offset.checked_add(length).ok_or_else(|| {
                StorageError::Other(format!(
                    "{}: the byte range at offset {offset} of length {length} ends past 2^64",
                    key.as_str()
                ))
            })
        };
        for r in &ranges {
            if let ByteRange::FromStart(offset, Some(length)) = r {
                end(*offset, *length)?;
            }
        }
        let bounded: Option<Vec<Range<u64>>> = ranges
            .iter()
            .map(|r| match r {
                ByteRange::FromStart(offset, Some(length)) => Some(*offset..offset + length),
                _ => None,
            })
            .collect();
        let result = match bounded {
            // Known ranges: object_store coalesces nearby ones and fetches them concurrently.
            Some(bounded) => self.0.store.get_ranges(&path, &bounded).await,
            None => {
                futures::stream::iter(ranges)
                    .map(|r| {
                        let range = match r {
                            ByteRange::FromStart(offset, Some(length)) => {
                                GetRange::Bounded(offset..offset + length)
                            }
                            ByteRange::FromStart(offset, None) => GetRange::Offset(offset),
                            ByteRange::Suffix(length) => GetRange::Suffix(length),
                        };
                        get_any_range(self.0.store.as_ref(), &path, range)
                    })
                    .buffered(8)
                    .try_collect()
                    .await
            }
        };
        match result {
            Ok(parts) => Ok(Some(
                futures::stream::iter(parts.into_iter().map(Ok)).boxed(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        match self.0.store.head(&self.0.path(key.as_str())).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    #[tokio::test]
    async fn byte_ranges_that_overflow_are_errors_not_panics() {
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        memory
            .put(
                &object_store::path::Path::from("a/c/0"),
                PutPayload::from_static(b"0123"),
            )
            .await
            .unwrap();
        let remote = RemoteStore::given(memory, Path::new("/a")).unwrap();
        let storage = ObjectStoreStorage(remote);
        let key = StoreKey::new("c/0").unwrap();
        // A shard index may say anything: offset 2^64 - 2, length 16.
        let ranges = vec![ByteRange::FromStart(u64::MAX - 1, Some(16))];
        let err = match storage
            .get_partial_many(&key, Box::new(ranges.into_iter()))
            .await
        {
            Err(e) => e.to_string(),
            Ok(_) => panic!("an overflowing range was read"),
        };
        assert!(err.contains("ends past 2^64"), "{err}");
    }
}
