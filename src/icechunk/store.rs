//! One snapshot of a repository as a Zarr store: the keys of the node at the table's `path`,
//! read through an Icechunk session (native chunks from the repository's storage, inline
//! chunks from its manifests, virtual chunks from their authorized containers).

use std::sync::Arc;

use icechunk::format::manifest::VirtualReferenceErrorKind;
use icechunk::format::{ByteRange, SnapshotId};
use icechunk::repository::VersionInfo;
use icechunk::session::SessionErrorKind;
use icechunk::store::{StoreError, StoreErrorKind};
use icechunk::Repository;
use zarrs::storage::byte_range::{ByteRange as ZarrsRange, ByteRangeIterator};
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, StorageError, StoreKey,
};

use crate::error::{BoxError, Error, Result};
use crate::zarr::store::{concurrent_parts, storage_error, Fetched, StoreBackend};

/// The node at `prefix` of one snapshot.
#[derive(Clone)]
pub(crate) struct IcechunkStore {
    store: icechunk::Store,
    /// The node's path in the repository with a trailing `/` (`""`: the root).
    prefix: String,
    snapshot: SnapshotId,
}

impl std::fmt::Debug for IcechunkStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Icechunk({}, /{})", self.snapshot, self.prefix)
    }
}

impl IcechunkStore {
    /// Snapshot `snapshot` of `repo`, read at node `path` (`""`: the root).
    pub(crate) async fn open(
        repo: &Repository,
        snapshot: &SnapshotId,
        path: &str,
        location: &str,
    ) -> Result<Self> {
        let session = repo
            .readonly_session(&VersionInfo::SnapshotId(snapshot.clone()))
            .await
            .map_err(|e| Error::NotFound {
                location: location.to_string(),
                reason: format!("opening snapshot {snapshot}: {e}"),
            })?;
        let store =
            icechunk::Store::from_session(Arc::new(tokio::sync::RwLock::new(session))).await;
        let prefix = match path.trim_matches('/') {
            "" => String::new(),
            path => format!("{path}/"),
        };
        Ok(IcechunkStore {
            store,
            prefix,
            snapshot: snapshot.clone(),
        })
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Bytes `range` of `key` (all of it: `None`); `None` when there is no such key.
    pub(crate) async fn get(
        &self,
        key: &str,
        range: Option<ByteRange>,
    ) -> Result<Option<Bytes>, BoxError> {
        let range = range.unwrap_or(ByteRange::ALL);
        absent_as_none(self.store.get(&self.key(key), &range).await)
    }

    /// The size of `key` as the snapshot records it (a chunk's from its manifest, without
    /// reading it); `None` when there is no such key.
    pub(crate) async fn size(&self, key: &str) -> Result<Option<u64>, BoxError> {
        absent_as_none(self.store.getsize(&self.key(key)).await)
    }

    /// Bytes `range` of `key` with its whole size, or `None`.
    pub(crate) async fn get_range(
        &self,
        key: &str,
        range: ByteRange,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        Ok(self.get(key, Some(range)).await?.map(|bytes| (bytes, size)))
    }

    /// The names of the node's children (its arrays and groups), sorted.
    async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        use futures::TryStreamExt;
        use icechunk::store::ListDirItem;
        let items = self.store.list_dir_items(&self.prefix).await?;
        let mut names: Vec<String> = items
            .try_filter_map(|item| async move {
                Ok(match item {
                    ListDirItem::Prefix(name) => Some(name),
                    ListDirItem::Key(_) => None,
                })
            })
            .try_collect()
            .await?;
        names.sort();
        Ok(names)
    }
}

/// The snapshot's node as the Zarr reader reads it: sizes from its manifests, so a chunk's is
/// known before it is fetched.
#[async_trait::async_trait]
impl StoreBackend for IcechunkStore {
    fn is_remote(&self) -> bool {
        true
    }

    async fn get_at_most(&self, key: &str, max: u64) -> Result<Option<Fetched>, BoxError> {
        match self.size(key).await? {
            None => Ok(None),
            Some(size) if size > max => Ok(Some(Fetched::TooLarge(size))),
            Some(_) => Ok(self.get(key, None).await?.map(Fetched::Bytes)),
        }
    }

    async fn get_range(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        IcechunkStore::get_range(self, key, ByteRange::Bounded(range)).await
    }

    async fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>, BoxError> {
        IcechunkStore::get_range(self, key, ByteRange::Last(n)).await
    }

    async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        IcechunkStore::list_children(self).await
    }

    async fn why_absent(&self) -> Option<String> {
        Some(
            "no array or group at this path in this snapshot: the 'path' option must name one"
                .into(),
        )
    }

    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        Arc::new(IcechunkStorage(self.clone()))
    }
}

/// Icechunk's answer for an absent key as `None`; a virtual chunk of a container the table
/// does not authorize as an error naming the container and the option.
fn absent_as_none<T>(result: std::result::Result<T, StoreError>) -> Result<Option<T>, BoxError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if matches!(e.kind(), StoreErrorKind::NotFound(_)) => Ok(None),
        Err(e) => Err(match e.kind() {
            StoreErrorKind::SessionError(SessionErrorKind::VirtualReferenceError(
                VirtualReferenceErrorKind::UnauthorizedVirtualChunkContainer { url_prefix, name },
            )) => {
                let named = match name {
                    Some(name) => format!(" (named {name})"),
                    None => String::new(),
                };
                format!(
                    "the chunk is a virtual chunk in container {url_prefix}{named}, which the \
                     table does not authorize: add it to the 'virtual_chunk_containers' option"
                )
                .into()
            }
            _ => Box::new(e),
        }),
    }
}

/// The snapshot as zarrs reads it: an `Array`'s chunk keys, codecs and partial decoders.
struct IcechunkStorage(IcechunkStore);

fn icechunk_range(range: ZarrsRange) -> ByteRange {
    match range {
        ZarrsRange::FromStart(offset, None) => ByteRange::From(offset),
        ZarrsRange::FromStart(offset, Some(length)) => {
            ByteRange::Bounded(offset..offset.saturating_add(length))
        }
        ZarrsRange::Suffix(length) => ByteRange::Last(length),
    }
}

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for IcechunkStorage {
    async fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.0.get(key.as_str(), None).await.map_err(storage_error)
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let reads = byte_ranges.map(|range| self.0.get(key.as_str(), Some(icechunk_range(range))));
        concurrent_parts(reads).await
    }

    async fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.0.size(key.as_str()).await.map_err(storage_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}
