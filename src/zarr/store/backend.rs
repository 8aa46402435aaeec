//! [`StoreBackend`]: what each place a Zarr node's objects live in (a local folder, an object
//! store prefix, an Icechunk snapshot) offers the reader. The policies on top (how large a
//! chunk or a metadata document may be, and the errors that say so) are [`ZarrStore`]'s,
//! written once for every backend.
//!
//! [`ZarrStore`]: super::ZarrStore

use std::ops::Range;
use std::sync::Arc;

use futures::StreamExt;
use zarrs::storage::{AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, StorageError};

use crate::error::BoxError;

/// An object read whole unless it is larger than asked for.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// Its bytes.
    Bytes(Bytes),
    /// It holds this many bytes, more than asked for: its body was not read.
    TooLarge(u64),
}

/// What [`StoreBackend::get_ranges`] read.
#[derive(Debug)]
pub(crate) enum RangesRead {
    /// The ranges' bytes, in order, and the object's whole size.
    Read(Vec<Bytes>, u64),
    /// There is no such object.
    Absent,
    /// The backend does not read many ranges at once.
    Unsupported,
}

/// The objects of one Zarr node, keyed relative to it (`zarr.json`, `c/0/1`).
#[async_trait::async_trait]
pub(crate) trait StoreBackend: std::fmt::Debug + Send + Sync {
    /// Whether reads are asynchronous (an object store, an Icechunk session), not blocking
    /// reads of local files.
    fn is_remote(&self) -> bool;

    /// Whether chunks come over a network, so that many in flight hide its latency (the
    /// default of `chunks_in_flight`: 16, else 2); an asynchronous store of local files
    /// (a local Icechunk repository) reads ahead as local folders do.
    fn over_network(&self) -> bool {
        self.is_remote()
    }

    /// The object at `key` if it holds at most `max` bytes, its size learnt before its body
    /// is read (remotely in the same request: the answer's length); `None` when there is none.
    async fn get_at_most(&self, key: &str, max: u64) -> Result<Option<Fetched>, BoxError>;

    /// Bytes `range` of the object at `key`, with the object's whole size, in one request;
    /// `None` when there is no such object.
    async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError>;

    /// Bytes `ranges` of the object at `key` (each inside it), with its whole size, when the
    /// backend reads many small ranges at about the cost of one (a netCDF file's chunks,
    /// read in one call of the file): `Ok(None)` when there is no such object, and
    /// [`Unsupported`](RangesRead::Unsupported) from backends that would make a request of
    /// each, which read a box's whole rows instead.
    async fn get_ranges(
        &self,
        _key: &str,
        _ranges: Vec<Range<u64>>,
    ) -> Result<RangesRead, BoxError> {
        Ok(RangesRead::Unsupported)
    }

    /// The last `n` bytes of the object at `key` (all of it when shorter), with its whole
    /// size; `None` when there is no such object. Local folders are read on the thread that
    /// decodes (`ZarrStore::blocking`) and need not answer.
    async fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>, BoxError>;

    /// The names of the node's children that may be nodes (folders, or key prefixes).
    async fn list_children(&self) -> Result<Vec<String>, BoxError>;

    /// Why the location holds no array, when the backend can tell.
    async fn why_absent(&self) -> Option<String> {
        None
    }

    /// Files read besides the node's own location (a Kerchunk reference file's targets), as
    /// URLs: a cluster holds them to its allow list as it holds locations.
    fn reads_beyond(&self) -> Vec<String> {
        Vec::new()
    }

    /// The order the format keeps a group's members in (a netCDF file's variables), which
    /// the dataset's columns follow; `None` for Zarr, whose members are read by name.
    fn member_order(&self) -> Option<Vec<String>> {
        None
    }

    /// The objects as zarrs reads them: chunk keys, codecs and partial decoders of an `Array`.
    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits>;
}

/// zarrs' byte ranges of an object of `size` bytes as offsets, each checked to lie inside it
/// (an error names the key and the size).
pub(crate) fn object_ranges(
    key: &str,
    byte_ranges: zarrs::storage::byte_range::ByteRangeIterator<'_>,
    size: u64,
) -> Result<Vec<Range<u64>>, StorageError> {
    use zarrs::storage::byte_range::ByteRange;
    let mut ranges = Vec::new();
    for range in byte_ranges {
        let (start, end) = match range {
            ByteRange::FromStart(offset, None) => (offset, size),
            ByteRange::FromStart(offset, Some(length)) => (offset, offset.saturating_add(length)),
            ByteRange::Suffix(length) => (size.saturating_sub(length), size),
        };
        if end > size || start > end {
            return Err(StorageError::Other(format!(
                "bytes {start}..{end} of '{key}', which holds {size}"
            )));
        }
        ranges.push(start..end);
    }
    Ok(ranges)
}

/// A backend's error as zarrs' storage error, with its root cause.
pub(crate) fn storage_error(e: BoxError) -> StorageError {
    StorageError::Other(crate::error::with_root_cause(e.as_ref()))
}

/// The answer of zarrs' `get_partial_many` from `reads` (one key's byte ranges: a shard's
/// chunks), awaited concurrently; `None` when the key is absent.
pub(crate) async fn concurrent_parts<'a, F>(
    reads: impl IntoIterator<Item = F>,
) -> Result<AsyncMaybeBytesIterator<'a>, StorageError>
where
    F: std::future::Future<Output = Result<Option<Bytes>, BoxError>>,
{
    let parts = futures::future::try_join_all(reads)
        .await
        .map_err(storage_error)?;
    let Some(parts) = parts.into_iter().collect::<Option<Vec<Bytes>>>() else {
        return Ok(None);
    };
    Ok(Some(
        futures::stream::iter(parts.into_iter().map(Ok)).boxed(),
    ))
}
