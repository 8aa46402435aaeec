//! What the netCDF store serves: a file laid out as a Zarr group — its metadata documents,
//! made once when the table opens, and for each variable where its chunks' bytes are in the
//! file. A netCDF-3 file's chunks are runs of rows (`classic.rs`), a netCDF-4 file's are its
//! HDF5 chunks as they are stored, filters and all, found in its chunk index (`nc4.rs`).

use std::collections::{BTreeMap, HashMap};

use zarrs::storage::Bytes;

use super::chunk_btree::StoredChunk;
use super::classic::Rows;
use super::lazy_index::LazyIndex;

/// A file as a Zarr group.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// The metadata documents by key (`.zgroup`, `name/.zarray`, ...; `zarr.json`, ...).
    pub documents: BTreeMap<String, Vec<u8>>,
    /// Where each variable's chunks are, by name.
    pub variables: HashMap<String, Source>,
    /// The variables in the file's order (xarray's order of columns).
    pub order: Vec<String>,
    /// Why variables were left out (types xarray's default engine leaves out), for the log.
    pub left_out: Vec<String>,
}

/// Where one variable's chunks are.
#[derive(Debug)]
pub(crate) enum Source {
    /// Rows of the file (netCDF-3, and a netCDF-4 variable stored contiguously): chunks
    /// along the first dimension, assembled from ranges of the rows.
    Rows(Rows),
    /// Stored chunks (netCDF-4 chunked storage): each chunk a range of the file, decoded by
    /// the codecs of the array's metadata, found in the index when first needed
    /// (`lazy_index.rs`). A chunk not in the index was never written: the array's fill value.
    Chunks(Box<LazyIndex>),
    /// The variable's bytes, held in its header (HDF5 compact storage): its one chunk.
    Inline(Bytes),
}

/// The stored chunks of a variable.
#[derive(Debug, Clone)]
pub(crate) struct ChunkIndex {
    /// Chunks along each dimension.
    pub grid: Vec<u64>,
    /// Where each written chunk is (offset and length in the file, and the filters it was
    /// stored without: `skipped.rs`), by its index in the grid in C order.
    pub stored: HashMap<u64, StoredChunk>,
    /// The HDF5 filters of the variable, in the order they are applied.
    pub filters: Vec<u16>,
    /// Bytes of one element (blosc's type size).
    pub typesize: u64,
}

impl ChunkIndex {
    /// The index in C order of the chunk at `indices`, when it is in the grid.
    pub(crate) fn linear(&self, indices: &[u64]) -> Option<u64> {
        if indices.len() != self.grid.len() {
            return None;
        }
        let mut at = 0u64;
        for (&i, &n) in indices.iter().zip(&self.grid) {
            if i >= n {
                return None;
            }
            at = at.checked_mul(n)?.checked_add(i)?;
        }
        Some(at)
    }
}

/// The chunk indices of a chunk key's last part (`3.0.1`; a scalar's is `0`), `rank` of
/// them.
pub(crate) fn chunk_indices(part: &str, rank: usize) -> Option<Vec<u64>> {
    let indices: Vec<u64> = (part.split('.').map(|p| p.parse().ok())).collect::<Option<_>>()?;
    match (rank, indices.as_slice()) {
        (0, [0]) => Some(Vec::new()),
        (0, _) => None,
        _ => (indices.len() == rank).then_some(indices),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_name_cells_of_the_grid() {
        let index = ChunkIndex {
            grid: vec![3, 4],
            stored: HashMap::new(),
            filters: Vec::new(),
            typesize: 1,
        };
        assert_eq!(index.linear(&[0, 0]), Some(0));
        assert_eq!(index.linear(&[2, 3]), Some(11));
        assert_eq!(index.linear(&[3, 0]), None);
        assert_eq!(index.linear(&[0]), None);
        assert_eq!(chunk_indices("2.3", 2), Some(vec![2, 3]));
        assert_eq!(chunk_indices("2.3", 3), None);
        assert_eq!(chunk_indices("0", 0), Some(vec![]));
        assert_eq!(chunk_indices("1", 0), None);
        assert_eq!(chunk_indices("x.1", 2), None);
    }
}
