//! The order rows come out of a grid scan in, worked out from the plan alone: units (chunks,
//! blocks) in C order of the grid, each unit's selected cells in C order. So within a
//! partition rows ascend lexicographically in the leading axes, as far as going from one unit
//! to the next never steps back in them.
//!
//! Going from a unit to the next changes the unit index first at some axis `j` (and resets the
//! ones after it). The rows stay sorted in the axes `0..p` when, at every such step, the axes
//! before `min(j, p)` hold a single selected index within a unit: then the axes before `j` do
//! not run back from the unit's last row to the next unit's first. Hence with `L` such leading
//! axes (units one index thick, or one index selected), rows are in full C order when every
//! axis the selection crosses units along is at most `L`, and else sorted in the first `L`.

use crate::scan::SortKey;
use crate::zarr::plan::grid_statistics::{AxisColumn, ValueOrder};
use crate::zarr::plan::selection::Selection;

/// How many leading axes rows are sorted by (lexicographically, all ascending in the index),
/// within each partition of a plan of `selection` over units of `unit_shape`.
pub(crate) fn sorted_axes(unit_shape: &[u64], selection: &Selection) -> usize {
    // Several boxes over many units are planned box by box; one box is always in C order.
    let [b] = selection.boxes() else {
        return 0;
    };
    let crosses_units = |a: usize| {
        let c = unit_shape[a];
        let ranges = b[a].ranges();
        match (ranges.first(), ranges.last()) {
            (Some(first), Some(last)) => first.start / c != (last.end - 1) / c,
            _ => false,
        }
    };
    let thin = |a: usize| unit_shape[a] == 1 || b[a].len() <= 1;
    let leading_thin = (0..b.len()).take_while(|&a| thin(a)).count();
    if (0..b.len()).all(|j| !crosses_units(j) || j <= leading_thin) {
        b.len()
    } else {
        leading_thin
    }
}

