//! Runs every sqllogictest file in `sql/` against an ndfusion session.
//!
//! Values print as DataFusion displays them (NULL as `NULL`, empty strings as `(empty)`).
//! A multi-line cell (EXPLAIN plans) becomes one row per line, so plans can be asserted.

use std::path::PathBuf;

use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use datafusion::prelude::SessionContext;
use sqllogictest::{DBOutput, DefaultColumnType};

struct Ndfusion {
    ctx: SessionContext,
}

#[derive(Debug)]
struct SqlError(String);

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SqlError {}

#[async_trait]
impl sqllogictest::AsyncDB for Ndfusion {
    type Error = SqlError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SqlError> {
        let err =
            |e: datafusion::error::DataFusionError| SqlError(ndfusion::Error::user_message(&e));
        let df = self.ctx.sql(sql).await.map_err(err)?;
        let is_query = !df.schema().fields().is_empty();
        let batches = df.collect().await.map_err(err)?;
        if !is_query {
            return Ok(DBOutput::StatementComplete(0));
        }
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        let mut columns = 0;
        for batch in &batches {
            columns = batch.num_columns();
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| SqlError(e.to_string()))?;
            for row in 0..batch.num_rows() {
                let cells: Vec<String> = formatters
                    .iter()
                    .map(|f| match f.value(row).to_string() {
                        s if s.is_empty() => "(empty)".to_string(),
                        s => s,
                    })
                    .collect();
                push_row(&mut rows, cells);
            }
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; columns],
            rows,
        })
    }

    async fn shutdown(&mut self) {}
}

/// Splits multi-line cells: the first line stays with the row, later lines become rows.
fn push_row(rows: &mut Vec<Vec<String>>, cells: Vec<String>) {
    let mut first = Vec::new();
    let mut rest = Vec::new();
    for cell in cells {
        let mut lines = cell.lines().filter(|l| !l.trim().is_empty());
        first.push(lines.next().unwrap_or("").to_string());
        rest.extend(lines.map(|l| vec![l.to_string()]));
    }
    rows.push(first);
    rows.extend(rest);
}

#[tokio::test]
async fn sql_files() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    let mut failures = Vec::new();
    for file in &files {
        let mut runner = sqllogictest::Runner::new(|| async {
            Ok(Ndfusion {
                ctx: ndfusion::new_session_context(),
            })
        });
        runner.set_var("REPO".into(), env!("CARGO_MANIFEST_DIR").into());
        if let Err(e) = runner.run_file_async(file).await {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "sqllogictest failures:\n{}",
        failures.join("\n\n")
    );
}
