//! Where a Zarr node's objects (metadata and chunks) are read from: a [`ZarrStore`] over one
//! [`StoreBackend`] — a local folder (`local.rs`: zarrs' filesystem store on blocking
//! threads, byte ranges checked against the file), a prefix of an object store (`remote.rs`),
//! a Kerchunk reference file (`references/`: keys inline or in other files), or any other
//! backend a table kind brings (an Icechunk snapshot: `icechunk/store.rs`). The size checks of
//! chunks and metadata documents, and their errors, are written here once.

mod backend;
mod local;
mod references;
mod remote;

use std::ops::Range;
use std::sync::Arc;

use zarrs::storage::{AsyncReadableStorageTraits, Bytes, StoreKey};

#[cfg(feature = "icechunk")]
pub(crate) use backend::concurrent_parts;
pub(crate) use backend::{object_ranges, storage_error, Fetched, RangesRead, StoreBackend};
pub(crate) use local::LocalStore;
pub(crate) use references::target::{open_file, Target as FileTarget};
use references::ReferenceBackend;
use remote::RemoteBackend;

use crate::error::{BoxError, Error, Result};
use crate::limits::{Limits, METADATA_BYTES};
use crate::storage::{local_folder, resolve, Resolved, StorageOptions};

/// The store of one Zarr node.
#[derive(Clone)]
pub(crate) struct ZarrStore {
    backend: Arc<dyn StoreBackend>,
    /// The same backend when it is a local folder: read on the thread that decodes.
    local: Option<Arc<LocalStore>>,
    /// What the node's files may make ndfusion do (the session's, or the process's).
    limits: Limits,
}

impl std::fmt::Debug for ZarrStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.backend.fmt(f)
    }
}

impl ZarrStore {
    /// The store of the array or group at `location`: a folder or prefix, where nothing is
    /// read yet, or a Kerchunk reference file (`*.json`), which is read, its references
    /// allowed inside its own folder or the `granted` URL prefixes.
    pub(crate) async fn open(
        location: &str,
        options: &StorageOptions,
        granted: &[String],
    ) -> Result<Self> {
        // Every Zarr location opens here: a bad NDFUSION_MAX_* variable is reported first.
        let limits = options.limits()?;
        if references::is_reference_file(location) {
            let backend = ReferenceBackend::open(location, options, granted, &limits).await?;
            return Ok(ZarrStore::over(Arc::new(backend), limits));
        }
        match resolve(location, options)? {
            Resolved::Local(path) => {
                // The array's folder, holding `zarr.json` or `.zarray`.
                if let Some(hint) = local_file_hint(&path) {
                    return Err(Error::NotFound {
                        location: location.to_string(),
                        reason: hint.into(),
                    });
                }
                local_folder(location, &path, "a Zarr array folder")?;
                let store = LocalStore::new(&path).map_err(|e| Error::NotFound {
                    location: location.to_string(),
                    reason: e.to_string(),
                })?;
                let store = Arc::new(store);
                Ok(ZarrStore {
                    backend: Arc::new(Arc::clone(&store)),
                    local: Some(store),
                    limits,
                })
            }
            Resolved::Remote(remote) => {
                Ok(ZarrStore::over(Arc::new(RemoteBackend(remote)), limits))
            }
        }
    }

    /// A store over another backend (an Icechunk snapshot), read asynchronously under
    /// `limits`.
    pub(crate) fn over(backend: Arc<dyn StoreBackend>, limits: Limits) -> Self {
        ZarrStore {
            backend,
            local: None,
            limits,
        }
    }

    /// The order the store's format keeps a group's members in, when it keeps one.
    pub(crate) fn member_order(&self) -> Option<Vec<String>> {
        self.backend.member_order()
    }

    /// The limits the node is read under.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether reads are asynchronous (an object store, an Icechunk session), not blocking
    /// reads of local files.
    pub(crate) fn is_remote(&self) -> bool {
        self.backend.is_remote()
    }

    /// See [`StoreBackend::over_network`].
    pub(crate) fn over_network(&self) -> bool {
        self.backend.over_network()
    }

