//! A set of indices along one dimension, as sorted, disjoint, non-empty ranges.

use std::fmt;
use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct IndexSet(Vec<Range<u64>>);

impl IndexSet {
    /// `0..n`.
    pub(crate) fn full(n: u64) -> Self {
        IndexSet::interval(n, 0, n)
    }

    /// `start..end`, clipped to `0..n`.
    pub(crate) fn interval(n: u64, start: u64, end: u64) -> Self {
        let (start, end) = (start.min(n), end.min(n));
        IndexSet(
            std::iter::once(start..end)
                .filter(|r| r.start < r.end)
                .collect(),
        )
    }

    pub(crate) fn empty() -> Self {
        IndexSet(vec![])
    }

    /// Normalises `ranges`: clipped to `0..n`, empty ones dropped, overlapping and adjacent
    /// ones merged.
    pub(crate) fn from_ranges(n: u64, mut ranges: Vec<Range<u64>>) -> Self {
        ranges
            .iter_mut()
            .for_each(|r| *r = r.start.min(n)..r.end.min(n));
        ranges.retain(|r| r.start < r.end);
        ranges.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        IndexSet(merged)
    }

    pub(crate) fn ranges(&self) -> &[Range<u64>] {
        &self.0
    }

    pub(crate) fn len(&self) -> u64 {
        self.0.iter().map(|r| r.end - r.start).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn intersect(&self, other: &IndexSet) -> IndexSet {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (&self.0[i], &other.0[j]);
            let (start, end) = (a.start.max(b.start), a.end.min(b.end));
            if start < end {
                out.push(start..end);
            }
            if a.end < b.end {
                i += 1;
            } else {
                j += 1;
            }
        }
        IndexSet(out)
    }

    /// The indices of `0..n` not in the set.
    pub(crate) fn complement(&self, n: u64) -> IndexSet {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        let mut at = 0;
        for r in &self.0 {
            if r.start > at {
                out.push(at..r.start.min(n));
            }
            at = r.end;
        }
        if at < n {
            out.push(at..n);
        }
        IndexSet::from_ranges(n, out)
    }

    pub(crate) fn difference(&self, other: &IndexSet) -> IndexSet {
        let n = self.0.last().map_or(0, |r| r.end);
        self.intersect(&other.complement(n))
    }

    /// Shifted by `-offset` and clipped to `0..len`: the part of the set inside a chunk that
    /// starts at `offset`, in chunk-local indices.
    pub(crate) fn local(&self, offset: u64, len: u64) -> IndexSet {
        let first = self.0.partition_point(|r| r.end <= offset);
        let ranges = self.0[first..]
            .iter()
            .take_while(|r| r.start < offset + len)
            .map(|r| r.start.max(offset) - offset..r.end.min(offset + len) - offset)
            .collect();
        IndexSet(ranges)
    }

    /// How many indices of the set are below `x`.
    pub(crate) fn count_below(&self, x: u64) -> u64 {
        self.0
            .iter()
            .take_while(|r| r.start < x)
            .map(|r| r.end.min(x) - r.start)
            .sum()
    }

    /// Every index in the set, in order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().flat_map(|r| r.clone())
    }
}

impl fmt::Display for IndexSet {
    /// `[0..10, 20..30]`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| format!("{}..{}", r.start, r.end))
            .collect();
        write!(f, "[{}]", parts.join(", "))
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_combines() {
        let a = IndexSet::from_ranges(10, vec![5..7, 0..2, 1..3, 9..20]);
        assert_eq!(a.ranges(), &[0..3, 5..7, 9..10]);
        assert_eq!(a.len(), 6);
        let b = IndexSet::from_ranges(10, vec![2..6]);
        assert_eq!(a.intersect(&b).ranges(), &[2..3, 5..6]);
        assert_eq!(a.complement(10).ranges(), &[3..5, 7..9]);
        assert_eq!(a.difference(&b).ranges(), &[0..2, 6..7, 9..10]);
        assert_eq!(a.local(4, 4).ranges(), &[1..3]);
        assert_eq!(a.local(0, 10), a);
        assert_eq!(a.local(8, 2).ranges(), &[1..2]);
        assert_eq!(a.count_below(6), 4);
        assert_eq!(a.count_below(0), 0);
        assert_eq!(a.count_below(100), 6);
        assert_eq!(IndexSet::full(0), IndexSet::empty());
    }
}
