//! ndfusion against what users would use instead, in one run, as ratios (see BENCHMARKS.md).
//!
//!     cargo bench --bench compare                  # full size (50M records, 100k nd batches)
//!     cargo bench --bench compare -- --records 5000000 --batches 10000   # smaller
//!
//!     cargo bench --bench compare -- --only s3     # one section: zarr, order, dataset,
//!                                                  # collection, s3, lance_nd, plan,
//!                                                  # memory, cluster or copy
//!
//! Data is generated once into `target/bench-data` (or `$NDFUSION_BENCH_DIR`) and reused.
//! The s3 section serves the zstd array from SeaweedFS on 127.0.0.1 (installed by
//! scripts/install-test-servers.sh, started as the tests start it).
//! Baselines: a tight Rust loop over zarrs-decoded chunk bytes (the limit), and, when
//! `python3.12` with zarr 3.4.2 / pylance 14.0.2 is present, zarr-python + numpy and
//! pylance + pyarrow on the same files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Float64Array, StringArray};
use futures::{StreamExt, TryStreamExt};
use ndfusion::{write_nd_batches, WriteOptions};
use ndfusion::{Dim, NdArrowArray, NdRecordBatch};
use zarrs::array::{
    Array, ArrayBytes, ArrayMetadata, ArrayMetadataV3, ArrayToBytesCodecTraits, CodecOptions,
};
use zarrs::filesystem::FilesystemStore;

#[allow(dead_code)]
#[path = "../tests/integration/servers.rs"]
mod servers;

/// The allocator the `ndfusion` binary uses (see src/bin/ndfusion/main.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// {id int64, value float64, x float32, y float32, flag uint8}: 25 bytes.
const RECORD: usize = 25;
const CHUNK: u64 = 1_000_000;
const REPEATS: usize = 5;

struct Args {
    records: u64,
    batches: usize,
    dir: PathBuf,
    /// `--run FORMAT LOCATION SQL`: only run one query (for profilers and the memory check).
    run: Option<(String, String, String)>,
    repeat: usize,
    /// `--only SECTION`: zarr, order, dataset, netcdf, collection, s3, lance_nd, plan, memory,
    /// cluster or copy.
    only: Option<String>,
}

impl Args {
    fn runs(&self, section: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == section)
    }
}

fn args() -> Args {
    let mut records = 50_000_000;
    let mut batches = 100_000;
    let mut run = None;
    let mut repeat = 1;
    let mut only = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--records" => records = it.next().and_then(|v| v.parse().ok()).expect("--records N"),
            "--batches" => batches = it.next().and_then(|v| v.parse().ok()).expect("--batches N"),
            "--repeat" => repeat = it.next().and_then(|v| v.parse().ok()).expect("--repeat N"),
            "--only" => {
                only = Some(it.next().expect(
                    "--only zarr|dataset|netcdf|collection|s3|lance_nd|plan|memory|cluster|copy|cluster_s3",
                ))
            }
            "--run" => {
                let mut next = || it.next().expect("--run FORMAT LOCATION SQL");
                run = Some((next(), next(), next()));
            }
            _ => {} // cargo bench passes --bench
        }
    }
    let dir = std::env::var_os("NDFUSION_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench-data"))
        });
    Args {
        records,
        batches,
        dir,
        run,
        repeat,
        only,
    }
}

/// Median wall time of `REPEATS` runs (after one warm-up), in seconds.
async fn median<F, Fut, T>(mut f: F) -> (f64, T)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut out = f().await;
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let start = Instant::now();
        out = f().await;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    (times[REPEATS / 2], out)
}

/// Resets the peak RSS (VmHWM) of this process, so each section's peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_mib() -> f64 {
    status_mib("VmHWM")
}

/// A memory figure of this process from /proc/self/status (VmRSS, VmHWM), in MiB.
fn status_mib(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l.to_string())
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

// ---------------------------------------------------------------- Zarr data

fn record_metadata(records: u64, compressed: bool) -> serde_json::Value {
    let mut codecs =
        vec![serde_json::json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if compressed {
        codecs.push(
            serde_json::json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}}),
        );
    }
    serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [records],
        "data_type": {"name": "struct", "configuration": {"fields": [
            {"name": "id", "data_type": "int64"}, {"name": "value", "data_type": "float64"},
            {"name": "x", "data_type": "float32"}, {"name": "y", "data_type": "float32"},
            {"name": "flag", "data_type": "uint8"}]}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": {"id": 0, "value": 0.0, "x": 0.0, "y": 0.0, "flag": 0},
        "codecs": codecs,
        "dimension_names": ["i"],
    })
}

/// The metadata zarrs reads and writes the records with: raw bits of the record size.
fn raw_metadata(records: u64, compressed: bool) -> ArrayMetadata {
    let mut raw = record_metadata(records, compressed);
    raw["data_type"] = serde_json::json!(format!("r{}", RECORD * 8));
    raw["fill_value"] = serde_json::Value::from(vec![0u8; RECORD]);
    let meta: ArrayMetadataV3 = serde_json::from_value(raw).unwrap();
    ArrayMetadata::V3(meta)
}

fn open_raw(path: &Path, records: u64, compressed: bool) -> Array<FilesystemStore> {
    let store = Arc::new(FilesystemStore::new(path).unwrap());
    Array::new_with_metadata(store, "/", raw_metadata(records, compressed)).unwrap()
}

/// Writes the array with zarrs (raw bits of the record size), then the `struct` metadata.
fn generate_zarr(path: &Path, records: u64, compressed: bool) {
    std::fs::create_dir_all(path).unwrap();
    let store = Arc::new(FilesystemStore::new(path).unwrap());
    let array = Array::new_with_metadata(store, "/", raw_metadata(records, compressed)).unwrap();
    let chunks = records.div_ceil(CHUNK);
    for c in 0..chunks {
        let n = CHUNK as usize;
        let mut bytes = Vec::with_capacity(n * RECORD);
        for k in 0..n as u64 {
            let i = c * CHUNK + k;
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            bytes.extend((i as i64).to_le_bytes());
            bytes.extend(((h >> 11) as f64 / (1u64 << 53) as f64).to_le_bytes());
            bytes.extend((k as f32 * 0.5).to_le_bytes());
            bytes.extend((-(k as f32)).to_le_bytes());
            bytes.push((h >> 60) as u8 % 8);
        }
        array.store_chunk(&[c], ArrayBytes::from(bytes)).unwrap();
    }
    std::fs::write(
        path.join("zarr.json"),
        record_metadata(records, compressed).to_string(),
    )
    .unwrap();
}

/// The limit: read and decode the same chunks with zarrs (its filesystem store, the one
/// ndfusion reads local folders with), then one tight loop over a field; one blocking task
/// per chunk, 2 at a time.
async fn raw_loop(
    array: &Arc<Array<FilesystemStore>>,
    chunks: std::ops::Range<u64>,
    rows: std::ops::Range<usize>,
    field: &'static str,
) -> f64 {
    futures::stream::iter(chunks)
        .map(|c| {
            let array = Arc::clone(array);
            let rows = rows.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let encoded = array.retrieve_encoded_chunk(&[c]).unwrap().unwrap();
                    let shape = [std::num::NonZeroU64::new(CHUNK).unwrap()];
                    let bytes = array
                        .codecs()
                        .decode(
                            std::borrow::Cow::Owned(encoded),
                            &shape,
                            array.data_type(),
                            array.fill_value(),
                            &CodecOptions::default(),
                        )
                        .unwrap()
                        .into_fixed()
                        .unwrap();
                    let start = (c * CHUNK) as usize;
                    let lo = rows.start.max(start) - start;
                    let hi = rows.end.min(start + CHUNK as usize) - start;
                    let records = &bytes[lo * RECORD..hi * RECORD];
                    match field {
                        "value" => records
                            .chunks_exact(RECORD)
                            .map(|r| f64::from_le_bytes(r[8..16].try_into().unwrap()))
                            .sum::<f64>(),
                        "flag" => {
                            records.chunks_exact(RECORD).filter(|r| r[24] == 3).count() as f64
                        }
                        "copy" => {
                            let v: Vec<f64> = records
                                .chunks_exact(RECORD)
                                .map(|r| f64::from_le_bytes(r[8..16].try_into().unwrap()))
                                .collect();
                            v.len() as f64
                        }
                        _ => unreachable!(),
                    }
                })
                .await
                .unwrap()
            }
        })
        .buffer_unordered(2)
        .fold(0.0, |a, b| async move { a + b })
        .await
}

async fn sql(ctx: &datafusion::prelude::SessionContext, query: &str) -> f64 {
    let batches = ctx.sql(query).await.unwrap().collect().await.unwrap();
    let col = batches[0].column(0);
    arrow::compute::cast(col, &arrow::datatypes::DataType::Float64)
        .unwrap()
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap()
        .value(0)
}

/// Rows of `SELECT value`, streamed and dropped (the projection measured without collecting).
async fn stream_rows(ctx: &datafusion::prelude::SessionContext, query: &str) -> f64 {
    let stream = ctx
        .sql(query)
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    stream
        .map_ok(|b| b.num_rows())
        .try_fold(0usize, |a, n| async move { Ok(a + n) })
        .await
        .unwrap() as f64
}

