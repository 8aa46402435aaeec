//! A cluster that finishes what it starts (issue 42): tasks longer than the executor timeout,
//! executors killed in the middle of a query, a scheduler restarted under running executors.
//! Real scheduler and executor processes with the token and TLS on; the data is served by a
//! throttled nginx, so a task takes as long as a test needs, and its access log counts how
//! often each chunk was read.

use std::collections::BTreeMap;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{ndfusion, repo, text, Cluster, Secrets};
use crate::servers::{nginx_throttled, Server};
use crate::terminal::write_slow_array;

/// The executor timeout of these clusters (seconds); a lost executor is noticed within 1.25
/// of it (the README's bound).
const TIMEOUT: u64 = 10;

/// A table of `chunks` chunks of 64 KiB, each served at 32 KiB/s and read one at a time per
/// task: 2 s a chunk. Returns the statements that query it, `partitions` tasks wide.
fn slow_table(chunks: usize, partitions: usize) -> (tempfile::TempDir, Server, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    write_slow_array(root.path(), chunks);
    let server = nginx_throttled(root.path(), 32 * 1024);
    let statements = [
        format!("SET datafusion.execution.target_partitions = {partitions}"),
        format!(
            "CREATE EXTERNAL TABLE slow STORED AS ZARR LOCATION '{}/slow.zarr' \
             OPTIONS ('client.allow_http' 'true', 'chunks_in_flight' '1')",
            server.endpoint()
        ),
        "SELECT count(*), sum(value) FROM slow".to_string(),
    ];
    let mut args = vec!["--quiet".to_string(), "--format".into(), "csv".into()];
    for statement in statements {
        args.extend(["-c".to_string(), statement]);
    }
    (root, server, args)
}

/// How often each chunk was requested (nginx logs a request once it ends, killed ones too).
fn chunk_reads(server: &Server) -> BTreeMap<String, usize> {
    let mut reads = BTreeMap::new();
    for request in server.requests() {
        if let Some(path) = request.split_whitespace().nth(1) {
            if path.contains("/slow.zarr/c/") {
                *reads.entry(path.to_string()).or_insert(0) += 1;
            }
        }
    }
    reads
}

/// The query on the cluster, started in the background.
fn start_query(cluster: &Cluster, secrets: &Secrets, args: &[String]) -> Child {
    let mut on_cluster = vec!["--cluster".to_string(), cluster.url()];
    on_cluster.extend(secrets.client_args());
    on_cluster.extend(args.iter().cloned());
    Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(&on_cluster)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `client` at most `bound`, then kills it and fails with the cluster's logs.
fn finish(mut client: Child, bound: Duration, cluster: &Cluster) -> (Output, Duration) {
    let start = Instant::now();
    while client.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            let _ = client.kill();
            panic!("the query still runs after {bound:?}\n{}", cluster.logs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (client.wait_with_output().unwrap(), start.elapsed())
}

/// The query succeeded with the slow table's answer, as the CLI prints it.
fn assert_slow_answer(out: &Output, chunks: usize, cluster: &Cluster) {
    let n = (chunks * 8192) as u64;
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        cluster.logs()
    );
    assert_eq!(
        text(&out.stdout),
        format!("count(*),sum(slow.value)\n{n},{}.0\n", n * (n - 1) / 2)
    );
}

/// One task of about 64 s on an executor with one slot (it cannot poll while the task runs)
/// and a timeout of 10 s: the executor stays, the task runs once, the answer is right.
#[test]
fn tasks_longer_than_the_executor_timeout_finish_once() {
    let secrets = Secrets::new();
    let cluster = Cluster::start_with(1, 1, TIMEOUT, &secrets.process_args());
    let chunks = 32;
    let (_root, server, args) = slow_table(chunks, 1);
    let started = Instant::now();
    let (out, took) = finish(
        start_query(&cluster, &secrets, &args),
        Duration::from_secs(240),
        &cluster,
    );
    assert_slow_answer(&out, chunks, &cluster);
    assert!(
        took > Duration::from_secs(6 * TIMEOUT),
        "the task took {took:?}: not longer than the test needs"
    );
    let reads = chunk_reads(&server);
    assert_eq!(reads.len(), chunks, "{reads:?}");
    let twice: Vec<_> = reads.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "chunks read more than once: {twice:?}\n{}",
        cluster.logs()
    );
    assert!(
        !cluster.scheduler_log().contains("heartbeat timed out"),
        "{}",
        cluster.logs()
    );
    eprintln!("a {took:?} task ({:?} in all) ran once", started.elapsed());
}

