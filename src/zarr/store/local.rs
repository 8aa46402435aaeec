//! The local folder of a Zarr array: zarrs' filesystem store, with every byte range checked
//! against the file's size before it is read. Ranges come from files (a shard's index says
//! where its inner chunks lie), and zarrs' store allocates a range's length before reading it,
//! so an index entry of 2^64 - 2 bytes would be an allocation of that size (or, at offset
//! 2^64 - 2, an overflow) rather than an error.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::storage_adapter::sync_to_async::{
    SyncToAsyncSpawnBlocking, SyncToAsyncStorageAdapter,
};
use zarrs::storage::{
    AsyncReadableStorageTraits, Bytes, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits,
    StorageError, StoreKey,
};

use super::backend::{Fetched, StoreBackend};
use crate::error::BoxError;

pub(crate) struct LocalStore {
    files: FilesystemStore,
}

impl LocalStore {
    pub(crate) fn new(dir: &Path) -> Result<Self, zarrs::filesystem::FilesystemStoreCreateError> {
        Ok(LocalStore {
            files: FilesystemStore::new(dir)?,
        })
    }

    /// The whole file at `key` if it holds at most `max` bytes (checked before it is read).
    pub(crate) fn get_at_most(
        &self,
        key: &StoreKey,
        max: u64,
    ) -> Result<Option<Fetched>, BoxError> {
        match self.files.size_key(key)? {
            None => Ok(None),
            Some(size) if size > max => Ok(Some(Fetched::TooLarge(size))),
            Some(_) => Ok(self.files.get(key)?.map(Fetched::Bytes)),
        }
    }

    /// The file holding `key`.
    pub(crate) fn key_to_fspath(&self, key: &StoreKey) -> PathBuf {
        self.files.key_to_fspath(key)
    }
}

impl ReadableStorageTraits for LocalStore {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        self.files.get(key)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let Some(size) = self.files.size_key(key)? else {
            return Ok(None);
        };
        let ranges: Vec<ByteRange> = byte_ranges.collect();
        for range in &ranges {
            check_range(key, range, size)?;
        }
        self.files
            .get_partial_many(key, Box::new(ranges.into_iter()))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        self.files.size_key(key)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Local")
    }
}

/// The async reads of a local folder, each on tokio's blocking pool.
#[async_trait::async_trait]
impl StoreBackend for Arc<LocalStore> {
    fn is_remote(&self) -> bool {
        false
    }

    async fn get_at_most(&self, key: &str, max: u64) -> Result<Option<Fetched>, BoxError> {
        let (fs, key) = (Arc::clone(self), StoreKey::new(key)?);
        tokio::task::spawn_blocking(move || LocalStore::get_at_most(&fs, &key, max)).await?
    }

    async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> Result<Option<(Bytes, u64)>, BoxError> {
        let (fs, key) = (Arc::clone(self), StoreKey::new(key)?);
        tokio::task::spawn_blocking(move || -> Result<_, BoxError> {
            let Some(size) = fs.size_key(&key)? else {
                return Ok(None);
            };
            let length = range.end.saturating_sub(range.start);
            let bytes = fs.get_partial(&key, ByteRange::FromStart(range.start, Some(length)))?;
            Ok(bytes.map(|b| (b, size)))
        })
        .await?
    }

    async fn get_suffix(&self, _key: &str, _n: u64) -> Result<Option<(Bytes, u64)>, BoxError> {
        Err("a suffix request to a local store".into())
    }

    async fn list_children(&self) -> Result<Vec<String>, BoxError> {
        let root = self.key_to_fspath(&StoreKey::new("zarr.json")?);
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
        .await?
    }

    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        Arc::new(SyncToAsyncStorageAdapter::new(
            Arc::clone(self),
            TokioBlockingPool,
        ))
    }
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

/// An error when `range` does not lie inside a file of `size` bytes.
fn check_range(key: &StoreKey, range: &ByteRange, size: u64) -> Result<(), StorageError> {
    let inside = match *range {
        ByteRange::FromStart(offset, Some(length)) => {
            offset.checked_add(length).is_some_and(|end| end <= size)
        }
        ByteRange::FromStart(offset, None) => offset <= size,
        ByteRange::Suffix(length) => length <= size,
    };
    if inside {
        return Ok(());
    }
    let what = match *range {
        ByteRange::FromStart(offset, Some(length)) => {
            format!("the byte range at offset {offset} of length {length}")
        }
        ByteRange::FromStart(offset, None) => format!("the byte range from offset {offset}"),
        ByteRange::Suffix(length) => format!("the last {length} bytes"),
    };
    Err(StorageError::Other(format!(
        "{what} (where a shard index puts an inner chunk, or the index itself) points past \
         the end of {} ({size} bytes): the file is cut short or its index is corrupt",
        key.as_str()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges_past_the_end_are_errors_before_anything_is_allocated() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c"), b"0123456789").unwrap();
        let store = LocalStore::new(dir.path()).unwrap();
        let key = StoreKey::new("c").unwrap();
        let read = |range| store.get_partial(&key, range);
        assert_eq!(
            read(ByteRange::FromStart(2, Some(3))).unwrap().unwrap(),
            &b"234"[..]
        );
        assert_eq!(read(ByteRange::Suffix(2)).unwrap().unwrap(), &b"89"[..]);
        // An index entry may say anything: offset 2^64 - 2, or a length of 2^63.
        for range in [
            ByteRange::FromStart(u64::MAX - 1, Some(16)),
            ByteRange::FromStart(0, Some(1 << 63)),
            ByteRange::FromStart(8, Some(3)),
            ByteRange::FromStart(11, None),
            ByteRange::Suffix(11),
        ] {
            let err = read(range).unwrap_err().to_string();
            assert!(err.contains("points past the end of c (10 bytes)"), "{err}");
        }
        let missing = StoreKey::new("d").unwrap();
        assert!(store
            .get_partial(&missing, ByteRange::FromStart(0, Some(1)))
            .unwrap()
            .is_none());
    }
}