fn python() -> Option<Command> {
    let ok = Command::new("python3.12")
        .env("PYENV_VERSION", "3.12.1")
        .args(["-c", "import zarr, lance; assert zarr.__version__ == '3.4.2' and lance.__version__ == '14.0.2'"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| {
        let mut c = Command::new("python3.12");
        c.env("PYENV_VERSION", "3.12.1");
        c
    })
}

/// Runs a Python snippet that prints one JSON object {query: median seconds}.
fn python_medians(script: &str) -> Option<serde_json::Value> {
    let out = python()?.args(["-c", script]).output().ok()?;
    if !out.status.success() {
        eprintln!(
            "python baseline failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

const PY_TIMER: &str = r#"
import json, statistics, time, sys
def med(f, n=5):
    f(); ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)
"#;

struct Row {
    group: String,
    query: String,
    ours: f64,
    baseline: String,
    theirs: Option<f64>,
}

fn print_rows(rows: &[Row]) {
    println!("\n| data | query | ndfusion (s) | baseline | baseline (s) | ndfusion / baseline |");
    println!("|---|---|---:|---|---:|---:|");
    for r in rows {
        let (t, ratio) = match r.theirs {
            Some(t) => (format!("{t:.4}"), format!("{:.3}", r.ours / t)),
            None => ("skipped".into(), "-".into()),
        };
        println!(
            "| {} | {} | {:.4} | {} | {} | {} |",
            r.group, r.query, r.ours, r.baseline, t, ratio
        );
    }
}

/// `--run`: opens one table as `t`, runs one query `repeat` times (streaming its rows, as a
/// client would), and prints as JSON the resident memory before the first query and the
/// process's peak, so a query's peak memory is measured in a process of its own.
async fn run_one(format: &str, location: &str, query: &str, repeat: usize) {
    // `NDFUSION_MEMORY_LIMIT` (bytes): the memory pool's size, as `ndfusion --memory-limit`.
    let mut runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new();
    if let Some(limit) = std::env::var("NDFUSION_MEMORY_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        runtime = runtime.with_memory_limit(limit, 1.0);
    }
    let ctx = ndfusion::new_session_context_with_runtime(
        datafusion::prelude::SessionConfig::new(),
        runtime.build_arc().unwrap(),
    );
    let table: Arc<dyn datafusion::catalog::TableProvider> = match format {
        "zarr" => Arc::new(ndfusion::ZarrTable::open(location).await.unwrap()),
        "lance_nd" => Arc::new(ndfusion::LanceNdTable::open(location).await.unwrap()),
        other => panic!("--run: unknown format {other} (zarr, lance_nd)"),
    };
    ctx.register_table("t", table).unwrap();
    reset_peak_rss();
    let before = status_mib("VmRSS");
    let start = Instant::now();
    let mut rows = 0.0;
    for _ in 0..repeat.max(1) {
        rows = stream_rows(&ctx, query).await;
    }
    let seconds = start.elapsed().as_secs_f64() / repeat.max(1) as f64;
    println!(
        "{}",
        serde_json::json!({"rows": rows, "seconds": seconds, "rss_before_mib": before,
                           "peak_mib": peak_rss_mib()})
    );
}

/// Runs one query in a child process (`--run`) and returns (RSS before, peak RSS) in MiB.
fn peak_memory_of(format: &str, location: &str, query: &str) -> Option<(f64, f64)> {
    peak_memory_limited(format, location, query, None)
}

/// [`peak_memory_of`] with the memory pool limited to `limit` bytes.
fn peak_memory_limited(
    format: &str,
    location: &str,
    query: &str,
    limit: Option<usize>,
) -> Option<(f64, f64)> {
    let exe = std::env::current_exe().ok()?;
    let mut command = Command::new(exe);
    command.args(["--run", format, location, query]);
    if let Some(limit) = limit {
        command.env("NDFUSION_MEMORY_LIMIT", limit.to_string());
    }
    let out = command.output().ok()?;
    if !out.status.success() {
        eprintln!("--run {query}: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some((v["rss_before_mib"].as_f64()?, v["peak_mib"].as_f64()?))
}

#[tokio::main]
async fn main() {
    let args = args();
    if let Some((format, location, query)) = &args.run {
        run_one(format, location, query, args.repeat).await;
        return;
    }
    std::fs::create_dir_all(&args.dir).unwrap();
    let mut rows = Vec::new();
    // (data, query, RSS before the query, peak RSS), each query in a process of its own.
    let mut peaks: Vec<(String, String, f64, f64)> = Vec::new();
    let py = python().is_some();
    if !py {
        println!(
            "python3.12 with zarr 3.4.2 and pylance 14.0.2 not found: Python baselines skipped"
        );
    }

    for compressed in [true, false] {
        if !args.runs("zarr") {
            break;
        }
        let label = if compressed { "zstd" } else { "uncompressed" };
        let path = args
            .dir
            .join(format!("records_{}_{label}.zarr", args.records));
        if !path.join("zarr.json").exists() {
            println!("generating {}", path.display());
            generate_zarr(&path, args.records, compressed);
        }
        let group = format!("Zarr {}M records, {label}", args.records / 1_000_000);
        let location = path.to_string_lossy().to_string();
        let ctx = ndfusion::new_session_context();
        ctx.register_table(
            "t",
            Arc::new(ndfusion::ZarrTable::open(&location).await.unwrap()),
        )
        .unwrap();
        let raw = Arc::new(open_raw(&path, args.records, compressed));
        let n = args.records as usize;
        let chunks = args.records.div_ceil(CHUNK);
        let (lo, hi) = (n / 2, n / 2 + n / 100);

        let (full, _) = median(|| sql(&ctx, "SELECT sum(value) FROM t")).await;
        let (full_raw, _) = median(|| raw_loop(&raw, 0..chunks, 0..n, "value")).await;
        let (flag, _) = median(|| sql(&ctx, "SELECT count(*) FROM t WHERE flag = 3")).await;
        let (flag_raw, _) = median(|| raw_loop(&raw, 0..chunks, 0..n, "flag")).await;
        let range_q = format!("SELECT sum(value) FROM t WHERE i >= {lo} AND i < {hi}");
        let (range, _) = median(|| sql(&ctx, &range_q)).await;
        let (range_raw, _) = median(|| {
            raw_loop(
                &raw,
                lo as u64 / CHUNK..(hi as u64).div_ceil(CHUNK),
                lo..hi,
                "value",
            )
        })
        .await;
        // The same range size further into its chunk (at 50M records: the back half of chunk
        // 25, where the first range is its front half): a compressed chunk is then
        // decompressed to its end rather than only its front.
        let (back_lo, back_hi) = (hi, hi + n / 100);
        let back_q = format!("SELECT sum(value) FROM t WHERE i >= {back_lo} AND i < {back_hi}");
        let (back, _) = median(|| sql(&ctx, &back_q)).await;
        let (proj, _) = median(|| stream_rows(&ctx, "SELECT value FROM t")).await;
        let (proj_raw, _) = median(|| raw_loop(&raw, 0..chunks, 0..n, "copy")).await;

        let pyt = if py {
            python_medians(&format!(
                "{PY_TIMER}\nimport zarr, numpy as np\na = zarr.open_array({location:?}, mode='r')\n\
                 r = {{'full': med(lambda: a[...]['value'].sum()), 'flag': med(lambda: int((a[...]['flag'] == 3).sum())),\n\
                 'range': med(lambda: a[{lo}:{hi}]['value'].sum()), 'proj': med(lambda: np.ascontiguousarray(a[...]['value']))}}\n\
                 print(json.dumps(r))"
            ))
        } else {
            None
        };
        let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
        for (q, ours, raw, key) in [
            ("sum(value)", full, full_raw, "full"),
            ("count(*) WHERE flag = 3", flag, flag_raw, "flag"),
            ("sum(value), 1% dimension range", range, range_raw, "range"),
            ("SELECT value (all rows)", proj, proj_raw, "proj"),
        ] {
            rows.push(Row {
                group: group.clone(),
                query: q.into(),
                ours,
                baseline: "raw zarrs loop".into(),
                theirs: Some(raw),
            });
            rows.push(Row {
                group: group.clone(),
                query: q.into(),
                ours,
                baseline: "zarr-python + numpy".into(),
                theirs: p(key),
            });
        }
        rows.push(Row {
            group: group.clone(),
            query: "1% range / full scan (ndfusion)".into(),
            ours: range,
            baseline: "ndfusion full scan".into(),
            theirs: Some(full),
        });
        rows.push(Row {
            group: group.clone(),
            query: format!("1% range i in [{back_lo}, {back_hi}) / full scan (ndfusion)"),
            ours: back,
            baseline: "ndfusion full scan".into(),
            theirs: Some(full),
        });
        for query in [
            "SELECT sum(value) FROM t",
            "SELECT count(*) FROM t WHERE flag = 3",
            &range_q,
            "SELECT value FROM t",
        ] {
            if let Some((before, peak)) = peak_memory_of("zarr", &location, query) {
                peaks.push((group.clone(), query.to_string(), before, peak));
            }
        }
    }

    if args.runs("order") {
        order_section(&args, &mut rows, py).await;
    }
    if args.runs("netcdf") {
        netcdf_section(&args, &mut rows, py).await;
    }
    if args.runs("dataset") {
        dataset_section(&args, &mut rows, py).await;
    }
    if args.runs("collection") {
        collection_section(&args, &mut rows, py).await;
    }
    let mut s3_requests = Vec::new();
    if args.runs("s3") {
        s3_requests = s3_section(&args, &mut rows, py).await;
    }
    if args.runs("lance_nd") {
        lance_nd_section(&args, &mut rows, &mut peaks, py).await;
    }

    if args.runs("memory") {
        memory_section(&args, &mut peaks);
    }
    if args.runs("copy") {
        copy_section(&args, &mut rows, py).await;
    }
    if args.runs("cluster") {
        cluster_section(&args, &mut rows).await;
    }
    // 10 GB generated and uploaded: only when asked for.
    if args.only.as_deref() == Some("cluster_s3") {
        cluster_s3_section(&args, &mut rows).await;
    }
    let plan_times = if args.runs("plan") {
        plan_section(&args).await
    } else {
        Vec::new()
    };

    print_rows(&rows);
    if !plan_times.is_empty() {
        println!("\n| chunks | grid | plan `sum(value)` (ms) | plan `WHERE i >= ...` (ms) | `LIMIT 10` planned and run (ms) |");
        println!("|---:|---|---:|---:|---:|");
        for (chunks, grid, whole, range, limit) in plan_times {
            println!("| {chunks} | {grid} | {whole:.2} | {range:.2} | {limit:.2} |");
        }
    }
    if !peaks.is_empty() {
        println!("\n| data | query (own process) | RSS before (MiB) | peak RSS (MiB) |");
        println!("|---|---|---:|---:|");
        for (group, query, before, peak) in peaks {
            println!("| {group} | `{query}` | {before:.0} | {peak:.0} |");
        }
    }
    if !s3_requests.is_empty() {
        println!("\n| data | query | requests | bytes fetched |");
        println!("|---|---|---:|---:|");
        for (group, query, requests, bytes) in s3_requests {
            println!("| {group} | {query} | {requests} | {bytes} |");
        }
    }
}

/// The zstd array served by SeaweedFS on loopback: ndfusion against the same queries on the
/// local files and against zarr-python reading the same objects (obstore's S3 store).
/// Returns (data, query, requests, bytes fetched) of each ndfusion query.
async fn s3_section(
    args: &Args,
    rows: &mut Vec<Row>,
    py: bool,
) -> Vec<(String, String, usize, usize)> {
    let path = args.dir.join(format!("records_{}_zstd.zarr", args.records));
    if !path.join("zarr.json").exists() {
        println!("generating {}", path.display());
        generate_zarr(&path, args.records, true);
    }
    let server = servers::seaweedfs("bench");
    let storage = upload_to_s3(&server, &path, "records.zarr").await;
    let ctx = ndfusion::new_session_context();
    let remote = ndfusion::ZarrTable::open_with(
        "s3://bench/records.zarr",
        ndfusion::ZarrOptions::new().with_storage(storage),
    )
    .await
    .unwrap();
    ctx.register_table("s3", Arc::new(remote)).unwrap();
    let local = ndfusion::ZarrTable::open(&path.to_string_lossy())
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(local)).unwrap();

    let n = args.records as usize;
    let (lo, hi) = (n / 2, n / 2 + n / 100);
    let full_q = "SELECT sum(value) FROM {t}";
    let range_q = format!("SELECT sum(value) FROM {{t}} WHERE i >= {lo} AND i < {hi}");
    let group = format!(
        "Zarr {}M records, zstd, S3 (SeaweedFS, loopback)",
        n / 1_000_000
    );
    let pyt = if py {
        python_medians(&format!(
            "{PY_TIMER}\nimport zarr, obstore\n\
             s = obstore.store.S3Store('bench', endpoint={endpoint:?}, access_key_id={key:?}, \
             secret_access_key={secret:?}, region='us-east-1', client_options={{'allow_http': True}})\n\
             a = zarr.open_array(zarr.storage.ObjectStore(s, read_only=True), path='records.zarr', mode='r')\n\
             r = {{'full': med(lambda: a[...]['value'].sum()), 'range': med(lambda: a[{lo}:{hi}]['value'].sum())}}\n\
             print(json.dumps(r))",
            endpoint = server.endpoint(),
            key = servers::S3_KEY_ID,
            secret = servers::S3_SECRET,
        ))
    } else {
        None
    };
    let mut requests = Vec::new();
    for (label, query, key) in [
        ("sum(value)", full_q.to_string(), "full"),
        ("sum(value), 1% dimension range", range_q, "range"),
    ] {
        let (on_s3, on_disk) = (query.replace("{t}", "s3"), query.replace("{t}", "t"));
        let (ours, _) = median(|| sql(&ctx, &on_s3)).await;
        let (local, _) = median(|| sql(&ctx, &on_disk)).await;
        rows.push(Row {
            group: group.clone(),
            query: label.into(),
            ours,
            baseline: "ndfusion, local files".into(),
            theirs: Some(local),
        });
        rows.push(Row {
            group: group.clone(),
            query: label.into(),
            ours,
            baseline: "zarr-python + obstore, same S3 objects".into(),
            theirs: pyt.as_ref().and_then(|v| v[key].as_f64()),
        });
        let (made, fetched) = scan_counters(&ctx, &on_s3).await;
        requests.push((group.clone(), label.to_string(), made, fetched));
    }
    requests
}

/// Uploads the folder at `path` to `key` in the server's `bench` bucket; returns the
/// storage options that reach it.
async fn upload_to_s3(
    server: &servers::Server,
    path: &Path,
    key: &str,
) -> ndfusion::StorageOptions {
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(server.endpoint())
            .with_allow_http(true)
            .with_bucket_name("bench")
            .with_access_key_id(servers::S3_KEY_ID)
            .with_secret_access_key(servers::S3_SECRET)
            .with_region("us-east-1")
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    servers::upload(&store, path, key).await;
    println!(
        "uploaded {} to SeaweedFS in {:.1} s",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    ndfusion::StorageOptions::from_map([
        ("aws.endpoint", server.endpoint()),
        ("aws.allow_http", "true".into()),
        ("aws.access_key_id", servers::S3_KEY_ID.into()),
        ("aws.secret_access_key", servers::S3_SECRET.into()),
        ("aws.region", "us-east-1".into()),
    ])
    .unwrap()
}

/// The dataset of the benchmark: 1000 days x 100 latitudes x 1000 longitudes of float32
/// temperatures (100 million cells), chunks of 10 days, written by xarray (zarr_format 3,
/// consolidated, its default zstd). Returns `None` without Python.
fn dataset_location(args: &Args) -> Option<PathBuf> {
    let path = args.dir.join("dataset_100M.zarr");
    if path.join("zarr.json").exists() {
        return Some(path);
    }
    println!("generating {} with xarray", path.display());
    let script = format!(
        "import numpy as np, pandas as pd, xarray as xr\n\
         rng = np.random.default_rng(1)\n\
         time = pd.date_range('2000-01-01', periods=1000, freq='D')\n\
         lat = np.linspace(-49.5, 49.5, 100); lon = np.linspace(0.05, 99.95, 1000)\n\
         temp = (15 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.standard_normal((1000, 100, 1000), dtype='float32')).astype('float32')\n\
         ds = xr.Dataset({{'temp': (('time', 'lat', 'lon'), temp)}}, coords={{'time': time, 'lat': lat, 'lon': lon}})\n\
         ds.to_zarr({path:?}, zarr_format=3, consolidated=True, encoding={{'temp': {{'chunks': (10, 100, 1000)}}}})\n",
        path = path.to_string_lossy()
    );
    let ok = python()?
        .args(["-c", &script])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(path)
}

/// A dataset of 100 million cells: a full aggregate and a 1% time range, against xarray +
/// pandas (`to_dataframe`) and xarray + dask reductions on the same store.
async fn dataset_section(args: &Args, rows: &mut Vec<Row>, py: bool) {
    let Some(path) = (if py { dataset_location(args) } else { None }) else {
        println!("dataset section skipped: it is written by xarray (python3.12 not found)");
        return;
    };
    let location = path.to_string_lossy().to_string();
    let ctx = ndfusion::new_session_context();
    ctx.register_table(
        "d",
        Arc::new(ndfusion::ZarrTable::open(&location).await.unwrap()),
    )
    .unwrap();
    let group = "xarray dataset 1000 x 100 x 1000 float32, zstd".to_string();
    // 1% of the days: 10 days, one chunk row.
    let range = "time BETWEEN '2001-05-15' AND '2001-05-24'";
    let full_q = "SELECT avg(temp) FROM d";
    let range_q = format!("SELECT avg(temp) FROM d WHERE {range}");
    let (full, _) = median(|| sql(&ctx, full_q)).await;
    let (part, _) = median(|| sql(&ctx, &range_q)).await;
    let pyt = python_medians(&format!(
        "{PY_TIMER}\nimport xarray as xr, dask\nds = xr.open_zarr({location:?})\n\
         sel = lambda: ds.sel(time=slice('2001-05-15', '2001-05-24'))\n\
         r = {{'df_full': med(lambda: ds.to_dataframe()['temp'].mean(), n=3),\n\
         'df_range': med(lambda: sel().to_dataframe()['temp'].mean()),\n\
         'dask_full': med(lambda: float(ds.temp.mean().compute())),\n\
         'dask_range': med(lambda: float(sel().temp.mean().compute()))}}\n\
         print(json.dumps(r))"
    ));
    let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
    for (q, ours, df, dask) in [
        ("avg(temp), all 100M cells", full, "df_full", "dask_full"),
        ("avg(temp), 1% time range", part, "df_range", "dask_range"),
    ] {
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "xarray + pandas (to_dataframe)".into(),
            theirs: p(df),
        });
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "xarray + dask (mean)".into(),
            theirs: p(dask),
        });
    }
    rows.push(Row {
        group: group.clone(),
        query: "1% time range / full scan (ndfusion)".into(),
        ours: part,
        baseline: "ndfusion full scan".into(),
        theirs: Some(full),
    });

    // The same chunks read as a plain array table: what the dataset adds over the reader.
    let array = format!("{location}/temp");
    ctx.register_table(
        "a",
        Arc::new(ndfusion::ZarrTable::open(&array).await.unwrap()),
    )
    .unwrap();
    let (alone, _) = median(|| sql(&ctx, "SELECT avg(value) FROM a")).await;
    rows.push(Row {
        group: group.clone(),
        query: "avg(temp), all 100M cells".into(),
        ours: full,
        baseline: "ndfusion, the array `temp` alone (same chunks)".into(),
        theirs: Some(alone),
    });

    // The same dataset in an object store on loopback.
    let server = servers::seaweedfs("bench");
    let storage = upload_to_s3(&server, &path, "dataset.zarr").await;
    let remote = ndfusion::ZarrTable::open_with(
        "s3://bench/dataset.zarr",
        ndfusion::ZarrOptions::new().with_storage(storage.clone()),
    )
    .await
    .unwrap();
    ctx.register_table("s3", Arc::new(remote)).unwrap();
    for (q, query, local) in [
        ("avg(temp), all 100M cells", full_q.to_string(), full),
        ("avg(temp), 1% time range", range_q, part),
    ] {
        let on_s3 = query.replace("FROM d", "FROM s3");
        let (ours, _) = median(|| sql(&ctx, &on_s3)).await;
        rows.push(Row {
            group: format!("{group}, S3 (SeaweedFS, loopback)"),
            query: q.into(),
            ours,
            baseline: "ndfusion, local files".into(),
            theirs: Some(local),
        });
    }

    // The array `temp` alone on S3 against its local files: the ratio a remote dataset is
    // held to (issue 43: a remote dataset may cost at most the array's ratio + 0.1).
    let remote_array = ndfusion::ZarrTable::open_with(
        "s3://bench/dataset.zarr/temp",
        ndfusion::ZarrOptions::new().with_storage(storage),
    )
    .await
    .unwrap();
    ctx.register_table("s3a", Arc::new(remote_array)).unwrap();
    // Days 500..510 are 2001-05-15..24, the dataset's 1% range.
    let array_range = "SELECT avg(value) FROM a WHERE time >= 500 AND time < 510";
    let (array_part, _) = median(|| sql(&ctx, array_range)).await;
    for (q, query, local) in [
        (
            "avg(temp), all 100M cells",
            "SELECT avg(value) FROM a",
            alone,
        ),
        ("avg(temp), 1% time range", array_range, array_part),
    ] {
        let on_s3 = query.replace("FROM a", "FROM s3a");
        let (ours, _) = median(|| sql(&ctx, &on_s3)).await;
        rows.push(Row {
            group: format!("{group}: the array `temp` alone, S3 (SeaweedFS, loopback)"),
            query: q.into(),
            ours,
            baseline: "ndfusion, the array's local files".into(),
            theirs: Some(local),
        });
    }
}

/// An ERA5-like netCDF-3 file (CDF-2, as the CDS wrote them before netCDF-4) and the same
/// data as Zarr, both written by xarray: `None` without Python.
fn netcdf_locations(args: &Args) -> Option<(PathBuf, PathBuf)> {
    let nc = args.dir.join("era5_like_100M.nc");
    let zarr = args.dir.join("era5_like_100M.zarr");
    if nc.exists() && zarr.join("zarr.json").exists() {
        return Some((nc, zarr));
    }
    println!(
        "generating {} and {} with xarray",
        nc.display(),
        zarr.display()
    );
    let script = format!(
        "import numpy as np, pandas as pd, xarray as xr\n\
         rng = np.random.default_rng(2)\n\
         time = pd.date_range('2000-01-01', periods=1000, freq='D')\n\
         lat = np.linspace(49.5, -49.5, 100); lon = np.linspace(0.05, 99.95, 1000)\n\
         t2m = (280 + 10 * np.cos(np.deg2rad(lat))[None, :, None] + rng.standard_normal((1000, 100, 1000), dtype='float32')).astype('float32')\n\
         ds = xr.Dataset({{'t2m': (('time', 'latitude', 'longitude'), t2m, {{'units': 'K'}})}}, coords={{'time': time, 'latitude': lat, 'longitude': lon}})\n\
         packed = {{'dtype': 'int16', 'scale_factor': 0.0015, 'add_offset': 280.0, '_FillValue': -32767}}\n\
         ds.to_netcdf({nc:?}, format='NETCDF3_64BIT', engine='netcdf4', unlimited_dims=['time'], encoding={{'t2m': packed, 'time': {{'dtype': 'int32', 'units': 'hours since 1900-01-01'}}}})\n\
         xr.open_dataset({nc:?}).to_zarr({zarr:?}, zarr_format=3, consolidated=True, encoding={{'t2m': {{'chunks': (5, 100, 1000)}}}})\n",
        nc = nc.to_string_lossy(),
        zarr = zarr.to_string_lossy(),
    );
    let ok = python()?
        .args(["-c", &script])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some((nc, zarr))
}

/// The netCDF-4 twin of `netcdf_locations`' file: the same values, packing and times, written
/// by xarray as NETCDF4 with deflate (level 1) + shuffle in 5-day chunks (the Zarr copy's).
fn netcdf4_location(args: &Args, nc3: &Path) -> Option<PathBuf> {
    let nc4 = args.dir.join("era5_like_100M_nc4.nc");
    if nc4.exists() {
        return Some(nc4);
    }
    println!("generating {} with xarray", nc4.display());
    let script = format!(
        "import xarray as xr\n\
         ds = xr.open_dataset({nc3:?})\n\
         packed = {{'dtype': 'int16', 'scale_factor': 0.0015, 'add_offset': 280.0, '_FillValue': -32767, 'zlib': True, 'complevel': 1, 'shuffle': True, 'chunksizes': (5, 100, 1000)}}\n\
         ds.to_netcdf({nc4:?}, format='NETCDF4', engine='netcdf4', unlimited_dims=['time'], encoding={{'t2m': packed, 'time': {{'dtype': 'int32', 'units': 'hours since 1900-01-01'}}}})\n",
        nc3 = nc3.to_string_lossy(),
        nc4 = nc4.to_string_lossy(),
    );
    let ok = python()?
        .args(["-c", &script])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(nc4)
}

/// Issue 39: a 100M-cell netCDF file read in place — netCDF-3 (int16 packed, 200 MB) and the
/// same data as netCDF-4 (deflate + shuffle) — a full aggregate, a 1% time range, a lat/lon
/// box and monthly means, against xarray's engines for each (eager, and + dask) and against
/// the same data as Zarr.
async fn netcdf_section(args: &Args, rows: &mut Vec<Row>, py: bool) {
    let Some((nc, zarr)) = (if py { netcdf_locations(args) } else { None }) else {
        println!("netcdf section skipped: its file is written by xarray (python3.12 not found)");
        return;
    };
    let group = "ERA5-like netCDF-3 (CDF-2) 1000 x 100 x 1000 int16 packed";
    let engines = [("netcdf4", false), ("scipy", false), ("netcdf4", true)];
    netcdf_queries(rows, &nc, &zarr, group, &engines).await;
    let Some(nc4) = netcdf4_location(args, &nc) else {
        println!("netCDF-4 file not written: its part skipped");
        return;
    };
    let group = "the same as netCDF-4, deflate (1) + shuffle, 5-day chunks";
    let engines = [
        ("netcdf4", false),
        ("h5netcdf", false),
        ("netcdf4", true),
        ("h5netcdf", true),
    ];
    netcdf_queries(rows, &nc4, &zarr, group, &engines).await;
}

/// The four queries on the netCDF file `nc` (checked against xarray's full average), timed
/// against xarray with each of `engines` (name, with dask in 5-day chunks) and against `zarr`.
async fn netcdf_queries(
    rows: &mut Vec<Row>,
    nc: &Path,
    zarr: &Path,
    group: &str,
    engines: &[(&str, bool)],
) {
    let (nc, zarr) = (
        nc.to_string_lossy().to_string(),
        zarr.to_string_lossy().to_string(),
    );
    let ctx = ndfusion::new_session_context();
    let table = ndfusion::NetCDFTable::open(&nc).await.unwrap();
    ctx.register_table("n", Arc::new(table)).unwrap();
    let table = ndfusion::ZarrTable::open(&zarr).await.unwrap();
    ctx.register_table("z", Arc::new(table)).unwrap();
    let queries = [
        ("avg(t2m), all 100M cells", "SELECT avg(t2m) FROM n", "full"),
        (
            "avg(t2m), 1% time range",
            "SELECT avg(t2m) FROM n WHERE time BETWEEN '2001-05-15' AND '2001-05-24'",
            "range",
        ),
        (
            "avg(t2m), 10 x 100 lat/lon box",
            "SELECT avg(t2m) FROM n WHERE latitude BETWEEN 10 AND 19 AND longitude BETWEEN 50 AND 59.99",
            "box",
        ),
        (
            "monthly means",
            "SELECT date_trunc('month', time) AS m, avg(t2m) FROM n GROUP BY 1",
            "monthly",
        ),
    ];
    let label = |(engine, dask): &(&str, bool)| match dask {
        true => format!("{engine}+dask"),
        false => engine.to_string(),
    };
    let py_engines: Vec<String> = (engines.iter())
        .map(|(engine, dask)| {
            let chunks = if *dask { "{'time': 5}" } else { "None" };
            format!("('{engine}', {chunks})")
        })
        .collect();
    let pyt = python_medians(&format!(
        "{PY_TIMER}\nimport xarray as xr, dask\nr = {{}}\n\
         for engine, chunks in [{engines}]:\n\
         \x20   ds = xr.open_dataset({nc:?}, engine=engine, chunks=chunks, cache=False)\n\
         \x20   run = (lambda x: float(x.compute())) if chunks else float\n\
         \x20   key = engine + ('+dask' if chunks else '')\n\
         \x20   r[key + ' full'] = med(lambda: run(ds.t2m.mean()), n=3)\n\
         \x20   r[key + ' range'] = med(lambda: run(ds.t2m.sel(time=slice('2001-05-15', '2001-05-24')).mean()))\n\
         \x20   r[key + ' box'] = med(lambda: run(ds.t2m.sel(latitude=slice(19, 10), longitude=slice(50, 59.99)).mean()))\n\
         \x20   r[key + ' monthly'] = med(lambda: ds.t2m.resample(time='MS').mean().compute(), n=3)\n\
         r['value full'] = float(xr.open_dataset({nc:?}).t2m.mean())\n\
         print(json.dumps(r))",
        engines = py_engines.join(", "),
    ));
    let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
    // The answers are xarray's.
    let batches = ctx
        .sql("SELECT avg(t2m) FROM n")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let ours = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Float64Array>()
        .unwrap()
        .value(0);
    if let Some(theirs) = p("value full") {
        assert!(
            (ours - theirs).abs() <= 1e-9 * theirs.abs(),
            "{ours} vs xarray {theirs}"
        );
        println!("{group}: avg(t2m): ndfusion {ours}, xarray {theirs}");
    }
    for (name, query, key) in queries {
        let (ours, _) = median(|| sql(&ctx, query)).await;
        for engine in engines {
            let engine = label(engine);
            rows.push(Row {
                group: group.to_string(),
                query: name.into(),
                ours,
                baseline: format!("xarray ({engine})"),
                theirs: p(&format!("{engine} {key}")),
            });
        }
        let on_zarr = query.replace("FROM n", "FROM z");
        let (zarr_time, _) = median(|| sql(&ctx, &on_zarr)).await;
        rows.push(Row {
            group: group.to_string(),
            query: name.into(),
            ours,
            baseline: "ndfusion, the same data as Zarr (zstd, 5-day chunks)".into(),
            theirs: Some(zarr_time),
        });
    }
}

/// Issue 25: what statistics and order answer, each against the full scan and xarray (or
/// zarr-python) in the same run: the 50M-record array, the 100M-cell dataset and a
/// collection of 10,000 daily stores.
async fn order_section(args: &Args, rows: &mut Vec<Row>, py: bool) {
    // The array: extremes and the last rows of the dimension.
    let path = args.dir.join(format!("records_{}_zstd.zarr", args.records));
    if !path.join("zarr.json").exists() {
        println!("generating {}", path.display());
        generate_zarr(&path, args.records, true);
    }
    let location = path.to_string_lossy().to_string();
    let ctx = ndfusion::new_session_context();
    let table = ndfusion::ZarrTable::open(&location).await.unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let group = format!("Zarr {}M records, zstd", args.records / 1_000_000);
    let (full, _) = median(|| sql(&ctx, "SELECT sum(value) FROM t")).await;
    let (max_i, _) = median(|| sql(&ctx, "SELECT max(i) FROM t")).await;
    let last_q = "SELECT value, i FROM t ORDER BY i DESC LIMIT 10";
    let (last, _) = median(|| sql(&ctx, last_q)).await;
    let pyt = py
        .then(|| {
            python_medians(&format!(
                "{PY_TIMER}\nimport zarr\na = zarr.open_array({location:?}, mode='r')\n\
                 r = {{'max': med(lambda: a.shape[0] - 1), 'last': med(lambda: a[-10:]['value'])}}\n\
                 print(json.dumps(r))"
            ))
        })
        .flatten();
    let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
    for (q, ours, key) in [
        ("max(i) (statistics)", max_i, "max"),
        ("ORDER BY i DESC LIMIT 10", last, "last"),
    ] {
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "ndfusion full scan, sum(value)".into(),
            theirs: Some(full),
        });
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "zarr-python (a.shape, a[-10:])".into(),
            theirs: p(key),
        });
    }

    // The dataset: the extremes of time, the last rows, monthly means.
    if let Some(path) = py.then(|| dataset_location(args)).flatten() {
        let location = path.to_string_lossy().to_string();
        let table = ndfusion::ZarrTable::open(&location).await.unwrap();
        ctx.register_table("d", Arc::new(table)).unwrap();
        let group = "xarray dataset 1000 x 100 x 1000 float32, zstd".to_string();
        let (full, _) = median(|| sql(&ctx, "SELECT avg(temp) FROM d")).await;
        let max_q = "SELECT CAST(max(time) AS BIGINT) FROM d";
        let (max_t, _) = median(|| sql(&ctx, max_q)).await;
        let last_q =
            "SELECT temp, time, lat, lon FROM d ORDER BY time DESC, lat DESC, lon DESC LIMIT 10";
        let (last, _) = median(|| sql(&ctx, last_q)).await;
        let monthly_q = "SELECT avg(temp) FROM d GROUP BY date_trunc('month', time)";
        let (monthly, _) = median(|| sql(&ctx, monthly_q)).await;
        // The same without ndfusion's rule that computes the key once per day.
        let plain = datafusion::prelude::SessionContext::new();
        let table = ndfusion::ZarrTable::open(&location).await.unwrap();
        plain.register_table("d", Arc::new(table)).unwrap();
        let (monthly_plain, _) = median(|| sql(&plain, monthly_q)).await;
        let pyt = python_medians(&format!(
            "{PY_TIMER}\nimport xarray as xr\nds = xr.open_zarr({location:?})\n\
             r = {{'max': med(lambda: ds.time.max().values),\n\
             'last': med(lambda: ds.isel(time=slice(-10, None)).temp.values),\n\
             'monthly': med(lambda: ds.temp.resample(time='1MS').mean(...).values, n=3),\n\
             'full': med(lambda: float(ds.temp.mean().compute()), n=3)}}\n\
             print(json.dumps(r))"
        ));
        let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
        for (q, ours, key, what) in [
            ("max(time) (statistics)", max_t, "max", "ds.time.max()"),
            (
                "ORDER BY time DESC LIMIT 10 (read backwards)",
                last,
                "last",
                "ds.isel(time=slice(-10, None))",
            ),
            (
                "avg(temp) GROUP BY date_trunc('month', time)",
                monthly,
                "monthly",
                "ds.temp.resample(time='1MS').mean(...)",
            ),
            ("avg(temp), all 100M cells", full, "full", "ds.temp.mean()"),
        ] {
            rows.push(Row {
                group: group.clone(),
                query: q.into(),
                ours,
                baseline: format!("xarray + dask, {what}"),
                theirs: p(key),
            });
        }
        for (q, ours) in [
            ("max(time) (statistics)", max_t),
            ("ORDER BY time DESC LIMIT 10 (read backwards)", last),
        ] {
            rows.push(Row {
                group: group.clone(),
                query: q.into(),
                ours,
                baseline: "ndfusion full scan, avg(temp)".into(),
                theirs: Some(full),
            });
        }
        rows.push(Row {
            group: group.clone(),
            query: "avg(temp) GROUP BY date_trunc('month', time)".into(),
            ours: monthly,
            baseline: "a plain DataFusion context (key per row, hashed)".into(),
            theirs: Some(monthly_plain),
        });
    } else {
        println!("order section: the dataset is written by xarray (python3.12 not found)");
    }

    // 10,000 daily stores: one day's range, the latest time.
    let dir = args.dir.join("daily_10k");
    if !dir
        .join(format!("d{:05}.zarr", MEMBERS - 1))
        .join("temp")
        .exists()
    {
        println!("generating {}", dir.display());
        generate_daily_collection(&dir);
    }
    let pattern = format!("{}/*.zarr", dir.display());
    let table = ndfusion::ZarrTable::open(&pattern).await.unwrap();
    ctx.register_table("c", Arc::new(table)).unwrap();
    let group = format!("{MEMBERS} daily Zarr datasets x 24 hours x 100 stations");
    let (full, _) = median(|| sql(&ctx, "SELECT avg(temp) FROM c")).await;
    let day_q = "SELECT avg(temp) FROM c WHERE time >= '2010-06-01' AND time < '2010-06-02'";
    let (day, _) = median(|| sql(&ctx, day_q)).await;
    let max_q = "SELECT CAST(max(time) AS BIGINT) FROM c";
    let (max_t, _) = median(|| sql(&ctx, max_q)).await;
    for (q, ours) in [
        ("avg(temp), one day (1 member of 10,000)", day),
        ("max(time) (statistics)", max_t),
    ] {
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "ndfusion full scan, avg(temp)".into(),
            theirs: Some(full),
        });
    }
}

