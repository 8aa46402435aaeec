//! `ndfusion serve` on 127.0.0.1, driven by arrow-flight's Flight SQL client: statement
//! queries, prepared statements with parameters, the catalog calls, the token and TLS, the
//! refusals, a client that goes away mid-stream or cancels by `FlightInfo`, the timeout, the
//! concurrency limit, 32 clients at once and SIGTERM. (ADBC's Python driver: python/tests/test_serve.py.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::util::pretty::pretty_format_batches;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables, SqlInfo};
use futures::TryStreamExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::cluster::Secrets;
use crate::servers;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The table every server here starts with: the Kerchunk demo (72 rows).
const DEMO: &str = "CREATE EXTERNAL TABLE demo STORED AS ZARR \
                    LOCATION 'tests/data/kerchunk/refs_v1.json'";
/// A query whose answer takes long to stream: 4·10^8 rows made on the fly.
const ENDLESS: &str = "SELECT value FROM generate_series(1, 400000000)";
const TOKEN: &str = "serve-token-0123456789abcdef";

// How the client's errors spell the gRPC codes (tonic's descriptions of them).
const PERMISSION_DENIED: &str = "does not have permission";
const UNAUTHENTICATED: &str = "does not have valid authentication credentials";
const RESOURCE_EXHAUSTED: &str = "resource has been exhausted";
const DEADLINE_EXCEEDED: &str = "Deadline expired";
const INVALID_ARGUMENT: &str = "invalid argument";

/// A running `ndfusion serve`, killed when dropped; its stderr goes to a log file.
pub(crate) struct Server {
    child: Child,
    log: PathBuf,
    address: String,
    _dir: tempfile::TempDir,
}

impl Server {
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("serve.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
        command
            .args(["serve", "--bind", "127.0.0.1:0", "-c", DEMO])
            .args(args)
            .current_dir(repo())
            .env_remove("NDFUSION_SERVE_TOKEN");
        for (k, v) in env {
            command.env(k, v);
        }
        let child = servers::spawn_logged(command, &log).unwrap();
        let mut server = Server {
            child,
            log,
            address: String::new(),
            _dir: dir,
        };
        let start = Instant::now();
        while server.address.is_empty() {
            let log = server.log();
            // Whole lines only: stderr is unbuffered, so the line may be read as it is written
            // (`... Flight SQL on 127.0.0.1` before its `:port`).
            let whole = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(line) = whole.lines().find(|l| l.contains("Flight SQL on ")) {
                server.address = line.rsplit(' ').next().unwrap().to_string();
            } else if let Ok(Some(status)) = server.child.try_wait() {
                panic!("ndfusion serve exited ({status}):\n{log}");
            } else {
                assert!(start.elapsed() < Duration::from_secs(60), "{log}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        server
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) async fn client(&self) -> FlightSqlServiceClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.address))
            .unwrap()
            .connect()
            .await
            .unwrap();
        FlightSqlServiceClient::new(channel)
    }

