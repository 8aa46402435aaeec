//! The chunks a selection touches, in C order of the chunk grid, each with the boxes of its
//! selected elements.

use std::collections::BTreeMap;

use super::chunk_read::{for_each_index, ChunkRead};
use super::selection::{box_is_empty, box_len, IndexBox, Selection};

/// The chunks a selection touches, in C order of the chunk grid, with their local boxes.
pub(crate) fn plan_chunk_reads(
    shape: &[u64],
    chunk_shape: &[u64],
    selection: &Selection,
) -> Vec<ChunkRead> {
    if shape.is_empty() {
        // A 0-d array is one chunk of one element.
        return vec![ChunkRead {
            indices: vec![],
            origin: vec![],
            shape: vec![],
            local: vec![vec![]],
            rows: 1,
        }];
    }
    let mut reads: BTreeMap<Vec<u64>, ChunkRead> = BTreeMap::new();
    for b in selection.boxes() {
        // Per dimension: the chunks the set touches.
        let per_dim: Vec<Vec<u64>> = b
            .iter()
            .zip(chunk_shape)
            .map(|(set, &c)| {
                let mut ks: Vec<u64> = set
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start / c..r.end.div_ceil(c))
                    .collect();
                ks.dedup();
                ks
            })
            .collect();
        for_each_index(&per_dim, |ks| {
            let origin: Vec<u64> = ks.iter().zip(chunk_shape).map(|(k, c)| k * c).collect();
            let local: IndexBox = b
                .iter()
                .zip(&origin)
                .zip(chunk_shape)
                .map(|((set, &o), &c)| set.local(o, c))
                .collect();
            if box_is_empty(&local) {
                return;
            }
            let read = reads.entry(ks.to_vec()).or_insert_with(|| ChunkRead {
                indices: ks.to_vec(),
                origin: origin.clone(),
                shape: chunk_shape.to_vec(),
                local: vec![],
                rows: 0,
            });
            read.rows += box_len(&local) as usize;
            read.local.push(local);
        });
    }
    reads.into_values().collect()
}

/// Number of chunks in the grid of an array.
pub(crate) fn chunk_count(shape: &[u64], chunk_shape: &[u64]) -> u64 {
    shape
        .iter()
        .zip(chunk_shape)
        .map(|(&n, &c)| n.div_ceil(c))
        .product()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::zarr::decode::Gather;
    use crate::zarr::index_set::IndexSet;

    fn set(n: u64, r: Vec<std::ops::Range<u64>>) -> IndexSet {
        IndexSet::from_ranges(n, r)
    }

    #[test]
    fn whole_array_reads_every_chunk_with_edge_chunks_bounded() {
        let shape = [5, 3];
        let reads = plan_chunk_reads(&shape, &[2, 2], &Selection::all(&shape));
        assert_eq!(reads.len(), 6);
        assert_eq!(reads.iter().map(|r| r.rows).sum::<usize>(), 15);
        let edge = &reads[5];
        assert_eq!(edge.indices, vec![2, 1]);
        assert_eq!(
            edge.local,
            vec![vec![set(2, vec![0..1]), set(2, vec![0..1])]]
        );
        // Edge chunk: positions index the full 2x2 decoded chunk.
        assert_eq!(
            edge.gather(1),
            Gather::Strided {
                start: 0,
                stride: 1,
                count: 1
            }
        );
        assert_eq!(edge.bounding_box(), Some((vec![0, 0], vec![1, 1])));
        assert_eq!(reads[0].bounding_box(), None);
        assert_eq!(
            reads[0].gather(4),
            Gather::Strided {
                start: 0,
                stride: 4,
                count: 4
            }
        );
    }

    #[test]
    fn zero_d_and_empty_arrays() {
        let reads = plan_chunk_reads(&[], &[], &Selection::all(&[]));
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].rows, 1);
        assert!(plan_chunk_reads(&[0, 4], &[2, 2], &Selection::all(&[0, 4])).is_empty());
        assert_eq!(chunk_count(&[5, 3], &[2, 2]), 6);
    }
}