    /// The whole chunk at `key`, of at most `limit` bytes (its size is checked before its
    /// body is read); `None` when there is none.
    pub(crate) async fn get_chunk(&self, key: &str, limit: u64) -> Result<Option<Bytes>, BoxError> {
        chunk_within(self.backend.get_at_most(key, limit).await?, limit)
    }

    /// [`ZarrStore::get_chunk`] of a local store, on this (blocking) thread.
    pub(crate) fn get_local_chunk(
        store: &LocalStore,
        key: &StoreKey,
        limit: u64,
    ) -> Result<Option<Bytes>, BoxError> {
        chunk_within(store.get_at_most(key, limit)?, limit)
    }

    /// The metadata document at `key` (`zarr.json`, `.zarray`, ...), at most
    /// the store's `Limits::metadata_bytes` (64 MiB by default; consolidated metadata of thousands of variables is a
    /// few MiB); `None` when there is none. The size is checked before the body is read (one
    /// request remotely: the answer's length), so a huge document costs nothing.
    pub(crate) async fn get_document(&self, key: &str) -> Result<Option<Bytes>, BoxError> {
        let max = self.limits.metadata_bytes;
        match self.backend.get_at_most(key, max).await? {
            None => Ok(None),
            Some(Fetched::Bytes(bytes)) => Ok(Some(bytes)),
            Some(Fetched::TooLarge(size)) => Err(format!(
                "the document is {size} bytes, more than the {max} a metadata document may \
                 have ({METADATA_BYTES})"
            )
            .into()),
        }
    }

    /// Bytes `range` of the object at `key`, with the object's whole size, in one request;
    /// `None` when there is no such object.
    pub(crate) async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        self.backend.get_range(key, range).await
    }

    /// Bytes `ranges` of the object at `key`, when the backend reads many ranges at once
    /// ([`StoreBackend::get_ranges`]).
    pub(crate) async fn get_ranges(
        &self,
        key: &str,
        ranges: Vec<Range<u64>>,
    ) -> Result<RangesRead, BoxError> {
        self.backend.get_ranges(key, ranges).await
    }

    /// The last `n` bytes of the remote object at `key` (all of it when shorter), with its
    /// whole size; `None` when there is no such object.
    pub(crate) async fn get_suffix(
        &self,
        key: &str,
        n: u64,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        self.backend.get_suffix(key, n).await
    }

    /// The names of the store root's children that may be nodes (folders, or key prefixes),
    /// sorted.
    pub(crate) async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        let mut names = self.backend.list_children().await?;
        names.sort();
        Ok(names)
    }

    /// Why a location holds no array, when the store can tell.
    pub(crate) async fn why_absent(&self) -> Option<String> {
        self.backend.why_absent().await
    }

    /// Files read besides the node's own location (a Kerchunk reference file's targets).
    pub(crate) fn reads_beyond(&self) -> Vec<String> {
        self.backend.reads_beyond()
    }

    /// The store as zarrs reads it: chunk keys, codecs and partial decoders of an `Array`.
    pub(crate) fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        self.backend.zarrs_storage()
    }

    /// The local store, for reads made on the thread that decodes them.
    pub(crate) fn blocking(&self) -> Option<Arc<LocalStore>> {
        self.local.clone()
    }
}

/// A chunk's bytes, or the error that it holds more than `limit`.
fn chunk_within(fetched: Option<Fetched>, limit: u64) -> Result<Option<Bytes>, BoxError> {
    match fetched {
        None => Ok(None),
        Some(Fetched::Bytes(bytes)) => Ok(Some(bytes)),
        Some(Fetched::TooLarge(size)) => Err(Box::new(ChunkTooLarge { size, limit })),
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

/// What a local file opened as a Zarr store is, when it is a netCDF or HDF5 file.
fn local_file_hint(path: &std::path::Path) -> Option<&'static str> {
    use std::io::Read;
    if !path.is_file() {
        return None;
    }
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    crate::netcdf::file_format_hint(&head[..n])
}
