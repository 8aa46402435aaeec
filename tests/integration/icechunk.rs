//! Icechunk repositories written by icechunk 2.3.0, xarray 2026.9.0 and VirtualiZarr 2.8.0
//! (tests/data/icechunk/make_fixtures.py) read as xarray reads each snapshot
//! (tests/data/icechunk/expected.json), locally and on the loopback S3 server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{Float64Type, TimestampMicrosecondType};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use serde_json::Value;

use ndfusion::{new_session_context, new_session_context_with_config, Error};

use super::xarray_cells::{assert_rows, Cell};
use crate::object_stores::{s3_options, s3_store, upload_fixtures, BUCKET};
use crate::servers::{self, S3_KEY_ID, S3_SECRET};

const DIR: &str = "tests/data/icechunk";
const OCEAN: &str = "tests/data/icechunk/ocean.icechunk";

pub(crate) fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

type Options = Vec<(&'static str, String)>;

fn options_sql(options: &[(&str, String)]) -> String {
    let pairs: Vec<String> = (options.iter())
        .map(|(k, v)| format!("'{k}' '{v}'"))
        .collect();
    match pairs.is_empty() {
        true => String::new(),
        false => format!("OPTIONS ({})", pairs.join(", ")),
    }
}

async fn create(ctx: &SessionContext, name: &str, location: &str, options: &[(&str, String)]) {
    let sql = format!(
        "CREATE EXTERNAL TABLE {name} STORED AS ICECHUNK LOCATION '{location}' {}",
        options_sql(options)
    );
    ctx.sql(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn batch(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    concat_batches(&schema, &batches).unwrap()
}

async fn error(ctx: &SessionContext, sql: &str) -> String {
    let result = match ctx.sql(sql).await {
        Ok(df) => df.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    Error::user_message(&result.expect_err(sql))
}

fn strings(v: &Value) -> Vec<String> {
    (v.as_array().unwrap().iter())
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// The `surface` dataset and the `points` array of one version, as xarray and numpy read it.
async fn assert_version(ctx: &SessionContext, suffix: &str, want: &Value, what: &str) {
    let surface = &want["surface"];
    let columns = strings(&surface["columns"]);
    let got = batch(
        ctx,
        &format!("SELECT {} FROM surface_{suffix}", columns.join(", ")),
    )
    .await;
    assert_eq!(
        got.num_rows() as u64,
        surface["rows"].as_u64().unwrap(),
        "{what}"
    );
    let dtype = |c: &str| surface["dtypes"][c].as_str().unwrap().to_string();
    assert_rows(what, &got, surface, &columns, dtype, 3);

    let points = batch(
        ctx,
        &format!("SELECT id, depth, ok FROM points_{suffix} ORDER BY dim_0"),
    )
    .await;
    for (i, field) in ["id", "depth", "ok"].into_iter().enumerate() {
        let values = want["points"][field].as_array().unwrap();
        let kind = if field == "depth" { "float64" } else { "" };
        for (row, value) in values.iter().enumerate() {
            let ours = Cell::from_arrow(points.column(i), row);
            assert_eq!(
                ours,
                Cell::from_json(value, kind),
                "{what}: points.{field}[{row}]"
            );
        }
    }
}

/// Every version selector reads the snapshot xarray reads for it: a branch's tip, a tag, a
/// snapshot id, a branch as of an instant; an array and a dataset of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_selector_reads_what_xarray_reads() {
    let want = expected();
    let ocean = &want["ocean"];
    let commits = &ocean["commits"];
    // (table suffix, options choosing the version, the version's answers in expected.json)
    let versions: Vec<(&str, Options, &str)> = vec![
        ("main", vec![], "main"),
        ("branch", vec![("branch", "main".into())], "main"),
        ("tag", vec![("tag", "v1".into())], "v1"),
        (
            "snapshot",
            vec![("snapshot", commits["appended"].as_str().unwrap().into())],
            "appended",
        ),
        (
            "experiment",
            vec![("branch", "experiment".into())],
            "experiment",
        ),
        (
            "as_of",
            vec![
                ("branch", "main".into()),
                ("as_of", ocean["as_of_first"].as_str().unwrap().into()),
            ],
            "v1",
        ),
    ];
    let ctx = new_session_context();
    for (suffix, selector, version) in &versions {
        let mut options = selector.clone();
        options.push(("path", "surface".into()));
        create(&ctx, &format!("surface_{suffix}"), OCEAN, &options).await;
        let mut options = selector.clone();
        options.push(("path", "/points/".into()));
        create(&ctx, &format!("points_{suffix}"), OCEAN, &options).await;
        let what = format!("{suffix} ({selector:?})");
        assert_version(&ctx, suffix, &ocean["versions"][version], &what).await;
    }

    // The mean xarray computes, through SQL.
    let got = batch(&ctx, "SELECT avg(temp) FROM surface_experiment").await;
    let mean = got.column(0).as_primitive::<Float64Type>().value(0);
    let theirs: f64 = ocean["versions"]["experiment"]["mean_temp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (mean - theirs).abs() <= 1e-12 * theirs.abs(),
        "{mean} vs {theirs}"
    );

    // Time filters prune as on any Zarr dataset; EXPLAIN names the snapshot read.
    let plan = batch(
        &ctx,
        "EXPLAIN SELECT avg(temp) FROM surface_tag WHERE time >= '2026-01-11'",
    )
    .await;
    let text = arrow::util::pretty::pretty_format_batches(&[plan])
        .unwrap()
        .to_string();
    let first = commits["first"].as_str().unwrap();
    assert!(
        text.contains(&format!("ocean.icechunk@{first}/surface")),
        "{text}"
    );
    let count = batch(
        &ctx,
        "SELECT count(*) FROM surface_tag WHERE time >= '2026-01-11'",
    )
    .await;
    // Days 11 and 12 of the first 12, 3 x 4 cells each.
    assert_eq!(
        count
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0),
        24
    );
}

/// `icechunk_log` and `icechunk_refs` list what icechunk's `ancestry`, `list_branches` and
/// `list_tags` list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_and_refs_functions_list_what_icechunk_lists() {
    let want = expected();
    let ocean = &want["ocean"];
    let ctx = new_session_context();
    for (branch, call) in [
        ("main", format!("icechunk_log('{OCEAN}')")),
        (
            "experiment",
            format!("icechunk_log('{OCEAN}', 'experiment')"),
        ),
    ] {
        let got = batch(
            &ctx,
            &format!("SELECT id, parent_id, written_at, message FROM {call}"),
        )
        .await;
        let log = ocean["log"][branch].as_array().unwrap();
        assert_eq!(got.num_rows(), log.len(), "{branch}");
        for (row, snapshot) in log.iter().enumerate() {
            assert_eq!(
                got.column(0).as_string::<i32>().value(row),
                snapshot["id"].as_str().unwrap()
            );
            let parent = got.column(1).as_string::<i32>();
            match snapshot["parent_id"].as_str() {
                Some(p) => assert_eq!(parent.value(row), p),
                None => assert!(parent.is_null(row), "{branch}: the first has no parent"),
            }
            let at = got.column(2).as_primitive::<TimestampMicrosecondType>();
            assert_eq!(
                Some(at.value(row)),
                snapshot["written_at_us"].as_i64(),
                "{branch} {row}"
            );
            assert_eq!(
                got.column(3).as_string::<i32>().value(row),
                snapshot["message"].as_str().unwrap()
            );
        }
    }
    // What to pin: the newest snapshot of main.
    let newest = batch(
        &ctx,
        &format!("SELECT id FROM icechunk_log('{OCEAN}') ORDER BY written_at DESC LIMIT 1"),
    )
    .await;
    assert_eq!(
        newest.column(0).as_string::<i32>().value(0),
        ocean["commits"]["points2"].as_str().unwrap()
    );

    let refs = batch(
        &ctx,
        &format!(
            "SELECT name, kind, snapshot_id FROM icechunk_refs('{OCEAN}') ORDER BY kind, name"
        ),
    )
    .await;
    let rows: Vec<(String, String, String)> = (0..refs.num_rows())
        .map(|r| {
            let s = |c: usize| refs.column(c).as_string::<i32>().value(r).to_string();
            (s(0), s(1), s(2))
        })
        .collect();
    let commits = &ocean["commits"];
    let id = |k: &str| commits[k].as_str().unwrap().to_string();
    assert_eq!(
        rows,
        vec![
            ("experiment".into(), "branch".into(), id("experiment")),
            ("main".into(), "branch".into(), id("points2")),
            ("v1".into(), "tag".into(), id("first")),
        ]
    );
    assert_eq!(strings(&ocean["branches"]), ["experiment", "main"]);
    assert_eq!(strings(&ocean["tags"]), ["v1"]);

    let err = error(
        &ctx,
        &format!("SELECT * FROM icechunk_log('{OCEAN}', 'nope')"),
    )
    .await;
    assert!(
        err.contains("no branch 'nope'") && err.contains("experiment, main"),
        "{err}"
    );
    let err = error(&ctx, "SELECT * FROM icechunk_refs('tests/data/datasets')").await;
    assert!(
        err.contains("tests/data/datasets") && err.contains("not an Icechunk repository"),
        "{err}"
    );
    let err = error(&ctx, &format!("SELECT * FROM icechunk_refs('{OCEAN}', 3)")).await;
    assert!(
        err.contains("argument 2") && err.contains("icechunk_refs('<location>'"),
        "{err}"
    );
    let err = error(
        &ctx,
        &format!("SELECT * FROM icechunk_refs('{OCEAN}', MAP {{'aws.regoin': 'x'}})"),
    )
    .await;
    assert!(err.contains("aws.regoin"), "{err}");
}

/// A copy of the ocean repository the test may commit to.
pub(crate) fn ocean_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("ocean.icechunk");
    servers::copy_dir(&repo_root().join(OCEAN), &copy);
    (dir, copy)
}

/// Commits to `main` of the repository at `repo_dir` the temperatures of branch `experiment`
/// (doubled): every chunk of `surface/temp` copied over, as a writer would write them.
pub(crate) async fn commit_doubled_temperatures(repo_dir: &Path) {
    let storage = icechunk::new_local_filesystem_storage(repo_dir)
        .await
        .unwrap();
    commit_doubled_temperatures_in(storage).await
}

/// The same in the repository `storage` holds.
async fn commit_doubled_temperatures_in(storage: Arc<dyn icechunk::Storage + Send + Sync>) {
    use icechunk::format::ByteRange;
    use icechunk::repository::VersionInfo;
    use tokio::sync::RwLock;
    let repo = icechunk::Repository::open(storage).execute().await.unwrap();
    let from = repo
        .readonly_session(&VersionInfo::BranchTipRef("experiment".into()))
        .await
        .unwrap();
    let from = icechunk::Store::from_session(Arc::new(RwLock::new(from))).await;
    let to = repo.writable_session("main").await.unwrap();
    let to = icechunk::Store::from_session(Arc::new(RwLock::new(to))).await;
    let keys: Vec<String> = from
        .list_prefix("surface/temp")
        .await
        .unwrap()
        .map(|k| k.unwrap())
        .collect()
        .await;
    let chunks: Vec<&String> = keys.iter().filter(|k| k.contains("/c/")).collect();
    assert!(!chunks.is_empty(), "{keys:?}");
    for key in chunks {
        let bytes = from.get(key, &ByteRange::ALL).await.unwrap();
        to.set(key, bytes).await.unwrap();
    }
    let session = to.session();
    let mut session = session.write().await;
    session
        .commit("main: temperature doubled")
        .execute()
        .await
        .unwrap();
}

pub(crate) fn temps(batches: &[RecordBatch]) -> Vec<Cell> {
    (batches.iter())
        .flat_map(|b| (0..b.num_rows()).map(move |r| Cell::from_arrow(b.column(0), r)))
        .collect()
}

pub(crate) fn xarray_temps(version: &Value) -> Vec<Cell> {
    (version["surface"]["values"]["temp"]
        .as_array()
        .unwrap()
        .iter())
    .map(|v| Cell::from_json(v, "float32"))
    .collect()
}

/// A table on a branch reads the tip when each query is planned, and the whole query reads
/// that snapshot: a commit landing while a query runs changes nothing in it; the next query
/// sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_keeps_its_snapshot_while_a_commit_lands() {
    let (_dir, copy) = ocean_copy();
    let location = copy.display().to_string();
    let storage = icechunk::new_local_filesystem_storage(&copy).await.unwrap();
    assert_commit_during_query(&location, &[], storage).await;
}