/// 10,000 daily stores from 2000-01-01 on, each a dataset of 24 hourly times x 100 stations
/// of float32, written as files (zarr.json and uncompressed chunks): a time coordinate with
/// CF units, and `temp`.
fn generate_daily_collection(dir: &Path) {
    for m in 0..MEMBERS {
        let path = dir.join(format!("d{m:05}.zarr"));
        let write = |rel: &str, bytes: &[u8]| {
            let file = path.join(rel);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        };
        let group = serde_json::json!({"zarr_format": 3, "node_type": "group",
            "attributes": {"day": m}});
        write("zarr.json", group.to_string().as_bytes());
        let array = |shape: serde_json::Value,
                     dims: serde_json::Value,
                     dtype: &str,
                     fill: serde_json::Value,
                     attrs: serde_json::Value| {
            serde_json::json!({"zarr_format": 3, "node_type": "array", "shape": shape,
                "data_type": dtype, "fill_value": fill,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
                "chunk_key_encoding": {"name": "default"},
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "dimension_names": dims, "attributes": attrs})
            .to_string()
        };
        let time = array(
            serde_json::json!([24]),
            serde_json::json!(["time"]),
            "int64",
            serde_json::json!(0),
            serde_json::json!({"units": "hours since 2000-01-01 00:00:00",
                "calendar": "proleptic_gregorian"}),
        );
        write("time/zarr.json", time.as_bytes());
        let hours: Vec<u8> = (0..24i64)
            .flat_map(|h| (m as i64 * 24 + h).to_le_bytes())
            .collect();
        write("time/c/0", &hours);
        let temp = array(
            serde_json::json!([24, 100]),
            serde_json::json!(["time", "station"]),
            "float32",
            serde_json::json!("NaN"),
            serde_json::json!({}),
        );
        write("temp/zarr.json", temp.as_bytes());
        let values: Vec<u8> = (0..24 * 100)
            .flat_map(|k| ((m % 365) as f32 / 10.0 + (k % 100) as f32 / 100.0).to_le_bytes())
            .collect();
        write("temp/c/0/0", &values);
    }
}

