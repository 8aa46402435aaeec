//! Real object-store servers for the tests, started on 127.0.0.1 with free ports and stopped
//! when dropped: SeaweedFS (S3), nginx (HTTP), Azurite (Azure Blob), fake-gcs-server (GCS).
//! `scripts/install-test-servers.sh` installs them into `target/test-servers/bin`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

pub const S3_KEY_ID: &str = "ndfusion-test";
pub const S3_SECRET: &str = "ndfusion-test-secret";
/// Azurite's well-known development account and key.
pub const AZURE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

fn bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/test-servers/bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-test-servers.sh (the README's test command does)",
        path.display()
    );
    path
}

/// Starts `command` with its output appended to `log`; it dies with the test process, even
/// when that is killed.
pub fn spawn_logged(mut command: Command, log: &Path) -> std::io::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command.spawn()
}

/// Waits until something accepts connections on 127.0.0.1:`port`; false after `limit`.
pub fn wait_for_port(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A port nothing listens on now.
/// CPU seconds (user and system) process `pid` has used, from /proc (proc(5): fields 14 and
/// 15 of `stat`, in clock ticks).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis, from field 3 on.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads a constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / per_second
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of one HTTP/1.1 request to 127.0.0.1:`port`, or `None` when nothing
/// answers.
pub fn http_status(port: u16, method: &str, path: &str, headers: &[(&str, String)]) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("Content-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1)?.parse().ok()
}

/// A server process, killed when dropped.
pub struct Server {
    name: &'static str,
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    /// Builds the command again, for restarts.
    command: Option<Box<dyn Fn() -> Command + Send>>,
}

impl Server {
    fn spawn(name: &'static str, command: Command, port: u16, dir: tempfile::TempDir) -> Self {
        let mut server = Server {
            name,
            child: None,
            port,
            dir,
            command: None,
        };
        server.child = Some(server.start(command));
        server
    }

    fn start(&self, command: Command) -> Child {
        let name = self.name;
        spawn_logged(command, &self.dir.path().join("server.log"))
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"))
    }

    /// Starts a stopped server again, on the same port and data.
    pub fn restart(&mut self) {
        let command = (self.command.as_ref().expect("this server cannot restart"))();
        self.child = Some(self.start(command));
    }

    /// Waits until `ready` holds (at most 60 s), or fails with the server's log.
    fn wait_until(mut self, ready: impl Fn(&Server) -> bool) -> Self {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if ready(&self) {
                return self;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("{} exited ({status}):\n{}", self.name, self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{} did not start:\n{}", self.name, self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The requests nginx served so far (`GET /path HTTP/1.1 bytes=0-99`, `-` without a
    /// range), oldest first.
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The requests logged after the first `from`, once the log has stopped growing for
    /// 200 ms (at most 5 s): nginx logs a request after it has answered it, so a client
    /// that reads the log at once may miss the last line.
    pub async fn settled_requests(&self, from: usize) -> Vec<String> {
        let start = Instant::now();
        let mut seen = self.requests().len();
        let mut still_since = Instant::now();
        while still_since.elapsed() < Duration::from_millis(200)
            && start.elapsed() < Duration::from_secs(5)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = self.requests().len();
            if now != seen {
                (seen, still_since) = (now, Instant::now());
            }
        }
        self.requests()[from.min(seen)..].to_vec()
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server (the next request fails with a refused connection).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SeaweedFS's all-in-one server with an S3 gateway and bucket `bucket`; every one of its
/// ports is a free one, telemetry off.
pub fn seaweedfs(bucket: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let ports = [
        ("master.port", free_port()),
        ("master.port.grpc", free_port()),
        ("volume.port", free_port()),
        ("volume.port.grpc", free_port()),
        ("filer.port", free_port()),
        ("filer.port.grpc", free_port()),
        ("s3.port.grpc", free_port()),
        ("admin.port", free_port()),
        ("admin.port.grpc", free_port()),
    ];
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let bucket = bucket.to_string();
    let command = move || {
        let mut command = Command::new(bin("weed"));
        command
            .arg("mini")
            .arg(format!("-dir={}", data.display()))
            .args([
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-master.telemetry=false",
                "-admin.ui=false",
                "-webdav=false",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
            ])
            .arg(format!("-s3.port={port}"))
            .arg(format!("-bucket={bucket}"))
            .env("AWS_ACCESS_KEY_ID", S3_KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", S3_SECRET);
        for (flag, p) in ports {
            command.arg(format!("-{flag}={p}"));
        }
        command
    };
    let mut server = Server::spawn("SeaweedFS", command(), port, dir);
    server.command = Some(Box::new(command));
    server.wait_until(seaweedfs_ready)
}

fn seaweedfs_ready(server: &Server) -> bool {
    http_status(server.port, "GET", "/", &[]) == Some(403)
}

impl Server {
    /// Restarts SeaweedFS and waits until it answers.
    pub fn restart_seaweedfs(mut self) -> Self {
        self.restart();
        self.wait_until(seaweedfs_ready)
    }
}

/// nginx serving `root` (range requests answered with 206).
pub fn nginx(root: &Path) -> Server {
    nginx_with(root, "")
}

/// nginx serving `root` at most `bytes_per_second` to each request: a slow store, for
/// statements that run long enough to be watched and interrupted.
pub fn nginx_throttled(root: &Path, bytes_per_second: usize) -> Server {
    nginx_with(root, &format!("limit_rate {bytes_per_second};"))
}

/// nginx serving `root` with `directives` in its server block.
fn nginx_with(root: &Path, directives: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let d = dir.path().display();
    let config = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  log_format requests '$request $http_range';\n  access_log {d}/access.log requests;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port};\n    root {};\n    {directives}\n  }}\n}}\n",
        root.display()
    );
    std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
    let mut command = Command::new(bin("nginx"));
    command
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.path().join("nginx.conf"))
        .arg("-e")
        .arg(dir.path().join("error.log"));
    Server::spawn("nginx", command, port, dir)
        .wait_until(|s| http_status(s.port, "GET", "/", &[]).is_some())
}

