//! Running SQL text: each statement planned, run and printed (`-c`, `-f`, standard input and
//! the REPL alike).

use std::io::Write;
use std::time::Instant;

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::dialect_from_str;

use crate::output::{self, OutputFormat};

/// The user-facing message of an error: ndfusion's own without DataFusion's "External
/// error: " prefix.
pub fn error_message(e: &DataFusionError) -> String {
    ndfusion::Error::user_message(e)
}

/// Prints results and, unless quiet, a row-count and timing line.
pub struct Printer {
    format: OutputFormat,
    quiet: bool,
}

impl Printer {
    pub fn new(format: OutputFormat, quiet: bool) -> Self {
        Printer { format, quiet }
    }
}

/// Runs every statement in `sql`, printing each result; stops at the first error.
pub async fn run_sql(ctx: &SessionContext, sql: &str, printer: &mut Printer) -> Result<()> {
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
    for statement in statements {
        let start = Instant::now();
        let plan = ctx.state().statement_to_plan(statement).await?;
        let df = ctx.execute_logical_plan(plan).await?;
        let schema = std::sync::Arc::new(df.schema().as_arrow().clone());
        let batches = df.collect().await?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut out = std::io::stdout().lock();
        output::write_batches(&mut out, printer.format, &schema, &batches)?;
        if !printer.quiet {
            writeln!(
                out,
                "{rows} row(s) fetched. Elapsed {:.3} seconds.\n",
                start.elapsed().as_secs_f64()
            )?;
        }
        out.flush()?;
    }
    Ok(())
}
