//! The cache a netCDF-4 or HDF5 file's metadata is read through. Object headers, heaps and
//! chunk index nodes are small and lie near one another, so reads are rounded out to fixed
//! blocks and the blocks kept: one block read serves many. The blocks a read lacks are
//! fetched with one request per run of missing blocks. hdf5-reader's `BlockCacheStorage`
//! fetches them one request at a time, so a 1 MB fixed-array data block on S3 cost 64
//! round trips, one after another. A read longer than a quarter of the cache passes through
//! whole: it would only push the headers out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hdf5_reader::error::{Error as H5Error, Result as H5Result};
use hdf5_reader::storage::DynStorage;
use hdf5_reader::{Storage, StorageBuffer};

/// `inner` read in blocks of `block` bytes, the `kept` most recently used of them kept.
pub(crate) struct BlockCache {
    inner: DynStorage,
    block: u64,
    kept: usize,
    blocks: Mutex<Blocks>,
}

/// The kept blocks by number, each with the tick it was last used at.
#[derive(Default)]
struct Blocks {
    by_number: HashMap<u64, (Arc<[u8]>, u64)>,
    tick: u64,
}

impl Blocks {
    fn get(&mut self, number: u64) -> Option<Arc<[u8]>> {
        self.tick += 1;
        let tick = self.tick;
        let (bytes, used) = self.by_number.get_mut(&number)?;
        *used = tick;
        Some(Arc::clone(bytes))
    }

    /// Keeps `bytes` as block `number`, dropping the least recently used block when `kept`
    /// are kept already (a scan of at most `kept` entries: metadata reads are few).
    fn put(&mut self, number: u64, bytes: Arc<[u8]>, kept: usize) {
        if self.by_number.len() >= kept && !self.by_number.contains_key(&number) {
            let oldest = self.by_number.iter().min_by_key(|(_, (_, used))| *used);
            if let Some((&oldest, _)) = oldest {
                self.by_number.remove(&oldest);
            }
        }
        self.tick += 1;
        self.by_number.insert(number, (bytes, self.tick));
    }
}

impl BlockCache {
    pub(crate) fn new(inner: DynStorage, block: usize, kept: usize) -> Self {
        BlockCache {
            inner,
            block: block.max(1) as u64,
            kept: kept.max(1),
            blocks: Mutex::default(),
        }
    }

    /// Blocks `first..first + count`, read in one request (the last may be short: the file
    /// ends there) and kept.
    fn fetch(&self, first: u64, count: u64) -> H5Result<Vec<Arc<[u8]>>> {
        let start = first * self.block;
        let len = (count * self.block).min(self.inner.len() - start);
        let run = self.inner.read_range(start, len as usize)?;
        if run.len() as u64 != len {
            return Err(H5Error::UnexpectedEof {
                offset: start,
                needed: len,
                available: run.len() as u64,
            });
        }
        let fetched: Vec<Arc<[u8]>> = run.chunks(self.block as usize).map(Arc::from).collect();
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        for (number, bytes) in (first..).zip(&fetched) {
            blocks.put(number, Arc::clone(bytes), self.kept);
        }
        Ok(fetched)
    }
}

