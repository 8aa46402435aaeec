//! Runs every sqllogictest file in `sql/` against an ndfusion session.
//!
//! Values print as DataFusion displays them (NULL as `NULL`, empty strings as `(empty)`).
//! A multi-line cell (EXPLAIN plans) becomes one row per line, so plans can be asserted.
//!
//! The same files run on Ballista clusters (label `cluster`, for `skipif cluster`): there
//! EXPLAIN also shows the distributed plan, which the runner checks holds the physical plan's
//! scan and then leaves out, so plans are compared with the local ones.

use std::path::PathBuf;

use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use datafusion::prelude::SessionContext;
use sqllogictest::{DBOutput, DefaultColumnType};

struct Ndfusion {
    ctx: SessionContext,
    on_cluster: bool,
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
        if self.on_cluster && sql.trim_start().starts_with("EXPLAIN") {
            without_distributed_plan(&mut rows)?;
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; columns],
            rows,
        })
    }

    async fn shutdown(&mut self) {}
}

/// Leaves out the `distributed_plan` rows of a cluster's EXPLAIN, after checking that they
/// hold the physical plan's scan (the last line of the physical plan).
fn without_distributed_plan(rows: &mut Vec<Vec<String>>) -> Result<(), SqlError> {
    let Some(start) = rows.iter().position(|r| r[0] == "distributed_plan") else {
        return Ok(());
    };
    let scan = rows[..start]
        .last()
        .and_then(|r| r.last())
        .map(|line| line.trim().to_string())
        .unwrap_or_default();
    if !rows[start..]
        .iter()
        .any(|r| r.iter().any(|cell| cell.trim() == scan))
    {
        return Err(SqlError(format!(
            "the distributed plan does not hold the scan `{scan}`"
        )));
    }
    rows.truncate(start);
    Ok(())
}

