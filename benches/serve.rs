//! `ndfusion serve` under load, against the same queries run in this process through a
//! `SessionContext` (BENCHMARKS.md, "Serving over Flight SQL"):
//!
//!     cargo bench --bench compare -- --only netcdf   # once: writes the ERA5-like dataset
//!     cargo bench --bench serve
//!
//! 1. 32 clients at once, 50 small queries each (aggregates of the Kerchunk demo table):
//!    p50 / p95 latency and queries per second, served and in-process.
//! 2. One client streaming a 2·10^7-row answer (time, latitude, longitude, t2m of
//!    `target/bench-data/era5_like_100M.zarr`): rows per second and the server's peak RSS,
//!    served and in-process (median of 3 after a warm-up).
//!
//! The server is this program again (`--serve-child`), a process of its own so that its peak
//! RSS is its own; both sides run the same library build. `--adaptive-window` gives the
//! client HTTP/2 windows sized to the link (tonic's default is a fixed 64 KiB).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow_flight::sql::client::FlightSqlServiceClient;
use datafusion::prelude::SessionContext;
use futures::TryStreamExt;
use tonic::transport::Channel;

/// The allocator the `ndfusion` binary uses (see src/bin/ndfusion/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLIENTS: usize = 32;
const QUERIES_EACH: usize = 50;
const STREAMED_ROWS: usize = 20_000_000;
const REPEATS: usize = 3;

fn era5() -> String {
    let dir = std::env::var("NDFUSION_BENCH_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-data").into());
    format!("{dir}/era5_like_100M.zarr")
}

fn tables() -> [String; 2] {
    [
        format!(
            "CREATE EXTERNAL TABLE demo STORED AS ZARR LOCATION '{}/tests/data/kerchunk/refs_v1.json'",
            env!("CARGO_MANIFEST_DIR")
        ),
        format!("CREATE EXTERNAL TABLE era5 STORED AS ZARR LOCATION '{}'", era5()),
    ]
}

fn small_query(client: usize, n: usize) -> String {
    // At most 17.75: every latitude keeps rows above it (temp runs from 10 to 27.75).
    let threshold = 10.0 + ((client * QUERIES_EACH + n) % 32) as f64 / 4.0;
    format!(
        "SELECT lat, count(*) AS n, avg(temp) AS t FROM demo WHERE temp > {threshold} \
         GROUP BY lat ORDER BY lat"
    )
}

fn streamed_query() -> String {
    format!("SELECT time, latitude, longitude, t2m FROM era5 LIMIT {STREAMED_ROWS}")
}

async fn context() -> SessionContext {
    let ctx = ndfusion::new_session_context();
    for sql in tables() {
        ctx.sql(&sql).await.unwrap();
    }
    ctx
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--serve-child") {
        return serve_child().await;
    }
    assert!(
        std::path::Path::new(&era5()).join("zarr.json").exists(),
        "{} is missing: run `cargo bench --bench compare -- --only netcdf` first",
        era5()
    );
    let ctx = context().await;

    // In this process.
    let local_load = load(|| {
        let ctx = ctx.clone();
        async move { Runner::Local(ctx) }
    })
    .await;
    let local_stream = median_stream(&mut Runner::Local(ctx.clone())).await;
    let local_peak = peak_rss_mib("self");

    // Served by a child process.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--serve-child")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line.trim().strip_prefix("address ").unwrap().to_string();
    let pid = child.id().to_string();
    let served_load = load(|| {
        let address = address.clone();
        async move { Runner::Served(connect(&address).await) }
    })
    .await;
    let served_stream = median_stream(&mut Runner::Served(connect(&address).await)).await;
    let served_peak = peak_rss_mib(&pid);
    let _ = child.kill();
    let _ = child.wait();

    println!("\n| what | in-process | served (Flight SQL) | served / in-process |");
    println!("|---|---:|---:|---:|");
    let row = |what: &str, local: f64, served: f64, unit: &str| {
        println!(
            "| {what} | {local:.4}{unit} | {served:.4}{unit} | {:.2} |",
            served / local
        );
    };
    row(
        "32 clients x 50 small queries: p50 latency",
        local_load.p50,
        served_load.p50,
        " s",
    );
    row("... p95 latency", local_load.p95, served_load.p95, " s");
    row(
        "... queries per second",
        local_load.qps,
        served_load.qps,
        "",
    );
    row(
        "2e7-row answer streamed to one client",
        local_stream,
        served_stream,
        " s",
    );
    let rate = |t: f64| STREAMED_ROWS as f64 / t / 1e6;
    row(
        "... million rows per second",
        rate(local_stream),
        rate(served_stream),
        "",
    );
    println!(
        "\npeak RSS: this process (in-process runs, then the client) {local_peak:.0} MiB; the \
         server {served_peak:.0} MiB; errors under load: {}",
        local_load.errors + served_load.errors
    );
}

