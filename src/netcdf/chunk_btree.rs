//! A variable's chunk index when it is a version 1 B-tree (what netCDF-C and every HDF5
//! library before 1.10's latest format write): searched chunk by chunk, as libhdf5 searches
//! it, so a query reads the nodes on the way from the root to the chunks it reads and no
//! others. A 1% time range of a file of thousands of chunks reads the root and a leaf or two,
//! where reading the whole index read every node, one request each on an object store. Nodes
//! are kept for the table once read; their bytes count against the metadata limit, as the
//! headers' do.
//!
//! A node is found by `level`: a child is one level below its parent, so a path ends after at
//! most 256 nodes and a node that points back up is an error, not a loop. Keys are checked to
//! ascend when a node is read, so a crafted node is an error and never a silently missed
//! chunk.

use std::cmp::Ordering as CmpOrdering;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hdf5_reader::btree_v1::{BTreeV1Key, BTreeV1Node};
use hdf5_reader::io::Cursor;
use tokio::sync::OnceCell;

use super::lazy_index::IndexRead;
use super::nc4::{in_file, is_undefined};
use super::store::read;
use crate::limits::METADATA_BYTES;
use crate::zarr::store::FileTarget;

/// Where a stored chunk is, and the filters it was stored without (its filter mask).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredChunk {
    pub range: Range<u64>,
    pub filter_mask: u32,
}

/// A version 1 chunk B-tree and the nodes of it read so far.
#[derive(Debug)]
pub(crate) struct ChunkBTree {
    /// The root node's address (relative to the superblock's `base`).
    root: u64,
    /// The variable's chunk shape (a key holds a chunk's first element's offsets).
    chunk_shape: Vec<u64>,
    /// Bytes of a chunk unfiltered (a key's size when it gives none and there are no filters).
    chunk_bytes: u64,
    filtered: bool,
    offset_size: u8,
    length_size: u8,
    base: u64,
    file_len: u64,
    /// The nodes read (or being read), by address.
    nodes: Mutex<HashMap<u64, Arc<OnceCell<Arc<Node>>>>>,
    /// Bytes of nodes read, against the metadata limit.
    spent: AtomicU64,
}

/// A node as searched: its level, the first `rank` offsets of its keys, its children.
#[derive(Debug)]
struct Node {
    level: u8,
    /// `keys[i]` is the first chunk under `children[i]` (for a leaf, its chunk).
    keys: Vec<Vec<u64>>,
    /// Each child's address, and for a leaf its chunk's stored size and filter mask.
    children: Vec<(u64, u32, u32)>,
}

impl ChunkBTree {
    /// The tree `read` locates.
    pub(crate) fn new(read: &IndexRead) -> Self {
        ChunkBTree {
            root: read.address,
            chunk_shape: read.chunk_shape.clone(),
            chunk_bytes: read.chunk_bytes,
            filtered: !read.empty.filters.is_empty(),
            offset_size: read.offset_size,
            length_size: read.length_size,
            base: read.base,
            file_len: read.file_len,
            nodes: Mutex::new(HashMap::new()),
            spent: AtomicU64::new(0),
        }
    }

