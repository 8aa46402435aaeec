//! One snapshot of a repository as a Zarr store: the keys of the node at the table's `path`,
//! read through an Icechunk session (metadata; virtual chunks from their authorized
//! containers), except chunks the manifest stores in the repository: their bytes are read by
//! ndfusion from the chunk reference (a byte range of a `chunks/` file, one read each; inline
//! chunks straight from the manifest).

use std::sync::Arc;

use icechunk::format::manifest::{ChunkPayload, ChunkRef, VirtualReferenceErrorKind};
use icechunk::format::{ByteRange, ChunkIndices, Path, SnapshotId, CHUNKS_FILE_PATH};
use icechunk::repository::VersionInfo;
use icechunk::session::Session;
use icechunk::session::SessionErrorKind;
use icechunk::store::{StoreError, StoreErrorKind};
use icechunk::Repository;
use tokio::sync::RwLock;
use zarrs::storage::byte_range::{ByteRange as ZarrsRange, ByteRangeIterator};
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, StorageError, StoreKey,
};

use super::bounds::RepositoryFiles;
use crate::error::{BoxError, Error, Result};
use crate::zarr::store::{concurrent_parts, storage_error, Fetched, StoreBackend};

/// The node at `prefix` of one snapshot.
#[derive(Clone)]
pub(crate) struct IcechunkStore {
    store: icechunk::Store,
    /// The session `store` reads through, asked for chunk references.
    session: Arc<RwLock<Session>>,
    /// The repository's files, native chunks read from them.
    files: RepositoryFiles,
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
        files: &RepositoryFiles,
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
        let session = Arc::new(RwLock::new(session));
        let store = icechunk::Store::from_session(Arc::clone(&session)).await;
        let prefix = match path.trim_matches('/') {
            "" => String::new(),
            path => format!("{path}/"),
        };
        Ok(IcechunkStore {
            store,
            session,
            files: files.clone(),
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
        let chunk = self.chunk(key).await?;
        self.read(key, chunk, &range.unwrap_or(ByteRange::ALL))
            .await
    }

    /// The size of `key` as the snapshot records it (a chunk's from its manifest, without
    /// reading it); `None` when there is no such key.
    pub(crate) async fn size(&self, key: &str) -> Result<Option<u64>, BoxError> {
        let chunk = self.chunk(key).await?;
        self.size_of(key, &chunk).await
    }

    /// Bytes `range` of `key`, which [`Self::chunk`] found to be `chunk`.
    async fn read(
        &self,
        key: &str,
        chunk: Option<Chunk>,
        range: &ByteRange,
    ) -> Result<Option<Bytes>, BoxError> {
        match chunk {
            Some(Chunk::Absent) => Ok(None),
            Some(Chunk::Inline(bytes)) => {
                let r = within(range, bytes.len() as u64, key)?;
                Ok(Some(bytes.slice(r.start as usize..r.end as usize)))
            }
            Some(Chunk::Stored(ChunkRef { id, offset, length })) => {
                let r = within(range, length, key)?;
                let file = format!("{CHUNKS_FILE_PATH}/{id}");
                let at = offset.saturating_add(r.start)..offset.saturating_add(r.end);
                Ok(Some(self.files.read(&file, at).await?))
            }
            Some(Chunk::Elsewhere) | None => {
                absent_as_none(self.store.get(&self.key(key), range).await)
            }
        }
    }

    /// The size of `key`, which [`Self::chunk`] found to be `chunk`.
    async fn size_of(&self, key: &str, chunk: &Option<Chunk>) -> Result<Option<u64>, BoxError> {
        match chunk {
            Some(Chunk::Absent) => Ok(None),
            Some(Chunk::Inline(bytes)) => Ok(Some(bytes.len() as u64)),
            Some(Chunk::Stored(chunk)) => Ok(Some(chunk.length)),
            Some(Chunk::Elsewhere) | None => {
                absent_as_none(self.store.getsize(&self.key(key)).await)
            }
        }
    }

    /// What the manifest says of `key` when it is a chunk key (`<array>/c/<i>/<j>...`);
    /// `None` for any other key (metadata).
    async fn chunk(&self, key: &str) -> Result<Option<Chunk>, BoxError> {
        let Some((path, coords)) = chunk_key(&self.key(key)) else {
            return Ok(None);
        };
        let session = self.session.read().await;
        let payload = match session.get_chunk_ref(&path, &coords).await {
            Ok(payload) => payload,
            // Not an array, or no node there: Icechunk's own read says what it is.
            Err(_) => return Ok(None),
        };
        Ok(Some(match payload {
            None => Chunk::Absent,
            Some(ChunkPayload::Inline(bytes)) => Chunk::Inline(bytes),
            Some(ChunkPayload::Ref(chunk)) => Chunk::Stored(chunk),
            Some(_) => Chunk::Elsewhere,
        }))
    }

    /// Bytes `range` of `key` with its whole size, or `None`.
    pub(crate) async fn get_range(
        &self,
        key: &str,
        range: ByteRange,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        // One manifest lookup for the size and the bytes.
        let chunk = self.chunk(key).await?;
        let Some(size) = self.size_of(key, &chunk).await? else {
            return Ok(None);
        };
        let bytes = self.read(key, chunk, &range).await?;
        Ok(bytes.map(|bytes| (bytes, size)))
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

/// A chunk as its manifest records it.
enum Chunk {
    /// No chunk there (the fill value).
    Absent,
    /// The chunk's bytes, in the manifest.
    Inline(Bytes),
    /// A byte range of one of the repository's `chunks/` files.
    Stored(ChunkRef),
    /// A virtual chunk (read by Icechunk, from its authorized container).
    Elsewhere,
}

/// The array path and chunk indices of a chunk key (`temp/c/0/1`, `c/0` at the root; the
/// default chunk key encoding, which Icechunk requires); `None` for any other key.
fn chunk_key(key: &str) -> Option<(Path, ChunkIndices)> {
    let (array, coords) = match key.strip_prefix("c/") {
        Some(coords) => ("", coords),
        None => key.rsplit_once("/c/")?,
    };
    let coords = (coords.split('/'))
        .map(|c| c.parse::<u32>().ok())
        .collect::<Option<Vec<u32>>>()?;
    let path = Path::try_from(format!("/{array}").as_str()).ok()?;
    Some((path, ChunkIndices(coords)))
}

/// `range` of an object of `length` bytes as offsets, or an error naming `key` when it does
/// not lie inside.
fn within(range: &ByteRange, length: u64, key: &str) -> Result<std::ops::Range<u64>, BoxError> {
    let r = match range {
        ByteRange::Bounded(r) => r.clone(),
        ByteRange::From(start) => *start..length,
        ByteRange::Last(n) => length.saturating_sub(*n)..length,
        ByteRange::Until(n) => 0..length.saturating_sub(*n),
    };
    if r.start > r.end || r.end > length {
        return Err(format!("bytes {r:?} of {key}, whose chunk has {length} bytes").into());
    }
    Ok(r)
}

/// The snapshot's node as the Zarr reader reads it: sizes from its manifests, so a chunk's is
/// known before it is fetched.
#[async_trait::async_trait]
impl StoreBackend for IcechunkStore {
    fn is_remote(&self) -> bool {
        true
    }

    /// A local repository's chunks are local files (read ahead as a folder's are).
    fn over_network(&self) -> bool {
        self.files.over_network()
    }

    async fn get_at_most(&self, key: &str, max: u64) -> Result<Option<Fetched>, BoxError> {
        let chunk = self.chunk(key).await?;
        match self.size_of(key, &chunk).await? {
            None => Ok(None),
            Some(size) if size > max => Ok(Some(Fetched::TooLarge(size))),
            Some(_) => Ok((self.read(key, chunk, &ByteRange::ALL).await?).map(Fetched::Bytes)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunk keys of the default encoding name their array and indices; metadata keys and
    /// anything else are left to Icechunk.
    #[test]
    fn chunk_keys_name_their_array_and_indices() {
        let parsed = |key: &str| chunk_key(key).map(|(p, c)| (p.to_string(), c.0));
        assert_eq!(parsed("temp/c/0/12"), Some(("/temp".into(), vec![0, 12])));
        assert_eq!(parsed("a/c/b/c/3"), Some(("/a/c/b".into(), vec![3])));
        assert_eq!(parsed("c/7"), Some(("/".into(), vec![7])));
        for key in [
            "temp/zarr.json",
            "c/zarr.json",
            "temp/c/x",
            "temp/c/",
            "temp/0.1",
        ] {
            assert_eq!(parsed(key), None, "{key}");
        }
    }

    /// Ranges resolve against the chunk's length; one outside it is an error naming the key.
    #[test]
    fn ranges_lie_inside_the_chunk() {
        let r = |range: ByteRange| within(&range, 10, "t/c/0").map_err(|e| e.to_string());
        assert_eq!(r(ByteRange::ALL), Ok(0..10));
        assert_eq!(r(ByteRange::Bounded(2..5)), Ok(2..5));
        assert_eq!(r(ByteRange::Last(3)), Ok(7..10));
        assert_eq!(r(ByteRange::Until(3)), Ok(0..7));
        let err = r(ByteRange::Bounded(4..11)).unwrap_err();
        assert!(err.contains("t/c/0") && err.contains("10 bytes"), "{err}");
    }
}
