//! ndfusion on a Ballista cluster of real processes on 127.0.0.1: `ndfusion scheduler`, two
//! `ndfusion executor`s, and clients (`ndfusion --cluster`, `new_cluster_context`) reading
//! tables from the loopback S3 server; and an executor killed in the middle of a query.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::object_stores::{s3_options, s3_store, upload_fixtures, BUCKET};
use crate::servers::{self, free_port};
use crate::slt::{run_sql_files_at_in, Mode};

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const CLUSTER_KEY_ID: &str = "cluster-key-id";
const CLUSTER_TOKEN: &str = "cluster-session-token";

/// A process of the cluster, killed when dropped; its output goes to a log file.
pub(crate) struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn start(name: &str, args: &[String], dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
        // The processes' own credentials: no request of a client's table may carry them.
        command
            .args(args)
            .current_dir(repo())
            .env("AWS_ACCESS_KEY_ID", CLUSTER_KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", "cluster-secret")
            .env("AWS_SESSION_TOKEN", CLUSTER_TOKEN);
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

    /// A process that has already ended (`true`), to take a cluster's apart.
    fn placeholder() -> Process {
        let mut child = Command::new("true").spawn().unwrap();
        let _ = child.wait();
        Process {
            name: "placeholder".into(),
            child,
            log: PathBuf::new(),
        }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A cluster's token and TLS files, as the README's secured cluster has them: a CA and one
/// certificate for 127.0.0.1 / localhost (written by openssl), and a token file.
pub(crate) struct Secrets {
    dir: tempfile::TempDir,
}

impl Secrets {
    pub(crate) fn new() -> Secrets {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("token"), "test-token-0123456789abcdef\n").unwrap();
        std::fs::write(
            d.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
        )
        .unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                text(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        run(&[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=ndfusion test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat());
        run(&[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "node.key",
                "-out",
                "node.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat());
        run(&[
            "x509",
            "-req",
            "-in",
            "node.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "node.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        // A CA that signed nothing of this cluster's.
        run(&[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "other_ca.key",
                "-out",
                "other_ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=another CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
            ],
        ]
        .concat());
        // A self-signed certificate as `openssl req -x509` makes it (CA:TRUE), for 127.0.0.1.
        run(&[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "self.key",
                "-out",
                "self.pem",
                "-days",
                "2",
                "-subj",
                "/CN=self-signed",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
        ]
        .concat());
        Secrets { dir }
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// What a scheduler and an executor are started with.
    pub(crate) fn process_args(&self) -> Vec<String> {
        let mut args = self.client_args();
        args.extend(["--tls-cert".into(), self.path("node.pem")]);
        args.extend(["--tls-key".into(), self.path("node.key")]);
        args
    }

    /// What `ndfusion --cluster` is given.
    pub(crate) fn client_args(&self) -> Vec<String> {
        vec![
            "--token-file".into(),
            self.path("token"),
            "--tls-ca".into(),
            self.path("ca.pem"),
        ]
    }

    pub(crate) fn security(&self) -> ndfusion::ClusterSecurity {
        ndfusion::ClusterSecurity::none()
            .with_token_file(&self.dir.path().join("token"))
            .unwrap()
            .with_tls(&self.dir.path().join("ca.pem"), None)
            .unwrap()
    }
}

/// A scheduler and executors on free ports of 127.0.0.1.
pub(crate) struct Cluster {
    scheduler: Process,
    scheduler_args: Vec<String>,
    pub(crate) executors: Vec<Process>,
    port: u16,
    work_dirs: Vec<PathBuf>,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A scheduler and `executors` executors, each given `extra` arguments too (`--allow`,
    /// `--allow-endpoint`).
    fn start(executors: usize, extra: &[String]) -> Cluster {
        // The default timeout (20 s): a busy executor on a loaded 2-core machine missed 10 s
        // of polls again and again after its peer was killed.
        Cluster::start_with(executors, 2, 20, extra)
    }

    /// [`Cluster::start`] with `concurrency` task slots per executor and an executor timeout
    /// of `timeout` seconds.
    pub(crate) fn start_with(
        executors: usize,
        concurrency: usize,
        timeout: u64,
        extra: &[String],
    ) -> Cluster {
        Cluster::launch(executors, concurrency, timeout, &[], extra)
    }

    /// [`Cluster::start_with`], the scheduler given `scheduler_extra` arguments too.
    pub(crate) fn launch(
        executors: usize,
        concurrency: usize,
        timeout: u64,
        scheduler_extra: &[String],
        extra: &[String],
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut args: Vec<String> = vec![
            "scheduler".into(),
            "--bind".into(),
            format!("127.0.0.1:{port}"),
            "--executor-timeout".into(),
            timeout.to_string(),
        ];
        args.extend(scheduler_extra.iter().cloned());
        args.extend(extra.iter().cloned());
        let scheduler = Process::start("scheduler", &args, dir.path());
        wait_for_port(port, &scheduler);
        let mut started = Vec::new();
        let mut work_dirs = Vec::new();
        for e in 0..executors {
            let flight = free_port();
            let work_dir = dir.path().join(format!("work{e}"));
            let mut args: Vec<String> = vec![
                "executor".into(),
                "--scheduler".into(),
                format!("127.0.0.1:{port}"),
                "--bind".into(),
                format!("127.0.0.1:{flight}"),
                "--concurrency".into(),
                concurrency.to_string(),
                "--work-dir".into(),
                work_dir.display().to_string(),
            ];
            args.extend(extra.iter().cloned());
            let executor = Process::start(&format!("executor{e}"), &args, dir.path());
            wait_for_port(flight, &executor);
            started.push(executor);
            work_dirs.push(work_dir);
        }
        Cluster {
            scheduler,
            scheduler_args: args,
            executors: started,
            port,
            work_dirs,
            dir,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("df://127.0.0.1:{}", self.port)
    }

    /// What the scheduler has logged so far.
    pub(crate) fn scheduler_log(&self) -> String {
        self.scheduler.log()
    }

    /// Kills the scheduler (SIGKILL) and starts it again on its address.
    pub(crate) fn restart_scheduler(&mut self) {
        self.scheduler.kill();
        self.scheduler =
            Process::start("scheduler-restarted", &self.scheduler_args, self.dir.path());
        wait_for_port(self.port, &self.scheduler);
    }

    pub(crate) fn logs(&self) -> String {
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
pub(crate) fn ndfusion(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// Every `sql/` file's queries on the S3 copy of the fixtures give the local answers on a
/// scheduler and two executors; the command line gives the local output and exit codes, and
/// both executors ran tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_and_two_executors_answer_like_the_local_cli() {
    let server = servers::seaweedfs(BUCKET);
    upload_fixtures(&s3_store(&server)).await;
    // A secured cluster, as the README starts one (token and TLS); the loopback S3 server is
    // an endpoint the operator allows.
    let secrets = Secrets::new();
    let mut extra = secrets.process_args();
    extra.extend(["--allow-endpoint".into(), server.endpoint()]);
    let cluster = Cluster::start(2, &extra);
    let options = s3_options(&server);

    let mode = Mode::Cluster(cluster.url(), secrets.security());
    let ran = run_sql_files_at_in(mode, "s3://data", &options, |_| false).await;
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
    on_cluster.extend(secrets.client_args());
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

    // `ndfusion serve --cluster`: the same answers to a Flight SQL client.
    let token = std::fs::read_to_string(secrets.path("token")).unwrap();
    let mut serve_args = vec!["--cluster".to_string(), cluster.url()];
    serve_args.extend(["--tls-ca".into(), secrets.path("ca.pem")]);
    for create in &statements[..4] {
        serve_args.extend(["-c".into(), create.clone()]);
    }
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let served = crate::serve::Server::start(&serve_args, &[(ndfusion::TOKEN_ENV, token.trim())]);
    let mut client = served.client().await;
    let ctx = ndfusion::new_session_context();
    for create in &statements[..4] {
        ctx.sql(create).await.unwrap();
    }
    for sql in &statements[4..] {
        let local = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let local = arrow::util::pretty::pretty_format_batches(&local).unwrap();
        let remote = crate::serve::query(&mut client, sql).await;
        assert_eq!(
            remote.as_deref(),
            Ok(local.to_string().as_str()),
            "{sql}\n{}\n{}",
            served.log(),
            cluster.logs()
        );
    }
    drop(served);

    // Failing queries fail the same way, with the same message: one the client's planning
    // finds, one a task on an executor finds (a corrupt chunk of member f4).
    for query in ["SELECT nope FROM w", "SELECT sum(temp) FROM f"] {
        let mut failing = args.clone();
        failing.extend(["-c".into(), query.into()]);
        let local = ndfusion(&failing);
        let mut on_cluster = vec!["--cluster".to_string(), cluster.url()];
        on_cluster.extend(secrets.client_args());
        on_cluster.extend(failing);
        let remote = ndfusion(&on_cluster);
        assert_eq!(local.status.code(), Some(1), "{query}");
        assert_eq!(remote.status.code(), Some(1), "{query}");
        assert_eq!(text(&remote.stderr), text(&local.stderr), "{query}");
    }

    // Without the token, with another one, or without TLS, the cluster answers nothing.
    let query = ["-c".to_string(), "SELECT 1".into()];
    let tls_only = ["--tls-ca".to_string(), secrets.path("ca.pem")];
    let wrong = secrets.dir.path().join("wrong");
    std::fs::write(&wrong, "another-token-0123456789").unwrap();
    for (what, security, expected) in [
        ("no token", tls_only.to_vec(), "requires a token"),
        (
            "another token",
            [
                &tls_only[..],
                &["--token-file".into(), wrong.display().to_string()],
            ]
            .concat(),
            "wrong cluster token",
        ),
        (
            "no TLS",
            vec!["--token-file".into(), secrets.path("token")],
            "",
        ),
        (
            "another CA",
            vec![
                "--token-file".into(),
                secrets.path("token"),
                "--tls-ca".into(),
                secrets.path("other_ca.pem"),
            ],
            "is not signed by the cluster's CA",
        ),
    ] {
        let mut args = vec!["--cluster".to_string(), cluster.url()];
        args.extend(security);
        args.extend(query.iter().cloned());
        let out = ndfusion(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.contains(expected), "{what}: {stderr}");
        assert!(!stderr.contains("MetadataMap"), "{what}: {stderr}");
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
    let secrets = Secrets::new();
    let mut cluster = Cluster::start(2, &secrets.process_args());
    // Two hundred thousand chunks, most of them absent (read as the fill value): seconds of
    // work spread over both executors.
    let args = vec![
        "--quiet".to_string(),
        "--format".into(),
        "csv".into(),
        "-c".into(),
        // Tasks of about a second: a Ballista executor whose slots are all busy does not poll
        // the scheduler, and polls are its heartbeats (a task longer than the executor
        // timeout makes its executor look lost).
        "SET datafusion.execution.target_partitions = 48".into(),
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
    on_cluster.extend(secrets.client_args());
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

/// The client's view of a refusal: exit code 1 and one readable line naming what was refused.
fn assert_refused(out: &Output, expected: &[&str], what: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
    assert!(stderr.starts_with("Error: "), "{what}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: {stderr}");
    for part in expected {
        assert!(stderr.contains(part), "{what}: {part:?} not in {stderr}");
    }
    for raw in ["Status {", "MetadataMap", "code: "] {
        assert!(!stderr.contains(raw), "{what}: raw {raw:?} in {stderr}");
    }
}

/// The review's attacks on a cluster started with an allow list, each now refused: files of
/// the cluster's machines read or written through DataFusion's file formats, the processes'
/// credentials sent to a host of the client's choosing, the allow list walked around with
/// escapes and symlinks, redirects to other hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_refuses_what_it_does_not_run() {
    use crate::listener::{path, response, Listener};
    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().canonicalize().unwrap();
    let inside = tempfile::tempdir().unwrap();
    let inside_dir = inside.path().canonicalize().unwrap();
    let data = repo().join("tests/data/zarr_v3").canonicalize().unwrap();
    std::os::unix::fs::symlink(repo().join("tests/data/zarr_v2"), inside_dir.join("v2")).unwrap();

    // An attacker's host: records what reaches it, answers S3 GETs of zarr.json so that the
    // client can create its table.
    let metadata = std::fs::read(data.join("grid_2d.zarr/zarr.json")).unwrap();
    let attacker = Listener::start(move |head| match path(head) {
        p if p.ends_with("/zarr.json") => response("200 OK", &[], &metadata),
        _ => response("404 Not Found", &[], b""),
    });
    // An HTTP store whose chunks redirect to another loopback host.
    let elsewhere = Listener::start(|_| response("200 OK", &[], &[7u8; 4096]));
    let away = elsewhere.url();
    let grid = std::fs::read(data.join("grid_2d.zarr/zarr.json")).unwrap();
    let redirecting = Listener::start(move |head| match path(head) {
        "/grid.zarr/zarr.json" => response("200 OK", &[], &grid),
        p => response("302 Found", &[("location", format!("{away}{p}"))], b""),
    });

    let cluster = Cluster::start(
        2,
        &[
            "--allow".into(),
            data.display().to_string(),
            "--allow".into(),
            inside_dir.display().to_string(),
            "--allow".into(),
            "s3://bucket".into(),
            "--allow".into(),
            redirecting.url(),
            // One reference file allowed alone, not the folder it is in.
            "--allow".into(),
            outside_dir.join("refs_alone.json").display().to_string(),
        ],
    );
    let on_cluster = |statements: &[String]| {
        let mut args = vec![
            "--cluster".to_string(),
            cluster.url(),
            "--quiet".into(),
            "--format".into(),
            "csv".into(),
        ];
        for s in statements {
            args.push("-c".into());
            args.push(s.clone());
        }
        Command::new(env!("CARGO_BIN_EXE_ndfusion"))
            .args(&args)
            .current_dir(repo())
            .env("AWS_ACCESS_KEY_ID", "client-key-id")
            .env("AWS_SECRET_ACCESS_KEY", "client-secret")
            .env_remove("AWS_SESSION_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    // 1. DataFusion's file formats and COPY TO: files outside the allow list are refused, in
    // every format the local session can write; inside it they are read.
    let local = datafusion::prelude::SessionContext::new();
    for (format, file) in [
        ("CSV", "x.csv"),
        ("JSON", "x.json"),
        ("PARQUET", "x.parquet"),
        ("ARROW", "x.arrow"),
    ] {
        for dir in [&outside_dir, &inside_dir] {
            let target = dir.join(file).display().to_string();
            let copy = format!("COPY (SELECT 'secret' AS line) TO '{target}' STORED AS {format}");
            local.sql(&copy).await.unwrap().collect().await.unwrap();
        }
        let read = |dir: &Path| {
            let location = dir.join(file).display().to_string();
            on_cluster(&[
                format!("CREATE EXTERNAL TABLE p STORED AS {format} LOCATION '{location}'"),
                "SELECT line FROM p".into(),
            ])
        };
        let out = read(&outside_dir);
        assert_refused(
            &out,
            &[&format!(
                "a {format} scan of files outside the allowed locations"
            )],
            format,
        );
        assert!(!text(&out.stdout).contains("secret"), "{format}");
        let out = read(&inside_dir);
        assert!(
            out.status.success(),
            "{format} inside: {}",
            text(&out.stderr)
        );
        assert!(text(&out.stdout).contains("secret"), "{format} inside");
    }
    let passwd = on_cluster(&[
        "CREATE EXTERNAL TABLE p (line VARCHAR) STORED AS CSV LOCATION '/etc/passwd'".into(),
        "SELECT line FROM p LIMIT 1".into(),
    ]);
    assert_refused(
        &passwd,
        &["refused by the cluster: a CSV scan"],
        "/etc/passwd",
    );
    assert!(!text(&passwd.stdout).contains("root:"));
    let written = inside_dir.join("written");
    let copy = on_cluster(&[format!(
        "COPY (SELECT 1 AS a) TO '{}/' STORED AS CSV",
        written.display()
    )]);
    assert_refused(&copy, &["writing files (COPY TO"], "COPY TO");
    assert!(!written.exists());
    let table_dir = inside_dir.join("appended");
    std::fs::create_dir_all(&table_dir).unwrap();
    let insert = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE ins (a INT) STORED AS CSV LOCATION '{}/'",
            table_dir.display()
        ),
        "INSERT INTO ins VALUES (1)".into(),
    ]);
    assert_refused(
        &insert,
        &["writing files (COPY TO, INSERT INTO"],
        "INSERT INTO",
    );
    assert_eq!(std::fs::read_dir(&table_dir).unwrap().count(), 0);

    // 2. The processes' own credentials never go to a client's endpoint.
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE e STORED AS ZARR LOCATION 's3://bucket/grid.zarr' \
             OPTIONS ('aws.endpoint' '{}', 'aws.allow_http' 'true', 'aws.region' 'us-east-1', \
             'client.max_retries' '0')",
            attacker.url()
        ),
        "SELECT count(*) FROM e".into(),
    ]);
    assert_refused(
        &out,
        &["'aws.endpoint'", "--allow-endpoint"],
        "aws.endpoint",
    );
    for request in attacker.requests() {
        assert!(!request.contains(CLUSTER_KEY_ID), "{request}");
        assert!(!request.contains(CLUSTER_TOKEN), "{request}");
    }
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{}/grid_2d.zarr' \
             OPTIONS ('gcp.service_account_path' '/etc/shadow')",
            data.display()
        ),
        "SELECT count(*) FROM g".into(),
    ]);
    assert_refused(
        &out,
        &["'gcp.service_account_path'"],
        "gcp.service_account_path",
    );

    // 3. The allow list after normalization: percent-escaped `..`, and a symlink inside an
    // allowed folder that points outside it.
    for location in [
        format!("file://{}/%2e%2e/zarr_v2/grid_2d.zarr", data.display()),
        format!("{}/v2/grid_2d.zarr", inside_dir.display()),
    ] {
        let out = on_cluster(&[
            format!("CREATE EXTERNAL TABLE b STORED AS ZARR LOCATION '{location}'"),
            "SELECT count(*) FROM b".into(),
        ]);
        assert_refused(
            &out,
            &["this cluster only reads locations under"],
            &location,
        );
    }
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE c STORED AS ZARR LOCATION '{}/*/grid_2d.zarr'",
            inside_dir.display()
        ),
        "SELECT count(*) FROM c".into(),
    ]);
    assert_refused(
        &out,
        &["this cluster only reads locations under"],
        "a pattern's member",
    );

    // A Kerchunk reference file in an allowed folder whose references point outside the
    // allow list: the grant the client gives them ('virtual_chunk_containers') is held to
    // the executors' allow list like a location.
    std::fs::copy(
        repo().join("tests/data/kerchunk/demo.nc"),
        outside_dir.join("demo.nc"),
    )
    .unwrap();
    let refs = std::fs::read_to_string(repo().join("tests/data/kerchunk/refs_v1.json"))
        .unwrap()
        .replace(
            "\"demo.nc\"",
            &format!("\"file://{}/demo.nc\"", outside_dir.display()),
        );
    std::fs::write(inside_dir.join("refs.json"), refs).unwrap();
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE k STORED AS ZARR LOCATION '{}/refs.json' \
             OPTIONS ('virtual_chunk_containers' 'file://{}/')",
            inside_dir.display(),
            outside_dir.display()
        ),
        "SELECT sum(temp) FROM k".into(),
    ]);
    assert_refused(
        &out,
        &["this cluster only reads locations under"],
        "a reference file's grant",
    );
    // A reference file allowed alone: the file beside it that its references read is not.
    std::fs::copy(
        repo().join("tests/data/kerchunk/refs_v1.json"),
        outside_dir.join("refs_alone.json"),
    )
    .unwrap();
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE alone STORED AS ZARR LOCATION '{}/refs_alone.json'",
            outside_dir.display()
        ),
        "SELECT sum(temp) FROM alone".into(),
    ]);
    assert_refused(
        &out,
        &["this cluster only reads locations under", "demo.nc"],
        "a file a reference file reads",
    );

    // 4. A chunk that redirects to another host is an error, and that host hears nothing.
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE r STORED AS ZARR LOCATION '{}/grid.zarr' \
             OPTIONS ('client.max_retries' '0')",
            redirecting.url()
        ),
        "SELECT sum(temp) FROM r".into(),
    ]);
    assert_refused(&out, &["redirect to another host refused"], "redirect");
    assert!(
        elsewhere.requests().is_empty(),
        "{:?}",
        elsewhere.requests()
    );

    // What is allowed still runs.
    let out = on_cluster(&[
        format!(
            "CREATE EXTERNAL TABLE ok STORED AS ZARR LOCATION '{}/grid_2d.zarr'",
            data.display()
        ),
        "SELECT count(*) FROM ok".into(),
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stderr),
        cluster.logs()
    );
    assert_eq!(text(&out.stdout), "count(*)\n35\n");
}