    /// Where chunk `at` (its indices in the grid) is stored; `None` when it was never
    /// written. Reads the nodes on the way not read yet (at most `budget` bytes of nodes in
    /// all), as libhdf5 descends: into the last child whose first key is not past the chunk.
    pub(crate) async fn chunk(
        &self,
        file: &FileTarget,
        budget: u64,
        at: &[u64],
    ) -> Result<Option<StoredChunk>, String> {
        let target: Option<Vec<u64>> = (at.iter().zip(&self.chunk_shape))
            .map(|(&i, &c)| i.checked_mul(c))
            .collect();
        let target = target.ok_or("a chunk's offset overflows 2^64")?;
        let mut address = self.root;
        let mut level = None;
        loop {
            if is_undefined(address, self.offset_size) {
                return Ok(None);
            }
            let node = self.node(file, budget, address).await?;
            if let Some(expected) = level {
                if node.level != expected {
                    return Err(format!(
                        "its B-tree node at byte {address} is at level {}, where its \
                         parent's children are at level {expected}",
                        node.level
                    ));
                }
            }
            // Keys ascend (checked when the node was read): the keys not past the chunk.
            let before = node
                .keys
                .partition_point(|key| key.as_slice() <= target.as_slice());
            let Some(i) = before.checked_sub(1) else {
                return Ok(None);
            };
            let (child, size, filter_mask) = node.children[i];
            if node.level > 0 {
                level = Some(node.level - 1);
                address = child;
                continue;
            }
            if node.keys[i] != target || is_undefined(child, self.offset_size) {
                return Ok(None);
            }
            let len = match size {
                0 if !self.filtered => self.chunk_bytes,
                0 => return Err("a filtered chunk has no size".into()),
                n => u64::from(n),
            };
            let range = in_file(child, len, self.base, self.file_len)?;
            return Ok(Some(StoredChunk { range, filter_mask }));
        }
    }

    /// The node at `address`, read the first time it is needed (concurrent callers wait
    /// for the one read).
    async fn node(
        &self,
        file: &FileTarget,
        budget: u64,
        address: u64,
    ) -> Result<Arc<Node>, String> {
        let cell = {
            let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(nodes.entry(address).or_default())
        };
        let node = cell.get_or_try_init(|| self.read_node(file, budget, address));
        node.await.cloned()
    }

    /// Counts `bytes` about to be fetched against `budget` (what is fetched, so a node that
    /// claims few entries still pays for the block read to find out).
    fn spend(&self, bytes: u64, budget: u64) -> Result<(), String> {
        let spent = (self.spent.fetch_add(bytes, Ordering::Relaxed)).saturating_add(bytes);
        if spent > budget {
            return Err(format!(
                "it is larger than the {budget} bytes a metadata document may have \
                 ({METADATA_BYTES})"
            ));
        }
        Ok(())
    }

    /// Reads and checks the node at `address`: in one request when it holds up to 64 entries
    /// (netCDF-C's and libhdf5's default nodes), else in two.
    async fn read_node(
        &self,
        file: &FileTarget,
        budget: u64,
        address: u64,
    ) -> Result<Arc<Node>, String> {
        let rank = self.chunk_shape.len();
        let offset = u64::from(self.offset_size);
        let header = 8 + 2 * offset;
        // chunk size, filter mask, then the offsets of the rank dimensions and the element's.
        let key = 8 + 8 * (rank as u64 + 1);
        let node_len = |entries: u64| header + (entries + 1) * key + entries * offset;
        let start = in_file(address, header, self.base, self.file_len)?.start;
        let first = node_len(64).min(self.file_len - start);
        self.spend(first, budget)?;
        let mut bytes = read(file, start..start + first).await?.to_vec();
        let entries = match bytes.get(6..8) {
            Some(&[low, high]) => u64::from(u16::from_le_bytes([low, high])),
            _ => {
                return Err(format!(
                    "the file ends inside its B-tree node at byte {address}"
                ))
            }
        };
        let len = node_len(entries);
        in_file(address, len, self.base, self.file_len)?;
        if len > first {
            self.spend(len - first, budget)?;
            bytes.extend_from_slice(&read(file, start + first..start + len).await?);
        }
        if (bytes.len() as u64) < len {
            return Err(format!(
                "the file ends inside its B-tree node at byte {address}"
            ));
        }
        let mut cursor = Cursor::new(&bytes[..len as usize]);
        let parsed = BTreeV1Node::parse(
            &mut cursor,
            self.offset_size,
            self.length_size,
            Some(rank as u32),
        );
        let parsed = parsed.map_err(|e| format!("its B-tree node at byte {address}: {e}"))?;
        searched(parsed, rank).map_err(|why| format!("its B-tree node at byte {address} {why}"))
    }
}

