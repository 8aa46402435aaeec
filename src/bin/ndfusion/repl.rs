//! The interactive SQL shell: statements edited as one however many lines they span, Tab
//! completion (`completion.rs`), Ctrl-C that stops the running statement (`interrupt.rs`),
//! and the display commands `\x`, `\maxrows` and `\timing`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{
    Cmd, CompletionType, ConditionalEventHandler, Config, Editor, Event, EventContext,
    EventHandler, KeyEvent, RepeatCount,
};

use crate::cli::parse_max_rows;
use crate::completion::{Catalog, ReplHelper, COMMANDS};
use crate::demo;
use crate::interrupt::Interrupts;
use crate::plot::{self, Chart};
use crate::statements::{error_message, rows_to_plot, run_sql, Printer, Ran};

const REGISTER: &str = "\
Register your own data (local paths, s3://, gs://, az://, http(s)://):
  CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '/path/to/array.zarr';
  CREATE EXTERNAL TABLE n STORED AS LANCE_ND LOCATION '/path/to/table.lance';
  CREATE EXTERNAL TABLE i STORED AS ICECHUNK LOCATION '/path/to/repo'
    OPTIONS ('branch' 'main', 'path' 'ocean/surface');
  SELECT * FROM icechunk_log('/path/to/repo');  -- and icechunk_refs(...)
  CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION 's3://bucket/array.zarr'
    OPTIONS ('aws.region' 'us-east-1', 'aws.skip_signature' 'true');
\\plot draws the last query's result: 2 columns (x, y) as a line, 3 (x, y, value) as a heat map;
\\plot FILE.png writes it as a picture.
Tab completes keywords, tables, columns, formats, OPTIONS keys and paths in LOCATION '...'.
Ctrl-C stops the running statement; Ctrl-C twice at an empty prompt, or Ctrl-D, quits.";

/// Whether the last Ctrl-C at the prompt came on an empty line: the line editor's handler
/// notes it, the REPL quits on the second in a row.
#[derive(Default)]
struct CtrlC {
    on_empty_line: Arc<AtomicBool>,
}

impl ConditionalEventHandler for CtrlC {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        let empty = ctx.line().trim().is_empty();
        self.on_empty_line.store(empty, Ordering::Relaxed);
        Some(Cmd::Interrupt)
    }
}

/// Runs the REPL until `\q`, Ctrl-D or Ctrl-C twice at an empty prompt; returns the exit
/// code.
pub async fn run(
    ctx: &SessionContext,
    mut printer: Printer,
    mut interrupts: Option<Interrupts>,
) -> i32 {
    // Tab completes what all choices share, a second Tab lists them (as bash does).
    let config = Config::builder()
        .completion_type(CompletionType::List)
        .auto_add_history(false)
        .build();
    let mut editor = match Editor::<ReplHelper, DefaultHistory>::with_config(config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("Error: cannot start the line editor: {e}");
            return 1;
        }
    };
    let on_empty_line = Arc::new(AtomicBool::new(false));
    let handler = CtrlC {
        on_empty_line: Arc::clone(&on_empty_line),
    };
    editor.bind_sequence(
        KeyEvent::ctrl('C'),
        EventHandler::Conditional(Box::new(handler)),
    );
    editor.set_helper(Some(ReplHelper::default()));
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    print_banner(ctx);

    let mut interrupted_at_empty_prompt = false;
    let mut last_query = None;
    loop {
        if let Some(helper) = editor.helper_mut() {
            helper.catalog = Catalog::snapshot(ctx).await;
        }
        let input = match editor.readline("ndfusion> ") {
            Ok(input) => input,
            Err(ReadlineError::Interrupted) => {
                let empty = on_empty_line.load(Ordering::Relaxed);
                if empty && interrupted_at_empty_prompt {
                    break;
                }
                interrupted_at_empty_prompt = empty;
                if empty {
                    eprintln!("(Ctrl-C again or Ctrl-D to quit)");
                }
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("Error: {e}");
                break;
            }
        };
        interrupted_at_empty_prompt = false;
        let sql = input.trim();
        if sql.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(sql);
        if let Some(interrupts) = interrupts.as_mut() {
            interrupts.forget_pending();
        }
        if let Some(file) = sql.strip_prefix("\\plot") {
            let file = Some(file.trim()).filter(|f| !f.is_empty());
            plot(ctx, last_query.as_deref(), file, interrupts.as_mut()).await;
            continue;
        }
        if sql.starts_with('\\') {
            match meta_command(ctx, sql, &mut printer, interrupts.as_mut()).await {
                MetaOutcome::Quit => break,
                MetaOutcome::Continue => continue,
            }
        }
        let ran = run_sql(ctx, sql, &printer, interrupts.as_mut()).await;
        report(ran, &mut last_query);
    }
    if let Some(path) = &history {
        if let Some(folder) = path.parent() {
            let _ = std::fs::create_dir_all(folder);
        }
        let _ = editor.save_history(path);
    }
    0
}

