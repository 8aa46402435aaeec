//! EXPLAIN's answer in the table format: each plan under its name, indented, its long lines
//! (an ndfusion scan's `chunks=k/n, selection=...`, EXPLAIN ANALYZE's counters) broken after
//! a comma onto indented lines that fit the terminal, instead of a two-column table wider
//! than it.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};

/// Whether a result is an EXPLAIN's (`plan_type`, `plan`, both text).
pub fn is_plan(schema: &SchemaRef) -> bool {
    let fields = schema.fields();
    fields.len() == 2
        && fields[0].name() == "plan_type"
        && fields[1].name() == "plan"
        && fields.iter().all(|f| f.data_type() == &DataType::Utf8)
}

/// The plans of an EXPLAIN, each under its name, lines cut to `width` when given.
pub fn render(batches: &[RecordBatch], width: Option<usize>) -> String {
    let mut out = String::new();
    for batch in batches {
        let (names, plans) = (batch.column(0).as_string::<i32>(), batch.column(1));
        let plans = plans.as_string::<i32>();
        for row in 0..batch.num_rows() {
            if names.is_null(row) || plans.is_null(row) {
                continue;
            }
            out.push_str(names.value(row));
            out.push('\n');
            for line in plans.value(row).lines() {
                for piece in wrap(&format!("  {line}"), width) {
                    out.push_str(&piece);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// `line` as lines of at most `width` characters where it can be broken after a `, `; the
/// lines after the first are indented 4 more than `line`. A piece with no comma in it stays
/// whole.
fn wrap(line: &str, width: Option<usize>) -> Vec<String> {
    let Some(width) = width.filter(|w| line.chars().count() > *w) else {
        return vec![line.to_string()];
    };
    let indent = line.len() - line.trim_start().len() + 4;
    let mut lines = Vec::new();
    let mut current = String::new();
    for piece in line.split_inclusive(", ") {
        let piece_width = piece.trim_end().chars().count();
        if !current.is_empty() && current.trim_end().chars().count() + piece_width > width {
            lines.push(current.trim_end().to_string());
            current = " ".repeat(indent);
        }
        current.push_str(piece);
    }
    lines.push(current.trim_end().to_string());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn a_scan_line_is_broken_after_commas_onto_indented_lines() {
        let line =
            "    ZarrScanExec: array=tests/data/zarr_v3/grid_2d.zarr, projection=[pressure], \
                    partitions=2, chunks=3/9, selection=station=[6..7]";
        let lines = wrap(line, Some(50));
        assert_eq!(
            lines,
            [
                "    ZarrScanExec: array=tests/data/zarr_v3/grid_2d.zarr,",
                "        projection=[pressure], partitions=2,",
                "        chunks=3/9, selection=station=[6..7]",
            ]
        );
        assert_eq!(wrap(line, None), [line]);
        assert_eq!(wrap("short, line", Some(50)), ["short, line"]);
    }

    #[test]
    fn plans_are_printed_under_their_names() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("plan_type", DataType::Utf8, false),
            Field::new("plan", DataType::Utf8, false),
        ]));
        assert!(is_plan(&schema));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["logical_plan", "physical_plan"])),
                Arc::new(StringArray::from(vec![
                    "Projection: a\n  TableScan: t",
                    "ZarrScanExec: chunks=1/2",
                ])),
            ],
        )
        .unwrap();
        assert_eq!(
            render(&[batch], Some(80)),
            "logical_plan\n  Projection: a\n    TableScan: t\nphysical_plan\n  ZarrScanExec: chunks=1/2\n"
        );
    }
}