/// The default normalization, and a logical plan's `TableScan` without its `fetch=N`: a
/// cluster's scheduler receives the logical plan without it (DataFusion's protobuf does not
/// carry it) and pushes the limit down again, so only the logical plan shows the difference.
#[allow(clippy::ptr_arg)]
fn without_scan_fetch(line: &String) -> String {
    let line = sqllogictest::default_normalizer(line);
    if !line.contains("TableScan:") {
        return line;
    }
    match line.find(", fetch=") {
        Some(start) => {
            let digits = line[start + ", fetch=".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            format!(
                "{}{}",
                &line[..start],
                &line[start + ", fetch=".len() + digits..]
            )
        }
        None => line,
    }
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

fn sql_files_in_repo() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    files
}

/// Where a runner's SQL runs.
#[derive(Debug, Clone)]
pub enum Mode {
    /// In this process, as `ndfusion` runs it.
    Local,
    /// On a Ballista cluster started inside this process (a scheduler and an executor).
    Standalone,
    /// On the Ballista cluster whose scheduler is at this `df://` URL, reached with this token
    /// and TLS.
    Cluster(String, ndfusion::ClusterSecurity),
}

fn runner(
    mode: Mode,
) -> sqllogictest::Runner<Ndfusion, impl sqllogictest::MakeConnection<Conn = Ndfusion>> {
    let on_cluster = !matches!(mode, Mode::Local);
    let mut runner = sqllogictest::Runner::new(move || {
        let mode = mode.clone();
        async move {
            let ctx = match mode {
                Mode::Local => ndfusion::new_session_context(),
                Mode::Standalone => ndfusion::new_standalone_context(2)
                    .await
                    .map_err(|e| SqlError(e.to_string()))?,
                Mode::Cluster(url, security) => ndfusion::new_cluster_context_with(&url, &security)
                    .await
                    .map_err(|e| SqlError(e.to_string()))?,
            };
            Ok(Ndfusion { ctx, on_cluster })
        }
    });
    if on_cluster {
        runner.add_label("cluster");
        runner.with_normalizer(without_scan_fetch);
    }
    runner.set_var("REPO".into(), env!("CARGO_MANIFEST_DIR").into());
    runner
}

/// Runs every file of `sql/` in `mode`; returns the failures.
async fn run_sql_files(mode: Mode) -> Vec<String> {
    let mut failures = Vec::new();
    for file in &sql_files_in_repo() {
        if let Err(e) = runner(mode.clone()).run_file_async(file).await {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    failures
}

#[tokio::test]
async fn sql_files() {
    let failures = run_sql_files(Mode::Local).await;
    assert!(
        failures.is_empty(),
        "sqllogictest failures:\n{}",
        failures.join("\n\n")
    );
}

/// The same files give the same answers on a Ballista cluster: tables and scans travel
/// through ndfusion's codecs to the scheduler and executor.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_files_on_a_standalone_cluster() {
    let failures = run_sql_files(Mode::Standalone).await;
    assert!(
        failures.is_empty(),
        "sqllogictest failures on a standalone cluster:\n{}",
        failures.join("\n\n")
    );
}

/// Runs the queries of every `sql/*.slt` file (but those `skip_file` names) with each table's
/// `LOCATION 'tests/data/...'` moved to `{base}/tests/data/...` and `options` added to its
/// OPTIONS: the answers must be those of the local files. Records that expect an error or
/// show a plan are left out (they name the location); returns how many records ran.
pub async fn run_sql_files_at(
    base: &str,
    options: &[(&str, String)],
    skip_file: impl Fn(&str) -> bool,
) -> usize {
    run_sql_files_at_in(Mode::Local, base, options, skip_file).await
}

/// [`run_sql_files_at`] in `mode`.
pub async fn run_sql_files_at_in(
    mode: Mode,
    base: &str,
    options: &[(&str, String)],
    skip_file: impl Fn(&str) -> bool,
) -> usize {
    use sqllogictest::{QueryExpect, Record, StatementExpect};
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in &sql_files_in_repo() {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if skip_file(&name) {
            continue;
        }
        let mut runner = runner(mode.clone());
        for record in sqllogictest::parse_file::<DefaultColumnType>(file).unwrap() {
            let record = match record {
                Record::Statement {
                    expected: StatementExpect::Error(_),
                    ..
                }
                | Record::Query {
                    expected: QueryExpect::Error(_),
                    ..
                } => continue,
                Record::Query { ref sql, .. } if sql.trim_start().starts_with("EXPLAIN") => {
                    continue
                }
                Record::Statement {
                    loc,
                    conditions,
                    connection,
                    sql,
                    expected,
                    retry,
                } => Record::Statement {
                    loc,
                    conditions,
                    connection,
                    sql: relocate(&sql, base, options),
                    expected,
                    retry,
                },
                other => other,
            };
            ran += 1;
            if let Err(e) = runner.run_async(record).await {
                failures.push(format!("{name} at {base}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "sqllogictest failures:\n{}",
        failures.join("\n\n")
    );
    ran
}

/// `LOCATION 'tests/data/x'` (or `'file://${REPO}/tests/data/x'`) becomes
/// `LOCATION '{base}/tests/data/x'` with `options` in its OPTIONS.
fn relocate(sql: &str, base: &str, options: &[(&str, String)]) -> String {
    let Some(start) = sql.find("LOCATION '") else {
        return sql.to_string();
    };
    let value_start = start + "LOCATION '".len();
    let value_end = value_start + sql[value_start..].find('\'').unwrap();
    let location = &sql[value_start..value_end];
    // What a file wrote itself (COPY ... TO '${__TEST_DIR__}/...') is read where it was written.
    if location.starts_with("${__TEST_DIR__}") {
        return sql.to_string();
    }
    let relative = location.trim_start_matches("file://${REPO}/");
    assert!(relative.starts_with("tests/data/"), "{sql}");
    let pairs: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("'{k}' '{v}'"))
        .collect();
    let rest = &sql[value_end + 1..];
    let rest = match rest.find("OPTIONS (") {
        _ if pairs.is_empty() => rest.to_string(),
        Some(i) => format!(
            "{}OPTIONS ({}, {}",
            &rest[..i],
            pairs.join(", "),
            &rest[i + "OPTIONS (".len()..]
        ),
        None => format!(
            "{} OPTIONS ({})",
            rest.trim_end().trim_end_matches(';'),
            pairs.join(", ")
        ),
    };
    format!(
        "{}'{base}/{relative}'{rest}",
        &sql[..start + "LOCATION ".len()]
    )
}

#[test]
fn locations_are_moved_and_options_added() {
    let options = [("aws.region", "r".to_string())];
    assert_eq!(
        relocate(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 'tests/data/a.zarr'",
            "s3://b",
            &options
        ),
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 's3://b/tests/data/a.zarr' OPTIONS ('aws.region' 'r')"
    );
    assert_eq!(
        relocate(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 'file://${REPO}/tests/data/a.zarr' OPTIONS ('batch_size' '1')",
            "s3://b",
            &options
        ),
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 's3://b/tests/data/a.zarr' OPTIONS ('aws.region' 'r', 'batch_size' '1')"
    );
}