/// Runs a query on the tip of `main` of the ocean repository at `location`, lands a commit
/// (through `storage`) after its first batch, and checks both queries' rows against xarray's.
async fn assert_commit_during_query(
    location: &str,
    storage_keys: &[(&'static str, String)],
    storage: Arc<dyn icechunk::Storage + Send + Sync>,
) {
    let want = expected();
    let versions = &want["ocean"]["versions"];
    // One partition, one chunk at a time, small batches: the second chunk (the appended days)
    // is read after the commit.
    let ctx = new_session_context_with_config(SessionConfig::new().with_target_partitions(1));
    let mut options = storage_keys.to_vec();
    options.extend([
        ("path", "surface".to_string()),
        ("batch_size", "12".into()),
        ("chunks_in_flight", "1".into()),
    ]);
    create(&ctx, "s", location, &options).await;
    // Planned (and its snapshot chosen) and started before the commit.
    let df = ctx.sql("SELECT temp FROM s").await.unwrap();
    let mut stream = df.execute_stream().await.unwrap();
    let mut running = vec![stream.next().await.unwrap().unwrap()];
    commit_doubled_temperatures_in(storage).await;
    while let Some(b) = stream.next().await {
        running.push(b.unwrap());
    }
    // Rows come in C order of (time, lat, lon), as xarray's to_dataframe lists them.
    assert_eq!(
        temps(&running),
        xarray_temps(&versions["main"]),
        "the running query"
    );

    let sql = "SELECT temp FROM s ORDER BY time, lat DESC, lon";
    let after = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    assert_eq!(
        temps(&after),
        xarray_temps(&versions["experiment"]),
        "the next query"
    );
    let plan = batch(&ctx, "EXPLAIN SELECT temp FROM s").await;
    let text = arrow::util::pretty::pretty_format_batches(&[plan])
        .unwrap()
        .to_string();
    let pairs: Vec<String> = (storage_keys.iter())
        .map(|(k, v)| format!("'{k}': '{v}'"))
        .collect();
    let map = match pairs.is_empty() {
        true => String::new(),
        false => format!(", 'main', MAP {{{}}}", pairs.join(", ")),
    };
    let log = batch(
        &ctx,
        &format!("SELECT id FROM icechunk_log('{location}'{map}) LIMIT 1"),
    )
    .await;
    let tip = log.column(0).as_string::<i32>().value(0).to_string();
    assert_ne!(tip, want["ocean"]["commits"]["points2"].as_str().unwrap());
    assert!(text.contains(&format!("@{tip}/surface")), "{text}");
}

/// Virtual chunks (VirtualiZarr's references into netCDF4 files) read as xarray reads them,
/// from containers the table authorizes; any other container is an error naming it and the
/// option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_chunks_read_from_authorized_containers_only() {
    let want = expected();
    let table = &want["virtual"]["table"];
    let repo = format!("{DIR}/virtual_local.icechunk");
    let nc = repo_root().join(DIR).join("nc").canonicalize().unwrap();
    let here = format!("nc=file://{}/", nc.display());
    let ctx = new_session_context();
    create(
        &ctx,
        "v",
        &repo,
        &[("virtual_chunk_containers", here.clone())],
    )
    .await;
    let columns = strings(&table["columns"]);
    let got = batch(&ctx, &format!("SELECT {} FROM v", columns.join(", "))).await;
    assert_eq!(got.num_rows() as u64, table["rows"].as_u64().unwrap());
    let dtype = |c: &str| table["dtypes"][c].as_str().unwrap().to_string();
    assert_rows("virtual", &got, table, &columns, dtype, 3);

    // Not authorized: the table opens (the metadata is native), its chunks are refused.
    create(&ctx, "refused", &repo, &[]).await;
    let err = error(&ctx, "SELECT sum(sst) FROM refused").await;
    assert!(
        err.contains("virtual chunk in container")
            && err.contains("(named nc)")
            && err.contains("'virtual_chunk_containers'"),
        "{err}"
    );
    // A container the repository does not have.
    let sql = format!(
        "CREATE EXTERNAL TABLE w STORED AS ICECHUNK LOCATION '{repo}' \
         OPTIONS ('virtual_chunk_containers' 'file:///elsewhere/')"
    );
    let err = error(&ctx, &sql).await;
    assert!(
        err.contains("virtual_chunk_containers")
            && err.contains("file:///elsewhere/")
            && err.contains("it has: nc=file://"),
        "{err}"
    );
}

/// Each mistake is an error naming what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_version_option_path_or_location_at_fault() {
    let ctx = new_session_context();
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('tag' 'v9')"),
            vec!["no tag 'v9'", "its tags: v1"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('branch' 'dev')"),
            vec!["no branch 'dev'", "experiment, main"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('snapshot' '0000000000000000000G')"),
            vec!["no snapshot 0000000000000000000G"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('branch' 'main', 'tag' 'v1')"),
            vec!["'branch' and 'tag' both choose a version"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('as_of' 'last tuesday')"),
            vec!["invalid option 'as_of'", "'last tuesday'"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('as_of' '2000-01-01T00:00:00Z')"),
            vec!["no snapshot on branch 'main' written at or before 2000-01-01"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('snapshot' 'abc')"),
            vec!["invalid option 'snapshot'", "'abc' is not a snapshot id"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('path' 'ocean/deep')"),
            vec![
                "ocean.icechunk@",
                "/ocean/deep",
                "no array or group at this path",
            ],
        ),
        (
            "LOCATION 'tests/data/datasets' ".into(),
            vec!["tests/data/datasets", "not an Icechunk repository"],
        ),
        (
            "LOCATION 'tests/data/icechunk/missing.icechunk' ".into(),
            vec!["tests/data/icechunk/missing.icechunk"],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('tags' 'v1')"),
            vec![
                "invalid option 'tags'",
                "known: batch_size",
                "branch, tag, snapshot, as_of",
            ],
        ),
        (
            format!("LOCATION '{OCEAN}' OPTIONS ('path' 'points', 'variables' 'temp')"),
            vec!["invalid option 'variables'", "is an array, not a group"],
        ),
    ];
    for (rest, says) in cases {
        let sql = format!("CREATE EXTERNAL TABLE e STORED AS ICECHUNK {rest}");
        let err = error(&ctx, &sql).await;
        for s in says {
            assert!(err.contains(s), "{sql}\n{err}\nlacks: {s}");
        }
    }
    // The v1 tag has no appended days: a path present in one version is absent in none here,
    // but the first snapshot of the repository has no nodes at all.
    let sql = format!(
        "CREATE EXTERNAL TABLE e STORED AS ICECHUNK LOCATION '{OCEAN}' \
         OPTIONS ('snapshot' '1CECHNKREP0F1RSTCMT0', 'path' 'surface')"
    );
    let err = error(&ctx, &sql).await;
    assert!(err.contains("@1CECHNKREP0F1RSTCMT0/surface"), "{err}");
}

/// The same repositories on the loopback S3 server: versions, the log, and virtual chunks in
/// the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repositories_on_s3_read_as_local_ones() {
    let want = expected();
    let ocean = &want["ocean"];
    let server = servers::seaweedfs(BUCKET);
    upload_fixtures(&s3_store(&server)).await;
    let storage = s3_options(&server);
    let location = format!("s3://{BUCKET}/{OCEAN}");
    let ctx = new_session_context();
    for (suffix, selector, version) in [
        ("main", ("branch", "main"), "main"),
        ("tag", ("tag", "v1"), "v1"),
        ("experiment", ("branch", "experiment"), "experiment"),
    ] {
        for (name, path) in [("surface", "surface"), ("points", "points")] {
            let mut options: Vec<(&str, String)> = storage.clone();
            options.push((selector.0, selector.1.into()));
            options.push(("path", path.into()));
            create(&ctx, &format!("{name}_{suffix}"), &location, &options).await;
        }
        assert_version(
            &ctx,
            suffix,
            &ocean["versions"][version],
            &format!("s3 {suffix}"),
        )
        .await;
    }
    // Chunks read ahead as the store's kind wants: 16 in flight over the network, 2 from a
    // local repository's files (as from a local folder).
    create(&ctx, "surface_local", OCEAN, &[("path", "surface".into())]).await;
    for (table, in_flight) in [("surface_main", 16), ("surface_local", 2)] {
        let plan = batch(&ctx, &format!("EXPLAIN VERBOSE SELECT temp FROM {table}")).await;
        let plan = arrow::util::pretty::pretty_format_batches(&[plan])
            .unwrap()
            .to_string();
        assert!(
            plan.contains(&format!("chunks_in_flight={in_flight}")),
            "{table}: {plan}"
        );
    }
    let pairs: Vec<String> = (storage.iter())
        .map(|(k, v)| format!("'{k}': '{v}'"))
        .collect();
    let log = batch(
        &ctx,
        &format!(
            "SELECT id FROM icechunk_log('{location}', 'main', MAP {{{}}}) ORDER BY written_at DESC",
            pairs.join(", ")
        ),
    )
    .await;
    let ids: Vec<&str> = (0..log.num_rows())
        .map(|r| log.column(0).as_string::<i32>().value(r))
        .collect();
    let theirs: Vec<&str> = (ocean["log"]["main"].as_array().unwrap().iter())
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, theirs);

    // VirtualiZarr's absolute s3:// references, read with the table's S3 settings.
    let table = &want["virtual"]["table"];
    let container = want["virtual_s3"]["container"]
        .as_str()
        .unwrap()
        .to_string();
    let mut options = storage.clone();
    options.push(("virtual_chunk_containers", container.clone()));
    create(
        &ctx,
        "vs3",
        &format!("s3://{BUCKET}/{DIR}/virtual_s3.icechunk"),
        &options,
    )
    .await;
    let columns = strings(&table["columns"]);
    let got = batch(&ctx, &format!("SELECT {} FROM vs3", columns.join(", "))).await;
    let dtype = |c: &str| table["dtypes"][c].as_str().unwrap().to_string();
    assert_eq!(got.num_rows() as u64, table["rows"].as_u64().unwrap());
    assert_rows("virtual on S3", &got, table, &columns, dtype, 3);
    // Without the grant, the chunks are refused naming the container.
    create(
        &ctx,
        "vs3_refused",
        &format!("s3://{BUCKET}/{DIR}/virtual_s3.icechunk"),
        &storage,
    )
    .await;
    let err = error(&ctx, "SELECT sum(sst) FROM vs3_refused").await;
    assert!(
        err.contains(&container) && err.contains("virtual_chunk_containers"),
        "{err}"
    );
    // A prefix that holds no repository.
    let mut options = storage.clone();
    options.push(("path", "surface".into()));
    let sql = format!(
        "CREATE EXTERNAL TABLE nothing STORED AS ICECHUNK LOCATION 's3://{BUCKET}/nowhere' {}",
        options_sql(&options)
    );
    let err = error(&ctx, &sql).await;
    assert!(
        err.contains("s3://data/nowhere") && err.contains("not an Icechunk repository"),
        "{err}"
    );

    // A commit landing on the S3 repository while a query runs.
    let mut s3 = icechunk::config::S3Options::default();
    s3.endpoint_url = Some(server.endpoint());
    s3.region = Some("us-east-1".into());
    s3.allow_http = true;
    s3.force_path_style = true;
    let credentials =
        icechunk::config::S3Credentials::Static(icechunk::config::S3StaticCredentials {
            access_key_id: S3_KEY_ID.into(),
            secret_access_key: S3_SECRET.into(),
            session_token: None,
            expires_after: None,
        });
    let writer = icechunk::storage::new_s3_object_store_storage(
        s3,
        BUCKET.into(),
        Some(OCEAN.into()),
        Some(credentials),
        Vec::new(),
        Vec::new(),
    )
    .await
    .unwrap();
    assert_commit_during_query(&location, &storage, writer).await;
}

/// Overwrites every file under `dir` of the repository copy with `bytes(len)`.
fn damage(repo: &Path, dir: &str, bytes: impl Fn(usize) -> Vec<u8>) {
    for entry in std::fs::read_dir(repo.join(dir)).unwrap() {
        let path = entry.unwrap().path();
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        std::fs::write(&path, bytes(len)).unwrap();
    }
}

/// Damaged repositories (Icechunk's own files, or chunks) are errors naming the repository,
/// and for chunks the chunk; never a panic or wrong rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_repositories_are_errors_naming_what_is_damaged() {
    let garbage = |len: usize| (0..len).map(|i| (i * 131 % 251) as u8).collect::<Vec<u8>>();
    let truncated = |len: usize| vec![0x28; len.min(7)];
    type Damage = (&'static str, Box<dyn Fn(usize) -> Vec<u8>>);
    let cases: Vec<Damage> = vec![
        ("snapshots", Box::new(garbage)),
        ("manifests", Box::new(garbage)),
        ("manifests", Box::new(truncated)),
        ("chunks", Box::new(garbage)),
        ("chunks", Box::new(truncated)),
    ];
    for (case, (dir, bytes)) in cases.into_iter().enumerate() {
        let (_tmp, copy) = ocean_copy();
        damage(&copy, dir, bytes);
        let location = copy.display().to_string();
        let ctx = new_session_context();
        let sql = format!(
            "CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{location}' \
             OPTIONS ('path' 'surface')"
        );
        let err = match ctx.sql(&sql).await {
            Err(e) => Error::user_message(&e),
            Ok(_) => error(&ctx, "SELECT sum(temp), sum(salt) FROM d").await,
        };
        assert!(err.contains(&location), "{dir}: {err}");
        if dir == "chunks" {
            assert!(err.contains("cannot read chunk 'temp/c/"), "{dir}: {err}");
        }
        if case == 4 {
            // ndfusion reads native chunks itself: a file shorter than the manifest says.
            assert!(
                err.contains("the manifest places a chunk at bytes 0.."),
                "{dir}: {err}"
            );
        }
    }
    // The repository's own description damaged: not a repository any more.
    let (_tmp, copy) = ocean_copy();
    std::fs::write(copy.join("repo"), b"not a repository").unwrap();
    let location = copy.display().to_string();
    let ctx = new_session_context();
    let sql = format!("CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{location}'");
    let err = error(&ctx, &sql).await;
    assert!(err.contains(&location), "{err}");
}

/// A sharded array and an uncompressed one, read in byte ranges of their shards and chunks
/// (zarrs' partial decoders over the repository), give what zarr-python reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_and_uncompressed_arrays_read_in_byte_ranges() {
    let want = expected();
    let repo = format!("{DIR}/sharded.icechunk");
    let ctx = new_session_context();
    create(&ctx, "sharded", &repo, &[("path", "sharded".into())]).await;
    create(&ctx, "plain", &repo, &[("path", "plain".into())]).await;
    for (table, kind, columns) in [("sharded", "", 6), ("plain", "float64", 4)] {
        let values: Vec<Cell> = (want["sharded"][table]["values"].as_array().unwrap().iter())
            .map(|v| Cell::from_json(v, kind))
            .collect();
        for (filter, rows) in [
            ("true", 0..values.len() / columns),
            ("dim_0 BETWEEN 5 AND 6", 5..7),
        ] {
            let sql = format!("SELECT value FROM {table} WHERE {filter} ORDER BY dim_0, dim_1");
            let got = batch(&ctx, &sql).await;
            let ours: Vec<Cell> = (0..got.num_rows())
                .map(|r| Cell::from_arrow(got.column(0), r))
                .collect();
            assert_eq!(
                ours,
                values[rows.start * columns..rows.end * columns],
                "{sql}"
            );
        }
    }
}

/// Icechunk reads its own files whole: one larger than a metadata document may be (64 MiB)
/// is refused before it is read, naming it and the limit (sparse files: nothing is written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_icechunk_files_are_refused_before_they_are_read() {
    let want = expected();
    let tip = want["ocean"]["commits"]["points2"]
        .as_str()
        .unwrap()
        .to_string();
    let grow = |path: &Path| {
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_len((64 << 20) + 1).unwrap();
    };
    let manifests = |repo: &Path| -> Vec<PathBuf> {
        (std::fs::read_dir(repo.join("manifests")).unwrap())
            .map(|e| e.unwrap().path())
            .collect()
    };
    type Grow<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, Grow)> = vec![
        ("/repo", Box::new(|repo: &Path| grow(&repo.join("repo")))),
        (
            "/snapshots/",
            Box::new(|repo: &Path| grow(&repo.join("snapshots").join(&tip))),
        ),
        (
            "/manifests/",
            Box::new(|repo: &Path| manifests(repo).iter().for_each(|m| grow(m))),
        ),
        // Files of the version 1 layout, which Icechunk's opening reads whole whatever the
        // repository's layout.
        (
            "/config.yaml",
            Box::new(|repo: &Path| {
                std::fs::File::create(repo.join("config.yaml")).unwrap();
                grow(&repo.join("config.yaml"))
            }),
        ),
        (
            "/refs/branch.main/ref.json",
            Box::new(|repo: &Path| {
                let file = repo.join("refs/branch.main/ref.json");
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::File::create(&file).unwrap();
                grow(&file)
            }),
        ),
    ];
    for (file, damage) in cases {
        let (_tmp, copy) = ocean_copy();
        damage(&copy);
        let location = copy.display().to_string();
        let ctx = new_session_context();
        let sql = format!(
            "CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{location}' \
             OPTIONS ('path' 'surface')"
        );
        let err = error(&ctx, &sql).await;
        assert!(
            err.contains(&format!("{location}{file}"))
                && err.contains("67108865 bytes")
                && err.contains("NDFUSION_MAX_METADATA_BYTES"),
            "{file}: {err}"
        );
    }
}

