//! Which elements a scan reads: a [`Selection`] is a union of disjoint boxes; a box holds one
//! [`IndexSet`] per dimension and selects their cartesian product. Dimension filters become a
//! selection (`pruning.rs`); the chunks it touches are planned in `chunk_plan.rs`.

use crate::zarr::plan::index_set::IndexSet;

/// One index set per dimension; selects their cartesian product.
pub(crate) type IndexBox = Vec<IndexSet>;

/// Unions of boxes larger than this are not pushed down (the filter is applied row by row).
pub(crate) const MAX_BOXES: usize = 256;

/// Selected elements: disjoint boxes, none empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    boxes: Vec<IndexBox>,
}

pub(crate) fn box_len(b: &IndexBox) -> u64 {
    b.iter().map(IndexSet::len).product()
}

pub(crate) fn box_is_empty(b: &IndexBox) -> bool {
    b.iter().any(IndexSet::is_empty)
}

/// `b \ a` as at most one disjoint box per dimension.
fn box_difference(b: &IndexBox, a: &IndexBox) -> Vec<IndexBox> {
    let mut out = Vec::new();
    let mut rest = b.clone();
    for d in 0..b.len() {
        let outside = rest[d].difference(&a[d]);
        if !outside.is_empty() {
            let mut piece = rest.clone();
            piece[d] = outside;
            out.push(piece);
        }
        rest[d] = rest[d].intersect(&a[d]);
        if rest[d].is_empty() {
            break;
        }
    }
    out
}

/// Merges disjoint boxes that differ in one dimension only (`t = 0 OR t = 4` is one box
/// `t in {0, 4}`), so fewer, larger boxes are planned.
fn merge_boxes(mut boxes: Vec<IndexBox>) -> Vec<IndexBox> {
    let mut merged = true;
    while merged {
        merged = false;
        'search: for i in 0..boxes.len() {
            for j in i + 1..boxes.len() {
                let differing: Vec<usize> = (0..boxes[i].len())
                    .filter(|&d| boxes[i][d] != boxes[j][d])
                    .collect();
                if let [d] = differing[..] {
                    let other = boxes.remove(j);
                    let mine = &mut boxes[i][d];
                    let n = mine
                        .ranges()
                        .last()
                        .map_or(0, |r| r.end)
                        .max(other[d].ranges().last().map_or(0, |r| r.end));
                    *mine = IndexSet::from_ranges(
                        n,
                        mine.ranges()
                            .iter()
                            .chain(other[d].ranges())
                            .cloned()
                            .collect(),
                    );
                    merged = true;
                    break 'search;
                }
            }
        }
    }
    boxes
}

impl Selection {
    /// Every element of an array of `shape`.
    pub(crate) fn all(shape: &[u64]) -> Self {
        Selection::from_boxes(vec![shape.iter().map(|&n| IndexSet::full(n)).collect()])
            .expect("one box")
    }

    /// No element.
    pub(crate) fn none() -> Self {
        Selection { boxes: vec![] }
    }

    /// The union of possibly overlapping boxes, made disjoint; `None` when that takes more
    /// than [`MAX_BOXES`] boxes.
    pub(crate) fn from_boxes(boxes: Vec<IndexBox>) -> Option<Self> {
        let mut disjoint: Vec<IndexBox> = Vec::new();
        for b in boxes.into_iter().filter(|b| !box_is_empty(b)) {
            let mut pieces = vec![b];
            for a in &disjoint {
                pieces = pieces.iter().flat_map(|p| box_difference(p, a)).collect();
                if pieces.is_empty() {
                    break;
                }
            }
            disjoint.extend(pieces);
            if disjoint.len() > MAX_BOXES {
                return None;
            }
        }
        Some(Selection {
            boxes: merge_boxes(disjoint),
        })
    }

    pub(crate) fn boxes(&self) -> &[IndexBox] {
        &self.boxes
    }

    /// Number of selected elements.
    pub(crate) fn len(&self) -> u64 {
        self.boxes.iter().map(box_len).sum()
    }

    /// Whether every element of an array of `shape` is selected.
    pub(crate) fn is_all(&self, shape: &[u64]) -> bool {
        self.len() == shape.iter().product::<u64>()
    }

    /// Whether the selection's part of every chunk (of `chunk_shape`, on an array of `shape`)
    /// is one run of the chunk's C-order elements, read without a list of their positions:
    /// one box of intervals that takes, along every axis after the first, whole chunks (all
    /// of an axis the chunks divide evenly, or chunks one index wide).
    pub(crate) fn runs_in_chunks(&self, shape: &[u64], chunk_shape: &[u64]) -> bool {
        let [b] = self.boxes.as_slice() else {
            return self.boxes.is_empty();
        };
        let whole_chunks = |d: usize| {
            let (n, c) = (shape[d], chunk_shape[d]);
            c == 1 || (b[d].len() == n && c > 0 && n % c == 0)
        };
        b.iter().all(|set| set.ranges().len() <= 1) && (1..b.len()).all(whole_chunks)
    }
}

impl Selection {
    /// `time=[0..2] x station=[3..4]`, boxes joined by ` | `; `none` when empty. Dimensions
    /// that a box does not constrain are left out.
    pub(crate) fn describe(&self, names: &[String], shape: &[u64]) -> String {
        if self.boxes.is_empty() {
            return "none".into();
        }
        let boxes: Vec<String> = self
            .boxes
            .iter()
            .map(|b| {
                let parts: Vec<String> = b
                    .iter()
                    .zip(names)
                    .zip(shape)
                    .filter(|((set, _), &n)| set.len() != n)
                    .map(|((set, name), _)| format!("{name}={set}"))
                    .collect();
                if parts.is_empty() {
                    "all".to_string()
                } else {
                    parts.join(" x ")
                }
            })
            .collect();
        boxes.join(" | ")
    }
}
#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn set(n: u64, r: Vec<std::ops::Range<u64>>) -> IndexSet {
        IndexSet::from_ranges(n, r)
    }

    #[test]
    fn boxes_differing_in_one_dimension_merge() {
        let a = vec![set(9, vec![0..1]), set(3, vec![0..3])];
        let b = vec![set(9, vec![4..5]), set(3, vec![0..3])];
        let sel = Selection::from_boxes(vec![a, b]).unwrap();
        assert_eq!(
            sel.boxes(),
            &[vec![set(9, vec![0..1, 4..5]), set(3, vec![0..3])]]
        );
    }

    #[test]
    fn an_empty_box_selects_nothing() {
        let selection = Selection::from_boxes(vec![vec![IndexSet::empty()]]).unwrap();
        assert_eq!(selection.len(), 0);
        assert!(selection.boxes().is_empty());
    }
}
