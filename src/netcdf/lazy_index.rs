//! A netCDF-4 variable's chunk index, read when a query first needs one of the variable's
//! chunks rather than when the table opens: a file of many variables opens at the cost of
//! its headers (and its coordinates' indexes, read with them), and a query reads the indexes
//! of the variables it reads. Each index is read once per table (per executor on a cluster),
//! on a blocking thread, its bytes counted against the metadata limit as the headers' are.

use std::sync::Arc;

use hdf5_reader::chunk_index::ChunkEntry;
use hdf5_reader::messages::layout::ChunkIndexing;
use hdf5_reader::{Storage, StorageBuffer};

use super::block_cache::BlockCache;
use tokio::sync::OnceCell;

use super::blocking::BlockingFile;
use super::layout::ChunkIndex;
use super::nc4::in_file;
use crate::limits::METADATA_BYTES;
use crate::zarr::store::FileTarget;

/// A variable's chunk index: known when the table opened (never written, or not chunked), or
/// read when first needed.
#[derive(Debug)]
pub(crate) struct LazyIndex {
    index: OnceCell<ChunkIndex>,
    read: Option<IndexRead>,
}

impl LazyIndex {
    /// An index known without reading one.
    pub(crate) fn ready(index: ChunkIndex) -> Self {
        LazyIndex {
            index: OnceCell::new_with(Some(index)),
            read: None,
        }
    }

    /// An index to read when first needed.
    pub(crate) fn pending(read: IndexRead) -> Self {
        LazyIndex {
            index: OnceCell::new(),
            read: Some(read),
        }
    }

    /// The index, read from `file` the first time (at most `budget` bytes of it; concurrent
    /// callers wait for the one read).
    pub(crate) async fn get(&self, file: &FileTarget, budget: u64) -> Result<&ChunkIndex, String> {
        self.index
            .get_or_try_init(|| async {
                let read = self.read.clone().ok_or("no chunk index to read")?;
                let runtime = tokio::runtime::Handle::current();
                let storage = BlockingFile::new(file.clone(), read.file_len, runtime, budget);
                let storage = Arc::new(storage);
                let reader = Arc::clone(&storage);
                let index = tokio::task::spawn_blocking(move || {
                    let base = read.base;
                    let from_base = Arc::new(FromBase {
                        inner: reader,
                        base,
                    });
                    let block = read.block_bytes();
                    read.read(&BlockCache::new(from_base, block, BLOCKS_KEPT))
                })
                .await
                .map_err(|e| format!("reading it failed: {e}"))?;
                index.map_err(|why| match storage.exhausted() {
                    true => format!(
                        "it is larger than the {budget} bytes a metadata document may have \
                         ({METADATA_BYTES}): {why}"
                    ),
                    false => why,
                })
            })
            .await
    }
}

/// Where a chunked variable's index is and what it indexes.
#[derive(Debug, Clone)]
pub(crate) struct IndexRead {
    /// The index's address, and the layout message's chunk dimensions and indexing type.
    pub address: u64,
    pub dims: Vec<u32>,
    pub indexing: Option<ChunkIndexing>,
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// Bytes of a chunk unfiltered.
    pub chunk_bytes: u64,
    pub offset_size: u8,
    pub length_size: u8,
    /// The superblock's base address, and the file's length (every chunk must lie inside).
    pub base: u64,
    pub file_len: u64,
    /// The index with no chunk stored yet (its grid, filters and type size).
    pub empty: ChunkIndex,
}

/// Blocks an index read keeps (its nodes are read once each; the parents stay).
const BLOCKS_KEPT: usize = 256;

impl IndexRead {
    /// Bytes of the blocks the index is read in. A version 1 B-tree's nodes (a few KiB each,
    /// up to 64 chunks) lie between the chunks they index, written as the chunks were: 4 KiB
    /// blocks read a node and little else. The newer indexes (fixed and extensible arrays,
    /// version 2 B-trees) keep their entries together: 16 KiB blocks, as the headers are read.
    fn block_bytes(&self) -> usize {
        match self.indexing {
            None => 4 << 10,
            Some(_) => 16 << 10,
        }
    }

