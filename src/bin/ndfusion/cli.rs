//! The command line: run SQL from arguments, files or standard input, or start the REPL.

use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::path::PathBuf;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;

use crate::interrupt::{Interrupts, EXIT_INTERRUPTED};
use crate::output::OutputFormat;
use crate::plot::{self, Chart};
use crate::progress::ProgressMode;
use crate::statements::{error_message, rows_to_plot, run_sql, Printer, Ran};
use crate::{demo, repl};

/// Query N-dimensional data (Zarr, lance-nd) with SQL.
#[derive(Debug, clap::Parser)]
#[command(name = "ndfusion", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    /// Run a cluster process instead of SQL.
    #[command(subcommand)]
    pub process: Option<Process>,

    /// Run the SQL on the Ballista cluster whose scheduler is at URL (df://HOST:PORT) instead
    /// of in this process.
    #[arg(long, value_name = "URL", conflicts_with = "memory_limit")]
    pub cluster: Option<String>,

    /// SQL to run (repeatable; one string may hold several statements separated by `;`).
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    pub commands: Vec<String>,

    /// File of SQL statements to run (repeatable).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,

    /// Print only results: no timing or row-count lines.
    #[arg(short, long)]
    pub quiet: bool,

    /// Rows the table format shows of a result, or `all` (the row count is printed
    /// regardless). Default: 40 when standard output is a terminal, all otherwise.
    #[arg(long, value_name = "N", value_parser = parse_max_rows)]
    pub maxrows: Option<MaxRows>,

    /// After the statements, draw the last query's result as a PNG: 2 columns (x, y) as a
    /// line, 3 (x, y, value) as a heat map (the REPL's `\plot FILE.png`).
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,

    /// Show a statement's progress (chunks done of those planned, bytes read, rows, time
    /// left) on standard error once it has run a second. auto: when standard error is a
    /// terminal, and results are a table or go to a terminal.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,

    /// Register the demo tables also when running -c / -f / standard input.
    #[arg(long)]
    pub demo: bool,

    /// Start the REPL without the demo tables.
    #[arg(long)]
    pub no_demo: bool,

    /// Memory DataFusion may use for query buffers (joins, sorts, aggregations, the chunks
    /// scans hold in flight and those a COPY writes), e.g. 512M or 2G; unlimited when not
    /// given.
    #[arg(short = 'm', long, value_name = "SIZE", value_parser = parse_size)]
    pub memory_limit: Option<usize>,

    /// How to reach a secured cluster (with --cluster).
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// A cluster's token and TLS files: the same flags on the scheduler, the executors and clients.
#[derive(Debug, Clone, clap::Args)]
pub struct SecurityArgs {
    /// File whose first line is the cluster's token (default: the NDFUSION_CLUSTER_TOKEN
    /// environment variable); every call carries it, and servers refuse calls without it.
    #[arg(long, value_name = "PATH", global = true)]
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA that signed the cluster's certificates: TLS on every link.
    #[arg(long, value_name = "PATH", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// PEM certificate of this scheduler or executor (signed by --tls-ca).
    #[arg(long, value_name = "PATH", global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "PATH", global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl SecurityArgs {
    pub fn security(&self) -> std::result::Result<ndfusion::ClusterSecurity, ndfusion::Error> {
        let mut security = ndfusion::ClusterSecurity::none();
        if let Some(path) = &self.token_file {
            security = security.with_token_file(path)?;
        } else if let Ok(token) = std::env::var(ndfusion::TOKEN_ENV) {
            security = security.with_token(&token)?;
        }
        match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (Some(ca), Some(cert), Some(key)) => {
                security = security.with_tls(ca, Some((cert.as_path(), key.as_path())))?;
            }
            (Some(ca), _, _) => security = security.with_tls(ca, None)?,
            (None, Some(_), _) => {
                return Err(ndfusion::Error::InvalidOption {
                    option: "tls-cert".into(),
                    reason: "TLS needs --tls-ca too (the CA that signed the cluster's \
                             certificates)"
                        .into(),
                })
            }
            (None, None, _) => {}
        }
        Ok(security)
    }
}

