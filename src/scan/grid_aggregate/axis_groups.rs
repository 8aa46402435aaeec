//! How one axis's indices fall into groups. A grid aggregate's group keys each read one axis
//! (`date_trunc('month', time)`, `lat`, `floor(lon / 2) * 2`), so each is evaluated once per
//! index of its axis; the keys of an axis then give every index a group along that axis,
//! and a cell's group is the tuple of its indices' groups: a position in a dense array,
//! found without a hash.
//!
//! Groups are numbered in the order the axis's indices first reach them. Keys that run in
//! one direction along the axis (the only keys DataFusion may declare an order of, from the
//! scan's order) then number their groups in that direction, so groups emitted by number
//! keep every order the plan above expects.

use std::collections::HashMap;
use std::ops::Range;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::take;
use arrow::row::{RowConverter, SortField};

use super::dense::Along;
use datafusion::common::{internal_err, Result};

/// The groups along one axis.
#[derive(Debug)]
pub(crate) struct AxisGroups {
    /// Per index of the axis: its group (0 for indices the scan does not read); empty for
    /// an axis without keys (one group), whose length only metadata says.
    ids: Vec<u32>,
    /// Per key of the axis: its value in each group.
    keys: Vec<ArrayRef>,
    /// Groups along the axis.
    len: u32,
    /// Whether some group holds two of the indices read.
    merges: bool,
}

impl AxisGroups {
    /// The groups of an axis of `axis_len` indices whose keys have `values` (one array per
    /// key, one value per index), among the indices in `read`. An axis without keys is one
    /// group.
    pub(crate) fn new(axis_len: usize, values: &[ArrayRef], read: &[Range<u64>]) -> Result<Self> {
        if values.iter().any(|v| v.len() != axis_len) {
            return internal_err!("an axis key has another length than its axis ({axis_len})");
        }
        if read.iter().any(|r| r.end > axis_len as u64) {
            return internal_err!("an index range reaches past its axis ({axis_len})");
        }
        let read_count: u64 = read.iter().map(|r| r.end - r.start).sum();
        if values.is_empty() {
            return Ok(AxisGroups {
                ids: Vec::new(),
                keys: Vec::new(),
                len: 1,
                merges: read_count > 1,
            });
        }
        // Keys were evaluated at every index (`AxisExpression`, at most 2^20 of them).
        let Ok(_) = u32::try_from(axis_len) else {
            return internal_err!("an axis of {axis_len} indices has too many groups");
        };
        let mut ids = vec![0u32; axis_len];
        let fields = values.iter().map(|v| SortField::new(v.data_type().clone()));
        let converter = RowConverter::new(fields.collect())?;
        let rows = converter.convert_columns(values)?;
        let mut numbers: HashMap<&[u8], u32> = HashMap::new();
        let mut first: Vec<u32> = Vec::new();
        for index in read.iter().flat_map(|r| r.start as usize..r.end as usize) {
            let next = first.len() as u32;
            let id = *numbers.entry(rows.row(index).data()).or_insert(next);
            if id == next {
                first.push(index as u32);
            }
            ids[index] = id;
        }
        let first = UInt32Array::from(first);
        let keys = (values.iter())
            .map(|v| take(v.as_ref(), &first, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(AxisGroups {
            ids,
            len: first.len() as u32,
            keys,
            merges: (first.len() as u64) < read_count,
        })
    }

    /// Groups along the axis.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    /// Whether some group holds two of the indices read (always, for an axis without keys
    /// and more than one index read).
    pub(crate) fn merges(&self) -> bool {
        self.merges
    }

    /// The group of each index; `None` for an axis without keys, whose every index is in
    /// its one group.
    pub(crate) fn ids(&self) -> Option<&[u32]> {
        (!self.keys.is_empty()).then_some(self.ids.as_slice())
    }

    /// Key `k`'s value in each group.
    pub(crate) fn key(&self, k: usize) -> Option<&ArrayRef> {
        self.keys.get(k)
    }

    /// How groups follow one another along runs of indices in `read` (ranges of consecutive
    /// indices): one group for all (an axis without keys), one each in turn, or neither.
    pub(crate) fn along(&self, read: &[Range<u64>]) -> Along {
        if self.keys.is_empty() {
            return Along::Same;
        }
        let consecutive = read.iter().all(|r| {
            let ids = &self.ids[r.start as usize..r.end as usize];
            ids.windows(2).all(|w| w[1] == w[0] + 1)
        });
        match consecutive {
            true => Along::Consecutive,
            false => Along::Looked,
        }
    }

    /// The groups the indices in `read` reach, as the range from the first to the last (an
    /// axis without keys: its one group, read or not).
    pub(crate) fn window(&self, read: &[Range<u64>]) -> Range<u32> {
        if self.keys.is_empty() {
            return 0..1;
        }
        let ids = read
            .iter()
            .flat_map(|r| r.start as usize..r.end as usize)
            .filter_map(|i| self.ids.get(i));
        let (low, high) = ids.fold((u32::MAX, 0), |(lo, hi), &id| (lo.min(id), hi.max(id)));
        match low <= high {
            true => low..high + 1,
            false => 0..0,
        }
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::Int64Type;
    use std::sync::Arc;

    #[test]
    fn groups_are_numbered_as_indices_first_reach_them() {
        // Months of 8 days, two keys (a month and a parity), days 1..7 read.
        let month: ArrayRef = Arc::new(Int64Array::from(vec![1, 1, 1, 2, 2, 3, 3, 3]));
        let parity: ArrayRef = Arc::new(StringArray::from(vec![
            "e", "o", "e", "o", "e", "o", "e", "o",
        ]));
        let groups = AxisGroups::new(8, &[month, parity], &[1..3, 4..8]).unwrap();
        assert_eq!(groups.len(), 5);
        assert_eq!(groups.ids(), Some(&[0, 0, 1, 0, 2, 3, 4, 3][..]));
        let months = groups.key(0).unwrap().as_primitive::<Int64Type>();
        assert_eq!(months.values().to_vec(), vec![1, 1, 2, 3, 3]);
        assert_eq!(groups.key(1).unwrap().as_string::<i32>().value(0), "o");
        assert_eq!(groups.window(&[5..7]), 3..5);
        assert_eq!(groups.window(&[]), 0..0);
        assert!(groups.merges(), "days 5 and 7 are one group");
        let day: ArrayRef = Arc::new(Int64Array::from(vec![0, 1, 2, 3, 3]));
        assert!(!AxisGroups::new(5, &[Arc::clone(&day)], &[1..4])
            .unwrap()
            .merges());
        assert!(AxisGroups::new(5, &[day], &[1..5]).unwrap().merges());
    }

    #[test]
    fn an_axis_without_keys_is_one_group() {
        let groups = AxisGroups::new(4, &[], &[]).unwrap();
        assert_eq!((groups.len(), groups.window(&[])), (1, 0..1));
        assert!(!groups.merges() && AxisGroups::new(4, &[], &[1..3]).unwrap().merges());
        // Nothing per index, however long the axis metadata declares.
        let long = AxisGroups::new(1 << 40, &[], &[0..(1 << 40)]).unwrap();
        assert_eq!(
            (long.ids(), long.along(&[0..(1 << 40)])),
            (None, Along::Same)
        );
        assert!(AxisGroups::new(4, &[], &[2..5]).is_err());
    }
}