/// Azurite's blob service, in memory, with container `container`.
pub fn azurite(container: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(bin("azurite-blob"));
    command
        .current_dir(dir.path())
        .args(["--blobHost", "127.0.0.1", "--blobPort"])
        .arg(port.to_string())
        .args([
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--disableProductStyleUrl",
            "--silent",
        ]);
    let server = Server::spawn("Azurite", command, port, dir)
        .wait_until(|s| http_status(s.port, "GET", "/", &[]).is_some());
    create_azure_container(port, container);
    server
}

/// `PUT /{account}/{container}?restype=container`, signed with the account key (Shared Key).
fn create_azure_container(port: u16, container: &str) {
    use base64::Engine;
    let date = httpdate(std::time::SystemTime::now());
    let version = "2021-08-06";
    let string_to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n\
         /{AZURE_ACCOUNT}/{AZURE_ACCOUNT}/{container}\nrestype:container"
    );
    let key = base64::engine::general_purpose::STANDARD
        .decode(AZURE_KEY)
        .unwrap();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let signature = base64::engine::general_purpose::STANDARD
        .encode(ring::hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
    let status = http_status(
        port,
        "PUT",
        &format!("/{AZURE_ACCOUNT}/{container}?restype=container"),
        &[
            ("x-ms-date", date),
            ("x-ms-version", version.to_string()),
            (
                "Authorization",
                format!("SharedKey {AZURE_ACCOUNT}:{signature}"),
            ),
        ],
    );
    assert_eq!(status, Some(201), "Azurite did not create the container");
}

/// An RFC 1123 date, as HTTP headers carry it.
fn httpdate(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let month_name = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    format!(
        "{weekday}, {day:02} {month_name} {year} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// fake-gcs-server in memory, with bucket `bucket` holding `preload` (local folder, key
/// prefix), and the service-account file that points object_store's GCS client at it without
/// OAuth. (fake-gcs-server does not take object_store's uploads, so objects are preloaded.)
pub fn fake_gcs(bucket: &str, preload: (&Path, &str)) -> (Server, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    copy_dir(preload.0, &data.join(bucket).join(preload.1));
    let mut command = Command::new(bin("fake-gcs-server"));
    command
        .args(["-scheme", "http", "-host", "127.0.0.1", "-port"])
        .arg(port.to_string())
        .args(["-backend", "memory", "-log-level", "warn"])
        .arg("-public-host")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-external-url")
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("-data")
        .arg(&data);
    let server = Server::spawn("fake-gcs-server", command, port, dir)
        .wait_until(|s| http_status(s.port, "GET", "/storage/v1/b", &[]) == Some(200));
    let account = server.dir().join("service-account.json");
    std::fs::write(
        &account,
        format!(
            r#"{{"gcs_base_url": "http://127.0.0.1:{port}", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}}"#
        ),
    )
    .unwrap();
    (server, account)
}

/// Copies a folder, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Copies every file below `local` to `prefix` in `store`.
pub async fn upload(store: &Arc<dyn ObjectStore>, local: &Path, prefix: &str) {
    let mut pending = vec![local.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(local)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let key = ObjectPath::from(format!("{prefix}/{relative}"));
            let bytes = std::fs::read(&path).unwrap();
            store.put(&key, PutPayload::from(bytes)).await.unwrap();
        }
    }
}
