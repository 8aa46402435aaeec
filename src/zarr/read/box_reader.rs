//! A box of an array's elements, in C order of the box, read chunk by chunk by the array's
//! [`ChunkReader`] (so under its read strategy: partial reads, zstd fronts, missing chunks as
//! the fill value, the scan's counters). Dataset variables are read this way.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::zarr::plan::chunk_plan::list_chunk_reads;
use crate::zarr::plan::chunk_selection::{c_strides, ChunkSelection};
use crate::zarr::plan::gather::Gather;
use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::chunk_reader::{ChunkReader, ChunkSink};
use crate::zarr::read::metrics::ChunkMetrics;

/// Chunks of one box read at a time.
const CHUNKS_IN_FLIGHT: usize = 4;

/// The elements of the box at `start` of `shape` (array coordinates), packed in C order.
pub(crate) async fn read_box(
    reader: &Arc<ChunkReader>,
    start: &[u64],
    shape: &[u64],
    metrics: &ChunkMetrics,
) -> Result<Vec<u8>> {
    let meta = &reader.array.meta;
    let element_size = meta.element.size();
    let cells = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    let bytes = cells
        .and_then(|n| n.checked_mul(element_size as u64))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::Internal(format!(
                "{}: a box of shape {shape:?} overflows the address space",
                reader.array.location
            ))
        })?;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let sets: Vec<IndexSet> = (start.iter().zip(shape).zip(&meta.shape))
        .map(|((&s, &n), &size)| IndexSet::interval(size, s, s + n))
        .collect();
    let Some(selection) = Selection::from_boxes(vec![sets]) else {
        return Ok(Vec::new());
    };
    let reads = list_chunk_reads(&meta.shape, &meta.chunk_shape, &selection);
    let sink = Arc::new(ElementBytes { element_size });
    let mut parts = futures::stream::iter(reads)
        .map(|read| {
            let (reader, sink, metrics) = (Arc::clone(reader), Arc::clone(&sink), metrics.clone());
            async move {
                let (origin, local) = read
                    .bounding_box()
                    .unwrap_or_else(|| (vec![0; read.shape.len()], read.shape.clone()));
                let origin: Vec<u64> = origin
                    .iter()
                    .zip(&read.origin)
                    .map(|(l, o)| l + o)
                    .collect();
                let pieces = reader.read(read, metrics, sink).await?;
                Ok::<_, Error>((origin, local, pieces.concat()))
            }
        })
        .buffered(CHUNKS_IN_FLIGHT);
    let mut out: Option<Vec<u8>> = None;
    while let Some((origin, part_shape, part)) = parts.try_next().await? {
        if origin == start && part_shape == shape {
            // One chunk holds the whole box: its elements are the box.
            return Ok(part);
        }
        let out = out.get_or_insert_with(|| vec![0; bytes]);
        place(out, shape, start, &part, &part_shape, &origin, element_size);
    }
    Ok(out.unwrap_or_default())
}

/// Copies `part` (C order, of `part_shape` at `part_origin`) into `out` (C order, of
/// `out_shape` at `out_origin`), one run of the last dimension at a time.
fn place(
    out: &mut [u8],
    out_shape: &[u64],
    out_origin: &[u64],
    part: &[u8],
    part_shape: &[u64],
    part_origin: &[u64],
    element_size: usize,
) {
    let Some((&run, outer)) = part_shape.split_last() else {
        out[..element_size].copy_from_slice(&part[..element_size]);
        return;
    };
    let run_bytes = run as usize * element_size;
    let strides = c_strides(out_shape);
    let rows: u64 = outer.iter().product();
    let mut index = vec![0u64; outer.len()];
    for row in 0..rows as usize {
        let at: u64 = (0..part_shape.len())
            .map(|d| {
                let i = index.get(d).copied().unwrap_or(0);
                (part_origin[d] - out_origin[d] + i) * strides[d]
            })
            .sum();
        let at = at as usize * element_size;
        out[at..at + run_bytes].copy_from_slice(&part[row * run_bytes..(row + 1) * run_bytes]);
        // Odometer step over the outer dimensions, last fastest.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < outer[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// The gathered elements of each piece, packed.
struct ElementBytes {
    element_size: usize,
}

impl ChunkSink for ElementBytes {
    type Out = Vec<u8>;

    fn take(&self, _part: &ChunkSelection, bytes: &[u8], gather: Gather) -> Result<Vec<u8>> {
        let size = self.element_size;
        Ok(match gather {
            Gather::Strided {
                start,
                stride,
                count,
            } if stride == size => bytes[start..start + count * size].to_vec(),
            gather => {
                let mut out = Vec::with_capacity(gather.len() * size);
                gather.for_each(|p| out.extend_from_slice(&bytes[p..p + size]));
                out
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_land_where_they_belong_in_the_box() {
        // A 3 x 4 box at (1, 2) of one-byte elements, from two parts split along columns.
        let mut out = vec![0u8; 12];
        let left = [1, 2, 5, 6, 9, 10];
        let right = [3, 4, 7, 8, 11, 12];
        place(&mut out, &[3, 4], &[1, 2], &left, &[3, 2], &[1, 2], 1);
        place(&mut out, &[3, 4], &[1, 2], &right, &[3, 2], &[1, 4], 1);
        assert_eq!(out, (1..=12).collect::<Vec<u8>>());
        // Two-byte elements, a part of one row.
        let mut out = vec![0u8; 8];
        place(
            &mut out,
            &[2, 2],
            &[0, 0],
            &[7, 7, 8, 8],
            &[1, 2],
            &[1, 0],
            2,
        );
        assert_eq!(out, vec![0, 0, 0, 0, 7, 7, 8, 8]);
    }
}
