//! A box of an array's elements, in C order of the box, read chunk by chunk by the array's
//! [`ChunkReader`] (so under its read strategy: partial reads, zstd fronts, missing chunks as
//! the fill value, the scan's counters). Dataset variables are read this way.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

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

/// The elements of a box.
#[derive(Debug)]
pub(crate) enum BoxElements {
    /// Packed in C order.
    Packed(Vec<u8>),
    /// One element repeated over the box: a box that is one missing chunk, read as its fill
    /// value without making a box of it.
    Uniform(Vec<u8>),
}

/// The elements of the box at `start` of `shape` (array coordinates); its chunks read
/// [`CHUNKS_IN_FLIGHT`] at a time.
pub(crate) async fn read_box(
    reader: &Arc<ChunkReader>,
    start: &[u64],
    shape: &[u64],
    metrics: &ChunkMetrics,
) -> Result<BoxElements> {
    let Some((reads, sink)) = plan_box(reader, start, shape)? else {
        return Ok(BoxElements::Packed(Vec::new()));
    };
    let sink = Arc::new(sink);
    futures::stream::iter(reads)
        .map(|read| Arc::clone(reader).read(read, metrics.clone(), Arc::clone(&sink)))
        .buffered(CHUNKS_IN_FLIGHT)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await?;
    sink.finish()
}

/// [`read_box`] from a local store, on this thread (a blocking one), chunk after chunk: the
/// caller reads other boxes beside it, and uses the box where it was read.
pub(crate) fn read_box_local(
    reader: &ChunkReader,
    start: &[u64],
    shape: &[u64],
    metrics: &ChunkMetrics,
) -> Result<BoxElements> {
    let Some((reads, sink)) = plan_box(reader, start, shape)? else {
        return Ok(BoxElements::Packed(Vec::new()));
    };
    for read in reads {
        reader.read_local(&read, metrics, &sink)?;
    }
    sink.finish()
}

/// The chunk reads of a box, and where they are assembled; `None` for an empty box.
fn plan_box(
    reader: &ChunkReader,
    start: &[u64],
    shape: &[u64],
) -> Result<Option<(Vec<ChunkSelection>, BoxAssembly)>> {
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
        return Ok(None);
    }
    let sets: Vec<IndexSet> = (start.iter().zip(shape).zip(&meta.shape))
        .map(|((&s, &n), &size)| IndexSet::interval(size, s, s + n))
        .collect();
    let Some(selection) = Selection::from_boxes(vec![sets]) else {
        return Ok(None);
    };
    let reads = list_chunk_reads(&meta.shape, &meta.chunk_shape, &selection);
    let sink = BoxAssembly {
        location: reader.array.location.clone(),
        start: start.to_vec(),
        shape: shape.to_vec(),
        element_size,
        bytes,
        out: Mutex::new(None),
    };
    Ok(Some((reads, sink)))
}

/// Puts each piece's elements where they lie in the box, on the thread that decoded them. A
/// box that is one piece keeps that piece's bytes (a chunk decoded whole: no copy; a missing
/// chunk: its fill element).
struct BoxAssembly {
    /// The array's location, for messages.
    location: String,
    start: Vec<u64>,
    shape: Vec<u64>,
    element_size: usize,
    /// The box's size in bytes.
    bytes: usize,
    out: Mutex<Option<BoxElements>>,
}