/// The child: the same tables served on a free port of 127.0.0.1 until killed.
async fn serve_child() {
    let ctx = context().await;
    let addr = "127.0.0.1:0".parse().unwrap();
    let settings = ndfusion::ServeSettings::default();
    let server = ndfusion::FlightSqlServer::bind(addr, ctx, settings)
        .await
        .unwrap();
    println!("address {}", server.local_addr().unwrap());
    server.serve_until(std::future::pending()).await.unwrap();
}

enum Runner {
    Local(SessionContext),
    Served(FlightSqlServiceClient<Channel>),
}

impl Runner {
    async fn rows(&mut self, sql: &str) -> Result<usize, String> {
        match self {
            Runner::Local(ctx) => rows_local(ctx, sql).await,
            Runner::Served(client) => rows_served(client, sql).await,
        }
    }
}

struct Load {
    p50: f64,
    p95: f64,
    qps: f64,
    errors: usize,
}

/// `CLIENTS` tasks, each with its own runner, `QUERIES_EACH` queries each.
async fn load<F, Fut>(runner: F) -> Load
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Runner>,
{
    let mut runners = Vec::new();
    for _ in 0..CLIENTS {
        runners.push(runner().await);
    }
    let start = Instant::now();
    let tasks = runners.into_iter().enumerate().map(|(c, mut runner)| {
        tokio::spawn(async move {
            let mut times = Vec::new();
            let mut errors = 0;
            for n in 0..QUERIES_EACH {
                let started = Instant::now();
                match runner.rows(&small_query(c, n)).await {
                    Ok(3) => {}
                    Ok(rows) => {
                        errors += 1;
                        eprintln!("client {c}, query {n}: {rows} rows, not 3");
                    }
                    Err(e) => {
                        errors += 1;
                        eprintln!("client {c}, query {n}: {e}");
                    }
                }
                times.push(started.elapsed().as_secs_f64());
            }
            (times, errors)
        })
    });
    let mut times = Vec::new();
    let mut errors = 0;
    for done in futures::future::join_all(tasks).await {
        let (t, e) = done.unwrap();
        times.extend(t);
        errors += e;
    }
    let wall = start.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Load {
        p50: at(0.5),
        p95: at(0.95),
        qps: times.len() as f64 / wall,
        errors,
    }
}

/// The median time of streaming the 2·10^7-row answer (after a warm-up).
async fn median_stream(runner: &mut Runner) -> f64 {
    let sql = streamed_query();
    assert_eq!(runner.rows(&sql).await, Ok(STREAMED_ROWS));
    let mut times = Vec::new();
    for _ in 0..REPEATS {
        let start = Instant::now();
        assert_eq!(runner.rows(&sql).await, Ok(STREAMED_ROWS));
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[REPEATS / 2]
}

/// The rows of `sql`'s answer, streamed and dropped.
async fn rows_local(ctx: &SessionContext, sql: &str) -> Result<usize, String> {
    let frame = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    let stream = frame.execute_stream().await.map_err(|e| e.to_string())?;
    let counted = stream.try_fold(0, |n, b| async move { Ok(n + b.num_rows()) });
    counted.await.map_err(|e| e.to_string())
}

async fn rows_served(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<usize, String> {
    let info = client.execute(sql.into(), None).await;
    let info = info.map_err(|e| e.to_string())?;
    let ticket = info.endpoint[0].ticket.clone().ok_or("no ticket")?;
    let stream = client.do_get(ticket).await.map_err(|e| e.to_string())?;
    let counted = stream.try_fold(0, |n, b| async move { Ok(n + b.num_rows()) });
    counted.await.map_err(|e| e.to_string())
}

async fn connect(address: &str) -> FlightSqlServiceClient<Channel> {
    // `--adaptive-window`: HTTP/2 windows sized to the link (as gRPC's Go and C++ clients,
    // which ADBC and JDBC use, size them); tonic's default is a fixed 64 KiB.
    let adaptive = std::env::args().any(|a| a == "--adaptive-window");
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .http2_adaptive_window(adaptive)
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    FlightSqlServiceClient::new(channel)
}

/// VmHWM of a process (`self` or a pid), in MiB.
fn peak_rss_mib(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
