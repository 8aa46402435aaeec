//! [`Gather`]: which elements of a chunk's bytes a read takes, in output row order (a
//! stride for whole chunks, explicit positions for a selection inside a chunk).

use arrow::array::{Array, BooleanArray};

/// The byte positions at which the selected elements start, in output row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gather {
    /// `count` elements at `start`, `start + stride`, ... A stride of 0 repeats one element
    /// (a missing chunk reads its fill value this way).
    Strided {
        start: usize,
        stride: usize,
        count: usize,
    },
    /// Explicit byte positions.
    Positions(Vec<usize>),
}

impl Gather {
    pub(crate) fn len(&self) -> usize {
        match self {
            Gather::Strided { count, .. } => *count,
            Gather::Positions(p) => p.len(),
        }
    }

    /// The elements of output rows `rows` (clamped to the ones there are).
    pub(crate) fn slice(&self, rows: std::ops::Range<usize>) -> Gather {
        let len = self.len();
        let rows = rows.start.min(len)..rows.end.min(len);
        match self {
            Gather::Strided { start, stride, .. } => Gather::Strided {
                start: start + rows.start * stride,
                stride: *stride,
                count: rows.len(),
            },
            Gather::Positions(p) => Gather::Positions(p[rows].to_vec()),
        }
    }

    /// The largest start position, if any element is selected.
    pub(crate) fn max_position(&self) -> Option<usize> {
        match self {
            Gather::Strided { count: 0, .. } => None,
            Gather::Strided {
                start,
                stride,
                count,
            } => Some(start + stride * (count - 1)),
            Gather::Positions(p) => p.iter().copied().max(),
        }
    }

    /// Keeps the elements whose `mask` entry is true (NULL counts as false).
    pub(crate) fn filter(&self, mask: &BooleanArray) -> Gather {
        let keep = match mask.nulls() {
            Some(nulls) => mask.values() & nulls.inner(),
            None => mask.values().clone(),
        };
        // Walks the set bits only, a word at a time.
        let kept = keep.set_indices();
        Gather::Positions(match self {
            Gather::Strided { start, stride, .. } => kept.map(|i| start + i * stride).collect(),
            Gather::Positions(p) => kept.map(|i| p[i]).collect(),
        })
    }

    /// Maps every position; matched once so the loop inside is monomorphic.
    #[inline]
    pub(crate) fn map<T>(&self, mut f: impl FnMut(usize) -> T) -> Vec<T> {
        match self {
            Gather::Strided {
                start,
                stride,
                count,
            } => (0..*count).map(|i| f(start + i * stride)).collect(),
            Gather::Positions(p) => p.iter().map(|&pos| f(pos)).collect(),
        }
    }

    #[inline]
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize)) {
        match self {
            Gather::Strided {
                start,
                stride,
                count,
            } => (0..*count).for_each(|i| f(start + i * stride)),
            Gather::Positions(p) => p.iter().for_each(|&pos| f(pos)),
        }
    }

    /// The positions of each of `len` consecutive items of size `item_size` in every element,
    /// element-major (the layout of a FixedSizeList's values).
    pub(crate) fn expand(&self, len: usize, item_size: usize) -> Gather {
        let mut out = Vec::with_capacity(self.len() * len);
        self.for_each(|p| out.extend((0..len).map(|k| p + k * item_size)));
        Gather::Positions(out)
    }

    /// Checks that each gathered element of `element_size` bytes lies inside `bytes`.
    pub(crate) fn check_bounds(
        &self,
        bytes: &[u8],
        element_size: usize,
    ) -> Result<(), OutOfBounds> {
        match self.max_position() {
            Some(p) if p + element_size > bytes.len() => Err(OutOfBounds {
                have: bytes.len(),
                need: p + element_size,
            }),
            _ => Ok(()),
        }
    }
}

/// Elements gathered past the end of the decoded bytes (a corrupt chunk decoded short).
#[derive(Debug, thiserror::Error)]
#[error("decoded chunk holds {have} bytes, but element bytes up to {need} are needed")]
pub(crate) struct OutOfBounds {
    pub have: usize,
    pub need: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filtering_a_gather_keeps_true_positions_and_drops_null() {
        let mask = BooleanArray::from(vec![Some(true), None, Some(false), Some(true)]);
        let strided = Gather::Strided {
            start: 2,
            stride: 3,
            count: 4,
        };
        assert_eq!(strided.filter(&mask), Gather::Positions(vec![2, 11]));
        let positions = Gather::Positions(vec![5, 7, 9, 40]);
        assert_eq!(positions.filter(&mask), Gather::Positions(vec![5, 40]));
    }
}
