//! Printing query results in the CLI's output formats.

mod plan;
mod table;

use std::io::Write;

use std::sync::Arc;

pub use table::{shorten, TableView};

use arrow::array::{ArrayRef, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
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
/// json and an empty table in the table format. In the table format `batches` may be the
/// first rows of `total_rows` (`--maxrows`): the table then ends in a row of `…`; an
/// EXPLAIN's plans are printed indented, under their names.
pub fn write_batches(
    out: &mut dyn Write,
    format: OutputFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    total_rows: usize,
    view: TableView,
) -> Result<(), ArrowError> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if schema.fields().is_empty() {
        // DDL and other statements without a result.
        return Ok(());
    }
    match format {
        OutputFormat::Table if plan::is_plan(schema) && !view.expanded => {
            write!(out, "{}", plan::render(batches, view.width))?;
        }
        OutputFormat::Table => {
            let text = table::render(schema, batches, rows, total_rows.max(rows), view)?;
            writeln!(out, "{text}")?;
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
            // Every batch is made writable before the header is: a failure prints nothing.
            let flat: Vec<RecordBatch> = batches
                .iter()
                .filter(|b| b.num_rows() > 0)
                .map(nested_as_json)
                .collect::<Result<_, _>>()?;
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .with_delimiter(delimiter)
                .build(&mut *out);
            for batch in &flat {
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

/// `batch` with every struct, list and map column replaced by its values as JSON text (as the
/// json format writes them), which CSV cannot hold otherwise.
fn nested_as_json(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    if !schema.fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(batch.num_columns());
    let options = arrow::json::writer::EncoderOptions::default();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !field.data_type().is_nested() {
            fields.push(Arc::clone(field));
            columns.push(Arc::clone(column));
            continue;
        }
        let mut encoder = arrow::json::writer::make_encoder(field, column.as_ref(), &options)?;
        let mut text = StringBuilder::with_capacity(column.len(), column.len() * 16);
        let mut buffer = Vec::new();
        for row in 0..column.len() {
            if encoder.is_null(row) {
                text.append_null();
                continue;
            }
            buffer.clear();
            encoder.encode(row, &mut buffer);
            text.append_value(String::from_utf8_lossy(&buffer));
        }
        fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, true)));
        columns.push(Arc::new(text.finish()) as ArrayRef);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array, ListArray, StringArray, StructArray};
    use arrow::datatypes::Int32Type;

    const WHOLE: TableView = TableView {
        width: None,
        expanded: false,
    };

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
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        write_batches(&mut out, format, &batch().schema(), batches, rows, WHOLE).unwrap();
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

    #[test]
    fn nested_values_are_json_text_in_csv_and_tsv() {
        let attrs = StructArray::from(vec![
            (
                Arc::new(Field::new("id", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("a,\"b\""), None])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("n", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
        ]);
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("__global_attrs__", attrs.data_type().clone(), true),
            Field::new("l", list.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(attrs),
                Arc::new(list),
            ],
        )
        .unwrap();
        let render = |format| {
            let mut out = Vec::new();
            write_batches(
                &mut out,
                format,
                &schema,
                std::slice::from_ref(&batch),
                2,
                WHOLE,
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            render(OutputFormat::Csv),
            "k,__global_attrs__,l\n\
             1,\"{\"\"id\"\":\"\"a,\\\"\"b\\\"\"\"\",\"\"n\"\":1}\",\"[1,null]\"\n\
             2,\"{\"\"n\"\":2}\",\n"
        );
        assert_eq!(
            render(OutputFormat::Tsv),
            "k\t__global_attrs__\tl\n\
             1\t\"{\"\"id\"\":\"\"a,\\\"\"b\\\"\"\"\",\"\"n\"\":1}\"\t[1,null]\n\
             2\t\"{\"\"n\"\":2}\"\t\n"
        );
    }
}