/// SIGTERM ends a scheduler or an executor within 10 seconds, also when the other is gone.
#[test]
fn processes_stop_within_ten_seconds_of_sigterm() {
    let mut cluster = Cluster::start(2, &[]);
    let stop = |process: &mut Process, what: &str| {
        let start = Instant::now();
        unsafe { libc::kill(process.child.id() as i32, libc::SIGTERM) };
        while process.child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{what} still runs 10 s after SIGTERM\n{}",
                process.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // An executor whose scheduler is already gone, then one with its scheduler up.
    let mut scheduler = std::mem::replace(&mut cluster.scheduler, Process::placeholder());
    let mut first = cluster.executors.remove(0);
    stop(&mut cluster.executors[0], "an executor");
    stop(&mut scheduler, "the scheduler");
    stop(&mut first, "an executor whose scheduler stopped");
    // A scheduler that died (SIGKILL) under a running executor.
    let mut cluster = Cluster::start(1, &[]);
    cluster.scheduler.kill();
    std::thread::sleep(Duration::from_secs(1));
    stop(
        &mut cluster.executors[0],
        "an executor whose scheduler died",
    );
}

/// A scheduler or executor on an address other hosts reach refuses to start without a token
/// and TLS (it would serve anyone, or take the token in clear); the refusal happens before
/// anything is bound.
#[test]
fn an_exposed_process_without_a_token_refuses_to_start() {
    for args in [
        vec!["scheduler", "--bind", "0.0.0.0:1"],
        vec![
            "executor",
            "--scheduler",
            "127.0.0.1:1",
            "--bind",
            "0.0.0.0:1",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
            .args(&args)
            .env_remove("NDFUSION_CLUSTER_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("give it a token"), "{stderr}");
        assert!(stderr.contains("and TLS"), "{stderr}");
        assert!(stderr.contains("--insecure"), "{stderr}");
    }
    // A token without TLS would cross the network in clear: refused too.
    let secrets = Secrets::new();
    let out = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["scheduler", "--bind", "0.0.0.0:1", "--token-file"])
        .arg(secrets.path("token"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("without TLS"), "{stderr}");
    assert!(!stderr.contains("a token ("), "{stderr}");
}

/// A self-signed certificate used as its own CA (the usual quick test certificate, which TLS
/// refuses as a server's own) stops a scheduler and an executor at start with an error naming
/// the file and saying so, not a connection failure later (issue 38).
#[test]
fn a_self_signed_certificate_as_its_own_ca_is_refused_at_start() {
    let secrets = Secrets::new();
    let tls = [
        "--token-file".to_string(),
        secrets.path("token"),
        "--tls-ca".into(),
        secrets.path("self.pem"),
        "--tls-cert".into(),
        secrets.path("self.pem"),
        "--tls-key".into(),
        secrets.path("self.key"),
    ];
    for process in [
        vec!["scheduler", "--bind", "127.0.0.1:0"],
        vec![
            "executor",
            "--scheduler",
            "127.0.0.1:1",
            "--bind",
            "127.0.0.1:0",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
            .args(&process)
            .args(&tls)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{process:?}: {stderr}");
        let file = format!("invalid option 'tls-cert': {}", secrets.path("self.pem"));
        assert!(stderr.contains(&file), "{stderr}");
        assert!(
            stderr.contains("a self-signed certificate cannot serve as its own CA"),
            "{stderr}"
        );
    }
}

/// An Icechunk table on a cluster: the scan travels with the snapshot the query was planned
/// on (EXPLAIN names it, the executor reads it), the next query after a commit reads the new
/// tip, and virtual chunk containers are held to the executors' allow list like locations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk_snapshots_travel_with_the_plan() {
    use crate::icechunk::{commit_doubled_temperatures, expected, ocean_copy, temps, xarray_temps};
    let want = expected();
    let versions = &want["ocean"]["versions"];
    let (dir, copy) = ocean_copy();
    let virtual_repo = repo().join("tests/data/icechunk/virtual_local.icechunk");
    let cluster = Cluster::start(
        1,
        &[
            "--allow".into(),
            dir.path().canonicalize().unwrap().display().to_string(),
            "--allow".into(),
            virtual_repo.canonicalize().unwrap().display().to_string(),
        ],
    );
    let ctx = ndfusion::new_cluster_context(&cluster.url()).await.unwrap();
    let location = copy.canonicalize().unwrap().display().to_string();
    let sql = |s: String| {
        let ctx = ctx.clone();
        async move {
            let df = ctx.sql(&s).await.map_err(|e| e.to_string())?;
            df.collect().await.map_err(|e| e.to_string())
        }
    };
    sql(format!(
        "CREATE EXTERNAL TABLE s STORED AS ICECHUNK LOCATION '{location}' \
         OPTIONS ('path' 'surface')"
    ))
    .await
    .unwrap();
    let query = "SELECT temp FROM s ORDER BY time, lat DESC, lon".to_string();
    let before = sql(query.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    assert_eq!(temps(&before), xarray_temps(&versions["main"]));
    let plan = sql("EXPLAIN SELECT avg(temp) FROM s".into()).await.unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&plan)
        .unwrap()
        .to_string();
    let tip = want["ocean"]["commits"]["points2"].as_str().unwrap();
    assert!(text.contains(&format!("@{tip}/surface")), "{text}");

    commit_doubled_temperatures(&copy).await;
    let after = sql(query)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    assert_eq!(temps(&after), xarray_temps(&versions["experiment"]));

    // The container's files are outside the executors' allow list: refused there, though
    // the client (which planned the query) could read them.
    let nc = repo()
        .join("tests/data/icechunk/nc")
        .canonicalize()
        .unwrap();
    sql(format!(
        "CREATE EXTERNAL TABLE v STORED AS ICECHUNK LOCATION '{}' \
         OPTIONS ('virtual_chunk_containers' 'nc=file://{}/')",
        virtual_repo.canonicalize().unwrap().display(),
        nc.display()
    ))
    .await
    .unwrap();
    let err = sql("SELECT sum(sst) FROM v".into()).await.unwrap_err();
    assert!(
        err.contains(&format!("file://{}/", nc.display()))
            && err.contains("this cluster only reads locations under"),
        "{err}"
    );
}