/// Members of the collection benchmark, and records per member.
const MEMBERS: usize = 10_000;
const MEMBER_RECORDS: u64 = 1_000;

/// 10,000 Zarr stores of 1,000 records each (one zstd chunk), written with zarrs, each with
/// attributes {id, platform_number, active}.
fn generate_collection(dir: &Path) {
    for m in 0..MEMBERS {
        let path = dir.join(format!("m{m:05}.zarr"));
        std::fs::create_dir_all(&path).unwrap();
        let mut raw = record_metadata(MEMBER_RECORDS, true);
        raw["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!([MEMBER_RECORDS]);
        let mut meta = raw.clone();
        raw["data_type"] = serde_json::json!(format!("r{}", RECORD * 8));
        raw["fill_value"] = serde_json::Value::from(vec![0u8; RECORD]);
        let raw: ArrayMetadataV3 = serde_json::from_value(raw).unwrap();
        let store = Arc::new(FilesystemStore::new(&path).unwrap());
        let array = Array::new_with_metadata(store, "/", ArrayMetadata::V3(raw)).unwrap();
        let mut bytes = Vec::with_capacity(MEMBER_RECORDS as usize * RECORD);
        for k in 0..MEMBER_RECORDS {
            let i = m as u64 * MEMBER_RECORDS + k;
            bytes.extend((i as i64).to_le_bytes());
            bytes.extend((k as f64 * 0.25).to_le_bytes());
            bytes.extend((k as f32).to_le_bytes());
            bytes.extend((m as f32).to_le_bytes());
            bytes.push((k % 8) as u8);
        }
        array.store_chunk(&[0], ArrayBytes::from(bytes)).unwrap();
        meta["attributes"] = serde_json::json!({
            "id": format!("m{m:05}"), "platform_number": m, "active": m % 2 == 0,
        });
        std::fs::write(path.join("zarr.json"), meta.to_string()).unwrap();
    }
}

/// 10,000 small stores as one table: opening, a count and a full sum over all, and one member
/// picked by `__global_attrs__.id`; against zarr-python opening every store in a loop.
async fn collection_section(args: &Args, rows: &mut Vec<Row>, py: bool) {
    let dir = args.dir.join("collection_10k");
    if !dir
        .join(format!("m{:05}.zarr", MEMBERS - 1))
        .join("zarr.json")
        .exists()
    {
        println!("generating {}", dir.display());
        generate_collection(&dir);
    }
    let pattern = format!("{}/*.zarr", dir.display());
    let group = format!("{MEMBERS} Zarr stores x {MEMBER_RECORDS} records, zstd");
    let (open, table) =
        median(|| async { ndfusion::ZarrTable::open(&pattern).await.unwrap() }).await;
    let ctx = ndfusion::new_session_context();
    ctx.register_table("c", Arc::new(table)).unwrap();
    let target = format!("m{:05}", MEMBERS / 2 + 7);
    let (count, _) = median(|| sql(&ctx, "SELECT count(*) FROM c")).await;
    let (full, _) = median(|| sql(&ctx, "SELECT sum(value) FROM c")).await;
    let pick_q = format!("SELECT sum(value) FROM c WHERE __global_attrs__.id = '{target}'");
    let (pick, _) = median(|| sql(&ctx, &pick_q)).await;
    let pyt = if py {
        python_medians(&format!(
            "{PY_TIMER}\nimport glob, zarr\npaths = sorted(glob.glob({pattern:?}))\n\
             opened = lambda: [(zarr.open_array(p, mode='r'), p) for p in paths]\n\
             def open_attrs():\n    return [(a, dict(a.attrs)) for a, p in opened()]\n\
             def count():\n    return sum(a.shape[0] for a, p in opened())\n\
             def full():\n    return sum(float(a[...]['value'].sum()) for a, p in opened())\n\
             def pick():\n    for a, attrs in open_attrs():\n        if attrs['id'] == {target:?}:\n            return float(a[...]['value'].sum())\n\
             r = {{'open': med(open_attrs, n=3), 'count': med(count, n=3), 'full': med(full, n=3), 'pick': med(pick, n=3)}}\n\
             print(json.dumps(r))"
        ))
    } else {
        None
    };
    let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
    for (q, ours, key) in [
        (
            "open (every member's metadata and attributes)",
            open,
            "open",
        ),
        (
            "count(*) over all (row counts from metadata)",
            count,
            "count",
        ),
        ("sum(value) over all members", full, "full"),
        ("one member by __global_attrs__.id", pick, "pick"),
    ] {
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "zarr-python loop + numpy".into(),
            theirs: p(key),
        });
    }
    rows.push(Row {
        group: group.clone(),
        query: "one member by id / count(*) over all (ndfusion)".into(),
        ours: pick,
        baseline: "ndfusion count(*) over all".into(),
        theirs: Some(count),
    });
    rows.push(Row {
        group,
        query: "one member by id / sum over all (ndfusion)".into(),
        ours: pick,
        baseline: "ndfusion sum over all".into(),
        theirs: Some(full),
    });
}