/// The sort keys of the output columns that hold the first `sorted` axes, in axis order: an
/// index ascends with its axis, a coordinate as its values run. The keys stop at the first axis
/// not in the output or whose values are unordered, and after one whose values repeat (rows
/// of equal values need not be sorted in the next axis).
pub(crate) fn sort_keys(sorted: usize, columns: &[AxisColumn<'_>]) -> Vec<SortKey> {
    keys_choosing(sorted, |axis| columns.iter().find(|c| c.axis == axis))
}

/// Every order the rows keep: [`sort_keys`], and the same with each other column of one of
/// its axes (a second column of an axis, such as an expression of it) in that axis's place.
pub(crate) fn orderings(sorted: usize, columns: &[AxisColumn<'_>]) -> Vec<Vec<SortKey>> {
    let primary = sort_keys(sorted, columns);
    let mut all = vec![primary.clone()];
    for other in columns {
        let first = columns.iter().find(|c| c.axis == other.axis);
        if other.axis >= primary.len() || first.is_some_and(|f| f.column == other.column) {
            continue;
        }
        let choose = |axis: usize| {
            if axis == other.axis {
                Some(other)
            } else {
                columns.iter().find(|c| c.axis == axis)
            }
        };
        let keys = keys_choosing(sorted, choose);
        if keys.len() > other.axis && !all.contains(&keys) {
            all.push(keys);
        }
    }
    all.retain(|keys| !keys.is_empty());
    all
}

/// The keys of the first `sorted` axes, each axis's column the one `choose` picks.
fn keys_choosing<'c>(
    sorted: usize,
    choose: impl Fn(usize) -> Option<&'c AxisColumn<'c>>,
) -> Vec<SortKey> {
    let mut keys = Vec::new();
    for axis in 0..sorted {
        let Some(col) = choose(axis) else {
            break;
        };
        let (descending, strict) = match col.values.order() {
            ValueOrder::Ascending { strict } => (false, strict),
            ValueOrder::Descending { strict } => (true, strict),
            ValueOrder::Unordered => break,
        };
        keys.push(SortKey {
            column: col.column,
            descending,
        });
        if !strict {
            break;
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::plan::chunk_plan::ChunkPlan;
    use crate::zarr::plan::grid_statistics::AxisValues;
    use crate::zarr::plan::index_set::IndexSet;

    fn one_box(shape: &[u64], ranges: &[(u64, u64)]) -> Selection {
        let b = (shape.iter().zip(ranges))
            .map(|(&n, &(s, e))| IndexSet::interval(n, s, e))
            .collect();
        Selection::from_boxes(vec![b]).unwrap()
    }

    /// The C-order indices of the plan's rows, chunk after chunk.
    fn rows(shape: &[u64], chunk: &[u64], selection: &Selection) -> Vec<Vec<u64>> {
        let plan = ChunkPlan::new(shape, chunk, selection);
        let mut out = Vec::new();
        for p in 0..plan.len() {
            let read = plan.read(p);
            for b in &read.local {
                let lists: Vec<Vec<u64>> = b.iter().map(|s| s.indices().collect()).collect();
                crate::zarr::plan::chunk_selection::for_each_index(&lists, |i| {
                    out.push(i.iter().zip(&read.origin).map(|(i, o)| i + o).collect());
                });
            }
        }
        out
    }

    /// Checks `sorted_axes` against the rows the plan makes: sorted in that many axes.
    fn check(shape: &[u64], chunk: &[u64], ranges: &[(u64, u64)]) -> usize {
        let selection = one_box(shape, ranges);
        let n = sorted_axes(chunk, &selection);
        let rows = rows(shape, chunk, &selection);
        let sorted_in = |k: usize| rows.windows(2).all(|w| w[0][..k] <= w[1][..k]);
        assert!(
            sorted_in(n),
            "{shape:?} {chunk:?} {ranges:?}: not sorted in {n}"
        );
        n
    }

    #[test]
    fn rows_are_sorted_as_far_as_units_never_step_back() {
        // 1-D: always.
        assert_eq!(check(&[10], &[3], &[(1, 9)]), 1);
        // Chunks span the trailing axes whole: full C order.
        assert_eq!(check(&[6, 4], &[2, 4], &[(0, 6), (0, 4)]), 2);
        // Chunked along the trailing axis too: no order in the leading axis ...
        assert_eq!(check(&[6, 4], &[2, 2], &[(0, 6), (0, 4)]), 0);
        // ... unless a unit is one index thick there, or one index of it is selected.
        assert_eq!(check(&[6, 4], &[1, 2], &[(0, 6), (0, 4)]), 2);
        assert_eq!(check(&[6, 4], &[2, 2], &[(3, 4), (0, 4)]), 2);
        // Or the selection stays in one unit along the trailing axis.
        assert_eq!(check(&[6, 4], &[2, 2], &[(0, 6), (0, 2)]), 2);
        // Three axes, one-thick leading units, crossing units on the last two: sorted in the
        // first only.
        assert_eq!(check(&[3, 4, 4], &[1, 2, 2], &[(0, 3), (0, 4), (0, 4)]), 1);
        // Several boxes: nothing promised (they are planned box by box over many chunks).
        let two = Selection::from_boxes(vec![
            vec![IndexSet::interval(10, 0, 2), IndexSet::interval(10, 0, 2)],
            vec![IndexSet::interval(10, 5, 7), IndexSet::interval(10, 5, 7)],
        ])
        .unwrap();
        assert_eq!(two.boxes().len(), 2);
        assert_eq!(sorted_axes(&[3, 3], &two), 0);
        // One box of several ranges is one box: in order.
        let gaps = Selection::from_boxes(vec![
            vec![IndexSet::interval(10, 0, 2)],
            vec![IndexSet::interval(10, 5, 7)],
        ])
        .unwrap();
        assert_eq!(sorted_axes(&[3], &gaps), 1);
    }

    #[test]
    fn every_small_box_is_sorted_as_claimed() {
        let spans = |n: u64| (0..n).flat_map(move |s| (s + 1..=n).map(move |e| (s, e)));
        for (n0, n1, n2) in [(3, 4, 1), (2, 3, 3), (4, 2, 2)] {
            for c0 in 1..=n0 {
                for c1 in 1..=n1 {
                    for c2 in 1..=n2 {
                        for r0 in spans(n0) {
                            for r1 in spans(n1) {
                                for r2 in spans(n2) {
                                    check(&[n0, n1, n2], &[c0, c1, c2], &[r0, r1, r2]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn sort_keys_follow_the_axis_values() {
        let values: arrow::array::ArrayRef =
            std::sync::Arc::new(arrow::array::Int32Array::from(vec![3, 2, 1]));
        let columns = [
            AxisColumn {
                column: 2,
                axis: 1,
                values: AxisValues::Index,
            },
            AxisColumn {
                column: 0,
                axis: 0,
                values: AxisValues::Values {
                    values: &values,
                    order: ValueOrder::Descending { strict: true },
                },
            },
        ];
        let key = |column, descending| SortKey { column, descending };
        assert_eq!(sort_keys(2, &columns), vec![key(0, true), key(2, false)]);
        assert_eq!(sort_keys(1, &columns), vec![key(0, true)]);
        // The leading axis not in the output: no order.
        assert_eq!(sort_keys(2, &columns[..1]), vec![]);
        let repeating = [AxisColumn {
            values: AxisValues::Values {
                values: &values,
                order: ValueOrder::Ascending { strict: false },
            },
            ..columns[1]
        }];
        assert_eq!(sort_keys(2, &repeating), vec![key(0, false)]);
    }
}
