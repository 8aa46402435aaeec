//! A prefix of an object store as a [`StoreBackend`], and as zarrs' async storage
//! ([`ObjectStoreStorage`]): one request per read where the store allows it.

use std::ops::Range;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, StorageError, StoreKey,
};

use super::backend::{Fetched, StoreBackend};
use crate::error::BoxError;
use crate::storage::RemoteStore;

/// The objects under a prefix of an object store.
pub(super) struct RemoteBackend(pub RemoteStore);

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({})", self.0.display(""))
    }
}

#[async_trait::async_trait]
impl StoreBackend for RemoteBackend {
    fn is_remote(&self) -> bool {
        true
    }

    async fn get_at_most(&self, key: &str, max: u64) -> Result<Option<Fetched>, BoxError> {
        let remote = &self.0;
        match remote.store.get(&remote.path(key)).await {
            Ok(result) if result.meta.size > max => Ok(Some(Fetched::TooLarge(result.meta.size))),
            Ok(result) => Ok(Some(Fetched::Bytes(result.bytes().await?))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Box::new(e)),
        }
    }

    async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        let remote = &self.0;
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

    /// One request (two where the store has no suffix requests).
    async fn get_suffix(&self, key: &str, n: u64) -> Result<Option<(Bytes, u64)>, BoxError> {
        let remote = &self.0;
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

    async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        let remote = &self.0;
        let listing = remote.store.list_with_delimiter(Some(&remote.root)).await?;
        Ok((listing.common_prefixes.iter())
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    async fn why_absent(&self) -> Option<String> {
        self.0.why_absent().await
    }

    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        Arc::new(ObjectStoreStorage(self.0.clone()))
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
    use std::path::Path;

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
