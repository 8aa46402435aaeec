//! `ndfusion serve`: run the start-up statements, then serve their tables over Arrow Flight
//! SQL until SIGTERM (or Ctrl-C).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use datafusion::prelude::SessionContext;
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::GenericDialect;

use crate::cli::{parse_size, AccessArgs, SecurityArgs};

/// Seconds running queries may take to finish after SIGTERM before the server exits.
const STOP_SECONDS: u64 = 10;

/// Serve tables to Arrow Flight SQL clients (ADBC, JDBC, DBeaver, ...).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0: a free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:50051")]
    bind: SocketAddr,
    /// File of SQL statements to run at start (repeatable; before the -c statements).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// SQL to run at start (repeatable), typically CREATE EXTERNAL TABLE: its tables are
    /// every client's.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,
    /// Memory all queries together may use for their buffers, e.g. 4G (default: unlimited).
    #[arg(short = 'm', long, value_name = "SIZE", value_parser = parse_size)]
    memory_limit: Option<usize>,
    /// Queries that may run at once; more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, value_name = "N")]
    max_concurrent_queries: Option<usize>,
    /// A query running longer than this ends with DEADLINE_EXCEEDED.
    #[arg(long, value_name = "SECONDS")]
    query_timeout: Option<f64>,
    /// Clients may run DDL, COPY and INSERT (inside the --allow locations).
    #[arg(long)]
    allow_ddl: bool,
    #[command(flatten)]
    access: AccessArgs,
    /// Run the queries on the Ballista cluster whose scheduler is at URL (df://HOST:PORT);
    /// its token is NDFUSION_CLUSTER_TOKEN, its CA --tls-ca.
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,
}

/// Runs the server until it is stopped; the process exit code.
pub async fn run(args: ServeArgs, security: &SecurityArgs) -> i32 {
    match serve(args, security).await {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("Error: {message}");
            1
        }
    }
}

async fn serve(args: ServeArgs, security: &SecurityArgs) -> Result<(), String> {
    let settings = settings(&args, security).map_err(|e| e.to_string())?;
    let ctx = session(&args, security).await?;
    for (source, sql) in start_statements(&args)? {
        run_start_statements(&ctx, &source, &sql).await?;
    }
    let server = ndfusion::FlightSqlServer::bind(args.bind, ctx, settings)
        .await
        .map_err(|e| e.to_string())?;
    let address = server.local_addr().map_err(|e| e.to_string())?;
    eprintln!("ndfusion serve: Flight SQL on {address}");
    server
        .serve_until(stopped())
        .await
        .map_err(|e| e.to_string())
}

/// Completes at SIGTERM or Ctrl-C; from then on the process exits at the latest after
/// STOP_SECONDS, whether running queries have finished or not.
async fn stopped() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        match terminate.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("ndfusion serve: stopping; running queries have {STOP_SECONDS} s to finish");
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(STOP_SECONDS)).await;
        eprintln!("ndfusion serve: queries still running after {STOP_SECONDS} s: exiting");
        std::process::exit(0);
    });
}

fn settings(
    args: &ServeArgs,
    security: &SecurityArgs,
) -> ndfusion::Result<ndfusion::ServeSettings> {
    let mut settings = ndfusion::ServeSettings {
        allow_ddl: args.allow_ddl,
        allowed: args.access.allowed(),
        max_concurrent_queries: args.max_concurrent_queries,
        query_timeout: args.query_timeout.map(Duration::from_secs_f64),
        insecure: args.access.insecure,
        ..Default::default()
    };
    if let Some(path) = &security.token_file {
        let text = std::fs::read_to_string(path).map_err(|e| ndfusion::Error::InvalidOption {
            option: "token-file".into(),
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        settings = settings.with_token(text.lines().next().unwrap_or_default())?;
    } else if let Ok(token) = std::env::var(ndfusion::SERVE_TOKEN_ENV) {
        settings = settings.with_token(&token)?;
    }
    if let (Some(cert), Some(key)) = (&security.tls_cert, &security.tls_key) {
        settings = settings.with_tls_files(cert, key)?;
    }
    Ok(settings)
}

async fn session(args: &ServeArgs, security: &SecurityArgs) -> Result<SessionContext, String> {
    if let Some(url) = &args.cluster {
        let mut cluster = ndfusion::ClusterSecurity::none();
        if let Ok(token) = std::env::var(ndfusion::TOKEN_ENV) {
            cluster = cluster.with_token(&token).map_err(|e| e.to_string())?;
        }
        if let Some(ca) = &security.tls_ca {
            cluster = cluster.with_tls(ca, None).map_err(|e| e.to_string())?;
        }
        return ndfusion::new_cluster_context_with(url, &cluster)
            .await
            .map_err(|e| e.to_string());
    }
    let config = datafusion::prelude::SessionConfig::new().with_information_schema(true);
    let runtime = match args.memory_limit {
        Some(limit) => ndfusion::memory_limited_runtime(limit),
        None => datafusion::execution::runtime_env::RuntimeEnvBuilder::new().build_arc(),
    };
    let runtime = runtime.map_err(|e| e.to_string())?;
    Ok(ndfusion::new_session_context_with_runtime(config, runtime))
}

/// The start-up SQL: each file's text, then each -c string, with where it came from.
fn start_statements(args: &ServeArgs) -> Result<Vec<(String, String)>, String> {
    let mut all = Vec::new();
    for path in &args.files {
        let sql = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        all.push((path.display().to_string(), sql));
    }
    for (i, sql) in args.commands.iter().enumerate() {
        all.push((format!("-c #{}", i + 1), sql.clone()));
    }
    Ok(all)
}

/// Runs each statement of `sql`; the first that fails stops the start, named.
async fn run_start_statements(ctx: &SessionContext, source: &str, sql: &str) -> Result<(), String> {
    let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
        .map_err(|e| format!("start statements of {source}: {e}"))?;
    for statement in statements {
        let text = statement.to_string();
        let shown: String = text.chars().take(200).collect();
        let failed = |e: datafusion::error::DataFusionError| {
            format!(
                "start statement of {source} failed: {shown}: {}",
                ndfusion::Error::user_message(&e)
            )
        };
        let plan = ctx
            .state()
            .statement_to_plan(statement)
            .await
            .map_err(failed)?;
        ctx.execute_logical_plan(plan)
            .await
            .map_err(failed)?
            .collect()
            .await
            .map_err(failed)?;
    }
    Ok(())
}