impl BoxAssembly {
    /// The assembled box, once every chunk read has placed its part.
    fn finish(&self) -> Result<BoxElements> {
        self.lock()?.take().ok_or_else(|| {
            Error::Internal(format!(
                "{}: no chunk reached the box at {:?} of shape {:?}",
                self.location, self.start, self.shape
            ))
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<BoxElements>>> {
        let location = &self.location;
        self.out
            .lock()
            .map_err(|_| Error::Internal(format!("{location}: a thread assembling a box panicked")))
    }
}

impl ChunkSink for BoxAssembly {
    type Out = ();

    fn take(&self, part: &ChunkSelection, bytes: Cow<'_, [u8]>, gather: Gather) -> Result<()> {
        // The box meets each chunk, and each piece of it, in one box.
        let [local] = part.local.as_slice() else {
            return Err(Error::Internal(format!(
                "a box read selected {} boxes of chunk {:?}",
                part.local.len(),
                part.indices
            )));
        };
        let origin: Vec<u64> = (local.iter().zip(&part.origin))
            .map(|(set, o)| o + set.ranges().first().map_or(0, |r| r.start))
            .collect();
        let piece_shape: Vec<u64> = local.iter().map(IndexSet::len).collect();
        let mut out = self.lock()?;
        if out.is_none() && origin == self.start && piece_shape == self.shape {
            let whole = matches!(gather, Gather::Strided { start: 0, stride, count }
                if stride == self.element_size && count * stride == bytes.len());
            let fill = matches!(
                gather,
                Gather::Strided {
                    start: 0,
                    stride: 0,
                    ..
                }
            );
            if whole {
                *out = Some(BoxElements::Packed(bytes.into_owned()));
                return Ok(());
            }
            if fill && bytes.len() >= self.element_size {
                *out = Some(BoxElements::Uniform(bytes[..self.element_size].to_vec()));
                return Ok(());
            }
        }
        // A box met by more than one piece is packed.
        if !matches!(*out, Some(BoxElements::Packed(_))) {
            *out = Some(BoxElements::Packed(vec![0; self.bytes]));
        }
        let Some(BoxElements::Packed(out)) = &mut *out else {
            return Err(Error::Internal(format!(
                "{}: a box not packed",
                self.location
            )));
        };
        let to = Placement {
            out_shape: &self.shape,
            out_origin: &self.start,
            part_shape: &piece_shape,
            part_origin: &origin,
            element_size: self.element_size,
        };
        to.place(out, &bytes, &gather);
        Ok(())
    }
}

/// Where a part (C order, of `part_shape` at `part_origin`) lies in a box (C order, of
/// `out_shape` at `out_origin`).
struct Placement<'a> {
    out_shape: &'a [u64],
    out_origin: &'a [u64],
    part_shape: &'a [u64],
    part_origin: &'a [u64],
    element_size: usize,
}

impl Placement<'_> {
    /// Copies the part's elements, at `gather` in `bytes` in the part's C order, into `out`,
    /// one run of the last dimension at a time.
    fn place(&self, out: &mut [u8], bytes: &[u8], gather: &Gather) {
        let size = self.element_size;
        let (run, outer) = match self.part_shape.split_last() {
            Some((&run, outer)) => (run as usize, outer),
            None => (1, &[][..]),
        };
        let run_bytes = run * size;
        let strides = c_strides(self.out_shape);
        let rows: u64 = outer.iter().product();
        let mut index = vec![0u64; outer.len()];
        for row in 0..rows as usize {
            let at: u64 = (0..self.part_shape.len())
                .map(|d| {
                    let i = index.get(d).copied().unwrap_or(0);
                    (self.part_origin[d] - self.out_origin[d] + i) * strides[d]
                })
                .sum();
            let to = &mut out[at as usize * size..][..run_bytes];
            let first = row * run;
            match gather {
                Gather::Strided { start, stride, .. } if *stride == size => {
                    to.copy_from_slice(&bytes[start + first * size..][..run_bytes]);
                }
                Gather::Strided { start, stride, .. } => {
                    for (k, element) in to.chunks_exact_mut(size).enumerate() {
                        let p = start + (first + k) * stride;
                        element.copy_from_slice(&bytes[p..p + size]);
                    }
                }
                Gather::Positions(positions) => {
                    let positions = &positions[first..first + run];
                    for (element, &p) in to.chunks_exact_mut(size).zip(positions) {
                        element.copy_from_slice(&bytes[p..p + size]);
                    }
                }
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(
        out: &mut [u8],
        (out_shape, out_origin): (&[u64], &[u64]),
        (part_shape, part_origin): (&[u64], &[u64]),
        element_size: usize,
        bytes: &[u8],
        gather: &Gather,
    ) {
        let to = Placement {
            out_shape,
            out_origin,
            part_shape,
            part_origin,
            element_size,
        };
        to.place(out, bytes, gather);
    }

    fn packed(count: usize, element_size: usize) -> Gather {
        Gather::Strided {
            start: 0,
            stride: element_size,
            count,
        }
    }

    #[test]
    fn parts_land_where_they_belong_in_the_box() {
        // A 3 x 4 box at (1, 2) of one-byte elements, from two parts split along columns.
        let mut out = vec![0u8; 12];
        let left = [1, 2, 5, 6, 9, 10];
        let right = [3, 4, 7, 8, 11, 12];
        let boxed = (&[3, 4][..], &[1, 2][..]);
        place(&mut out, boxed, (&[3, 2], &[1, 2]), 1, &left, &packed(6, 1));
        place(
            &mut out,
            boxed,
            (&[3, 2], &[1, 4]),
            1,
            &right,
            &packed(6, 1),
        );
        assert_eq!(out, (1..=12).collect::<Vec<u8>>());
        // Two-byte elements, a part of one row.
        let mut out = vec![0u8; 8];
        let boxed = (&[2, 2][..], &[0, 0][..]);
        place(
            &mut out,
            boxed,
            (&[1, 2], &[1, 0]),
            2,
            &[7, 7, 8, 8],
            &packed(2, 2),
        );
        assert_eq!(out, vec![0, 0, 0, 0, 7, 7, 8, 8]);
    }

    #[test]
    fn parts_are_gathered_as_they_are_placed() {
        let boxed = (&[2, 2][..], &[0, 0][..]);
        // A missing chunk: one fill element repeated over the part.
        let mut out = vec![0u8; 4];
        let fill = Gather::Strided {
            start: 0,
            stride: 0,
            count: 2,
        };
        place(&mut out, boxed, (&[2, 1], &[0, 1]), 1, &[9], &fill);
        assert_eq!(out, vec![0, 9, 0, 9]);
        // Elements at explicit positions of a bigger decoded chunk, and every other one.
        let mut out = vec![0u8; 4];
        let positions = Gather::Positions(vec![3, 0, 2, 1]);
        place(
            &mut out,
            boxed,
            (&[2, 2], &[0, 0]),
            1,
            &[4, 3, 2, 1],
            &positions,
        );
        assert_eq!(out, vec![1, 4, 2, 3]);
        let mut out = vec![0u8; 4];
        let every_other = Gather::Strided {
            start: 1,
            stride: 2,
            count: 2,
        };
        place(
            &mut out,
            boxed,
            (&[1, 2], &[1, 0]),
            1,
            &[0, 5, 0, 6],
            &every_other,
        );
        assert_eq!(out, vec![0, 0, 5, 6]);
    }
}
