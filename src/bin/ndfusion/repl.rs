//! The interactive SQL shell.

use std::path::PathBuf;

use datafusion::prelude::SessionContext;
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use crate::demo;
use crate::statements::{error_message, run_sql, Printer};

const HELP: &str = "\
Statements end with ';' and may span lines.
  \\d          list tables
  \\d NAME     describe a table
  \\options    the OPTIONS of STORED AS ZARR, NETCDF, HDF5, ICECHUNK and LANCE_ND, and of COPY ... STORED AS ZARR
  \\?          this help
  \\q          quit (or Ctrl-D)
Register your own data (local paths, s3://, gs://, az://, http(s)://):
  CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '/path/to/array.zarr';
  CREATE EXTERNAL TABLE n STORED AS LANCE_ND LOCATION '/path/to/table.lance';
  CREATE EXTERNAL TABLE i STORED AS ICECHUNK LOCATION '/path/to/repo'
    OPTIONS ('branch' 'main', 'path' 'ocean/surface');
  SELECT * FROM icechunk_log('/path/to/repo');  -- and icechunk_refs(...)
  CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION 's3://bucket/array.zarr'
    OPTIONS ('aws.region' 'us-east-1', 'aws.skip_signature' 'true');";

/// Runs the REPL until `\q` or end of input; returns the exit code.
pub async fn run(ctx: &SessionContext, mut printer: Printer) -> i32 {
    let mut editor = match DefaultEditor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("Error: cannot start the line editor: {e}");
            return 1;
        }
    };
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    print_banner(ctx);

    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "ndfusion> "
        } else {
            "      ..> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("Error: {e}");
                break;
            }
        };
        let trimmed = line.trim();
        if buffer.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            match meta_command(ctx, trimmed, &mut printer).await {
                MetaOutcome::Quit => break,
                MetaOutcome::Continue => continue,
            }
        }
        if trimmed.is_empty() && buffer.is_empty() {
            continue;
        }
        buffer.push_str(&line);
        buffer.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut buffer);
        let _ = editor.add_history_entry(sql.trim_end());
        if let Err(e) = run_sql(ctx, &sql, &mut printer).await {
            eprintln!("Error: {}", error_message(&e));
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    0
}

enum MetaOutcome {
    Quit,
    Continue,
}

async fn meta_command(ctx: &SessionContext, command: &str, printer: &mut Printer) -> MetaOutcome {
    let mut words = command.split_whitespace();
    let sql = match (words.next(), words.next()) {
        (Some("\\q"), _) => return MetaOutcome::Quit,
        (Some("\\?" | "\\h" | "\\help"), _) => {
            println!("{HELP}");
            return MetaOutcome::Continue;
        }
        (Some("\\options"), _) => {
            for kind in ndfusion::table_kinds() {
                match kind.takes_options_of() {
                    Some(other) => println!("STORED AS {} (and {other}'s):", kind.stored_as()),
                    None => println!("STORED AS {}:", kind.stored_as()),
                }
                for (key, doc) in kind.documented_options() {
                    println!("  {key:<20} {doc}");
                }
            }
            for kind in ndfusion::table_kinds() {
                let options = kind.documented_write_options();
                if !options.is_empty() {
                    println!("COPY ... STORED AS {}:", kind.stored_as());
                }
                for (key, doc) in options {
                    println!("  {key:<20} {doc}");
                }
            }
            println!("and the storage settings: aws.*, gcp.*, azure.*, client.* (README)");
            return MetaOutcome::Continue;
        }
        (Some("\\d"), None) => "SELECT table_name, table_type FROM information_schema.tables \
             WHERE table_schema = 'public' ORDER BY table_name"
            .to_string(),
        (Some("\\d"), Some(name)) => {
            describe_options(ctx, name).await;
            format!("DESCRIBE {name}")
        }
        _ => {
            eprintln!("Unknown command {command}; \\? lists the commands.");
            return MetaOutcome::Continue;
        }
    };
    if let Err(e) = run_sql(ctx, &sql, printer).await {
        eprintln!("Error: {}", error_message(&e));
    }
    MetaOutcome::Continue
}

/// The options an ndfusion table was opened with (secrets as `***`).
async fn describe_options(ctx: &SessionContext, name: &str) {
    let Ok(table) = ctx.table_provider(name).await else {
        return;
    };
    let kind = ndfusion::table_kind_of(table.as_ref());
    if let Some(options) = kind.and_then(|k| k.describe(table.as_ref())) {
        println!("options: {options}");
    }
}

fn print_banner(ctx: &SessionContext) {
    println!(
        "ndfusion {} — SQL over N-dimensional data. \\? for help, \\q to quit.",
        env!("CARGO_PKG_VERSION")
    );
    let registered: Vec<_> = demo::DEMO_TABLES
        .iter()
        .filter(|(name, _, _)| ctx.table_exist(*name).unwrap_or(false))
        .collect();
    if registered.is_empty() {
        return;
    }
    println!("\nDemo tables:");
    for (name, _, about) in &registered {
        println!("  {name:<9} {about}");
    }
    println!(
        "\nTry:\n  SELECT day, avg(temperature) FROM ocean WHERE depth < 5 GROUP BY day ORDER BY day LIMIT 5;\n  \
         SELECT id, point.x, point['y'] FROM points WHERE value > 1500;\n  \
         SELECT station, max(temp) FROM weather GROUP BY station ORDER BY station;\n  \
         SELECT avg(temp) FROM sea WHERE time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10;\n  \
         SELECT x, y, temperature FROM profiles WHERE __global_attrs__.id = 'c';\n"
    );
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ndfusion_history"))
}