/// An Icechunk file replaced by `frame` after its own 39-byte header (magic, writer, spec
/// version, file type, compression), as a crafted repository would hold it.
fn reframe(path: &Path, frame: impl Fn(&[u8]) -> Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let body = zstd::decode_all(&bytes[39..]).unwrap();
    let mut crafted = bytes[..39].to_vec();
    crafted.extend(frame(&body));
    std::fs::write(path, crafted).unwrap();
}

/// `data` as a zstd frame whose header does not give its decompressed size (as writers before
/// icechunk 2.3 wrote them).
fn frame_without_size(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    encoder.include_contentsize(false).unwrap();
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// Icechunk decompresses its files into what their zstd frames claim (and, without a claim,
/// as long as they go on): a small file that decompresses past the bound of a metadata
/// document is refused before Icechunk reads it, whether its frame says so or not; a snapshot
/// that gives a manifest another size than its file's (Icechunk allocates that size) is an
/// error naming both. Frames without a size, as older writers wrote them, still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn icechunk_files_that_decompress_past_the_bound_are_refused() {
    let want = expected();
    let tip = want["ocean"]["commits"]["points2"]
        .as_str()
        .unwrap()
        .to_string();
    let files = |repo: &Path, dir: &str| -> Vec<PathBuf> {
        (std::fs::read_dir(repo.join(dir)).unwrap())
            .map(|e| e.unwrap().path())
            .collect()
    };
    let open = |location: String, storage: Vec<(&'static str, String)>| async move {
        let ctx = new_session_context();
        let mut options = storage;
        options.push(("path", "surface".into()));
        let sql = format!(
            "CREATE EXTERNAL TABLE d STORED AS ICECHUNK LOCATION '{location}' {}",
            options_sql(&options)
        );
        (ctx.sql(&sql).await.map(|_| ctx), location)
    };
    let local = |copy: &Path| open(copy.display().to_string(), Vec::new());
    // 64 MiB + 1 of zeros: a frame of a few KiB, declaring its size or not.
    let zeros = vec![0u8; (64 << 20) + 1];
    let declared = zstd::bulk::compress(&zeros, 1).unwrap();
    let unsaid = frame_without_size(&zeros);
    let bombs = [
        (
            "decompresses to 67108865 bytes, more than the 67108864",
            &declared,
        ),
        ("decompresses to more than the 67108864", &unsaid),
    ];
    for (said, bomb) in bombs {
        for file in ["/repo", "/snapshots/", "/manifests/"] {
            let (_tmp, copy) = ocean_copy();
            let paths = match file {
                "/repo" => vec![copy.join("repo")],
                "/snapshots/" => vec![copy.join("snapshots").join(&tip)],
                _ => files(&copy, "manifests"),
            };
            for path in paths {
                reframe(&path, |_| bomb.clone());
            }
            let (created, location) = local(&copy).await;
            let err = Error::user_message(&created.err().expect("refused"));
            assert!(
                err.contains(&format!("{location}{file}"))
                    && err.contains(said)
                    && err.contains("NDFUSION_MAX_METADATA_BYTES"),
                "{file}: {err}"
            );
        }
    }

    // The repository's description and snapshots rewritten without their frames' sizes: the
    // same rows (not the manifests: the snapshots give their sizes, which rewriting changes).
    let (_tmp, copy) = ocean_copy();
    let mut all = vec![copy.join("repo")];
    all.extend(files(&copy, "snapshots"));
    for path in &all {
        reframe(path, frame_without_size);
    }
    let (created, _) = local(&copy).await;
    let ctx = created.unwrap();
    let sql = "SELECT temp FROM d ORDER BY time, lat DESC, lon";
    let rows = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    assert_eq!(
        temps(&rows),
        xarray_temps(&want["ocean"]["versions"]["main"])
    );

    // The tip's snapshot giving one of its manifests 2^40 bytes (the size of one manifest
    // file, found once in the snapshot, replaced).
    let (_tmp, copy) = ocean_copy();
    let snapshot = copy.join("snapshots").join(&tip);
    let body = zstd::decode_all(&std::fs::read(&snapshot).unwrap()[39..]).unwrap();
    let sizes = files(&copy, "manifests")
        .iter()
        .map(|m| std::fs::metadata(m).unwrap().len().to_le_bytes())
        .collect::<Vec<_>>();
    let size = (sizes.iter())
        .find(|s| body.windows(8).filter(|w| w == &s.as_slice()).count() == 1)
        .copied()
        .expect("a manifest size the snapshot holds once");
    reframe(&snapshot, |body| {
        let at = body.windows(8).position(|w| w == size).unwrap();
        let mut body = body.to_vec();
        body[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        zstd::bulk::compress(&body, 3).unwrap()
    });
    let claim = format!(
        "snapshot {tip} gives the manifest 1099511627776 bytes; the file has {}",
        u64::from_le_bytes(size)
    );
    let (created, location) = local(&copy).await;
    let err = Error::user_message(&created.err().expect("refused"));
    assert!(
        err.contains(&format!("{location}/manifests/")) && err.contains(&claim),
        "{err}"
    );

    // On S3 (a ranged GET of each file's front), where the claimed size would be the capacity
    // Icechunk reserves for the server's answer: the same errors.
    let (_bombed_tmp, bombed) = ocean_copy();
    for path in files(&bombed, "manifests") {
        reframe(&path, |_| unsaid.clone());
    }
    let server = servers::seaweedfs(BUCKET);
    let store = s3_store(&server);
    servers::upload(&store, &copy, "claimed.icechunk").await;
    servers::upload(&store, &bombed, "bombed.icechunk").await;
    for (name, said) in [
        ("claimed.icechunk", claim.as_str()),
        ("bombed.icechunk", "decompresses to more than the 67108864"),
    ] {
        let location = format!("s3://{BUCKET}/{name}");
        let (created, _) = open(location.clone(), s3_options(&server)).await;
        let err = Error::user_message(&created.err().expect("refused"));
        assert!(
            err.contains(&format!("{location}/manifests/")) && err.contains(said),
            "{name}: {err}"
        );
    }
    // An empty object has no front to ask for (S3 answers 416): its size is asked instead,
    // and an empty `config.yaml` (which a version 2 repository does not use) opens as none.
    let (_empty_tmp, empty) = ocean_copy();
    std::fs::write(empty.join("config.yaml"), b"").unwrap();
    servers::upload(&store, &empty, "empty_probe.icechunk").await;
    let location = format!("s3://{BUCKET}/empty_probe.icechunk");
    let (created, _) = open(location, s3_options(&server)).await;
    let ctx = created.expect("an empty config.yaml is no error");
    let rows = ctx
        .sql("SELECT temp FROM d ORDER BY time, lat DESC, lon")
        .await;
    assert_eq!(
        temps(&rows.unwrap().collect().await.unwrap()),
        xarray_temps(&expected()["ocean"]["versions"]["main"])
    );
}
