//! Where the rows of one nd record batch end, in a stream of rows sorted by their global
//! attributes (the sink requires that order, so DataFusion sorts, spilling within the
//! memory pool): a batch is complete, and can be written, when the next row's attributes
//! differ.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::Schema;
use arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexRequirement, PhysicalSortRequirement};

use super::rows_batch::RowsError;

/// The order the sink's rows arrive in: ascending, NULL first (as a `RowConverter` with
/// default sort fields compares, which is how the cuts compare).
const ORDER: SortOptions = SortOptions {
    descending: false,
    nulls_first: true,
};

/// The ordering of `schema`'s columns `keys` that the sink requires; `None` with no keys
/// (every row in one batch).
pub(crate) fn required_ordering(schema: &Schema, keys: &[usize]) -> Option<LexRequirement> {
    LexRequirement::new(keys.iter().map(|&c| {
        let column = Column::new(schema.field(c).name(), c);
        PhysicalSortRequirement::new(std::sync::Arc::new(column), Some(ORDER))
    }))
}

/// Finds where batches begin, one record batch of sorted rows at a time.
pub(crate) struct GroupCuts {
    keys: Vec<usize>,
    converter: Option<RowConverter>,
    /// The key of the last row seen.
    last: Option<OwnedRow>,
}

impl GroupCuts {
    /// Cuts of rows of `schema` grouped by columns `keys` (none: one group).
    pub(crate) fn new(schema: &Schema, keys: Vec<usize>) -> Result<Self, RowsError> {
        let converter = match keys.is_empty() {
            true => None,
            false => Some(RowConverter::new(
                (keys.iter())
                    .map(|&c| {
                        SortField::new_with_options(schema.field(c).data_type().clone(), ORDER)
                    })
                    .collect(),
            )?),
        };
        Ok(GroupCuts {
            keys,
            converter,
            last: None,
        })
    }

    /// The offsets in `rows` where a new group begins: 0 when its first row's key differs
    /// from the previous record batch's last. A key below the one before it means the rows
    /// are not sorted, which would split a batch in two: an error, never two table rows.
    pub(crate) fn starts(&mut self, rows: &RecordBatch) -> Result<Vec<usize>, RowsError> {
        let Some(converter) = &self.converter else {
            return Ok(Vec::new());
        };
        if rows.num_rows() == 0 {
            return Ok(Vec::new());
        }
        let columns: Vec<ArrayRef> = self.keys.iter().map(|&c| rows.column(c).clone()).collect();
        let converted = converter.convert_columns(&columns)?;
        let mut starts = Vec::new();
        let mut previous = self.last.as_ref().map(|r| r.row());
        for (i, key) in converted.iter().enumerate() {
            match previous {
                Some(p) if p == key => {}
                Some(p) if p > key => return Err(RowsError::Unsorted),
                _ if i == 0 && previous.is_none() => {}
                _ => starts.push(i),
            }
            previous = Some(key);
        }
        self.last = Some(converted.row(converted.num_rows() - 1).owned());
        Ok(starts)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    fn rows(keys: Vec<Option<&str>>) -> RecordBatch {
        let n = keys.len() as i64;
        RecordBatch::try_from_iter([
            ("k", Arc::new(StringArray::from(keys)) as ArrayRef),
            ("v", Arc::new(Int64Array::from_iter_values(0..n))),
        ])
        .unwrap()
    }

    #[test]
    fn groups_begin_where_the_key_changes_across_record_batches() {
        let first = rows(vec![None, Some("a"), Some("a")]);
        let mut cuts = GroupCuts::new(&first.schema(), vec![0]).unwrap();
        assert_eq!(cuts.starts(&first).unwrap(), vec![1]);
        // The group of "a" goes on; "b" begins one.
        assert_eq!(
            cuts.starts(&rows(vec![Some("a"), Some("b")])).unwrap(),
            vec![1]
        );
        assert_eq!(cuts.starts(&rows(vec![])).unwrap(), Vec::<usize>::new());
        assert_eq!(cuts.starts(&rows(vec![Some("c")])).unwrap(), vec![0]);
        assert!(matches!(
            cuts.starts(&rows(vec![Some("a")])),
            Err(RowsError::Unsorted)
        ));
    }

    #[test]
    fn without_keys_every_row_is_one_group() {
        let all = rows(vec![Some("b"), Some("a")]);
        let mut cuts = GroupCuts::new(&all.schema(), vec![]).unwrap();
        assert!(cuts.starts(&all).unwrap().is_empty());
        assert!(required_ordering(&all.schema(), &[]).is_none());
        let ordering = required_ordering(&all.schema(), &[0]).unwrap();
        let shown: Vec<String> = ordering.iter().map(|r| r.to_string()).collect();
        assert_eq!(shown, ["k@0 ASC"]);
    }
}
