//! The table format as a terminal shows it: cut to the terminal's width (long values end in
//! `…`), at most `max_rows` rows, or one column per line (`\x`).
//!
//! Without a width (standard output is a file or a pipe) the table is arrow's pretty table,
//! whole.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use comfy_table::{Cell, ContentArrangement, Row, Table};

/// How the table format is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableView {
    /// Columns the terminal has (`None`: not a terminal, nothing is cut).
    pub width: Option<usize>,
    /// One column per line (`\x`).
    pub expanded: bool,
}

/// arrow's pretty table preset: the same borders as before the terminal view.
const BORDERS: &str = "||--+-++|    ++++++";

/// What marks a value cut short.
const CUT: &str = "…";

/// The rows of `batches` as text, `shown` of them (the first), formatted as arrow formats
/// them; with a width, newlines and tabs are shown as `\n` and `\t` so a row stays a line.
fn cells(
    batches: &[RecordBatch],
    shown: usize,
    one_line: bool,
) -> Result<Vec<Vec<String>>, ArrowError> {
    let options = FormatOptions::default();
    let mut rows = Vec::with_capacity(shown);
    for batch in batches {
        if rows.len() == shown {
            break;
        }
        let formatters = (batch.columns().iter())
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows().min(shown - rows.len()) {
            let values = formatters.iter().map(|f| {
                let text = f.value(row).to_string();
                match one_line && text.contains(['\n', '\t', '\r']) {
                    true => text
                        .replace('\n', "\\n")
                        .replace('\t', "\\t")
                        .replace('\r', "\\r"),
                    false => text,
                }
            });
            rows.push(values.collect());
        }
    }
    Ok(rows)
}

/// Writes the first `shown` rows of `batches` as a table (a last row of `…` when rows were
/// left out), or one column per line when expanded.
pub fn render(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    shown: usize,
    total: usize,
    view: TableView,
) -> Result<String, ArrowError> {
    let rows = cells(batches, shown, view.width.is_some())?;
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if view.expanded {
        return Ok(expanded(&names, &rows, view.width));
    }
    let mut table = Table::new();
    table.load_preset(BORDERS);
    let mut header = Row::from(names.iter().map(Cell::new).collect::<Vec<_>>());
    if let Some(width) = view.width {
        table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(u16::try_from(width).unwrap_or(u16::MAX))
            .set_truncation_indicator(CUT);
        header.max_height(1);
    }
    table.set_header(header);
    for values in rows {
        let mut row = Row::from(values.into_iter().map(Cell::new).collect::<Vec<_>>());
        if view.width.is_some() {
            row.max_height(1);
        }
        table.add_row(row);
    }
    if shown < total {
        table.add_row(names.iter().map(|_| Cell::new(CUT)).collect::<Vec<_>>());
    }
    Ok(table.to_string())
}

/// One column per line, a record at a time (psql's `\x`):
///
/// ```text
/// -[ RECORD 1 ]--------
/// time        | 2001-03-11T00:00:00
/// temperature | 12.5
/// ```
fn expanded(names: &[&str], rows: &[Vec<String>], width: Option<usize>) -> String {
    let name_width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    // What a value may take: the width less the name column and " | ".
    let value_width = width.map(|w| w.saturating_sub(name_width + 3).max(8));
    let mut out = String::new();
    for (i, values) in rows.iter().enumerate() {
        let title = format!("-[ RECORD {} ]", i + 1);
        let rule = width.unwrap_or(name_width + 20).max(title.len());
        out.push_str(&title);
        out.push_str(&"-".repeat(rule - title.chars().count()));
        out.push('\n');
        for (name, value) in names.iter().zip(values) {
            let value = match value_width {
                Some(w) => shorten(value, w),
                None => value.clone(),
            };
            out.push_str(&format!("{name:<name_width$} | {value}\n"));
        }
    }
    if rows.is_empty() {
        out.push_str("(no rows)\n");
    }
    out
}

/// `text` in at most `width` characters, ending in `…` when cut.
pub fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept + CUT
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(rows: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("description", DataType::Utf8, false),
        ]));
        let long = "a rather long value that a narrow terminal cannot show whole\tand a tab";
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows)),
                Arc::new(StringArray::from_iter_values((0..rows).map(|_| long))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_table_fits_the_terminal_and_long_values_end_in_an_ellipsis() {
        let b = batch(3);
        let view = TableView {
            width: Some(40),
            expanded: false,
        };
        let text = render(&b.schema(), std::slice::from_ref(&b), 3, 3, view).unwrap();
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line:?} is wider than 40");
        }
        assert!(text.contains('…'), "{text}");
        assert_eq!(text.lines().count(), 3 + 4, "one line per row: {text}");
    }

    #[test]
    fn rows_left_out_end_the_table_in_a_row_of_ellipses() {
        let b = batch(50);
        let view = TableView {
            width: None,
            expanded: false,
        };
        let text = render(&b.schema(), std::slice::from_ref(&b), 5, 50, view).unwrap();
        assert!(text.contains("| 4  |"), "{text}");
        assert!(!text.contains("| 5  |"), "{text}");
        assert!(text.contains("| …  | … "), "{text}");
    }

    #[test]
    fn without_a_terminal_values_are_whole() {
        let b = batch(1);
        let view = TableView {
            width: None,
            expanded: false,
        };
        let text = render(&b.schema(), std::slice::from_ref(&b), 1, 1, view).unwrap();
        assert!(text.contains("cannot show whole\tand a tab"), "{text}");
        assert_eq!(
            text,
            arrow::util::pretty::pretty_format_batches(&[b])
                .unwrap()
                .to_string()
        );
    }

    #[test]
    fn expanded_shows_a_column_per_line() {
        let b = batch(2);
        let view = TableView {
            width: Some(30),
            expanded: true,
        };
        let text = render(&b.schema(), std::slice::from_ref(&b), 2, 2, view).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("-[ RECORD 1 ]{}", "-".repeat(17)));
        assert_eq!(lines[1], "id          | 0");
        assert_eq!(lines[2], "description | a rather long v…");
        assert_eq!(lines[2].chars().count(), 30);
        assert_eq!(lines.len(), 6);
    }
}