/// A parsed chunk node as searched: a chunk node (type 1) whose keys ascend.
fn searched(parsed: BTreeV1Node, rank: usize) -> Result<Arc<Node>, String> {
    if parsed.node_type != 1 {
        return Err(format!("is of type {}, not a chunk node", parsed.node_type));
    }
    let entries = parsed.children.len();
    let mut keys = Vec::with_capacity(entries);
    let mut children = Vec::with_capacity(entries);
    // The last key bounds the last child from above; a search does not need it.
    for (key, child) in parsed.keys.into_iter().zip(parsed.children) {
        let BTreeV1Key::RawData {
            chunk_size,
            filter_mask,
            mut offsets,
        } = key
        else {
            return Err("has a group key".into());
        };
        offsets.truncate(rank);
        keys.push(offsets);
        children.push((child, chunk_size, filter_mask));
    }
    let ascending = keys
        .windows(2)
        .all(|pair| pair[0].cmp(&pair[1]) == CmpOrdering::Less);
    if !ascending {
        return Err("has keys out of order".into());
    }
    Ok(Arc::new(Node {
        level: parsed.level,
        keys,
        children,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netcdf::layout::ChunkIndex;
    use object_store::memory::InMemory;
    use object_store::path::Path as ObjectPath;
    use object_store::{ObjectStoreExt, PutPayload};

    const UNDEFINED: u64 = u64::MAX;

    /// A chunk node of a rank-2 variable (8-byte offsets): `entries` are each child's first
    /// chunk (element offsets), its address and stored size; `last` the key after them.
    fn node(level: u8, entries: &[([u64; 2], u64, u32)], last: [u64; 2]) -> Vec<u8> {
        let mut out = b"TREE".to_vec();
        out.push(1);
        out.push(level);
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend(UNDEFINED.to_le_bytes());
        out.extend(UNDEFINED.to_le_bytes());
        let key = |out: &mut Vec<u8>, offsets: [u64; 2], size: u32| {
            out.extend(size.to_le_bytes());
            out.extend(0u32.to_le_bytes());
            for o in offsets.into_iter().chain([0]) {
                out.extend(o.to_le_bytes());
            }
        };
        for &(offsets, child, size) in entries {
            key(&mut out, offsets, size);
            out.extend(child.to_le_bytes());
        }
        key(&mut out, last, 0);
        out
    }

    /// A file of 4 KiB holding `nodes` at their addresses, and a tree over chunks of 2 x 3
    /// rooted at the first.
    async fn file(nodes: &[(u64, Vec<u8>)]) -> (ChunkBTree, FileTarget) {
        let mut bytes = vec![0u8; 4096];
        for (at, node) in nodes {
            // A node past the end is cut where the file ends.
            let at = *at as usize;
            let fits = node.len().min(bytes.len() - at);
            bytes[at..at + fits].copy_from_slice(&node[..fits]);
        }
        let store = Arc::new(InMemory::new());
        let path = ObjectPath::from("f.h5");
        store.put(&path, PutPayload::from(bytes)).await.unwrap();
        let empty = ChunkIndex {
            grid: vec![3, 2],
            stored: HashMap::new(),
            filters: vec![1],
            typesize: 4,
        };
        let tree = ChunkBTree::new(&IndexRead {
            address: nodes[0].0,
            dims: vec![2, 3],
            indexing: None,
            shape: vec![6, 6],
            chunk_shape: vec![2, 3],
            chunk_bytes: 24,
            offset_size: 8,
            length_size: 8,
            base: 0,
            file_len: 4096,
            empty,
        });
        (tree, FileTarget::Remote { store, path })
    }

    /// Chunks (0, 0), (0, 1), (1, 0) under the first leaf, (2, 1) under the second; (1, 1)
    /// and (2, 0) never written.
    fn two_leaves() -> Vec<(u64, Vec<u8>)> {
        let root = node(1, &[([0, 0], 512, 0), ([4, 3], 1024, 0)], [6, 6]);
        let a = node(
            0,
            &[([0, 0], 2000, 10), ([0, 3], 2100, 11), ([2, 0], 2200, 12)],
            [4, 3],
        );
        let b = node(0, &[([4, 3], 2300, 13)], [6, 6]);
        vec![(0, root), (512, a), (1024, b)]
    }

    async fn lookup(tree: &ChunkBTree, file: &FileTarget, at: [u64; 2]) -> Option<Range<u64>> {
        let chunk = tree.chunk(file, 1 << 20, &at).await.unwrap();
        chunk.map(|c| c.range)
    }

    #[tokio::test]
    async fn a_chunk_is_found_reading_the_nodes_on_its_way_alone() {
        let (tree, file) = file(&two_leaves()).await;
        assert_eq!(lookup(&tree, &file, [0, 0]).await, Some(2000..2010));
        // The root and the first leaf: the second leaf was not read.
        assert_eq!(tree.nodes.lock().unwrap().len(), 2);
        assert_eq!(lookup(&tree, &file, [0, 1]).await, Some(2100..2111));
        assert_eq!(lookup(&tree, &file, [1, 0]).await, Some(2200..2212));
        assert_eq!(lookup(&tree, &file, [1, 1]).await, None);
        assert_eq!(lookup(&tree, &file, [2, 0]).await, None);
        assert_eq!(tree.nodes.lock().unwrap().len(), 2);
        assert_eq!(lookup(&tree, &file, [2, 1]).await, Some(2300..2313));
        assert_eq!(tree.nodes.lock().unwrap().len(), 3);
    }

    async fn error(nodes: Vec<(u64, Vec<u8>)>, at: [u64; 2], budget: u64) -> String {
        let (tree, file) = file(&nodes).await;
        tree.chunk(&file, budget, &at).await.unwrap_err()
    }

    #[tokio::test]
    async fn crafted_trees_are_errors_naming_the_node() {
        // A child that points back at its parent (a node at the parent's level).
        let looping = vec![(0, node(1, &[([0, 0], 0, 0)], [6, 6]))];
        let err = error(looping, [0, 0], 1 << 20).await;
        assert!(
            err.contains(
                "node at byte 0 is at level 1, where its parent's children are at level 0"
            ),
            "{err}"
        );
        // Keys that do not ascend.
        let mut nodes = two_leaves();
        nodes[1].1 = node(0, &[([2, 0], 2000, 10), ([0, 3], 2100, 11)], [4, 3]);
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert_eq!(err, "its B-tree node at byte 512 has keys out of order");
        // A child outside the file, a chunk outside it, a node the file ends inside.
        let mut nodes = two_leaves();
        nodes[0].1 = node(1, &[([0, 0], 1 << 40, 0)], [6, 6]);
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert!(err.contains("1099511627776"), "{err}");
        let mut nodes = two_leaves();
        nodes[1].1 = node(0, &[([0, 0], 4090, 10)], [4, 3]);
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert!(err.contains("4090..4100"), "{err}");
        let mut nodes = two_leaves();
        nodes[0] = (4060, nodes[0].1.clone());
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert!(err.contains("4060"), "{err}");
        // Not a node; a group node; more node bytes than the budget.
        let mut nodes = two_leaves();
        nodes[1].1[..4].copy_from_slice(b"XXXX");
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert!(
            err.starts_with("its B-tree node at byte 512: ") && err.contains("signature"),
            "{err}"
        );
        let mut nodes = two_leaves();
        nodes[1].1[4] = 0;
        let err = error(nodes, [0, 0], 1 << 20).await;
        assert!(err.starts_with("its B-tree node at byte 512"), "{err}");
        let err = error(two_leaves(), [0, 0], 200).await;
        assert!(err.contains("larger than the 200 bytes"), "{err}");
    }
}