    /// Sends SIGTERM and waits for the server to exit, at most `limit`: its exit status and
    /// how long the exit took.
    async fn terminate(&mut self, limit: Duration) -> (std::process::ExitStatus, Duration) {
        let start = Instant::now();
        // SAFETY: a signal to the child this test started and still holds.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < limit,
                "still running {:?} after SIGTERM:\n{}",
                start.elapsed(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for a log line containing `text` (the server writes it when a query ends),
    /// letting this runtime's tasks (the client's connection) run meanwhile.
    async fn wait_for_log(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no '{text}' in:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The answer to `sql`, or the error as text.
pub(crate) async fn query(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<String, String> {
    let batches = query_batches(client, sql).await?;
    Ok(pretty_format_batches(&batches).unwrap().to_string())
}

async fn query_batches(
    client: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> Result<Vec<RecordBatch>, String> {
    let info = client
        .execute(sql.into(), None)
        .await
        .map_err(|e| e.to_string())?;
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let stream = client.do_get(ticket).await.map_err(|e| e.to_string())?;
    stream.try_collect().await.map_err(|e| e.to_string())
}

/// The same statement answered in this process.
async fn in_process(sql: &str) -> String {
    let ctx = ndfusion::new_session_context();
    std::env::set_current_dir(repo()).unwrap();
    ctx.sql(DEMO).await.unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

#[tokio::test]
async fn statements_prepared_statements_and_the_catalog() {
    let server = Server::start(&[], &[]);
    let mut client = server.client().await;
    for sql in [
        "SELECT count(*) AS n, sum(temp) AS s, count(pres) AS p FROM demo",
        "SELECT time, lat, lon, temp FROM demo WHERE lat = 20 ORDER BY time DESC, lon LIMIT 5",
        "SELECT __global_attrs__.id AS id, max(land) AS land FROM demo GROUP BY 1",
    ] {
        assert_eq!(
            query(&mut client, sql).await.unwrap(),
            in_process(sql).await,
            "{sql}"
        );
    }

    // A prepared statement with parameters, bound as ADBC binds them (one row, "0", "1").
    let sql = "SELECT time, lon, temp FROM demo WHERE temp > $1 AND lat = $2 ORDER BY temp";
    let mut prepared = client.prepare(sql.into(), None).await.unwrap();
    assert_eq!(prepared.parameter_schema().unwrap().fields().len(), 2);
    let names: Vec<String> = (prepared.dataset_schema().unwrap().fields().iter())
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["time", "lon", "temp"]);
    let parameters = RecordBatch::try_from_iter([
        (
            "0",
            Arc::new(arrow::array::Float64Array::from(vec![25.0])) as _,
        ),
        (
            "1",
            Arc::new(arrow::array::Float64Array::from(vec![30.0])) as _,
        ),
    ])
    .unwrap();
    prepared.set_parameters(parameters).unwrap();
    let info = prepared.execute().await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let batches: Vec<RecordBatch> =
        (client.do_get(ticket).await.unwrap().try_collect().await).unwrap();
    let bound = "SELECT time, lon, temp FROM demo WHERE temp > 25.0 AND lat = 30.0 ORDER BY temp";
    assert_eq!(
        pretty_format_batches(&batches).unwrap().to_string(),
        in_process(bound).await
    );
    prepared.close().await.unwrap();

    // A prepared statement without parameters (JDBC prepares every statement), run twice,
    // then closed: its handle is gone.
    let sql = "SELECT count(*) AS n, max(temp) AS t FROM demo WHERE lat = 20";
    let mut prepared = client.prepare(sql.into(), None).await.unwrap();
    assert_eq!(prepared.parameter_schema().unwrap().fields().len(), 0);
    for _ in 0..2 {
        let info = prepared.execute().await.unwrap();
        let ticket = info.endpoint[0].ticket.clone().unwrap();
        let batches: Vec<RecordBatch> =
            (client.do_get(ticket).await.unwrap().try_collect().await).unwrap();
        assert_eq!(
            pretty_format_batches(&batches).unwrap().to_string(),
            in_process(sql).await
        );
    }
    let info = prepared.execute().await.unwrap();
    prepared.close().await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let closed = match client.do_get(ticket).await {
        Ok(stream) => stream.try_collect::<Vec<RecordBatch>>().await.map(|_| ()),
        Err(e) => Err(e),
    };
    let err = closed.unwrap_err().to_string();
    assert!(err.contains("prepared statement"), "{err}");

    // The catalog.
    let info = client.get_catalogs().await.unwrap();
    let catalogs = collect(&mut client, info).await;
    assert!(catalogs.contains("datafusion"), "{catalogs}");
    let request = CommandGetDbSchemas {
        catalog: None,
        db_schema_filter_pattern: None,
    };
    let info = client.get_db_schemas(request).await.unwrap();
    assert!(collect(&mut client, info).await.contains("public"));
    let request = CommandGetTables {
        catalog: None,
        db_schema_filter_pattern: None,
        table_name_filter_pattern: Some("dem%".into()),
        table_types: vec![],
        include_schema: true,
    };
    let info = client.get_tables(request).await.unwrap();
    let tables = collect(&mut client, info).await;
    assert!(
        tables.contains("| demo ") && tables.contains("TABLE"),
        "{tables}"
    );
    let info = client.get_table_types().await.unwrap();
    assert!(collect(&mut client, info).await.contains("VIEW"));
    let info = client
        .get_sql_info(vec![
            SqlInfo::FlightSqlServerName,
            SqlInfo::FlightSqlServerReadOnly,
        ])
        .await
        .unwrap();
    let sql_info = collect(&mut client, info).await;
    assert!(sql_info.contains("ndfusion"), "{sql_info}");

    // Bad SQL is one readable line.
    let err = query(&mut client, "SELECT nope FROM demo")
        .await
        .unwrap_err();
    assert!(
        err.contains(INVALID_ARGUMENT) && err.contains("nope"),
        "{err}"
    );
    let log = server.wait_for_log("outcome=\"ok\"").await;
    assert!(log.contains("client=127.0.0.1:"), "{log}");
}

async fn collect(
    client: &mut FlightSqlServiceClient<Channel>,
    info: arrow_flight::FlightInfo,
) -> String {
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let batches: Vec<RecordBatch> =
        (client.do_get(ticket).await.unwrap().try_collect().await).unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

#[tokio::test]
async fn the_token_and_tls() {
    let secrets = Secrets::new();
    let server = Server::start(
        &[
            "--tls-cert",
            &secrets.path("node.pem"),
            "--tls-key",
            &secrets.path("node.key"),
        ],
        &[("NDFUSION_SERVE_TOKEN", TOKEN)],
    );
    let ca = std::fs::read(secrets.path("ca.pem")).unwrap();
    let connect = || async {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca))
            .domain_name("localhost");
        let channel = Channel::from_shared(format!("https://{}", server.address))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        FlightSqlServiceClient::new(channel)
    };
    let count = "SELECT count(*) AS n FROM demo";

    let mut anonymous = connect().await;
    let err = query(&mut anonymous, count).await.unwrap_err();
    assert!(err.contains(UNAUTHENTICATED), "{err}");
    let mut wrong = connect().await;
    assert!(wrong.handshake("me", "not-the-token-at-all").await.is_err());
    wrong.set_token("not-the-token-at-all".into());
    assert!(query(&mut wrong, count)
        .await
        .unwrap_err()
        .contains(UNAUTHENTICATED));

    // Basic auth on Handshake (any user, the token as password) returns the bearer.
    let mut client = connect().await;
    client.handshake("anyone", TOKEN).await.unwrap();
    assert_eq!(client.token().map(String::as_str), Some(TOKEN));
    assert!(query(&mut client, count).await.unwrap().contains("72"));
    let mut bearer = connect().await;
    bearer.set_token(TOKEN.into());
    assert!(query(&mut bearer, count).await.unwrap().contains("72"));

    // Plain text to a TLS server does not get through.
    let plain = Channel::from_shared(format!("http://{}", server.address))
        .unwrap()
        .connect()
        .await;
    if let Ok(channel) = plain {
        let mut client = FlightSqlServiceClient::new(channel);
        client.set_token(TOKEN.into());
        assert!(query(&mut client, count).await.is_err());
    }

    // A non-loopback address without a token and TLS does not start.
    let out = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["serve", "--bind", "0.0.0.0:0"])
        .env_remove("NDFUSION_SERVE_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--insecure") && stderr.contains("token"),
        "{stderr}"
    );
}

#[tokio::test]
async fn statements_that_change_the_server_are_refused_or_kept_inside_allow() {
    let server = Server::start(&[], &[]);
    let mut client = server.client().await;
    for (sql, statement) in [
        (
            "CREATE EXTERNAL TABLE x STORED AS ZARR LOCATION 'tests/data/kerchunk/refs_v1.json'",
            "CREATE EXTERNAL TABLE",
        ),
        ("DROP TABLE demo", "DROP TABLE"),
        ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
        ("COPY (SELECT 1) TO '/tmp/x.csv'", "COPY"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/x.csv'", "COPY"),
        ("INSERT INTO demo SELECT * FROM demo LIMIT 1", "INSERT"),
    ] {
        let err = query(&mut client, sql).await.unwrap_err();
        assert!(err.contains(PERMISSION_DENIED), "{sql}: {err}");
        assert!(
            err.contains(&format!("{statement} is not allowed")),
            "{err}"
        );
    }
    assert!(query(&mut client, "SELECT count(*) FROM demo")
        .await
        .is_ok());

    // --allow-ddl: inside --allow only.
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    std::fs::create_dir(&allowed).unwrap();
    let allowed = allowed.display().to_string();
    let server = Server::start(&["--allow-ddl", "--allow", &allowed], &[]);
    let mut client = server.client().await;
    let outside =
        "CREATE EXTERNAL TABLE x STORED AS ZARR LOCATION 'tests/data/kerchunk/refs_v1.json'";
    let err = query(&mut client, outside).await.unwrap_err();
    assert!(
        err.contains(PERMISSION_DENIED) && err.contains("refs_v1.json"),
        "{err}"
    );
    let copy_out = format!("COPY (SELECT 1 AS a) TO '{}/../escape.csv'", allowed);
    assert!(query(&mut client, &copy_out)
        .await
        .unwrap_err()
        .contains(PERMISSION_DENIED));
    let copy_in = format!("COPY (SELECT 1 AS a) TO '{allowed}/one.csv' STORED AS CSV");
    query(&mut client, &copy_in).await.unwrap();
    let create = format!(
        "CREATE EXTERNAL TABLE one STORED AS CSV LOCATION '{allowed}/one.csv' \
         OPTIONS ('format.has_header' 'true')"
    );
    query(&mut client, &create).await.unwrap();
    assert!(query(&mut client, "SELECT a FROM one")
        .await
        .unwrap()
        .contains("| 1 |"));
    let endpoint = format!(
        "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{allowed}/x.zarr' \
         OPTIONS ('aws.endpoint' 'http://169.254.169.254')"
    );
    let err = query(&mut client, &endpoint).await.unwrap_err();
    assert!(err.contains("aws.endpoint"), "{err}");
    // A pattern inside --allow whose member is a link to a file outside: refused once the
    // pattern is expanded, and the table is gone again.
    std::os::unix::fs::symlink(
        repo().join("tests/data/netcdf/classic.nc"),
        format!("{allowed}/linked.nc"),
    )
    .unwrap();
    let linked = format!("CREATE EXTERNAL TABLE l STORED AS NETCDF LOCATION '{allowed}/*.nc'");
    let err = query(&mut client, &linked).await.unwrap_err();
    assert!(
        err.contains(PERMISSION_DENIED) && err.contains("linked.nc"),
        "{err}"
    );
    let err = query(&mut client, "SELECT * FROM l").await.unwrap_err();
    assert!(err.contains("not found"), "{err}");
    // Without --allow too, a client's storage options do not choose where the server's
    // credentials go.
    let open = Server::start(&["--allow-ddl"], &[]);
    let mut open_client = open.client().await;
    let err = query(&mut open_client, &endpoint).await.unwrap_err();
    assert!(
        err.contains(PERMISSION_DENIED) && err.contains("aws.endpoint"),
        "{err}"
    );
    // The operator's tables are read as before; a location of a client's choosing is not.
    assert!(query(&mut client, "SELECT count(*) FROM demo")
        .await
        .is_ok());
    let err = query(&mut client, "SELECT * FROM icechunk_log('/tmp')")
        .await
        .unwrap_err();
    assert!(err.contains("icechunk_log"), "{err}");
}

#[tokio::test]
async fn a_client_that_goes_away_stops_its_query() {
    let server = Server::start(&["--max-concurrent-queries", "1"], &[]);
    let mut client = server.client().await;
    let info = client.execute(ENDLESS.into(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = client.do_get(ticket).await.unwrap();
    let first = stream.try_next().await.unwrap().unwrap();
    assert!(first.num_rows() > 0);

    // The one query slot is taken.
    let mut other = server.client().await;
    let err = query(&mut other, "SELECT 1").await.unwrap_err();
    assert!(err.contains(RESOURCE_EXHAUSTED), "{err}");

    // Gone: the query ends on the server, its slot is free, a new query answers at once.
    drop(stream);
    drop(client);
    server
        .wait_for_log("outcome=\"cancelled by the client\"")
        .await;
    let start = Instant::now();
    let answer = query(&mut other, "SELECT count(*) AS n FROM demo")
        .await
        .unwrap();
    assert!(answer.contains("72"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// A client cancels an answer being sent by its `FlightInfo` (Flight's `CancelFlightInfo`,
/// Flight SQL's older `CancelQuery`): the stream ends with CANCELLED, the query's
/// slot is free at once, another client's run of the same statement goes on, and a
/// `FlightInfo` with nothing being sent is NOT_FOUND.
#[tokio::test]
async fn a_client_cancels_an_answer_by_its_flight_info() {
    use arrow_flight::sql::{ActionCancelQueryRequest, ActionCancelQueryResult, ProstMessageExt};
    use arrow_flight::{Action, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus};
    use prost::Message;

    let server = Server::start(&["--max-concurrent-queries", "2"], &[]);
    let mut client = server.client().await;
    let mut bystander = server.client().await;
    let mut canceller = server.client().await;
    let start = |client: &mut FlightSqlServiceClient<Channel>| {
        let mut client = client.clone();
        async move {
            let info = client.execute(ENDLESS.into(), None).await.unwrap();
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            let mut stream = client.do_get(ticket).await.unwrap();
            assert!(stream.try_next().await.unwrap().unwrap().num_rows() > 0);
            (info, stream)
        }
    };
    let (info, mut stream) = start(&mut client).await;
    let (_, mut other) = start(&mut bystander).await;

    let cancel = |info: &arrow_flight::FlightInfo| {
        let body = CancelFlightInfoRequest::new(info.clone()).encode_to_vec();
        Action::new("CancelFlightInfo", body)
    };
    let mut results = canceller.do_action(cancel(&info)).await.unwrap();
    let result = results.try_next().await.unwrap().unwrap();
    let result = CancelFlightInfoResult::decode(result.body).unwrap();
    assert_eq!(result.status, CancelStatus::Cancelled as i32);
    let err = error_at_end(&mut stream).await;
    assert!(err.contains("cancelled (CancelFlightInfo)"), "{err}");
    server
        .wait_for_log("outcome=\"cancelled (CancelFlightInfo)\"")
        .await;
    // Its slot is free (the bystander holds the other), the bystander's stream goes on.
    let answer = query(&mut canceller, "SELECT count(*) AS n FROM demo")
        .await
        .unwrap();
    assert!(answer.contains("72"), "{answer}");
    assert!(other.try_next().await.unwrap().unwrap().num_rows() > 0);

    // Nothing being sent for that FlightInfo any more.
    let err = canceller.do_action(cancel(&info)).await.unwrap_err();
    assert!(
        err.to_string().contains("names no answer being sent"),
        "{err}"
    );

    // Flight SQL's CancelQuery ends the bystander's.
    drop(other);
    let info = bystander.execute(ENDLESS.into(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut other = bystander.do_get(ticket).await.unwrap();
    assert!(other.try_next().await.unwrap().unwrap().num_rows() > 0);
    let request = ActionCancelQueryRequest {
        info: info.encode_to_vec().into(),
    };
    let action = Action::new("CancelQuery", request.as_any().encode_to_vec());
    let mut results = canceller.do_action(action).await.unwrap();
    let result = results.try_next().await.unwrap().unwrap();
    let any = arrow_flight::sql::Any::decode(result.body).unwrap();
    let result: ActionCancelQueryResult = any.unpack().unwrap().unwrap();
    assert_eq!(result.result, CancelStatus::Cancelled as i32);
    let err = error_at_end(&mut other).await;
    assert!(err.contains("cancelled"), "{err}");

    // What a client sends is checked: a body that is no request, a request without a
    // FlightInfo, an action the server does not have, a statement ticket shorter than its id.
    for (action, want) in [
        (
            Action::new("CancelFlightInfo", b"\xff\xff".to_vec()),
            "CancelFlightInfo: ",
        ),
        (
            Action::new(
                "CancelFlightInfo",
                CancelFlightInfoRequest { info: None }.encode_to_vec(),
            ),
            "CancelFlightInfo names no FlightInfo",
        ),
        (
            Action::new(
                "CancelQuery",
                ActionCancelQueryRequest {
                    info: b"\xff\xff".to_vec().into(),
                }
                .as_any()
                .encode_to_vec(),
            ),
            "the FlightInfo to cancel",
        ),
        (
            Action::new("DropEverything", Vec::new()),
            "no action 'DropEverything'",
        ),
    ] {
        let err = canceller.do_action(action).await.unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    let short = arrow_flight::sql::TicketStatementQuery {
        statement_handle: b"abc".to_vec().into(),
    };
    let ticket = arrow_flight::Ticket::new(short.as_any().encode_to_vec());
    let err = match canceller.do_get(ticket).await {
        Ok(mut stream) => stream.try_next().await.map(|_| ()),
        Err(e) => Err(e),
    };
    let err = err.unwrap_err().to_string();
    assert!(err.contains("the ticket is shorter than its id"), "{err}");
}

/// The error a cancelled answer's stream ends with (after the batches already on the way).
async fn error_at_end(stream: &mut arrow_flight::decode::FlightRecordBatchStream) -> String {
    loop {
        match stream.try_next().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the cancelled stream ended without an error"),
            Err(e) => break e.to_string(),
        }
    }
}

/// One memory pool for all queries: a query that holds chunks leaves too little for a second
/// one, and its client going away gives the memory back at once.
#[tokio::test]
async fn a_client_that_goes_away_returns_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.zarr").display().to_string();
    let copy = format!(
        "COPY (SELECT value FROM generate_series(1, 8000000)) TO '{big}' STORED AS ZARR \
         OPTIONS ('chunks' 'dim_0=1000000', 'compression' 'none')"
    );
    ndfusion::new_session_context()
        .sql(&copy)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let create = format!("CREATE EXTERNAL TABLE big STORED AS ZARR LOCATION '{big}'");
    let server = Server::start(&["--memory-limit", "100M", "-c", &create], &[]);
    let sum = "SELECT sum(value) AS s FROM big";
    let mut other = server.client().await;
    assert!(query(&mut other, sum)
        .await
        .unwrap()
        .contains("32000004000000"));

    // A client reads one batch of everything and stops reading: its scans hold their chunks.
    let mut client = server.client().await;
    let info = client
        .execute("SELECT value FROM big".into(), None)
        .await
        .unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = client.do_get(ticket).await.unwrap();
    stream.try_next().await.unwrap();
    // Time for both of its partitions to have reserved a chunk on a busy machine.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let err = query(&mut other, sum).await.unwrap_err();
    assert!(err.contains("memory pool"), "{err}");

    drop(stream);
    drop(client);
    server
        .wait_for_log("outcome=\"cancelled by the client\"")
        .await;
    assert!(query(&mut other, sum)
        .await
        .unwrap()
        .contains("32000004000000"));
}

#[tokio::test]
async fn a_query_past_the_timeout_ends() {
    let server = Server::start(&["--query-timeout", "1"], &[]);
    let mut client = server.client().await;
    let start = Instant::now();
    let err = query_batches(&mut client, ENDLESS).await.unwrap_err();
    assert!(
        err.contains(DEADLINE_EXCEEDED) && err.contains("--query-timeout"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    server.wait_for_log("outcome=\"timed out\"").await;
    assert!(query(&mut client, "SELECT 1").await.is_ok());
}

/// A join that computes without waiting for anything (10^10 combinations of a table made
/// by the server's start statement, in small batches of work).
const CPU_BOUND: &str = "SELECT count(*) FROM r a, r b, r c, r d, r e \
                         WHERE a.id + b.id + c.id + d.id + e.id = 7";
const MAKE_R: &str = "CREATE TABLE r AS SELECT value AS id FROM generate_series(1, 100)";

/// `--query-timeout` stops a query that computes without waiting: the client gets the
/// server's DEADLINE_EXCEEDED, the server stops using the cores, and SIGTERM with such a
/// query running ends the server within its grace.
#[tokio::test]
async fn a_cpu_bound_query_past_the_timeout_stops_its_work() {
    let server = Server::start(&["--query-timeout", "1", "-c", MAKE_R], &[]);
    let pid = server.child.id();
    let mut client = server.client().await;
    let start = Instant::now();
    let err = query_batches(&mut client, CPU_BOUND).await.unwrap_err();
    assert!(
        err.contains(DEADLINE_EXCEEDED) && err.contains("--query-timeout"),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    // Given a moment to wind down, the server idles.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = crate::servers::cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = crate::servers::cpu_seconds(pid) - before;
    assert!(
        used < 0.5,
        "{used} CPU seconds in the 2 s after the timeout"
    );
    assert!(query(&mut client, "SELECT 1").await.is_ok());

    // SIGTERM with a CPU-bound query running (no timeout): the server ends it within its
    // 10 s grace and exits.
    let mut server = Server::start(&["-c", MAKE_R], &[]);
    let mut client = server.client().await;
    let info = client.execute(CPU_BOUND.into(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let running = tokio::spawn(async move {
        let stream = client.do_get(ticket).await;
        let _ = stream.map(|s| s.try_collect::<Vec<_>>());
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.terminate(Duration::from_secs(14)).await;
    running.abort();
}

#[tokio::test]
async fn thirty_two_clients_at_once() {
    let server = Server::start(&[], &[]);
    let expected = in_process("SELECT sum(temp) AS s FROM demo WHERE lat = 10").await;
    let address = server.address.clone();
    let clients = (0..32).map(|i| {
        let address = address.clone();
        tokio::spawn(async move {
            let channel = Channel::from_shared(format!("http://{address}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut client = FlightSqlServiceClient::new(channel);
            let mut answers = Vec::new();
            for j in 0..5 {
                let sql = match (i + j) % 2 {
                    0 => "SELECT sum(temp) AS s FROM demo WHERE lat = 10".to_string(),
                    _ => format!("SELECT {i} * 1000 + {j} AS k"),
                };
                answers.push((i, j, query_batches(&mut client, &sql).await.unwrap()));
            }
            answers
        })
    });
    for answers in futures::future::join_all(clients).await {
        for (i, j, batches) in answers.unwrap() {
            let text = pretty_format_batches(&batches).unwrap().to_string();
            if (i + j) % 2 == 0 {
                assert_eq!(text, expected);
            } else {
                let k = batches[0]
                    .column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap();
                assert_eq!(k.value(0), i as i64 * 1000 + j as i64);
                assert_eq!(k.len(), 1);
            }
        }
    }
}

#[tokio::test]
async fn sigterm_lets_running_queries_finish_then_exits() {
    let mut server = Server::start(&[], &[]);
    let mut client = server.client().await;
    assert!(query(&mut client, "SELECT 1").await.is_ok());
    let (status, _) = server.terminate(Duration::from_secs(15)).await;
    assert!(status.success(), "{status}: {}", server.log());
    assert!(server.log().contains("stopping"));

    // A query still streaming at SIGTERM: the server exits within its 10 s.
    let mut server = Server::start(&[], &[]);
    let mut client = server.client().await;
    let info = client.execute(ENDLESS.into(), None).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let mut stream = client.do_get(ticket).await.unwrap();
    stream.try_next().await.unwrap();
    let (_, took) = server.terminate(Duration::from_secs(14)).await;
    assert!(took >= Duration::from_secs(9), "{}", server.log());
}

#[test]
fn a_failing_start_statement_stops_the_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "-c",
            "SELECT 1; SELECT nope FROM nowhere",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("-c #1") && stderr.contains("nowhere"),
        "{stderr}"
    );
}
