//! A netCDF-4 variable's chunk index, read when a query first needs one of the variable's
//! chunks rather than when the table opens: a file of many variables opens at the cost of
//! its headers, and a query reads the indexes of the variables it reads. A version 1 B-tree
//! (netCDF-C's) is searched chunk by chunk, reading the nodes on the way to the chunks a
//! query reads (`chunk_btree.rs`); the newer indexes (fixed and extensible arrays, version 2
//! B-trees) keep their entries together and are read whole, once per table (per executor on
//! a cluster), on a blocking thread. Either way their bytes count against the metadata limit,
//! as the headers' do.

use std::sync::Arc;

use hdf5_reader::chunk_index::ChunkEntry;
use hdf5_reader::messages::layout::ChunkIndexing;
use hdf5_reader::{Storage, StorageBuffer};

use super::block_cache::BlockCache;
use tokio::sync::OnceCell;

use super::blocking::BlockingFile;
use super::chunk_btree::{ChunkBTree, StoredChunk};
use super::layout::ChunkIndex;
use super::nc4::in_file;
use crate::limits::METADATA_BYTES;
use crate::zarr::store::FileTarget;

/// A variable's chunk index: none (never written, or not chunked), read whole when first
/// needed, or searched chunk by chunk.
#[derive(Debug)]
pub(crate) enum LazyIndex {
    /// A variable with no chunk stored: its grid, filters and type size.
    Unwritten(ChunkIndex),
    /// The index `read` locates, read whole when first needed.
    Whole {
        index: OnceCell<ChunkIndex>,
        read: Box<IndexRead>,
    },
    /// A version 1 B-tree, searched for each chunk.
    Searched { tree: ChunkBTree, empty: ChunkIndex },
}

impl LazyIndex {
    /// The index of a variable with no chunk stored (`empty`'s).
    pub(crate) fn unwritten(empty: ChunkIndex) -> Self {
        LazyIndex::Unwritten(empty)
    }

    /// An index to read when first needed: searched when it is a version 1 B-tree, else read
    /// whole.
    pub(crate) fn pending(read: IndexRead) -> Self {
        if read.indexing.is_some() {
            return LazyIndex::Whole {
                index: OnceCell::new(),
                read: Box::new(read),
            };
        }
        LazyIndex::Searched {
            tree: ChunkBTree::new(&read),
            empty: read.empty,
        }
    }

    /// The variable's grid of chunks, filters and type size (what a chunk stored with some
    /// filters skipped is restored with).
    pub(crate) fn template(&self) -> &ChunkIndex {
        match self {
            LazyIndex::Unwritten(empty) | LazyIndex::Searched { empty, .. } => empty,
            LazyIndex::Whole { read, .. } => &read.empty,
        }
    }

    /// Where chunk `at` (its indices in the grid) is stored, `None` when it was never
    /// written or is outside the grid; the index (or the nodes on the way) read from `file`
    /// the first time, at most `budget` bytes of it.
    pub(crate) async fn chunk(
        &self,
        file: &FileTarget,
        budget: u64,
        at: &[u64],
    ) -> Result<Option<StoredChunk>, String> {
        let Some(linear) = self.template().linear(at) else {
            return Ok(None);
        };
        match self {
            LazyIndex::Unwritten(_) => Ok(None),
            LazyIndex::Searched { tree, .. } => tree.chunk(file, budget, at).await,
            LazyIndex::Whole { index, read } => {
                let index = index.get_or_try_init(|| read_whole(read, file, budget));
                Ok(index.await?.stored.get(&linear).cloned())
            }
        }
    }
}

/// The index `read` locates, read whole from `file` on a blocking thread (at most `budget`
/// bytes of it).
async fn read_whole(
    read: &IndexRead,
    file: &FileTarget,
    budget: u64,
) -> Result<ChunkIndex, String> {
    let read = read.clone();
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
        read.read(&BlockCache::new(from_base, BLOCK_BYTES, BLOCKS_KEPT))
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

/// Bytes of the blocks an index read whole is read in: the newer indexes keep their entries
/// together, read in blocks as the headers are.
const BLOCK_BYTES: usize = 16 << 10;

impl IndexRead {
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
            let filter_mask = entry.filter_mask;
            index
                .stored
                .insert(linear, StoredChunk { range, filter_mask });
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
    let indexing =
        (read.indexing.as_ref()).ok_or("a version 1 B-tree is searched, not read whole")?;
    let entries = match indexing {
        ChunkIndexing::SingleChunk {
            filtered_size,
            filters,
        } => Ok(vec![hdf5_reader::chunk_index::single_chunk_entry(
            address,
            *filtered_size,
            *filters,
            rank,
        )]),
        ChunkIndexing::BTreeV2 => hdf5_reader::chunk_index::collect_v2_chunk_entries_storage(
            storage,
            address,
            offset_size,
            length_size,
            rank as u32,
            dims,
            None,
        ),
        ChunkIndexing::Implicit => hdf5_reader::chunk_index::collect_implicit_chunk_entries(
            address,
            shape,
            dims,
            elem as usize,
            None,
            storage.len(),
        ),
        ChunkIndexing::FixedArray { .. } => {
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
        ChunkIndexing::ExtensibleArray { .. } => {
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
