//! Printing query results in the CLI's output formats.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Aligned table with borders.
    Table,
    Csv,
    Tsv,
    /// One JSON array of row objects.
    Json,
    /// One JSON object per line.
    Ndjson,
}

/// Writes `batches` (all with `schema`) to `out`. A statement without result columns (DDL)
/// prints nothing; one that returns no rows prints nothing in csv, tsv and ndjson, `[]` in
/// json and an empty table in the table format.
pub fn write_batches(
    out: &mut dyn Write,
    format: OutputFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), ArrowError> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if schema.fields().is_empty() {
        // DDL and other statements without a result.
        return Ok(());
    }
    match format {
        OutputFormat::Table => {
            if rows == 0 {
                let empty = RecordBatch::new_empty(schema.clone());
                writeln!(
                    out,
                    "{}",
                    arrow::util::pretty::pretty_format_batches(&[empty])?
                )?;
            } else {
                writeln!(
                    out,
                    "{}",
                    arrow::util::pretty::pretty_format_batches(batches)?
                )?;
            }
        }
        OutputFormat::Csv | OutputFormat::Tsv => {
            if rows == 0 {
                return Ok(());
            }
            let delimiter = if format == OutputFormat::Csv {
                b','
            } else {
                b'\t'
            };
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .with_delimiter(delimiter)
                .build(&mut *out);
            for batch in batches.iter().filter(|b| b.num_rows() > 0) {
                writer.write(batch)?;
            }
        }
        OutputFormat::Json => {
            let mut writer = arrow::json::ArrayWriter::new(&mut *out);
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
            writeln!(out)?;
        }
        OutputFormat::Ndjson => {
            let mut writer = arrow::json::LineDelimitedWriter::new(&mut *out);
            for batch in batches {
                writer.write(batch)?;
            }
            writer.finish()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("x,y"), None])),
            ],
        )
        .unwrap()
    }

    fn render(format: OutputFormat, batches: &[RecordBatch]) -> String {
        let mut out = Vec::new();
        write_batches(&mut out, format, &batch().schema(), batches).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn formats() {
        let b = [batch()];
        assert_eq!(render(OutputFormat::Csv, &b), "a,b\n1,\"x,y\"\n2,\n");
        assert_eq!(render(OutputFormat::Tsv, &b), "a\tb\n1\tx,y\n2\t\n");
        assert_eq!(
            render(OutputFormat::Ndjson, &b),
            "{\"a\":1,\"b\":\"x,y\"}\n{\"a\":2}\n"
        );
        assert_eq!(
            render(OutputFormat::Json, &b),
            "[{\"a\":1,\"b\":\"x,y\"},{\"a\":2}]\n"
        );
        assert!(render(OutputFormat::Table, &b).contains("| x,y |"));
    }

    #[test]
    fn no_rows_prints_nothing_in_csv() {
        assert_eq!(render(OutputFormat::Csv, &[]), "");
        assert_eq!(render(OutputFormat::Json, &[]), "[]\n");
    }
}
