//! Running SQL text: each statement planned, run and printed (`-c`, `-f`, standard input and
//! the REPL alike), stopped by Ctrl-C, its progress shown while it runs.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use futures::StreamExt;

use crate::interrupt::{interruptible, Interrupts};
use crate::output::{self, OutputFormat, TableView};
use crate::plot;
use crate::progress::Progress;

/// The user-facing message of an error: ndfusion's own without DataFusion's "External
/// error: " prefix.
pub fn error_message(e: &DataFusionError) -> String {
    ndfusion::Error::user_message(e)
}

/// How results are printed: the format, and what the REPL's `\x`, `\maxrows`, `\timing`
/// change.
pub struct Printer {
    pub format: OutputFormat,
    /// No row-count or timing lines.
    pub quiet: bool,
    /// Rows the table format shows (`None`: all); the row count is printed regardless.
    pub max_rows: Option<usize>,
    /// One column per line in the table format (`\x`).
    pub expanded: bool,
    /// The time a statement took, after its row count (`\timing`).
    pub timing: bool,
    /// Whether a long statement shows its progress on standard error.
    pub progress: bool,
}

/// How running SQL text ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ran {
    /// Every statement ran; the text of the last query among them (not DDL, COPY, INSERT,
    /// EXPLAIN or SET), for `\plot`.
    Finished { last_query: Option<String> },
    /// Ctrl-C stopped a statement; those after it did not run.
    Interrupted,
}

/// Runs every statement in `sql`, printing each result; stops at the first error, or at
/// Ctrl-C when `interrupts` is given.
pub async fn run_sql(
    ctx: &SessionContext,
    sql: &str,
    printer: &Printer,
    mut interrupts: Option<&mut Interrupts>,
) -> Result<Ran> {
    let dialect_name = ctx
        .state()
        .config()
        .options()
        .sql_parser
        .dialect
        .to_string();
    let dialect = dialect_from_str(&dialect_name)
        .ok_or_else(|| DataFusionError::Plan(format!("unknown SQL dialect '{dialect_name}'")))?;
    let statements = DFParser::parse_sql_with_dialect(sql, dialect.as_ref())?;
    let mut last_query = None;
    for statement in statements {
        let start = Instant::now();
        let run = run_statement(ctx, statement, printer);
        let Some(answer) = interruptible(interrupts.as_deref_mut(), run).await else {
            return Ok(Ran::Interrupted);
        };
        let answer = answer?;
        print(printer, &answer, start.elapsed())?;
        last_query = answer.query.or(last_query);
    }
    Ok(Ran::Finished { last_query })
}

/// Runs `query` again for `\plot`: every row, at most [`plot::MAX_ROWS`]; `None` when
/// Ctrl-C stopped it.
pub async fn rows_to_plot(
    ctx: &SessionContext,
    query: &str,
    interrupts: Option<&mut Interrupts>,
) -> Result<Option<(SchemaRef, Vec<RecordBatch>)>> {
    let run = async {
        let df = ctx.sql(query).await?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        let mut stream = df.execute_stream().await?;
        let (mut batches, mut rows) = (Vec::new(), 0usize);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            rows += batch.num_rows();
            if rows > plot::MAX_ROWS {
                return Err(DataFusionError::Execution(format!(
                    "\\plot reads at most {} rows; the last query has more: aggregate it \
                     (GROUP BY) or LIMIT it first",
                    plot::MAX_ROWS
                )));
            }
            batches.push(batch);
        }
        Ok((schema, batches))
    };
    interruptible(interrupts, run).await.transpose()
}

/// A statement's answer as printed: its first rows (all but in the table format with
/// `max_rows`) and how many rows there were.
struct Answer {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    rows: usize,
    /// The statement's text, when it is a query.
    query: Option<String>,
}

/// Whether `plan` answers a query (what `\plot` can run again), not DDL, a write, EXPLAIN or
/// a setting.
fn is_query(plan: &LogicalPlan) -> bool {
    !matches!(
        plan,
        LogicalPlan::Ddl(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Explain(_)
            | LogicalPlan::Analyze(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::DescribeTable(_)
    )
}

/// Plans and runs `statement`, keeping the rows `printer` shows; the progress line is drawn
/// while it runs.
async fn run_statement(
    ctx: &SessionContext,
    statement: Statement,
    printer: &Printer,
) -> Result<Answer> {
    let text = statement.to_string();
    let plan = ctx.state().statement_to_plan(statement).await?;
    let query = is_query(&plan).then_some(text);
    let df = ctx.execute_logical_plan(plan).await?;
    let schema = Arc::new(df.schema().as_arrow().clone());
    let task = Arc::new(df.task_ctx());
    let plan = df.create_physical_plan().await?;
    let rows = Arc::new(AtomicUsize::new(0));
    let _progress = (printer.progress).then(|| Progress::start(Arc::clone(&plan), rows.clone()));
    let keep = match printer.format {
        OutputFormat::Table => printer.max_rows.unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    let mut stream = execute_stream(plan, task)?;
    let (mut batches, mut kept) = (Vec::new(), 0usize);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        rows.fetch_add(batch.num_rows(), Ordering::Relaxed);
        // Rows past those shown are counted, not held.
        if kept < keep {
            let batch = batch.slice(0, batch.num_rows().min(keep - kept));
            kept += batch.num_rows();
            batches.push(batch);
        }
    }
    let rows = rows.load(Ordering::Relaxed);
    Ok(Answer {
        schema,
        batches,
        rows,
        query,
    })
}

/// Prints an answer, then (unless quiet) its row count and, with timing, the time it took.
fn print(printer: &Printer, answer: &Answer, elapsed: Duration) -> Result<()> {
    let view = TableView {
        width: crate::terminal::stdout_width(),
        expanded: printer.expanded,
    };
    let mut out = std::io::stdout().lock();
    let (schema, batches, rows) = (&answer.schema, &answer.batches, answer.rows);
    output::write_batches(&mut out, printer.format, schema, batches, rows, view)?;
    if !printer.quiet {
        let shown: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let mut line = format!("{rows} row(s) fetched");
        if shown < rows && printer.format == OutputFormat::Table {
            line.push_str(&format!(
                " ({shown} shown: \\maxrows or --maxrows for more)"
            ));
        }
        line.push('.');
        if printer.timing {
            line.push_str(&format!(" Elapsed {:.3} seconds.", elapsed.as_secs_f64()));
        }
        writeln!(out, "{line}\n")?;
    }
    out.flush()?;
    Ok(())
}