/// Runs `query` once and sums the scan's `requests` and `bytes_read` counters.
async fn scan_counters(ctx: &datafusion::prelude::SessionContext, query: &str) -> (usize, usize) {
    use datafusion::physical_plan::ExecutionPlan;
    fn sum(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
        let own = plan
            .metrics()
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |v| v.as_usize());
        own + plan
            .children()
            .into_iter()
            .map(|c| sum(c, name))
            .sum::<usize>()
    }
    let plan = ctx
        .sql(query)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
        .await
        .unwrap();
    (sum(&plan, "requests"), sum(&plan, "bytes_read"))
}

async fn lance_nd_section(
    args: &Args,
    rows: &mut Vec<Row>,
    peaks: &mut Vec<(String, String, f64, f64)>,
    py: bool,
) {
    let path = args.dir.join(format!("nd_{}.lance", args.batches));
    let uri = path.to_string_lossy().to_string();
    if !path.exists() {
        println!("generating {uri}");
        generate_lance_nd(&uri, args.batches).await;
    }
    let group = format!("lance-nd {}k batches x 1000", args.batches / 1000);
    let ctx = ndfusion::new_session_context();
    ctx.register_table(
        "t",
        Arc::new(ndfusion::LanceNdTable::open(&uri).await.unwrap()),
    )
    .unwrap();
    let id = format!("id{:06}", args.batches / 2 + 7);
    let lookup_q = format!("SELECT sum(v) FROM t WHERE __global_attrs__.id = '{id}'");
    let (lookup, _) = median(|| sql(&ctx, &lookup_q)).await;
    let (grp, _) = median(|| {
        sql(
            &ctx,
            "SELECT sum(v) FROM t WHERE __global_attrs__.\"group\" = 'g3'",
        )
    })
    .await;
    let (full, _) = median(|| sql(&ctx, "SELECT sum(v) FROM t")).await;
    for query in [
        lookup_q.as_str(),
        "SELECT sum(v) FROM t WHERE __global_attrs__.\"group\" = 'g3'",
        "SELECT sum(v) FROM t",
    ] {
        if let Some((before, peak)) = peak_memory_of("lance_nd", &uri, query) {
            peaks.push((group.clone(), query.to_string(), before, peak));
        }
    }
    // The fixed cost of a query: SQL parsing, logical and physical planning, no execution.
    let (planning, _) = median(|| async {
        ctx.sql(&lookup_q)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    })
    .await;
    let pyt = if py {
        python_medians(&format!(
            "{PY_TIMER}\nimport lance, pyarrow.compute as pc\nds = lance.dataset({uri:?})\n\
             s = lambda t: pc.sum(pc.list_flatten(t.column('v').combine_chunks().field('values')))\n\
             r = {{'lookup': med(lambda: s(ds.to_table(columns=['v'], filter=\"__global_attrs__.id = '{id}'\"))),\n\
             'group': med(lambda: s(ds.to_table(columns=['v'], filter=\"__global_attrs__.group = 'g3'\"))),\n\
             'full': med(lambda: s(ds.to_table(columns=['v'])))}}\nprint(json.dumps(r))"
        ))
    } else {
        None
    };
    let p = |k: &str| pyt.as_ref().and_then(|v| v[k].as_f64());
    for (q, ours, key) in [
        ("lookup by id (BTREE)", lookup, "lookup"),
        ("filter by group (10%)", grp, "group"),
        ("full sum(v)", full, "full"),
    ] {
        rows.push(Row {
            group: group.clone(),
            query: q.into(),
            ours,
            baseline: "pylance + pyarrow".into(),
            theirs: p(key),
        });
    }
    rows.push(Row {
        group: group.clone(),
        query: "full scan / id lookup (ndfusion)".into(),
        ours: full,
        baseline: "ndfusion id lookup".into(),
        theirs: Some(lookup),
    });
    rows.push(Row {
        group,
        query: "id lookup: planning only (ndfusion)".into(),
        ours: planning,
        baseline: "ndfusion id lookup".into(),
        theirs: Some(lookup),
    });
}