/// Two executors of one slot each, a task of 16 s on each; one executor is killed 6 s in: its
/// task runs again on the other, the answer is right, and the loss was noticed within 1.25
/// timeouts. Then every executor is killed under a query: it fails within the README's bound
/// (1.25 timeouts to notice the last loss, one more timeout alone) with an error saying why.
#[test]
fn a_lost_executor_costs_its_tasks_and_losing_all_fails_the_query() {
    let secrets = Secrets::new();
    let mut cluster = Cluster::start_with(2, 1, TIMEOUT, &secrets.process_args());
    let chunks = 16;
    let (_root, server, args) = slow_table(chunks, 2);
    let client = start_query(&cluster, &secrets, &args);
    // Both tasks are running when each executor has read a chunk.
    let start = Instant::now();
    while chunk_reads(&server).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(4));
    cluster.executors[0].kill();
    let killed = Instant::now();
    let (out, _) = finish(client, Duration::from_secs(240), &cluster);
    assert_slow_answer(&out, chunks, &cluster);
    let reads = chunk_reads(&server);
    assert_eq!(reads.len(), chunks);
    assert!(
        reads.values().any(|n| *n > 1),
        "no chunk was read again: the killed executor's task did not run again\n{reads:?}"
    );
    let noticed = cluster.scheduler_log().contains("heartbeat timed out");
    assert!(noticed, "{}", cluster.logs());
    eprintln!(
        "one executor lost: the query ended {:?} after the kill",
        killed.elapsed()
    );

    // Every executor lost.
    let client = start_query(&cluster, &secrets, &args);
    let before = chunk_reads(&server).values().sum::<usize>();
    let start = Instant::now();
    while chunk_reads(&server).values().sum::<usize>() == before {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.executors[1].kill();
    let bound = Duration::from_secs(TIMEOUT * 5 / 4 + TIMEOUT + 15);
    let (out, took) = finish(client, bound, &cluster);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{}", cluster.logs());
    assert!(
        stderr.contains("no executor of the cluster has answered"),
        "{stderr}\n{}",
        cluster.logs()
    );
    eprintln!("every executor lost: the query failed {took:?} after the kill");
}

