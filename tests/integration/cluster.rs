//! ndfusion on a Ballista cluster of real processes on 127.0.0.1: `ndfusion scheduler`, two
//! `ndfusion executor`s, and clients (`ndfusion --cluster`, `new_cluster_context`) reading
//! tables from the loopback S3 server; and an executor killed in the middle of a query.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::object_stores::{s3_options, s3_store, upload_fixtures, BUCKET};
use crate::servers::{self, free_port};
use crate::slt::{run_sql_files_at_in, Mode};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A process of the cluster, killed when dropped; its output goes to a log file.
struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(name: &str, args: &[String], dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
        command.args(args).current_dir(repo());
        Process {
            name: name.to_string(),
            child: servers::spawn_logged(command, &log).unwrap(),
            log,
        }
    }

    fn log(&self) -> String {
        format!(
            "--- {} ---\n{}",
            self.name,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A scheduler and executors on free ports of 127.0.0.1.
struct Cluster {
    scheduler: Process,
    executors: Vec<Process>,
    port: u16,
    work_dirs: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(executors: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let scheduler = Process::start(
            "scheduler",
            &[
                "scheduler".into(),
                "--bind".into(),
                format!("127.0.0.1:{port}"),
                "--executor-timeout".into(),
                "10".into(),
            ],
            dir.path(),
        );
        wait_for_port(port, &scheduler);
        let mut started = Vec::new();
        let mut work_dirs = Vec::new();
        for e in 0..executors {
            let flight = free_port();
            let work_dir = dir.path().join(format!("work{e}"));
            let executor = Process::start(
                &format!("executor{e}"),
                &[
                    "executor".into(),
                    "--scheduler".into(),
                    format!("127.0.0.1:{port}"),
                    "--bind".into(),
                    format!("127.0.0.1:{flight}"),
                    "--concurrency".into(),
                    "2".into(),
                    "--work-dir".into(),
                    work_dir.display().to_string(),
                ],
                dir.path(),
            );
            wait_for_port(flight, &executor);
            started.push(executor);
            work_dirs.push(work_dir);
        }
        Cluster {
            scheduler,
            executors: started,
            port,
            work_dirs,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.port)
    }

    fn logs(&self) -> String {
        let mut logs = vec![self.scheduler.log()];
        logs.extend(self.executors.iter().map(Process::log));
        logs.join("\n")
    }
}

fn wait_for_port(port: u16, process: &Process) {
    assert!(
        servers::wait_for_port(port, Duration::from_secs(60)),
        "nothing listens on {port}\n{}",
        process.log()
    );
}

/// `ndfusion` with `args`, from the repository root.
fn ndfusion(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// Every `sql/` file's queries on the S3 copy of the fixtures give the local answers on a
/// scheduler and two executors; the command line gives the local output and exit codes, and
/// both executors ran tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_and_two_executors_answer_like_the_local_cli() {
    let server = servers::seaweedfs(BUCKET);
    upload_fixtures(&s3_store(&server)).await;
    let cluster = Cluster::start(2);
    let options = s3_options(&server);

    let ran = run_sql_files_at_in(Mode::Cluster(cluster.url()), "s3://data", &options, |_| {
        false
    })
    .await;
    assert!(ran > 100, "only {ran} records ran\n{}", cluster.logs());

    let with = |location: &str| {
        let pairs: Vec<String> = options
            .iter()
            .map(|(k, v)| format!("'{k}' '{v}'"))
            .collect();
        format!(
            "LOCATION 's3://data/tests/data/{location}' OPTIONS ({})",
            pairs.join(", ")
        )
    };
    let statements = [
        format!("CREATE EXTERNAL TABLE w STORED AS ZARR {}", with("zarr_v3/grid_2d.zarr")),
        format!("CREATE EXTERNAL TABLE o STORED AS ZARR {}", with("datasets/ocean_v3.zarr")),
        format!("CREATE EXTERNAL TABLE f STORED AS ZARR {}", with("collections/floats/*.zarr")),
        format!("CREATE EXTERNAL TABLE m STORED AS LANCE_ND {}", with("lance_nd/many.lance")),
        "SELECT station, max(temp), sum(pressure) FROM w GROUP BY station ORDER BY station".into(),
        "SELECT count(*), round(avg(temp), 4) FROM o WHERE lat > 10".into(),
        "SELECT __global_attrs__.id, count(*), sum(temp) FROM f WHERE __global_attrs__.id <> 'f4' GROUP BY 1 ORDER BY 1".into(),
        "SELECT count(*), sum(v) FROM m WHERE __global_attrs__.id = 'id01234'".into(),
        "SELECT count(*), count(DISTINCT __global_attrs__.id) FROM m".into(),
    ];
    let mut args = vec!["--quiet".to_string(), "--format".into(), "csv".into()];
    for sql in &statements {
        args.push("-c".into());
        args.push(sql.clone());
    }
    let local = ndfusion(&args);
    let mut on_cluster = vec!["--cluster".to_string(), cluster.url()];
    on_cluster.extend(args.iter().cloned());
    let remote = ndfusion(&on_cluster);
    assert!(local.status.success(), "{}", text(&local.stderr));
    assert!(
        remote.status.success(),
        "{}\n{}",
        text(&remote.stderr),
        cluster.logs()
    );
    assert_eq!(text(&remote.stdout), text(&local.stdout));

    // Failing queries fail the same way, with the same message: one the client's planning
    // finds, one a task on an executor finds (a corrupt chunk of member f4).
    for query in ["SELECT nope FROM w", "SELECT sum(temp) FROM f"] {
        let mut failing = args.clone();
        failing.extend(["-c".into(), query.into()]);
        let local = ndfusion(&failing);
        let mut on_cluster = vec!["--cluster".to_string(), cluster.url()];
        on_cluster.extend(failing);
        let remote = ndfusion(&on_cluster);
        assert_eq!(local.status.code(), Some(1), "{query}");
        assert_eq!(remote.status.code(), Some(1), "{query}");
        assert_eq!(text(&remote.stderr), text(&local.stderr), "{query}");
    }

    // Both executors ran tasks: each wrote shuffle files of some job.
    for dir in &cluster.work_dirs {
        let jobs = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        assert!(
            jobs > 0,
            "{} ran no task\n{}",
            dir.display(),
            cluster.logs()
        );
    }
}

/// An executor killed while a query runs: the query ends within a bound, with the local
/// answer (Ballista ran the lost tasks again) or a clear error; it never hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_mid_query_ends_the_query_in_bounded_time() {
    let mut cluster = Cluster::start(2);
    // Two hundred thousand chunks, most of them absent (read as the fill value): seconds of
    // work spread over both executors.
    let args = vec![
        "--quiet".to_string(),
        "--format".into(),
        "csv".into(),
        "-c".into(),
        "SET datafusion.execution.target_partitions = 4".into(),
        "-c".into(),
        "CREATE EXTERNAL TABLE big STORED AS ZARR \
         LOCATION 'tests/data/zarr_v3/ten_million_chunks.zarr'"
            .into(),
        "-c".into(),
        "SELECT count(*), sum(pressure) FROM big WHERE i < 200000000 AND ok".into(),
    ];
    let local = ndfusion(&args);
    assert!(local.status.success(), "{}", text(&local.stderr));

    let mut on_cluster = vec!["--cluster".to_string(), cluster.url()];
    on_cluster.extend(args);
    let mut client = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(&on_cluster)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        client.try_wait().unwrap().is_none(),
        "the query ended before the executor was killed: make it longer"
    );
    cluster.executors[0].kill();

    let start = Instant::now();
    let bound = Duration::from_secs(180);
    while client.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            let _ = client.kill();
            panic!(
                "the query still runs {bound:?} after the kill\n{}",
                cluster.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = client.wait_with_output().unwrap();
    let waited = start.elapsed();
    if out.status.success() {
        assert_eq!(text(&out.stdout), text(&local.stdout));
    } else {
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("Error: "), "{stderr}");
    }
    eprintln!(
        "after the kill the query {} in {waited:?}",
        if out.status.success() {
            "succeeded"
        } else {
            "failed"
        }
    );
}