async fn generate_lance_nd(uri: &str, batches: usize) {
    let text = |s: String| -> ArrayRef { Arc::new(StringArray::from(vec![s])) };
    let opts = WriteOptions::new();
    for start in (0..batches).step_by(10_000) {
        let part: Vec<NdRecordBatch> = (start..(start + 10_000).min(batches))
            .map(|i| {
                let values = Float64Array::from_iter_values(
                    (0..1000).map(|k| ((i * 1000 + k) % 977) as f64 * 0.25),
                );
                let v = NdArrowArray::try_new(Arc::new(values), vec![Dim::new("t", 1000)], vec![])
                    .unwrap();
                NdRecordBatch::try_new(
                    vec![("v".into(), v)],
                    vec![
                        ("id".into(), text(format!("id{i:06}"))),
                        ("group".into(), text(format!("g{}", i % 10))),
                    ],
                )
                .unwrap()
            })
            .collect();
        write_nd_batches(uri, &part, &opts).await.unwrap();
    }
    use lance::index::DatasetIndexExt;
    let mut dataset = lance::Dataset::open(uri).await.unwrap();
    dataset
        .create_index(
            &["__global_attrs__.id"],
            lance_index::IndexType::BTree,
            None,
            &lance_index::scalar::ScalarIndexParams::default(),
            true,
        )
        .await
        .unwrap();
}

// ---------------------------------------------------------------- Planning

/// Plan time against the chunk count: arrays of 10^3 to 10^7 chunks of 1000 records, metadata
/// only (every chunk missing reads as the fill value). Times in milliseconds, medians.
async fn plan_section(args: &Args) -> Vec<(u64, String, f64, f64, f64)> {
    let mut out = Vec::new();
    let grids: Vec<(u64, Vec<u64>)> = (3..=7)
        .map(|e| (10u64.pow(e), vec![10u64.pow(e)]))
        .chain([(10_000_000, vec![1000, 10_000])])
        .collect();
    for (chunks, grid) in grids {
        let name = grid
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("x");
        let path = args.dir.join(format!("plan_{name}.zarr"));
        std::fs::create_dir_all(&path).unwrap();
        let mut meta = record_metadata(chunks * 1000, true);
        let chunk_shape: Vec<u64> = match grid.len() {
            1 => vec![1000],
            _ => vec![10, 100],
        };
        let shape: Vec<u64> = grid.iter().zip(&chunk_shape).map(|(g, c)| g * c).collect();
        meta["shape"] = serde_json::json!(shape);
        meta["chunk_grid"]["configuration"]["chunk_shape"] = serde_json::json!(chunk_shape);
        meta["dimension_names"] = match grid.len() {
            1 => serde_json::json!(["i"]),
            _ => serde_json::json!(["i", "j"]),
        };
        std::fs::write(path.join("zarr.json"), meta.to_string()).unwrap();
        let ctx = ndfusion::new_session_context();
        let location = path.to_string_lossy().to_string();
        ctx.register_table(
            "t",
            Arc::new(ndfusion::ZarrTable::open(&location).await.unwrap()),
        )
        .unwrap();
        let plan = |query: String| {
            let ctx = ctx.clone();
            async move {
                let df = ctx.sql(&query).await.unwrap();
                df.create_physical_plan().await.unwrap();
            }
        };
        let ms = |(seconds, _): (f64, _)| seconds * 1000.0;
        let whole = ms(median(|| plan("SELECT sum(value) FROM t".into())).await);
        let half = shape[0] / 2;
        let range =
            ms(median(|| plan(format!("SELECT sum(value) FROM t WHERE i >= {half}"))).await);
        let limit = ms(median(|| async {
            let batches = ctx
                .sql("SELECT * FROM t LIMIT 10")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
        })
        .await);
        println!("plan: {chunks} chunks ({name}): {whole:.2} / {range:.2} / {limit:.2} ms");
        out.push((chunks, name, whole, range, limit));
    }
    out
}