/// The processes of a Ballista cluster, with ndfusion's tables built in, and the Flight SQL
/// server.
#[derive(Debug, clap::Subcommand)]
pub enum Process {
    /// Serve tables to Arrow Flight SQL clients (ADBC, JDBC, DBeaver, ...).
    Serve(crate::serve::ServeArgs),
    /// Run a cluster's scheduler: clients (`ndfusion --cluster`) send it queries, it plans
    /// them and hands their tasks to executors.
    Scheduler {
        /// Address to listen on for clients and executors.
        #[arg(long, default_value = "127.0.0.1:50050")]
        bind: SocketAddr,
        #[command(flatten)]
        access: AccessArgs,
        /// Seconds without a heartbeat after which an executor is lost and its tasks rerun.
        #[arg(long, default_value_t = 20)]
        executor_timeout: u64,
        /// Decoded bytes a task of a scan aims to read, e.g. 512M: a scan is cut into the
        /// session's target partitions, or into more tasks when each would read more.
        #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
        target_task_bytes: usize,
    },
    /// Run a cluster's executor: it registers with the scheduler and runs tasks.
    Executor {
        /// The scheduler's HOST:PORT.
        #[arg(long)]
        scheduler: String,
        /// Address to serve shuffle data on (Arrow Flight).
        #[arg(long, default_value = "127.0.0.1:50051")]
        bind: SocketAddr,
        /// Tasks run at once (default: the machine's cores).
        #[arg(long)]
        concurrency: Option<usize>,
        /// Folder for shuffle files (default: a new one under the temporary folder).
        #[arg(long)]
        work_dir: Option<PathBuf>,
        /// Memory the executor's tasks may use, e.g. 4G (default: unlimited).
        #[arg(short = 'm', long, value_name = "SIZE", value_parser = parse_size)]
        memory_limit: Option<usize>,
        #[command(flatten)]
        access: AccessArgs,
    },
}

/// What the clients of a scheduler, an executor or a server may reach: the same flags on
/// each.
#[derive(Debug, Clone, clap::Args)]
pub struct AccessArgs {
    /// Clients' tables may be read (and, on a server with --allow-ddl, written) only under
    /// this location prefix (repeatable; default: any).
    #[arg(long = "allow", value_name = "PREFIX")]
    allow: Vec<String>,
    /// Clients' tables may send requests to this endpoint (`aws.endpoint`, `azure.endpoint`;
    /// repeatable; default: none, the processes' own stores only).
    #[arg(long = "allow-endpoint", value_name = "URL")]
    allow_endpoint: Vec<String>,
    /// Listen on a non-loopback address without a token (anyone who reaches it may run
    /// queries).
    #[arg(long)]
    pub insecure: bool,
}

impl AccessArgs {
    /// The locations tables may read. A cluster process or a server never lets a client
    /// choose where its own credentials go: endpoints are refused unless the operator names
    /// them.
    pub fn allowed(&self) -> ndfusion::AllowedLocations {
        match self.allow.is_empty() {
            true => ndfusion::AllowedLocations::everything(),
            false => ndfusion::AllowedLocations::prefixes(self.allow.clone()),
        }
        .with_endpoints(self.allow_endpoint.clone())
    }
}

/// Seconds a process may take to stop after SIGTERM before it exits regardless (Ballista's
/// shutdown waits on its peers: a scheduler that is gone must not keep an executor alive).
const STOP_SECONDS: u64 = 8;

