//! Tables in object stores, against real servers on 127.0.0.1 (`servers.rs`): the fixtures are
//! uploaded and the sql/ files' queries must give the local answers; faults give clear errors.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch};
use arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use ndfusion::{
    read_nd_batches, write_nd_batches, Dim, Error, NdArrowArray, NdRecordBatch, ReadOptions,
    StorageOptions, WriteOptions, ZarrOptions, ZarrTable,
};

use crate::servers::{self, Server, AZURE_ACCOUNT, AZURE_KEY, S3_KEY_ID, S3_SECRET};
use crate::slt::run_sql_files_at;

pub const BUCKET: &str = "data";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn s3_options(server: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("aws.endpoint", server.endpoint()),
        ("aws.allow_http", "true".into()),
        ("aws.access_key_id", S3_KEY_ID.into()),
        ("aws.secret_access_key", S3_SECRET.into()),
        ("aws.region", "us-east-1".into()),
        // Fault tests must fail fast; the defaults retry for a minute.
        ("client.max_retries", "2".into()),
        ("client.retry_timeout", "5".into()),
    ]
}

fn storage(options: &[(&'static str, String)]) -> StorageOptions {
    StorageOptions::from_map(options.iter().map(|(k, v)| (*k, v.clone()))).unwrap()
}

pub fn s3_store(server: &Server) -> Arc<dyn ObjectStore> {
    Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(server.endpoint())
            .with_allow_http(true)
            .with_bucket_name(BUCKET)
            .with_access_key_id(S3_KEY_ID)
            .with_secret_access_key(S3_SECRET)
            .with_region("us-east-1")
            .build()
            .unwrap(),
    )
}

pub async fn upload_fixtures(store: &Arc<dyn ObjectStore>) {
    servers::upload(store, &repo().join("tests/data"), "tests/data").await;
}

async fn collect(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.sql(sql).await.unwrap().collect().await.unwrap()
}

async fn query_error(ctx: &SessionContext, sql: &str) -> String {
    let result = match ctx.sql(sql).await {
        Ok(df) => df.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    Error::user_message(&result.expect_err(sql))
}

fn options_sql(options: &[(&str, String)]) -> String {
    if options.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("'{k}' '{v}'"))
        .collect();
    format!("OPTIONS ({})", pairs.join(", "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_tables_answer_the_sql_files_like_local_ones() {
    let server = servers::seaweedfs(BUCKET);
    upload_fixtures(&s3_store(&server)).await;
    let ran = run_sql_files_at("s3://data", &s3_options(&server), |_| false).await;
    assert!(ran > 100, "only {ran} records ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_tables_answer_the_sql_files_like_local_ones() {
    let (server, account) = servers::fake_gcs(BUCKET, (&repo().join("tests/data"), "tests/data"));
    let options = [
        (
            "gcp.service_account_path",
            account.to_string_lossy().to_string(),
        ),
        ("client.allow_http", "true".to_string()),
    ];
    let ran = run_sql_files_at("gs://data", &options, |_| false).await;
    assert!(ran > 100, "only {ran} records ran ({})", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_tables_answer_the_sql_files_like_local_ones() {
    let server = servers::azurite(BUCKET);
    let endpoint = format!("{}/{AZURE_ACCOUNT}", server.endpoint());
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::azure::MicrosoftAzureBuilder::new()
            .with_account(AZURE_ACCOUNT)
            .with_access_key(AZURE_KEY)
            .with_container_name(BUCKET)
            .with_endpoint(endpoint.clone())
            .with_allow_http(true)
            .build()
            .unwrap(),
    );
    upload_fixtures(&store).await;
    let options = [
        ("azure.account_name", AZURE_ACCOUNT.to_string()),
        ("azure.access_key", AZURE_KEY.to_string()),
        ("azure.endpoint", endpoint),
        ("azure.allow_http", "true".to_string()),
    ];
    let ran = run_sql_files_at("az://data", &options, |_| false).await;
    assert!(ran > 100, "only {ran} records ran ({})", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_zarr_tables_answer_the_sql_files_like_local_ones() {
    let server = servers::nginx(repo());
    let base = server.endpoint();
    // Lance finds a table's latest version by listing, and a group without consolidated
    // metadata is listed: plain HTTP cannot list. Icechunk repositories are read from
    // folders and s3/gs/az prefixes only.
    let ran = run_sql_files_at(&base, &[], |name| {
        name.starts_with("lance_nd") || name.ends_with("_listed.slt") || name == "icechunk.slt"
    })
    .await;
    assert!(ran > 80, "only {ran} records ran");

    // Opening a v3 array is one request (zarr.json), a v2 array three (zarr.json is absent,
    // then .zarray and .zattrs); nothing is listed.
    for (path, requests) in [
        ("tests/data/zarr_v3/grid_2d.zarr", 1),
        ("tests/data/zarr_v2/grid_2d.zarr", 3),
    ] {
        let before = server.requests();
        ZarrTable::open(&format!("{base}/{path}")).await.unwrap();
        let made = server.settled_requests(before.len()).await;
        assert_eq!(made.len(), requests, "{path}: {made:?}");
        assert!(made.iter().all(|r| r.starts_with("GET ")), "{made:?}");
    }

    // Chunks read in part are ranged GETs: an uncompressed chunk, the rows of the selection;
    // a shard, its index (a suffix) and the inner chunks the selection touches. The answers
    // are those of the local files.
    let ctx = ndfusion::new_session_context();
    let query = "SELECT station, pressure FROM {t} WHERE time = 1 AND station < 3 ORDER BY station";
    // Elements are 13 bytes (float32, float64, bool), a chunk row 3 elements: row 1 of chunk
    // c/0/0 is bytes 39..78.
    for (name, first_request_ranges) in [
        ("codec_uncompressed", vec!["bytes=39-77"]),
        ("codec_sharded", vec!["bytes=-"]),
    ] {
        let path = format!("tests/data/zarr_v3/{name}.zarr");
        ctx.sql(&create(
            &format!("{name}_remote"),
            &format!("{base}/{path}"),
            &[],
        ))
        .await
        .unwrap();
        ctx.sql(&create(name, &path, &[])).await.unwrap();
        let before = server.requests().len();
        let remote = collect(&ctx, &query.replace("{t}", &format!("{name}_remote"))).await;
        let made = server.settled_requests(before).await;
        let local = collect(&ctx, &query.replace("{t}", name)).await;
        assert_eq!(
            pretty_format_batches(&remote).unwrap().to_string(),
            pretty_format_batches(&local).unwrap().to_string()
        );
        assert!(!made.is_empty());
        assert!(
            made.iter()
                .all(|r| r.contains(&format!("{path}/c/0/0 ")) && !r.ends_with(" -")),
            "{name}: {made:?}"
        );
        for range in first_request_ranges {
            assert!(made.iter().any(|r| r.contains(range)), "{name}: {made:?}");
        }
    }
}

/// The SQL for `t` at `location`, with `options`.
fn create(table: &str, location: &str, options: &[(&str, String)]) -> String {
    format!(
        "CREATE EXTERNAL TABLE {table} STORED AS ZARR LOCATION '{location}' {}",
        options_sql(options)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_faults_are_clear_errors() {
    let mut server = servers::seaweedfs(BUCKET);
    let store = s3_store(&server);
    let grid = "tests/data/zarr_v3/grid_2d.zarr";
    servers::upload(&store, &repo().join(grid), "deleted.zarr").await;
    servers::upload(&store, &repo().join(grid), "garbage.zarr").await;
    servers::upload(&store, &repo().join(grid), "grid.zarr").await;
    store
        .delete(&ObjectPath::from("deleted.zarr/c/1/1"))
        .await
        .unwrap();
    store
        .put(
            &ObjectPath::from("garbage.zarr/c/1/1"),
            PutPayload::from_static(b"not a zstd frame"),
        )
        .await
        .unwrap();
    let options = s3_options(&server);
    let ctx = ndfusion::new_session_context();

    // A deleted chunk reads as the fill value, as the same chunk deleted from a local copy.
    let local = tempfile::tempdir().unwrap();
    servers::copy_dir(&repo().join(grid), local.path());
    std::fs::remove_file(local.path().join("c/1/1")).unwrap();
    ctx.sql(&create("deleted", "s3://data/deleted.zarr", &options))
        .await
        .unwrap();
    ctx.sql(&create("local", &local.path().to_string_lossy(), &[]))
        .await
        .unwrap();
    let query = |t: &str| {
        format!("SELECT time, station, temp, pressure, ok FROM {t} ORDER BY time, station")
    };
    let remote = pretty_format_batches(&collect(&ctx, &query("deleted")).await)
        .unwrap()
        .to_string();
    let expected = pretty_format_batches(&collect(&ctx, &query("local")).await)
        .unwrap()
        .to_string();
    assert_eq!(remote, expected);

    // A chunk replaced by garbage is an error naming its key.
    ctx.sql(&create("garbage", "s3://data/garbage.zarr", &options))
        .await
        .unwrap();
    let message = query_error(&ctx, "SELECT sum(temp) FROM garbage").await;
    assert!(
        message.starts_with("cannot read chunk 'c/1/1' of s3://data/garbage.zarr"),
        "{message}"
    );

    // A shard whose index puts an inner chunk past its end (offset 2^64 - 2, checksum
    // intact): checked before zarrs reads it, read whole or in part.
    let sharded = "tests/data/zarr_v3/codec_sharded.zarr";
    servers::upload(&store, &repo().join(sharded), "sharded.zarr").await;
    let mut shard = std::fs::read(repo().join(sharded).join("c/0/0")).unwrap();
    let (len, index_at) = (shard.len(), shard.len() - 4 * 16 - 4);
    shard[index_at..index_at + 8].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
    let crc = super::zarr_fixtures::crc32c(&shard[index_at..len - 4]);
    shard[len - 4..].copy_from_slice(&crc.to_le_bytes());
    store
        .put(
            &ObjectPath::from("sharded.zarr/c/0/0"),
            PutPayload::from(shard),
        )
        .await
        .unwrap();
    ctx.sql(&create("sharded", "s3://data/sharded.zarr", &options))
        .await
        .unwrap();
    for query in [
        "SELECT pressure FROM sharded WHERE time = 0 AND station = 0",
        "SELECT sum(pressure) FROM sharded",
    ] {
        let message = query_error(&ctx, query).await;
        assert!(
            message.starts_with("cannot read chunk 'c/0/0' of s3://data/sharded.zarr")
                && message.contains("points past the end of the shard's"),
            "{query}: {message}"
        );
    }

    // Wrong credentials: an error naming the object, without the secret.
    let mut wrong = options.clone();
    wrong.retain(|(k, _)| *k != "aws.secret_access_key");
    wrong.push(("aws.secret_access_key", "not-the-secret-42".into()));
    let message = query_error(&ctx, &create("wrong", "s3://data/grid.zarr", &wrong)).await;
    assert!(
        message.starts_with("object store error at s3://data/grid.zarr/zarr.json"),
        "{message}"
    );
    assert!(!message.contains("not-the-secret-42"), "{message}");

    // A bucket that does not exist is named.
    let message = query_error(
        &ctx,
        &create("nobucket", "s3://no-such-bucket/a.zarr", &options),
    )
    .await;
    assert_eq!(
        message,
        "cannot open s3://no-such-bucket/a.zarr: the bucket 'no-such-bucket' does not exist"
    );
    let message = query_error(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE nb STORED AS LANCE_ND LOCATION 's3://no-such-bucket/t.lance' {}",
            options_sql(&options)
        ),
    )
    .await;
    assert_eq!(
        message,
        "cannot open s3://no-such-bucket/t.lance: the bucket 'no-such-bucket' does not exist"
    );
    let message = query_error(&ctx, &create("empty", "s3://data/none.zarr", &options)).await;
    assert_eq!(
        message,
        "cannot open s3://data/none.zarr: nothing is stored at this location"
    );

    // The server stopped in the middle of a scan: the query fails within the retry budget.
    let mut slow = options.clone();
    slow.push(("chunks_in_flight", "1".into()));
    slow.push(("batch_size", "1".into()));
    ctx.sql(&create("grid", "s3://data/grid.zarr", &slow))
        .await
        .unwrap();
    let config = ctx.copied_config().with_target_partitions(1);
    let single = SessionContext::new_with_config(config);
    let table = ctx.table_provider("grid").await.unwrap();
    single.register_table("grid", table).unwrap();
    let mut stream = single
        .sql("SELECT temp FROM grid")
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    assert!(stream.next().await.unwrap().is_ok());
    server.stop();
    let start = Instant::now();
    let mut failure = None;
    while let Some(batch) = stream.next().await {
        if let Err(e) = batch {
            failure = Some(Error::user_message(&e));
            break;
        }
    }
    let message = failure.expect("the scan went on without its server");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
    assert!(
        message.starts_with("cannot read chunk 'c/0/1' of s3://data/grid.zarr"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_requests_that_fail_while_the_server_restarts_are_retried() {
    let mut server = servers::seaweedfs(BUCKET);
    let grid = "tests/data/zarr_v3/grid_2d.zarr";
    servers::upload(&s3_store(&server), &repo().join(grid), "grid.zarr").await;
    let mut options = s3_options(&server);
    options.retain(|(k, _)| !k.starts_with("client."));
    // SeaweedFS answers 500 for a while after it starts: retries must outlast that, whatever
    // the jitter of the backoff.
    options.push(("client.retry_timeout", "60".into()));
    options.push(("client.max_retries", "100".into()));
    let ctx = ndfusion::new_session_context();
    ctx.sql(&create("remote", "s3://data/grid.zarr", &options))
        .await
        .unwrap();
    ctx.sql(&create("local", grid, &[])).await.unwrap();
    let query = |t: &str| format!("SELECT time, station, temp FROM {t} ORDER BY time, station");
    let expected = pretty_format_batches(&collect(&ctx, &query("local")).await)
        .unwrap()
        .to_string();

    server.stop();
    let running = {
        let ctx = ctx.clone();
        let sql = query("remote");
        tokio::spawn(async move { ctx.sql(&sql).await?.collect().await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _server = tokio::task::spawn_blocking(move || server.restart_seaweedfs())
        .await
        .unwrap();
    let batches = running.await.unwrap().expect("retries outlast the restart");
    assert_eq!(
        pretty_format_batches(&batches).unwrap().to_string(),
        expected
    );
}

#[test]
fn the_cli_exits_non_zero_when_the_store_is_down() {
    let server = servers::seaweedfs(BUCKET);
    let mut options = s3_options(&server);
    drop(server);
    options.retain(|(k, _)| *k != "client.retry_timeout");
    options.push(("client.retry_timeout", "1".into()));
    let output = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["--quiet", "-c"])
        .arg(create("t", "s3://data/grid.zarr", &options))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("Error: object store error at s3://data/grid.zarr/zarr.json"),
        "{stderr}"
    );
    assert!(!stderr.contains(S3_SECRET), "{stderr}");
}

/// One nd record batch: `temperature` over (x, y), optionally `salinity` over x, and global
/// attribute `id`.
fn nd_batch(id: &str, offset: f64, salinity: bool) -> NdRecordBatch {
    let temperature = NdArrowArray::try_new(
        Arc::new(Float64Array::from_iter_values(
            (0..6).map(|i| offset + i as f64),
        )),
        vec![Dim::new("x", 2), Dim::new("y", 3)],
        vec![],
    )
    .unwrap();
    let mut arrays = vec![("temperature".to_string(), temperature)];
    if salinity {
        let s = NdArrowArray::try_new(
            Arc::new(Float64Array::from(vec![35.0, 35.5])),
            vec![Dim::new("x", 2)],
            vec![],
        )
        .unwrap();
        arrays.push(("salinity".to_string(), s));
    }
    let id = Arc::new(arrow::array::StringArray::from(vec![id])) as arrow::array::ArrayRef;
    NdRecordBatch::try_new(arrays, vec![("id".to_string(), id)]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_lance_nd_tables_are_written_and_read_like_local_ones() {
    let server = servers::seaweedfs(BUCKET);
    let options = s3_options(&server);
    let write = WriteOptions::new().with_storage(storage(&options));
    let read = ReadOptions::new().with_storage(storage(&options));
    let local = tempfile::tempdir().unwrap();
    let local_uri = local.path().join("t.lance").to_string_lossy().to_string();
    let remote_uri = "s3://data/tables/t.lance";
    // Create, append, then append with a new array and statistics (schema evolution).
    let writes = [
        vec![nd_batch("a", 0.0, false)],
        vec![nd_batch("b", 10.0, false), nd_batch("c", 20.0, false)],
        vec![nd_batch("d", 30.0, true)],
    ];
    for batches in &writes {
        write_nd_batches(&local_uri, batches, &WriteOptions::new())
            .await
            .unwrap();
        write_nd_batches(remote_uri, batches, &write).await.unwrap();
    }
    let from_local = read_nd_batches(&local_uri, &ReadOptions::new())
        .await
        .unwrap();
    let from_remote = read_nd_batches(remote_uri, &read).await.unwrap();
    assert_eq!(from_remote.len(), 4);
    assert_eq!(from_remote, from_local);
    assert!(from_remote[0].array("salinity").is_none());
    assert!(from_remote[3].array("salinity").is_some());

    // SQL over the remote table, with the global-attribute filter pushed into Lance.
    let ctx = ndfusion::new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE_ND LOCATION '{remote_uri}' {}",
        options_sql(&options)
    ))
    .await
    .unwrap();
    let batches = collect(
        &ctx,
        "SELECT count(*) AS n, sum(temperature) AS s FROM t WHERE __global_attrs__.id IN ('b', 'd')",
    )
    .await;
    let n = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let s = batches[0]
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    // Rows b and d: 6 cells each, temperatures 10..15 and 30..35.
    assert_eq!((n.value(0), s.value(0)), (12, 75.0 + 195.0));

    // A table that is not there, remotely.
    let message = ndfusion::LanceNdTable::open_with(
        "s3://data/tables/none.lance",
        ndfusion::LanceNdOptions::new().with_storage(storage(&options)),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        message.starts_with("cannot open s3://data/tables/none.lance: no lance-nd table here"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_lance_nd_writers_and_readers_lose_nothing() {
    let server = servers::seaweedfs(BUCKET);
    let options = storage(&s3_options(&server));
    crate::lance_nd::writers_and_readers("s3://data/race.lance", options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_the_application_built_serves_zarr_and_lance_nd() {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    upload_fixtures(&store).await;
    let storage = StorageOptions::new().with_object_store(Arc::clone(&store));
    let table = ZarrTable::open_with(
        "tests/data/zarr_v3/grid_2d.zarr",
        ZarrOptions::new().with_storage(storage.clone()),
    )
    .await
    .unwrap();
    let ctx = ndfusion::new_session_context();
    ctx.register_table("grid", Arc::new(table)).unwrap();
    ctx.sql(
        "CREATE EXTERNAL TABLE local STORED AS ZARR LOCATION 'tests/data/zarr_v3/grid_2d.zarr'",
    )
    .await
    .unwrap();
    let query = |t: &str| {
        format!("SELECT station, sum(temp) AS t, max(pressure) AS p FROM {t} GROUP BY station ORDER BY station")
    };
    assert_eq!(
        pretty_format_batches(&collect(&ctx, &query("grid")).await)
            .unwrap()
            .to_string(),
        pretty_format_batches(&collect(&ctx, &query("local")).await)
            .unwrap()
            .to_string()
    );
    let batches = read_nd_batches(
        "tests/data/lance_nd/doc_example.lance",
        &ReadOptions::new().with_storage(storage),
    )
    .await
    .unwrap();
    let local = read_nd_batches("tests/data/lance_nd/doc_example.lance", &ReadOptions::new())
        .await
        .unwrap();
    assert_eq!(batches, local);
}

#[tokio::test]
async fn redirects_are_followed_only_within_the_host() {
    use crate::listener::{path, response, Listener};
    // The host a redirect points away to: it must receive nothing.
    let elsewhere = Listener::start(|_| response("200 OK", &[], b"{}"));
    let away = format!("{}/grid.zarr/zarr.json", elsewhere.url());
    let metadata = std::fs::read(repo().join("tests/data/zarr_v3/grid_2d.zarr/zarr.json")).unwrap();
    let origin = Listener::start(move |head| match path(head) {
        "/away.zarr/zarr.json" => response("302 Found", &[("location", away.clone())], b""),
        "/moved.zarr/zarr.json" => response(
            "301 Moved Permanently",
            &[("location", "/grid.zarr/zarr.json".into())],
            b"",
        ),
        "/grid.zarr/zarr.json" => response("200 OK", &[], &metadata),
        _ => response("404 Not Found", &[], b""),
    });
    let ctx = ndfusion::new_session_context();
    let err = query_error(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}/away.zarr' \
             OPTIONS ('client.max_retries' '0')",
            origin.url()
        ),
    )
    .await;
    assert!(err.contains("redirect to another host refused"), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{}", elsewhere.port)),
        "{err}"
    );
    assert!(
        elsewhere.requests().is_empty(),
        "{:?}",
        elsewhere.requests()
    );
    // Within the host a redirect is followed: the moved array opens (its chunks are absent:
    // fill values).
    collect(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE m STORED AS ZARR LOCATION '{}/moved.zarr'",
            origin.url()
        ),
    )
    .await;
    let got = collect(&ctx, "SELECT count(*) AS n FROM m").await;
    let shown = pretty_format_batches(&got).unwrap().to_string();
    assert!(shown.contains("| 35 |"), "{shown}");
    assert!(elsewhere.requests().is_empty());
}

/// An object store that counts the bytes and requests its reads fetch.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    bytes: std::sync::atomic::AtomicU64,
    requests: std::sync::atomic::AtomicU64,
}

impl Counting {
    fn take(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.bytes.swap(0, Relaxed), self.requests.swap(0, Relaxed))
    }

    fn add(&self, bytes: u64, requests: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.bytes.fetch_add(bytes, Relaxed);
        self.requests.fetch_add(requests, Relaxed);
    }
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if !head {
            self.add(got.range.end - got.range.start, 1);
        }
        Ok(got)
    }

    async fn get_ranges(
        &self,
        location: &ObjectPath,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<zarrs::storage::Bytes>> {
        // The inner store coalesces nearby ranges into its requests: counted as asked.
        let got = self.inner.get_ranges(location, ranges).await?;
        self.add(got.iter().map(|b| b.len() as u64).sum(), 0);
        self.add(0, 1);
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A 1% time range of a chunked netCDF-4 file on S3 fetches a small multiple of 1% of the
/// file: the superblock and headers at open (read in 16 KiB blocks), the chunk index when the
/// first query needs it, then the one chunk of the range. Counted at the store, every
/// request included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_percent_range_of_a_netcdf4_file_on_s3_reads_little_more_than_one_percent() {
    let server = servers::seaweedfs(BUCKET);
    let s3 = s3_store(&server);
    let file = "tests/data/netcdf/ranges.nc";
    let bytes = std::fs::read(repo().join(file)).unwrap();
    s3.put(&ObjectPath::from(file), PutPayload::from(bytes.clone()))
        .await
        .unwrap();
    let counting = Arc::new(Counting {
        inner: s3,
        bytes: 0.into(),
        requests: 0.into(),
    });
    let storage = StorageOptions::new().with_object_store(Arc::clone(&counting) as _);
    let options = ndfusion::NetCDFOptions::new().with_storage(storage);
    let table = ndfusion::NetCDFTable::open_with(file, options)
        .await
        .unwrap();
    let (at_open, open_requests) = counting.take();

    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/data/netcdf/expected.json")).unwrap(),
    )
    .unwrap();
    let want = &expected["ranges"]["one_percent"];
    let file_bytes = expected["ranges"]["file_bytes"].as_u64().unwrap();
    assert_eq!(file_bytes, bytes.len() as u64);
    let ctx = ndfusion::new_session_context();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let (from, to) = (want["from"].as_str().unwrap(), want["to"].as_str().unwrap());
    let sql = format!(
        "SELECT count(t2m), sum(t2m) FROM t WHERE time >= '{}' AND time < '{}'",
        &from[..19],
        &to[..19]
    );
    let batches = collect(&ctx, &sql).await;
    let (in_query, query_requests) = counting.take();
    let count = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(count.value(0), want["count"].as_i64().unwrap());
    let sum = batches[0]
        .column(1)
        .as_any()
        .downcast_ref::<Float64Array>()
        .unwrap();
    let theirs: f64 = want["sum"].as_str().unwrap().parse().unwrap();
    assert!(
        (sum.value(0) - theirs).abs() < 1e-6 * theirs.abs(),
        "{} vs {theirs}",
        sum.value(0)
    );

    // 1% of the file: 2 of its 200 times, one chunk of 100. Opening: the first 16 KiB, then
    // the blocks of headers; the first query: the nodes of the variable's chunk B-tree on the
    // way to the chunk (its root and one leaf: 100 chunks make two leaves), then the chunk.
    let one_percent = file_bytes / 100;
    eprintln!("open {at_open} B in {open_requests}, first query {in_query} B in {query_requests}");
    assert!(
        query_requests <= 3,
        "the query fetched {in_query} bytes in {query_requests} requests"
    );
    assert!(
        at_open + in_query <= 4 * one_percent,
        "opening fetched {at_open} bytes in {open_requests} requests, the query {in_query} in \
         {query_requests}; 1% is {one_percent}"
    );
    // The index is kept: the same query again fetches the chunk alone.
    collect(&ctx, &sql).await;
    let (again, again_requests) = counting.take();
    assert!(
        again <= 2 * one_percent && again_requests <= 2,
        "the query again fetched {again} bytes in {again_requests} requests; 1% is {one_percent}"
    );
}