// ---------------------------------------------------------------- Memory

/// Peak memory of full scans of a 2 GB array (80M records, 80 zstd chunks of 25 MB decoded),
/// each query in a process of its own, without a limit and with the pool limited to 128 MiB
/// (each of the 2 partitions then keeps one chunk read in flight instead of two).
fn memory_section(args: &Args, peaks: &mut Vec<(String, String, f64, f64)>) {
    const RECORDS: u64 = 80_000_000;
    let path = args.dir.join(format!("records_{RECORDS}_zstd.zarr"));
    if !path.join("zarr.json").exists() {
        println!("generating {}", path.display());
        generate_zarr(&path, RECORDS, true);
    }
    let location = path.to_string_lossy().to_string();
    for limit in [None, Some(128usize << 20)] {
        let group = match limit {
            None => "Zarr 80M records (2.0 GB), zstd, no memory limit".to_string(),
            Some(l) => format!(
                "Zarr 80M records (2.0 GB), zstd, memory limit {} MiB",
                l >> 20
            ),
        };
        for query in [
            "SELECT sum(value) FROM t",
            "SELECT count(*) FROM t WHERE flag = 3",
            "SELECT value FROM t",
        ] {
            if let Some((before, peak)) = peak_memory_limited("zarr", &location, query, limit) {
                println!("{group}: {query}: {before:.0} -> {peak:.0} MiB");
                peaks.push((group.clone(), query.to_string(), before, peak));
            }
        }
    }
}