/// Runs a scheduler or an executor until it stops; returns the process exit code.
pub async fn run_process(process: Process, security: &SecurityArgs) -> i32 {
    if let Process::Serve(args) = process {
        // Its own security flags and its own way of stopping (serve.rs).
        return crate::serve::run(args, security).await;
    }
    let security = match security.security() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("Error: {e}");
            return 1;
        }
    };
    if let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::spawn(async move {
            terminate.recv().await;
            tokio::time::sleep(std::time::Duration::from_secs(STOP_SECONDS)).await;
            eprintln!("still stopping {STOP_SECONDS} s after SIGTERM: exiting now");
            std::process::exit(1);
        });
    }
    let result = match process {
        Process::Scheduler {
            bind,
            access,
            executor_timeout,
            target_task_bytes,
        } => {
            eprintln!("ndfusion scheduler listening on {bind}");
            ndfusion::run_scheduler(ndfusion::SchedulerSettings {
                bind,
                allowed: access.allowed(),
                executor_timeout_seconds: executor_timeout,
                target_task_bytes: target_task_bytes as u64,
                security,
                insecure: access.insecure,
            })
            .await
        }
        // Served and returned above.
        Process::Serve(_) => Ok(()),
        Process::Executor {
            scheduler,
            bind,
            concurrency,
            work_dir,
            memory_limit,
            access,
        } => {
            eprintln!("ndfusion executor on {bind}, scheduler {scheduler}");
            let defaults = ndfusion::ExecutorSettings::default();
            ndfusion::run_executor(ndfusion::ExecutorSettings {
                scheduler,
                bind,
                concurrency: concurrency.unwrap_or(defaults.concurrency),
                work_dir,
                memory_limit: memory_limit.map(|m| m as u64),
                allowed: access.allowed(),
                security,
                insecure: access.insecure,
            })
            .await
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

/// `--maxrows`: a number of rows, or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxRows {
    Rows(usize),
    All,
}

impl MaxRows {
    /// The rows shown, `None` for all.
    pub fn limit(self) -> Option<usize> {
        match self {
            MaxRows::Rows(n) => Some(n),
            MaxRows::All => None,
        }
    }
}

/// `40`, `all` (also `inf`, datafusion-cli's word); `0` is not a table.
pub fn parse_max_rows(text: &str) -> std::result::Result<MaxRows, String> {
    match text.trim() {
        "all" | "inf" => Ok(MaxRows::All),
        n => match n.parse::<usize>() {
            Ok(0) | Err(_) => Err(format!(
                "{text:?} is not a number of rows (1 or more) or `all`"
            )),
            Ok(n) => Ok(MaxRows::Rows(n)),
        },
    }
}

/// Rows the table format shows when standard output is a terminal and `--maxrows` is not
/// given.
const TERMINAL_ROWS: usize = 40;

/// `512M`, `2G`, `1.5G`, `100000` (bytes); units K, M, G, T of 1024.
pub fn parse_size(text: &str) -> std::result::Result<usize, String> {
    let bytes = ndfusion::parse_size(text).map_err(|e| e.to_string())?;
    usize::try_from(bytes).map_err(|_| format!("{text:?} is not a usable memory size"))
}

/// The session: ndfusion's formats, the information schema, and the memory limit if given;
/// or a cluster's.
async fn session(args: &Args) -> Result<SessionContext> {
    if let Some(url) = &args.cluster {
        let security = args.security.security()?;
        return Ok(ndfusion::new_cluster_context_with(url, &security).await?);
    }
    let config = datafusion::prelude::SessionConfig::new().with_information_schema(true);
    let runtime = match args.memory_limit {
        Some(limit) => ndfusion::memory_limited_runtime(limit),
        None => datafusion::execution::runtime_env::RuntimeEnvBuilder::new().build_arc(),
    };
    Ok(ndfusion::new_session_context_with_runtime(config, runtime?))
}

/// One source of statements, in command-line order.
enum Source {
    Command(String),
    File(PathBuf),
}

/// Runs the CLI; returns the process exit code.
pub async fn run(args: Args, matches: &clap::ArgMatches) -> i32 {
    let ctx = match session(&args).await {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let sources = ordered_sources(&args, matches);
    let interactive = sources.is_empty() && std::io::stdin().is_terminal();

    if (interactive && !args.no_demo) || args.demo {
        if let Err(e) = demo::register(&ctx).await {
            eprintln!("warning: demo tables not registered: {e}");
        }
    }
    let printer = printer(&args);
    let mut interrupts = Interrupts::install();
    if interactive {
        return repl::run(&ctx, printer, interrupts).await;
    }

    let mut texts = Vec::new();
    if sources.is_empty() {
        let mut sql = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut sql) {
            eprintln!("Error: cannot read standard input: {e}");
            return 1;
        }
        texts.push(Source::Command(sql));
    }
    let mut last_query = None;
    for source in texts.into_iter().chain(sources) {
        let sql = match source {
            Source::Command(sql) => sql,
            Source::File(path) => match std::fs::read_to_string(&path) {
                Ok(sql) => sql,
                Err(e) => {
                    eprintln!("Error: cannot read {}: {e}", path.display());
                    return 1;
                }
            },
        };
        match run_sql(&ctx, &sql, &printer, interrupts.as_mut()).await {
            Ok(Ran::Finished { last_query: query }) => last_query = query.or(last_query),
            other => return exit_code(other),
        }
    }
    match &args.plot {
        Some(file) => plot_to(&ctx, last_query.as_deref(), file, interrupts.as_mut()).await,
        None => 0,
    }
}

/// `--plot FILE.png`: the last query's result drawn into `file`; the exit code.
async fn plot_to(
    ctx: &SessionContext,
    last_query: Option<&str>,
    file: &std::path::Path,
    interrupts: Option<&mut Interrupts>,
) -> i32 {
    let Some(query) = last_query else {
        eprintln!("Error: --plot: no query ran (the last of -c / -f is drawn)");
        return 1;
    };
    let rows = match rows_to_plot(ctx, query, interrupts).await {
        Ok(Some(rows)) => rows,
        other => return exit_code(other.map(|_| Ran::Interrupted)),
    };
    match Chart::of(&rows.0, &rows.1).and_then(|chart| plot::write_png(&chart, file)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

/// How results are printed, from the flags and where standard output and error go.
fn printer(args: &Args) -> Printer {
    let stdout_is_terminal = std::io::stdout().is_terminal();
    let max_rows = match args.maxrows {
        Some(rows) => rows.limit(),
        None => stdout_is_terminal.then_some(TERMINAL_ROWS),
    };
    let progress = match args.progress {
        ProgressMode::Always => true,
        ProgressMode::Never => false,
        ProgressMode::Auto => {
            std::io::stderr().is_terminal()
                && (stdout_is_terminal || args.format == OutputFormat::Table)
        }
    };
    Printer {
        format: args.format,
        quiet: args.quiet,
        max_rows,
        expanded: false,
        timing: true,
        progress,
    }
}

fn exit_code(result: Result<Ran>) -> i32 {
    match result {
        Ok(Ran::Finished { .. }) => 0,
        Ok(Ran::Interrupted) => {
            eprintln!("cancelled");
            EXIT_INTERRUPTED
        }
        Err(e) => {
            eprintln!("Error: {}", error_message(&e));
            1
        }
    }
}

/// `-c` and `-f` values in the order they were given.
fn ordered_sources(args: &Args, matches: &clap::ArgMatches) -> Vec<Source> {
    let mut indexed: Vec<(usize, Source)> = Vec::new();
    if let Some(idx) = matches.indices_of("commands") {
        indexed.extend(
            idx.zip(&args.commands)
                .map(|(i, c)| (i, Source::Command(c.clone()))),
        );
    }
    if let Some(idx) = matches.indices_of("files") {
        indexed.extend(
            idx.zip(&args.files)
                .map(|(i, f)| (i, Source::File(f.clone()))),
        );
    }
    indexed.sort_by_key(|(i, _)| *i);
    indexed.into_iter().map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxrows_is_a_number_of_rows_or_all() {
        assert_eq!(parse_max_rows("40"), Ok(MaxRows::Rows(40)));
        assert_eq!(parse_max_rows("all").map(MaxRows::limit), Ok(None));
        for bad in ["0", "-3", "many"] {
            let error = parse_max_rows(bad).unwrap_err();
            assert!(error.contains(bad) && error.contains("`all`"), "{error}");
        }
    }
}