/// Prints how a statement ended, when it did not simply finish; keeps the last query for
/// `\plot`.
fn report(result: datafusion::error::Result<Ran>, last_query: &mut Option<String>) {
    match result {
        Ok(Ran::Finished { last_query: query }) => {
            if query.is_some() {
                *last_query = query;
            }
        }
        Ok(Ran::Interrupted) => eprintln!("cancelled"),
        Err(e) => eprintln!("Error: {}", error_message(&e)),
    }
}

/// `\plot` (in the terminal) or `\plot FILE.png`: the last query's result drawn.
async fn plot(
    ctx: &SessionContext,
    last_query: Option<&str>,
    file: Option<&str>,
    interrupts: Option<&mut Interrupts>,
) {
    let Some(query) = last_query else {
        eprintln!("Nothing to plot yet: run a query of 2 columns (x, y) or 3 (x, y, value).");
        return;
    };
    let rows = match rows_to_plot(ctx, query, interrupts).await {
        Ok(Some(rows)) => rows,
        Ok(None) => return eprintln!("cancelled"),
        Err(e) => return eprintln!("Error: {}", error_message(&e)),
    };
    let drawn = Chart::of(&rows.0, &rows.1).and_then(|chart| match file {
        Some(file) => plot::write_png(&chart, Path::new(file)).map(|()| format!("Wrote {file}.\n")),
        None => {
            let width = crate::terminal::stdout_width().unwrap_or(80);
            plot::draw(&chart, width, PLOT_ROWS)
        }
    });
    match drawn {
        Ok(text) => print!("{text}"),
        Err(e) => eprintln!("Error: {e}"),
    }
}

/// Text rows a chart takes in the terminal.
const PLOT_ROWS: usize = 16;

enum MetaOutcome {
    Quit,
    Continue,
}

async fn meta_command(
    ctx: &SessionContext,
    command: &str,
    printer: &mut Printer,
    interrupts: Option<&mut Interrupts>,
) -> MetaOutcome {
    let mut words = command.split_whitespace();
    let sql = match (words.next(), words.next()) {
        (Some("\\q"), _) => return MetaOutcome::Quit,
        (Some("\\?" | "\\h" | "\\help"), _) => {
            println!("Statements end with ';' and may span lines.");
            for (command, about) in COMMANDS {
                println!("  {command:<10} {about}");
            }
            println!("{REGISTER}");
            return MetaOutcome::Continue;
        }
        (Some(command @ "\\x"), setting) => {
            toggle(command, setting, &mut printer.expanded, "Expanded display");
            return MetaOutcome::Continue;
        }
        (Some(command @ "\\timing"), setting) => {
            toggle(command, setting, &mut printer.timing, "Timing");
            return MetaOutcome::Continue;
        }
        (Some("\\maxrows"), setting) => {
            match setting.map(parse_max_rows) {
                Some(Ok(rows)) => printer.max_rows = rows.limit(),
                Some(Err(e)) => eprintln!("Error: \\maxrows: {e}"),
                None => {}
            }
            match printer.max_rows {
                Some(rows) => println!("Tables show {rows} rows at most."),
                None => println!("Tables show every row."),
            }
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
    report(run_sql(ctx, &sql, printer, interrupts).await, &mut None);
    MetaOutcome::Continue
}

/// Sets `flag` from `setting` (`on`, `off`; the other way round without one) and says what
/// it is now: `{what} is on.`
fn toggle(command: &str, setting: Option<&str>, flag: &mut bool, what: &str) {
    match setting {
        None => *flag = !*flag,
        Some("on") => *flag = true,
        Some("off") => *flag = false,
        Some(_) => eprintln!("{command} takes on or off"),
    }
    println!("{what} is {}.", if *flag { "on" } else { "off" });
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

/// `$XDG_STATE_HOME/ndfusion/history`, `~/.local/state/ndfusion/history` without it.
fn history_path() -> Option<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        Some(state) => PathBuf::from(state),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".local/state"),
    };
    Some(state.join("ndfusion").join("history"))
}