/// A process of the bench's cluster, killed when dropped.
struct ClusterProcess(std::process::Child);

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ndfusion <args>` in the background (its output in the temporary folder), once `port`
/// accepts connections.
fn start_cluster_process(args: &[String], port: u16) -> ClusterProcess {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
    command.args(args);
    let log = std::env::temp_dir().join(format!("ndfusion-bench-{port}.log"));
    let child = servers::spawn_logged(command, &log).unwrap();
    assert!(
        servers::wait_for_port(port, std::time::Duration::from_secs(60)),
        "ndfusion {args:?} did not start (see {})",
        log.display()
    );
    ClusterProcess(child)
}

/// The overhead of distribution on one machine: the Zarr full scan and a sum over the 10,000
/// member collection, locally, on a standalone (in-process) Ballista cluster, and on a
/// scheduler and two executor processes on 127.0.0.1, all with 4 target partitions.
async fn cluster_section(args: &Args, rows: &mut Vec<Row>) {
    let path = args.dir.join(format!("records_{}_zstd.zarr", args.records));
    if !path.join("zarr.json").exists() {
        println!("generating {}", path.display());
        generate_zarr(&path, args.records, true);
    }
    let collection = args.dir.join("collection_10k");
    if !collection
        .join(format!("m{:05}.zarr", MEMBERS - 1))
        .join("zarr.json")
        .exists()
    {
        println!("generating {}", collection.display());
        generate_collection(&collection);
    }
    let scheduler_port = servers::free_port();
    let _scheduler = start_cluster_process(
        &[
            "scheduler".into(),
            "--bind".into(),
            format!("127.0.0.1:{scheduler_port}"),
        ],
        scheduler_port,
    );
    let _executors: Vec<ClusterProcess> = (0..2)
        .map(|_| {
            let port = servers::free_port();
            start_cluster_process(
                &[
                    "executor".into(),
                    "--scheduler".into(),
                    format!("127.0.0.1:{scheduler_port}"),
                    "--bind".into(),
                    format!("127.0.0.1:{port}"),
                    "--concurrency".into(),
                    "2".into(),
                ],
                port,
            )
        })
        .collect();
    let contexts = [
        ("local", ndfusion::new_session_context()),
        (
            "standalone cluster",
            ndfusion::new_standalone_context(4).await.unwrap(),
        ),
        (
            "scheduler + 2 executors",
            ndfusion::new_cluster_context(&format!("df://127.0.0.1:{scheduler_port}"))
                .await
                .unwrap(),
        ),
    ];
    let array = format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
        path.display()
    );
    let members = format!(
        "CREATE EXTERNAL TABLE c STORED AS ZARR LOCATION '{}/*.zarr'",
        collection.display()
    );
    let queries = [
        (
            format!("Zarr {}M records, zstd", args.records / 1_000_000),
            "SELECT sum(value) FROM t",
        ),
        (
            format!("{MEMBERS} Zarr stores x {MEMBER_RECORDS} records, zstd"),
            "SELECT sum(value) FROM c",
        ),
        (
            "no table (the cost of a job)".to_string(),
            "SELECT count(*) FROM (VALUES (1), (2)) AS v(x)",
        ),
    ];
    let mut local_times = Vec::new();
    for (name, ctx) in &contexts {
        for sql_text in [
            "SET datafusion.execution.target_partitions = 4",
            array.as_str(),
            members.as_str(),
        ] {
            ctx.sql(sql_text).await.unwrap().collect().await.unwrap();
        }
        for (i, (group, query)) in queries.iter().enumerate() {
            // The first query of a table opens it where the plan runs (then kept).
            let start = Instant::now();
            sql(ctx, query).await;
            let first = start.elapsed().as_secs_f64();
            let (time, _) = median(|| sql(ctx, query)).await;
            if *name == "local" {
                local_times.push((first, time));
                continue;
            }
            rows.push(Row {
                group: group.clone(),
                query: format!("`{query}` on a {name}, first query of the table"),
                ours: first,
                baseline: "ndfusion in one process, first query".into(),
                theirs: Some(local_times[i].0),
            });
            rows.push(Row {
                group: group.clone(),
                query: format!("`{query}` on a {name}, median of 5"),
                ours: time,
                baseline: "ndfusion in one process".into(),
                theirs: Some(local_times[i].1),
            });
        }
    }
}

/// Records of the cluster benchmark on S3 (issue 42): 10 GB decoded, 400 zstd chunks.
const CLUSTER_RECORDS: u64 = 400_000_000;

/// Runs of each query after the first, in the cluster benchmark on S3 (its scans are long).
const CLUSTER_REPEATS: usize = 3;

/// A 10 GB array (400M records, zstd) on SeaweedFS on 127.0.0.1, read by ndfusion in one
/// process and through a scheduler (default `--target-task-bytes`) and 1, 2 and 4 executors
/// of 2 task slots each: wall times (first query and median of 3), the scan's tasks and the
/// longest task of those runs (from the executors' logs: "Finished task ... in").
async fn cluster_s3_section(args: &Args, rows: &mut Vec<Row>) {
    let path = args
        .dir
        .join(format!("records_{CLUSTER_RECORDS}_zstd.zarr"));
    if !path.join("zarr.json").exists() {
        println!("generating {}", path.display());
        generate_zarr(&path, CLUSTER_RECORDS, true);
    }
    let server = servers::seaweedfs("bench");
    upload_to_s3(&server, &path, "big.zarr").await;
    let create = format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 's3://bench/big.zarr' OPTIONS \
         ('aws.endpoint' '{}', 'aws.allow_http' 'true', 'aws.access_key_id' '{}', \
         'aws.secret_access_key' '{}', 'aws.region' 'us-east-1')",
        server.endpoint(),
        servers::S3_KEY_ID,
        servers::S3_SECRET
    );
    let n = CLUSTER_RECORDS;
    let (lo, hi) = (n / 2, n / 2 + n / 100);
    let queries = [
        (
            "full sum".to_string(),
            "SELECT sum(value) FROM t".to_string(),
        ),
        (
            "1% dimension range".to_string(),
            format!("SELECT sum(value) FROM t WHERE i >= {lo} AND i < {hi}"),
        ),
    ];
    let group = format!(
        "Zarr {}M records (10 GB decoded), zstd, S3 (SeaweedFS, loopback)",
        n / 1_000_000
    );
    let local = ndfusion::new_session_context();
    local.sql(&create).await.unwrap().collect().await.unwrap();
    let mut local_times = Vec::new();
    for (_, query) in &queries {
        local_times.push(timed_runs(&local, query).await);
    }
    for executors in [1, 2, 4] {
        let cluster = BenchCluster::start(executors, &server.endpoint());
        let ctx = ndfusion::new_cluster_context(&cluster.url()).await.unwrap();
        ctx.sql(&create).await.unwrap().collect().await.unwrap();
        for ((label, query), (local_first, local_median)) in queries.iter().zip(&local_times) {
            let mark = cluster.log_ends();
            let (first, time) = timed_runs(&ctx, query).await;
            let longest = (cluster.finished_since(&mark).into_iter()).fold(0.0, f64::max);
            let tasks = scan_partitions(&ctx, query).await;
            println!(
                "{executors} executors: {label}: first {first:.2} s (local {local_first:.2}), \
                 median {time:.2} s (local {local_median:.2}), {tasks} scan tasks, longest \
                 task {longest:.2} s"
            );
            rows.push(Row {
                group: group.clone(),
                query: format!(
                    "`{query}` on scheduler + {executors} executors: {tasks} scan tasks, \
                     longest task {longest:.2} s, first query {first:.2} s"
                ),
                ours: time,
                baseline: format!("ndfusion in one process (first query {local_first:.2} s)"),
                theirs: Some(*local_median),
            });
        }
    }
}

/// The first run's time and the median of the next `CLUSTER_REPEATS`, in seconds.
async fn timed_runs(ctx: &datafusion::prelude::SessionContext, query: &str) -> (f64, f64) {
    let start = Instant::now();
    sql(ctx, query).await;
    let first = start.elapsed().as_secs_f64();
    let mut times = Vec::new();
    for _ in 0..CLUSTER_REPEATS {
        let start = Instant::now();
        sql(ctx, query).await;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    (first, times[CLUSTER_REPEATS / 2])
}

/// The partitions of the query's scan, as EXPLAIN shows them (on a cluster, its tasks).
async fn scan_partitions(ctx: &datafusion::prelude::SessionContext, query: &str) -> usize {
    let batches = (ctx.sql(&format!("EXPLAIN {query}")).await.unwrap())
        .collect()
        .await
        .unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let count = plan.split("partitions=").nth(1).expect("a scan");
    count[..count.find(|c: char| !c.is_ascii_digit()).unwrap()]
        .parse()
        .unwrap()
}

/// A scheduler and executors of 2 slots on 127.0.0.1, logging each task they finish.
struct BenchCluster {
    port: u16,
    logs: Vec<PathBuf>,
    _processes: Vec<ClusterProcess>,
}

impl BenchCluster {
    /// The processes allow requests to `endpoint` (the loopback S3 server).
    fn start(executors: usize, endpoint: &str) -> BenchCluster {
        let port = servers::free_port();
        let scheduler = [
            "scheduler".into(),
            "--bind".into(),
            format!("127.0.0.1:{port}"),
            "--allow-endpoint".into(),
            endpoint.to_string(),
        ];
        let mut processes = vec![start_cluster_process(&scheduler, port)];
        let mut logs = Vec::new();
        for _ in 0..executors {
            let flight = servers::free_port();
            let log = std::env::temp_dir().join(format!("ndfusion-bench-{flight}.log"));
            let _ = std::fs::remove_file(&log);
            let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
            command.env("RUST_LOG", "info").args([
                "executor".to_string(),
                "--scheduler".into(),
                format!("127.0.0.1:{port}"),
                "--bind".into(),
                format!("127.0.0.1:{flight}"),
                "--concurrency".into(),
                "2".into(),
                "--allow-endpoint".into(),
                endpoint.to_string(),
            ]);
            processes.push(ClusterProcess(
                servers::spawn_logged(command, &log).unwrap(),
            ));
            assert!(servers::wait_for_port(
                flight,
                std::time::Duration::from_secs(60)
            ));
            logs.push(log);
        }
        BenchCluster {
            port,
            logs,
            _processes: processes,
        }
    }

    fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.port)
    }

    /// Where each executor's log ends now.
    fn log_ends(&self) -> Vec<usize> {
        (self.logs.iter())
            .map(|log| std::fs::read(log).map_or(0, |b| b.len()))
            .collect()
    }

    /// The seconds of each task the executors finished since `ends` ([`Self::log_ends`]).
    fn finished_since(&self, ends: &[usize]) -> Vec<f64> {
        let mut tasks = Vec::new();
        for (log, &end) in self.logs.iter().zip(ends) {
            let bytes = std::fs::read(log).unwrap_or_default();
            let text = String::from_utf8_lossy(bytes.get(end..).unwrap_or_default());
            for line in text.lines().filter(|l| l.contains("Finished task")) {
                let took = line.rsplit(" in ").next().unwrap_or("");
                tasks.extend(debug_duration_seconds(took.trim()));
            }
        }
        tasks
    }
}

/// A `Duration`'s `{:?}` text (`1.5s`, `850.2ms`, `12µs`) in seconds.
fn debug_duration_seconds(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" | "us" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale)
}

/// Rows of the COPY benchmark (issue 40): 2 x 10^7 records of {id int64, value float64,
/// x float32, y float32, flag uint8}, 25 bytes each.
const COPY_ROWS: u64 = 20_000_000;

/// `COPY (query) TO '...' STORED AS ZARR` of a struct array against zarr-python 3.4.2 writing
/// the same structured array (same fields, same elements per chunk, bytes + zstd level 3).
/// Both make their rows first (ndfusion from generate_series, Python with numpy) and write to
/// local disk; each write goes to a fresh location.
async fn copy_section(args: &Args, rows: &mut Vec<Row>, py: bool) {
    let dir = args.dir.join("copy");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let per_chunk = (2 << 20) / RECORD as u64;
    let ctx = ndfusion::new_session_context();
    let mut n = 0;
    let (ours, _) = median(|| {
        n += 1;
        let target = dir.join(format!("ndfusion_{n}.zarr"));
        let sql = format!(
            "COPY (SELECT value AS id, CAST(value AS DOUBLE) * 0.5 AS value, \
             CAST(value AS REAL) AS x, CAST(-value AS REAL) AS y, \
             CAST(value % 7 AS TINYINT UNSIGNED) AS flag FROM generate_series(1, {COPY_ROWS})) \
             TO '{}' STORED AS ZARR OPTIONS ('chunks' 'dim_0={per_chunk}')",
            target.display()
        );
        let ctx = &ctx;
        async move {
            ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        }
    })
    .await;
    let theirs = if py {
        let script = format!(
            r#"{PY_TIMER}
import numpy as np, zarr, itertools
from zarr.codecs import BytesCodec, ZstdCodec
n = {COPY_ROWS}
counter = itertools.count()
dt = np.dtype([("id", "<i8"), ("value", "<f8"), ("x", "<f4"), ("y", "<f4"), ("flag", "u1")])
def write():
    v = np.arange(1, n + 1, dtype="<i8")
    a = np.empty(n, dtype=dt)
    a["id"] = v; a["value"] = v * 0.5; a["x"] = v; a["y"] = -v.astype("<f4"); a["flag"] = v % 7
    z = zarr.create_array("{dir}/python_%d.zarr" % next(counter), shape=(n,), chunks=({per_chunk},),
                          dtype=dt, serializer=BytesCodec(endian="little"),
                          compressors=[ZstdCodec(level=3)])
    z[:] = a
print(json.dumps({{"copy": med(write)}}))
"#,
            dir = dir.display()
        );
        python_medians(&script).and_then(|v| v["copy"].as_f64())
    } else {
        None
    };
    rows.push(Row {
        group: format!("struct array {}M records, zstd", COPY_ROWS / 1_000_000),
        query: "COPY ... TO '...' STORED AS ZARR (rows made by the query)".into(),
        ours,
        baseline: "zarr-python 3.4.2 create_array + a[:] = numpy records".into(),
        theirs,
    });
    copy_dataset(args, &dir, rows, py).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// COPY of the 100M-cell dataset written back as a dataset: a 1% time range (10 days, one
/// source chunk row) and monthly means (33 x 100 x 1000), against xarray 2026.9 + dask writing
/// the same selection (`ds.sel(...).to_zarr()`) and resample (`ds.resample(time="MS").mean()
/// .to_zarr()`). Both write Zarr v3 with consolidated metadata, zstd, float32 values and the
/// chunks xarray picks (10 and 1 time steps of 100 x 1000); the Python side then checks that
/// ndfusion's stores hold what its own do.
async fn copy_dataset(args: &Args, dir: &Path, rows: &mut Vec<Row>, py: bool) {
    let Some(path) = (if py { dataset_location(args) } else { None }) else {
        println!("copy of the dataset skipped: it is written by xarray (python3.12 not found)");
        return;
    };
    let location = path.to_string_lossy().to_string();
    let ctx = ndfusion::new_session_context();
    let table = ndfusion::ZarrTable::open(&location).await.unwrap();
    ctx.register_table("d", Arc::new(table)).unwrap();
    let queries = [
        (
            "range",
            "SELECT time, lat, lon, temp FROM d WHERE time BETWEEN '2001-05-15' AND '2001-05-24'",
            "time=10",
        ),
        (
            "monthly",
            "SELECT date_trunc('month', time) AS time, lat, lon, CAST(avg(temp) AS REAL) AS temp \
             FROM d GROUP BY 1, 2, 3",
            "time=1",
        ),
    ];
    let mut ours = Vec::new();
    for (name, query, chunks) in queries {
        let mut n = 0;
        let (secs, _) = median(|| {
            n += 1;
            let sql = format!(
                "COPY ({query}) TO '{}' STORED AS ZARR \
                 OPTIONS ('dimensions' 'time,lat,lon', 'chunks' '{chunks}')",
                dir.join(format!("ndfusion_{name}_{n}.zarr")).display()
            );
            let ctx = &ctx;
            async move {
                ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            }
        })
        .await;
        ours.push(secs);
    }
    let script = format!(
        r#"{PY_TIMER}
import itertools, warnings, xarray as xr
warnings.simplefilter("ignore")
ds = xr.open_zarr({location:?})
counter = itertools.count()
def out(name):
    return "{dir}/xarray_%s_%d.zarr" % (name, next(counter))
def selected():
    ds.sel(time=slice("2001-05-15", "2001-05-24")).to_zarr(out("range"), zarr_format=3, consolidated=True)
def monthly():
    ds.resample(time="MS").mean().to_zarr(out("monthly"), zarr_format=3, consolidated=True)
r = {{"range": med(selected), "monthly": med(monthly)}}
# The same stores: ndfusion's first write of each against xarray's own.
xr.testing.assert_equal(xr.open_zarr("{dir}/ndfusion_range_1.zarr").load(), ds.sel(time=slice("2001-05-15", "2001-05-24")).load())
xr.testing.assert_allclose(xr.open_zarr("{dir}/ndfusion_monthly_1.zarr").load(), ds.resample(time="MS").mean().load(), rtol=1e-6)
print(json.dumps(r))
"#,
        dir = dir.display()
    );
    let theirs = python_medians(&script);
    let group = "xarray dataset 1000 x 100 x 1000 float32, zstd, written back".to_string();
    for ((name, query), ours) in [
        ("range", "COPY 1% time range (10 days) ... 'dimensions'"),
        (
            "monthly",
            "COPY monthly means (GROUP BY month, lat, lon) ... 'dimensions'",
        ),
    ]
    .into_iter()
    .zip(ours)
    {
        rows.push(Row {
            group: group.clone(),
            query: query.into(),
            ours,
            baseline: match name {
                "range" => "xarray: ds.sel(time=slice(...)).to_zarr()".into(),
                _ => "xarray + dask: ds.resample(time=\"MS\").mean().to_zarr()".into(),
            },
            theirs: theirs.as_ref().and_then(|v| v[name].as_f64()),
        });
    }
}