    /// The index read from `storage`: where each stored chunk is, checked to lie inside the
    /// file. Blocking.
    fn read(&self, storage: &dyn Storage) -> Result<ChunkIndex, String> {
        let mut index = self.empty.clone();
        let entries = chunk_entries(storage, self)?;
        for entry in entries {
            let at: Vec<u64> = (entry.offsets.iter().zip(&self.chunk_shape))
                .map(|(&o, &c)| o / c)
                .collect();
            // Chunks past the extent (kept when a dimension shrank) are not read.
            let Some(linear) = index.linear(&at) else {
                continue;
            };
            let len = match entry.size {
                0 if index.filters.is_empty() => self.chunk_bytes,
                0 => return Err("a filtered chunk has no size".into()),
                n => n,
            };
            let range = in_file(entry.address, len, self.base, self.file_len)?;
            index.stored.insert(linear, range);
            if entry.filter_mask != 0 {
                index.skipped.insert(linear, entry.filter_mask);
            }
        }
        Ok(index)
    }
}

/// The chunks in a chunk index of any kind, read through `storage`.
fn chunk_entries(storage: &dyn Storage, read: &IndexRead) -> Result<Vec<ChunkEntry>, String> {
    let IndexRead {
        address,
        offset_size,
        length_size,
        ..
    } = *read;
    let elem = read.empty.typesize;
    let (dims, shape) = (&read.dims[..], &read.shape[..]);
    let rank = shape.len();
    let entries = match read.indexing.as_ref() {
        None => hdf5_reader::btree_v1::collect_btree_v1_leaves_storage(
            storage,
            address,
            offset_size,
            length_size,
            Some(rank as u32),
            dims,
            None,
        )
        .and_then(|leaves| {
            (leaves.into_iter())
                .map(|(key, chunk)| match key {
                    hdf5_reader::btree_v1::BTreeV1Key::RawData {
                        chunk_size,
                        filter_mask,
                        offsets,
                    } => Ok(ChunkEntry {
                        address: chunk,
                        size: u64::from(chunk_size),
                        filter_mask,
                        offsets: offsets.into_iter().take(rank).collect(),
                    }),
                    _ => Err(hdf5_reader::error::Error::InvalidData(
                        "a group key in a chunk B-tree".into(),
                    )),
                })
                .collect()
        }),
        Some(ChunkIndexing::SingleChunk {
            filtered_size,
            filters,
        }) => Ok(vec![hdf5_reader::chunk_index::single_chunk_entry(
            address,
            *filtered_size,
            *filters,
            rank,
        )]),
        Some(ChunkIndexing::BTreeV2) => hdf5_reader::chunk_index::collect_v2_chunk_entries_storage(
            storage,
            address,
            offset_size,
            length_size,
            rank as u32,
            dims,
            None,
        ),
        Some(ChunkIndexing::Implicit) => hdf5_reader::chunk_index::collect_implicit_chunk_entries(
            address,
            shape,
            dims,
            elem as usize,
            None,
            storage.len(),
        ),
        Some(ChunkIndexing::FixedArray { .. }) => {
            hdf5_reader::fixed_array::collect_fixed_array_chunk_entries_storage(
                storage,
                address,
                offset_size,
                length_size,
                shape,
                dims,
                None,
            )
        }
        Some(ChunkIndexing::ExtensibleArray { .. }) => {
            hdf5_reader::extensible_array::collect_extensible_array_chunk_entries_storage(
                storage,
                address,
                offset_size,
                length_size,
                shape,
                None,
                dims,
                None,
            )
        }
    };
    entries.map_err(|e| e.to_string())
}

/// A file addressed from its superblock's base address, as HDF5 addresses are (a user block
/// moves the superblock away from the file's start; `Hdf5File` shifts its reads the same way).
struct FromBase {
    inner: Arc<BlockingFile>,
    base: u64,
}

impl Storage for FromBase {
    fn len(&self) -> u64 {
        self.inner.len().saturating_sub(self.base)
    }

    fn read_range(&self, offset: u64, len: usize) -> hdf5_reader::error::Result<StorageBuffer> {
        let at = (offset.checked_add(self.base))
            .ok_or(hdf5_reader::error::Error::OffsetOutOfBounds(offset))?;
        self.inner.read_range(at, len)
    }
}
