//! A file as `hdf5-reader` reads a netCDF-4 file's metadata: synchronously, by byte range.
//! Its reads run on a blocking thread (the table opens the file in `spawn_blocking`), an
//! object store's through the runtime's handle; every byte read counts against the metadata
//! limit, so a header or chunk index that loops or claims too much ends in an error, not in
//! reading the file whole.

use std::sync::atomic::{AtomicU64, Ordering};

use hdf5_reader::error::Error as H5Error;
use hdf5_reader::{Storage, StorageBuffer};

use crate::zarr::store::FileTarget;

/// A file read synchronously, with a budget of bytes.
pub(crate) struct BlockingFile {
    file: FileTarget,
    len: u64,
    runtime: tokio::runtime::Handle,
    /// Bytes that may still be read.
    budget: AtomicU64,
}

impl BlockingFile {
    /// `file` of `len` bytes, of which at most `budget` may be read; reads block on
    /// `runtime` (never call them from one of its workers).
    pub(crate) fn new(
        file: FileTarget,
        len: u64,
        runtime: tokio::runtime::Handle,
        budget: u64,
    ) -> Self {
        BlockingFile {
            file,
            len,
            runtime,
            budget: AtomicU64::new(budget),
        }
    }

    /// Whether the budget ran out (the error that ended a parse is then the limit's).
    pub(crate) fn exhausted(&self) -> bool {
        self.budget.load(Ordering::Relaxed) == 0
    }
}

impl Storage for BlockingFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_range(&self, offset: u64, len: usize) -> hdf5_reader::error::Result<StorageBuffer> {
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= self.len);
        let Some(end) = end else {
            return Err(H5Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: self.len.saturating_sub(offset),
            });
        };
        let took = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(len as u64)
            });
        if took.is_err() {
            self.budget.store(0, Ordering::Relaxed);
            return Err(H5Error::ResourceLimit(
                "the file's metadata is larger than the metadata limit".into(),
            ));
        }
        match self.runtime.block_on(self.file.read(offset..end)) {
            Ok(Some(bytes)) => Ok(StorageBuffer::from_shared_owner(
                std::sync::Arc::new(bytes),
                0,
                len,
            )?),
            Ok(None) => Err(H5Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the file no longer exists",
            ))),
            Err(e) => Err(H5Error::Io(std::io::Error::other(
                crate::error::with_root_cause(e.as_ref()),
            ))),
        }
    }
}