/// A scheduler killed and started again on its address while executors run: the query it
/// was running fails, the executors register again, and the next query answers.
#[test]
fn executors_serve_a_restarted_scheduler() {
    let secrets = Secrets::new();
    let mut cluster = Cluster::start_with(2, 2, TIMEOUT, &secrets.process_args());
    let sql = [
        "--quiet",
        "--format",
        "csv",
        "-c",
        "CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION 'tests/data/zarr_v3/grid_2d.zarr'",
        "-c",
        "SELECT count(*), sum(temp) FROM g",
    ]
    .map(String::from);
    let local = ndfusion(&sql);
    assert!(local.status.success(), "{}", text(&local.stderr));
    let query = |cluster: &Cluster| {
        let mut args = vec!["--cluster".to_string(), cluster.url()];
        args.extend(secrets.client_args());
        args.extend(sql.iter().cloned());
        ndfusion(&args)
    };
    assert!(query(&cluster).status.success(), "{}", cluster.logs());
    // A query running when the scheduler dies ends with an error.
    let (_root, server, args) = slow_table(8, 1);
    let client = start_query(&cluster, &secrets, &args);
    let start = Instant::now();
    while chunk_reads(&server).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.restart_scheduler();
    let (out, took) = finish(client, Duration::from_secs(30), &cluster);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    eprintln!(
        "the running query failed {took:?} after the restart: {}",
        text(&out.stderr).trim()
    );
    let start = Instant::now();
    loop {
        let out = query(&cluster);
        if out.status.success() {
            assert_eq!(text(&out.stdout), text(&local.stdout));
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no answer 60 s after the restart: {}\n{}",
            text(&out.stderr),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("a restarted scheduler answered after {:?}", start.elapsed());
}

/// The scan line of an EXPLAIN's physical plan, with its partition count.
async fn scan_line(ctx: &datafusion::prelude::SessionContext, query: &str) -> (String, usize) {
    let df = ctx.sql(&format!("EXPLAIN {query}")).await.unwrap();
    let batches = df.collect().await.unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let line = (plan.lines())
        .find(|l| l.contains("ScanExec:"))
        .unwrap_or_else(|| panic!("no scan in\n{plan}"));
    let count = line.split("partitions=").nth(1).unwrap();
    let count = count[..count.find(|c: char| !c.is_ascii_digit()).unwrap()]
        .parse()
        .unwrap();
    (line.to_string(), count)
}

/// A scheduler cuts scans into tasks of `--target-task-bytes` (decoded bytes read): a large
/// selection makes more tasks than the session's target partitions, a small one keeps them;
/// EXPLAIN on the cluster shows the count and the size, and the answer is the local one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_are_cut_into_tasks_of_the_target_size() {
    let secrets = Secrets::new();
    let sized = ["--target-task-bytes".to_string(), "100M".into()];
    let cluster = Cluster::launch(2, 2, 20, &sized, &secrets.process_args());
    let remote = ndfusion::new_cluster_context_with(&cluster.url(), &secrets.security())
        .await
        .unwrap();
    let local = ndfusion::new_session_context();
    let big = repo().join("tests/data/zarr_v3/ten_million_chunks.zarr");
    let floats = repo().join("tests/data/collections/floats");
    for ctx in [&remote, &local] {
        for statement in [
            "SET datafusion.execution.target_partitions = 2".to_string(),
            format!(
                "CREATE EXTERNAL TABLE big STORED AS ZARR LOCATION '{}'",
                big.display()
            ),
            format!(
                "CREATE EXTERNAL TABLE f STORED AS ZARR LOCATION '{}/*.zarr'",
                floats.display()
            ),
        ] {
            ctx.sql(&statement).await.unwrap().collect().await.unwrap();
        }
    }
    // Chunks of 1000 elements of 13 bytes: 2000 chunks are 24.8 MiB, one task's worth.
    let (line, small) = scan_line(&remote, "SELECT sum(pressure) FROM big WHERE i < 2000000").await;
    assert_eq!(small, 2, "{line}");
    assert!(
        line.contains("(tasks of 100.0 MiB, 24.8 MiB read)"),
        "{line}"
    );
    // 100,000 chunks are 1.2 GiB: 13 tasks of at most 100 MiB, more than the 2 asked for.
    let query = "SELECT count(*), sum(pressure) FROM big WHERE i < 100000000";
    let (line, large) = scan_line(&remote, query).await;
    assert_eq!(large, 13, "{line}");
    assert!(
        line.contains("(tasks of 100.0 MiB, 1.2 GiB read)"),
        "{line}"
    );
    // Locally the session's target partitions alone.
    let (line, here) = scan_line(&local, query).await;
    assert_eq!(here, 2, "{line}");
    assert!(!line.contains("tasks of"), "{line}");
    // A collection's tasks are sized by its members' reads.
    let (line, _) = scan_line(&remote, "SELECT sum(temp) FROM f").await;
    assert!(line.contains("(tasks of 100.0 MiB, "), "{line}");

    let answer = |ctx: datafusion::prelude::SessionContext| async move {
        let batches = ctx.sql(query).await?.collect().await?;
        Ok::<_, datafusion::error::DataFusionError>(
            arrow::util::pretty::pretty_format_batches(&batches)?.to_string(),
        )
    };
    let on_cluster = answer(remote.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    assert_eq!(on_cluster, answer(local.clone()).await.unwrap());
}