impl Storage for BlockCache {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_range(&self, offset: u64, len: usize) -> H5Result<StorageBuffer> {
        let file_len = self.inner.len();
        let end = offset
            .checked_add(len as u64)
            .filter(|&end| end <= file_len);
        let Some(end) = end else {
            return Err(H5Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: file_len.saturating_sub(offset),
            });
        };
        if len == 0 {
            return Ok(StorageBuffer::from_vec(Vec::new()));
        }
        if len as u64 > self.block * self.kept as u64 / 4 {
            return self.inner.read_range(offset, len);
        }
        let (first, last) = (offset / self.block, (end - 1) / self.block);
        let mut found: Vec<Option<Arc<[u8]>>> = {
            let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
            (first..=last).map(|number| blocks.get(number)).collect()
        };
        // Each run of missing blocks is one request.
        let mut at = 0;
        while at < found.len() {
            if found[at].is_some() {
                at += 1;
                continue;
            }
            let run = found[at..].iter().take_while(|b| b.is_none()).count();
            let fetched = self.fetch(first + at as u64, run as u64)?;
            for (slot, bytes) in found[at..at + run].iter_mut().zip(fetched) {
                *slot = Some(bytes);
            }
            at += run;
        }
        let start = (offset - first * self.block) as usize;
        if let [Some(only)] = found.as_slice() {
            return StorageBuffer::from_shared(Arc::clone(only), start, len);
        }
        let mut out = Vec::with_capacity(len);
        for bytes in found.iter().flatten() {
            out.extend_from_slice(bytes);
        }
        out.drain(..start);
        out.truncate(len);
        Ok(StorageBuffer::from_vec(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `len` bytes (each its offset's low byte) that count the requests made of them.
    struct Counted {
        len: u64,
        requests: AtomicUsize,
    }

    impl Storage for Counted {
        fn len(&self) -> u64 {
            self.len
        }

        fn read_range(&self, offset: u64, len: usize) -> H5Result<StorageBuffer> {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let bytes = (offset..offset + len as u64).map(|i| i as u8).collect();
            Ok(StorageBuffer::from_vec(bytes))
        }
    }

    fn cache(len: u64, kept: usize) -> (Arc<Counted>, BlockCache) {
        let inner = Arc::new(Counted {
            len,
            requests: AtomicUsize::new(0),
        });
        let cache = BlockCache::new(Arc::clone(&inner) as DynStorage, 16, kept);
        (inner, cache)
    }

    fn expect(offset: u64, len: usize) -> Vec<u8> {
        (offset..offset + len as u64).map(|i| i as u8).collect()
    }

    #[test]
    fn a_read_over_missing_blocks_is_one_request_per_run() {
        let (inner, cache) = cache(1000, 64);
        // Blocks 2..=6, none kept: one request.
        assert_eq!(&*cache.read_range(40, 60).unwrap(), expect(40, 60));
        assert_eq!(inner.requests.load(Ordering::Relaxed), 1);
        // Within kept blocks: no request.
        assert_eq!(&*cache.read_range(33, 5).unwrap(), expect(33, 5));
        assert_eq!(&*cache.read_range(50, 40).unwrap(), expect(50, 40));
        assert_eq!(inner.requests.load(Ordering::Relaxed), 1);
        // Blocks 0..=9: 0 and 1 missing, 2..=6 kept, 7..=9 missing: two requests.
        assert_eq!(&*cache.read_range(5, 150).unwrap(), expect(5, 150));
        assert_eq!(inner.requests.load(Ordering::Relaxed), 3);
        // The file's last block is short.
        assert_eq!(&*cache.read_range(990, 10).unwrap(), expect(990, 10));
    }

    #[test]
    fn long_reads_pass_through_and_reads_past_the_end_fail() {
        let (inner, cache) = cache(1000, 8);
        // A quarter of 8 blocks of 16 bytes is 32 bytes.
        assert_eq!(&*cache.read_range(0, 33).unwrap(), expect(0, 33));
        assert_eq!(&*cache.read_range(0, 33).unwrap(), expect(0, 33));
        assert_eq!(inner.requests.load(Ordering::Relaxed), 2);
        assert!(cache.read_range(990, 11).is_err());
        assert!(cache.read_range(u64::MAX, 2).is_err());
        assert!(cache.read_range(1000, 0).unwrap().is_empty());
    }

    #[test]
    fn the_least_recently_used_block_goes_first() {
        let (inner, cache) = cache(1000, 2);
        cache.read_range(0, 1).unwrap(); // block 0
        cache.read_range(16, 1).unwrap(); // block 1
        cache.read_range(0, 1).unwrap(); // block 0 used again
        cache.read_range(32, 1).unwrap(); // block 2: block 1 goes
        assert_eq!(inner.requests.load(Ordering::Relaxed), 3);
        cache.read_range(0, 1).unwrap();
        assert_eq!(inner.requests.load(Ordering::Relaxed), 3);
        cache.read_range(16, 1).unwrap();
        assert_eq!(inner.requests.load(Ordering::Relaxed), 4);
    }
}
