//! The local folder of a Zarr array: zarrs' filesystem store, with every byte range checked
//! against the file's size before it is read. Ranges come from files (a shard's index says
//! where its inner chunks lie), and zarrs' store allocates a range's length before reading it,
//! so an index entry of 2^64 - 2 bytes would be an allocation of that size (or, at offset
//! 2^64 - 2, an overflow) rather than an error.

use std::path::{Path, PathBuf};

use zarrs::filesystem::FilesystemStore;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    Bytes, MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
};

use crate::error::BoxError;
use crate::zarr::store::ChunkTooLarge;

pub(crate) struct LocalStore {
    files: FilesystemStore,
}

impl LocalStore {
    pub(crate) fn new(dir: &Path) -> Result<Self, zarrs::filesystem::FilesystemStoreCreateError> {
        Ok(LocalStore {
            files: FilesystemStore::new(dir)?,
        })
    }

    /// The whole file at `key`, of at most `limit` bytes (checked before it is read).
    pub(crate) fn get_chunk(&self, key: &StoreKey, limit: u64) -> Result<Option<Bytes>, BoxError> {
        match self.files.size_key(key)? {
            None => Ok(None),
            Some(size) if size > limit => Err(Box::new(ChunkTooLarge { size, limit })),
            Some(_) => Ok(self.files.get(key)?),
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
