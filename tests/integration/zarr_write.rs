//! `COPY (query) TO '...' STORED AS ZARR` (README, "Writing Zarr"): a struct array that
//! ndfusion reads back as the same rows, locally and on the loopback S3 server; an existing
//! location needs `overwrite`; a query that fails midway, or is cancelled, leaves nothing at
//! the target; columns a struct field cannot hold and NULLs are errors naming them. What
//! zarr-python 3.4.2 reads from these stores is checked in python/tests/test_copy.py.

use std::path::Path;
use std::time::{Duration, Instant};

use arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use object_store::ObjectStoreExt;

use crate::object_stores::{s3_options, BUCKET};
use crate::servers;

const STRUCT_1D: &str = "tests/data/zarr_v3/struct_1d.zarr";

fn repo(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

async fn run(ctx: &SessionContext, sql: &str) -> Result<String, String> {
    let result = async { ctx.sql(sql).await?.collect().await }.await;
    match result {
        Ok(batches) => Ok(pretty_format_batches(&batches).unwrap().to_string()),
        Err(e) => Err(ndfusion::Error::user_message(&e)),
    }
}

async fn ok(ctx: &SessionContext, sql: &str) -> String {
    run(ctx, sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

async fn err(ctx: &SessionContext, sql: &str) -> String {
    run(ctx, sql).await.expect_err(sql)
}

/// What is in `folder`, names sorted (hidden staging folders included).
fn entries(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// The rows of `table` and of the store written from it, compared both ways with EXCEPT:
/// no row of one is missing from the other, and the counts agree.
async fn assert_same_rows(ctx: &SessionContext, source: &str, written: &str) {
    for (a, b) in [(source, written), (written, source)] {
        let sql = format!("SELECT count(*) AS missing FROM ({a} EXCEPT ALL {b})");
        assert!(ok(ctx, &sql).await.contains("| 0       |"), "{sql}");
    }
}

/// zarr-python's struct array (id int32, flags uint8, point {x, y} float32, value float64)
/// written back: ndfusion reads the same rows, types and element order (dim_0), and the
/// metadata is the seed's struct data type with the query's fields in order.
#[tokio::test]
async fn a_struct_array_is_written_and_read_back_as_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("copy.zarr");
    let ctx = ndfusion::new_session_context();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{}'",
            repo(STRUCT_1D)
        ),
    )
    .await;
    let written = ok(
        &ctx,
        &format!("COPY (SELECT id, flags, point, value FROM s ORDER BY dim_0) TO '{}' STORED AS ZARR OPTIONS ('chunks' 'dim_0=3')", out.display()),
    )
    .await;
    assert!(written.contains("| 10    |"), "{written}");
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    assert_same_rows(&ctx, "SELECT * FROM s", "SELECT * FROM back").await;
    let schema = |t: &str| {
        format!("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{t}' ORDER BY ordinal_position")
    };
    assert_eq!(
        ok(&ctx, &schema("s")).await,
        ok(&ctx, &schema("back")).await
    );
    // 10 elements in chunks of 3: four chunks, the last one stored whole.
    assert_eq!(entries(&out.join("c")), ["0", "1", "2", "3"]);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["shape"], serde_json::json!([10]));
    assert_eq!(
        meta["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([3])
    );
    let source: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo(&format!("{STRUCT_1D}/zarr.json"))).unwrap())
            .unwrap();
    assert_eq!(meta["data_type"], source["data_type"]);
    assert_eq!(entries(dir.path()), ["copy.zarr"]);
}

/// A table's own rows, its `dim_0` column with them (`COPY (SELECT * FROM t WHERE ...)`): the
/// column is kept as a field, whatever its values, and the array's dimension is named
/// `index` (pandas' `reset_index` name), so the store reads back as the rows copied plus
/// their index; a column named `index` too moves the dimension on to `index_1`.
#[tokio::test]
async fn a_tables_own_rows_copy_with_their_dimension_column() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{}'",
            repo(STRUCT_1D)
        ),
    )
    .await;
    let subset = "SELECT * FROM s WHERE dim_0 BETWEEN 2 AND 8 AND value > 0";
    let out = dir.path().join("subset.zarr");
    let written = ok(
        &ctx,
        &format!(
            "COPY ({subset} ORDER BY dim_0) TO '{}' STORED AS ZARR OPTIONS ('chunks' 'index=2')",
            out.display()
        ),
    )
    .await;
    let count = ok(&ctx, &format!("SELECT count(*) AS n FROM ({subset})")).await;
    let n: String = count
        .lines()
        .nth(3)
        .unwrap()
        .trim_matches(['|', ' '])
        .into();
    assert!(written.contains(&format!("| {n} ")), "{written} vs {count}");
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    assert_same_rows(&ctx, subset, "SELECT * EXCLUDE (index) FROM back").await;
    // The index counts the elements written, in the order they were written.
    let order = ok(
        &ctx,
        "SELECT count(*) AS out_of_order FROM (SELECT dim_0, index, \
         lag(dim_0) OVER (ORDER BY index) AS before FROM back) WHERE before >= dim_0",
    )
    .await;
    assert!(order.contains("| 0            |"), "{order}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["dimension_names"], serde_json::json!(["index"]));
    assert_eq!(
        meta["data_type"]["configuration"]["fields"][0]["name"],
        "dim_0"
    );
    // A copy of that copy: `index` is a column now, so the dimension is `index_1`.
    let again = dir.path().join("again.zarr");
    ok(
        &ctx,
        &format!(
            "COPY (SELECT * FROM back) TO '{}' STORED AS ZARR",
            again.display()
        ),
    )
    .await;
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(again.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["dimension_names"], serde_json::json!(["index_1"]));
}

/// Times (NULL as NaT), durations, dates, booleans and every integer and float width
/// round-trip; an empty result is an array of no elements.
#[tokio::test]
async fn every_fixed_size_type_round_trips_and_an_empty_result_is_an_empty_array() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    let query = "SELECT CAST(value % 100 AS TINYINT) AS i8, CAST(value AS SMALLINT) AS i16, \
         CAST(value AS INT) AS i32, value AS i64, CAST(value % 200 AS TINYINT UNSIGNED) AS u8, \
         CAST(value AS SMALLINT UNSIGNED) AS u16, CAST(value AS INT UNSIGNED) AS u32, \
         CAST(value AS BIGINT UNSIGNED) AS u64, CAST(value AS REAL) / 3 AS f32, \
         CAST(value AS DOUBLE) / 3 AS f64, value % 2 = 0 AS even, \
         CASE WHEN value % 3 = 0 THEN NULL ELSE to_timestamp_seconds(value * 86400) END AS t, \
         to_timestamp_nanos(value) AS t_ns, \
         CAST(to_timestamp_seconds(value * 86400) AS DATE) AS d, \
         arrow_cast(value, 'Duration(Millisecond)') AS dur, \
         named_struct('a', value, 'b', named_struct('c', CAST(value AS DOUBLE))) AS nested \
         FROM generate_series(1, 1000)";
    let out = dir.path().join("types.zarr");
    ok(
        &ctx,
        &format!("COPY ({query}) TO '{}' STORED AS ZARR", out.display()),
    )
    .await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    // Dates come back as datetime64[D] timestamps; the rest as they were.
    let source = format!("SELECT * REPLACE (CAST(d AS TIMESTAMP) AS d) FROM ({query})");
    assert_same_rows(&ctx, &source, "SELECT * EXCLUDE (dim_0) FROM back").await;
    let nulls = ok(&ctx, "SELECT count(*) - count(t) AS nat FROM back").await;
    assert!(nulls.contains("| 333 |"), "{nulls}");

    let empty = dir.path().join("empty.zarr");
    let written = ok(&ctx, &format!("COPY (SELECT id, value FROM (VALUES (1, 2.0)) AS v(id, value) WHERE id > 1) TO '{}' STORED AS ZARR", empty.display())).await;
    assert!(written.contains("| 0     |"), "{written}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(empty.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["shape"], serde_json::json!([0]));
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE nothing STORED AS ZARR LOCATION '{}'",
            empty.display()
        ),
    )
    .await;
    assert!(ok(&ctx, "SELECT count(*) AS n FROM nothing")
        .await
        .contains("| 0 |"));
}

/// A location that holds something is refused unless `overwrite` is true, before the query
/// runs; with it the old store is replaced by the new, complete one.
#[tokio::test]
async fn an_existing_location_is_replaced_only_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.zarr");
    let ctx = ndfusion::new_session_context();
    let copy = |n: u32, options: &str| {
        format!(
            "COPY (SELECT value FROM generate_series(1, {n})) TO '{}' STORED AS ZARR {options}",
            out.display()
        )
    };
    ok(&ctx, &copy(10, "")).await;
    let refused = err(&ctx, &copy(20, "")).await;
    assert!(
        refused.contains(&format!(
            "cannot write {}: something is already there",
            out.display()
        )) && refused.contains("'overwrite' 'true'"),
        "{refused}"
    );
    // A plain file is a location taken too.
    let file = dir.path().join("file.zarr");
    std::fs::write(&file, b"keep").unwrap();
    let refused = err(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS one) TO '{}' STORED AS ZARR",
            file.display()
        ),
    )
    .await;
    assert!(refused.contains("something is already there"), "{refused}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");

    ok(
        &ctx,
        &copy(20, "OPTIONS ('overwrite' 'true', 'compression' 'gzip')"),
    )
    .await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    let sum = ok(&ctx, "SELECT count(*) AS n, sum(value) AS total FROM back").await;
    assert!(sum.contains("| 20 | 210   |"), "{sum}");
    assert_eq!(entries(dir.path()), ["file.zarr", "out.zarr"]);
}

/// A query that fails after chunks were written leaves no store and no staging folder; an
/// overwrite that fails leaves the old store as it was.
#[tokio::test]
async fn a_query_failing_midway_leaves_nothing_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    // Rows past 150,000 divide by zero: the first batches (and chunks of 1,000) are written.
    let failing =
        "SELECT CASE WHEN value > 150000 THEN value / (value - value) ELSE value END AS v \
                   FROM generate_series(1, 200000)";
    let out = dir.path().join("failed.zarr");
    let e = err(
        &ctx,
        &format!(
            "COPY ({failing}) TO '{}' STORED AS ZARR OPTIONS ('chunks' 'dim_0=1000')",
            out.display()
        ),
    )
    .await;
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    wait_until_empty(dir.path());

    let kept = dir.path().join("kept.zarr");
    ok(
        &ctx,
        &format!(
            "COPY (SELECT value FROM generate_series(1, 5)) TO '{}' STORED AS ZARR",
            kept.display()
        ),
    )
    .await;
    let before = std::fs::read(kept.join("zarr.json")).unwrap();
    err(&ctx, &format!("COPY ({failing}) TO '{}' STORED AS ZARR OPTIONS ('overwrite' 'true', 'chunks' 'dim_0=1000')", kept.display())).await;
    assert_eq!(std::fs::read(kept.join("zarr.json")).unwrap(), before);
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE kept STORED AS ZARR LOCATION '{}'",
            kept.display()
        ),
    )
    .await;
    assert!(ok(&ctx, "SELECT sum(value) AS s FROM kept")
        .await
        .contains("| 15 |"));
    wait_for(
        || entries(dir.path()) == ["kept.zarr"],
        "the staging folder removed",
    );
}

/// A COPY dropped while it runs (a cancelled query) removes what it wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_copy_leaves_nothing_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cancelled.zarr");
    let ctx = ndfusion::new_session_context();
    let sql = format!(
        "COPY (SELECT value, value * 2 AS twice FROM generate_series(1, 1000000000)) TO '{}' \
         STORED AS ZARR OPTIONS ('chunks' 'dim_0=1000', 'compression' 'none')",
        out.display()
    );
    let task = tokio::spawn(async move { run(&ctx, &sql).await });
    // Cancelled once chunks are being written into the staging folder.
    wait_for(
        || {
            std::fs::read_dir(dir.path()).unwrap().any(|e| {
                let path = e.unwrap().path();
                std::fs::read_dir(path.join("c")).is_ok_and(|mut c| c.nth(5).is_some())
            })
        },
        "chunks written",
    );
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    wait_until_empty(dir.path());
}

/// Columns and values a struct field cannot hold are errors naming them, before anything is
/// written (types) or without leaving anything (NULLs).
#[tokio::test]
async fn what_a_struct_cannot_hold_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    let at = |name: &str| dir.path().join(name).display().to_string();
    let e = err(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS id, 'a' AS name) TO '{}' STORED AS ZARR",
            at("s.zarr")
        ),
    )
    .await;
    assert!(
        e.contains("column 'name' is Utf8") && e.contains("fixed-size values"),
        "{e}"
    );
    let e = err(
        &ctx,
        &format!(
            "COPY (SELECT [1, 2] AS xs) TO '{}' STORED AS ZARR",
            at("l.zarr")
        ),
    )
    .await;
    assert!(e.contains("column 'xs' is List"), "{e}");
    let e = err(
        &ctx,
        &format!(
            "COPY (SELECT named_struct('p', 'x') AS s) TO '{}' STORED AS ZARR",
            at("n.zarr")
        ),
    )
    .await;
    assert!(e.contains("column 's.p' is Utf8"), "{e}");
    let e = err(&ctx, &format!("COPY (SELECT CASE WHEN value = 7 THEN NULL ELSE value END AS v FROM generate_series(1, 10)) TO '{}' STORED AS ZARR", at("null.zarr"))).await;
    assert!(
        e.contains("column 'v' is NULL in row 6 of the result") && e.contains("coalesce"),
        "{e}"
    );
    let e = err(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS a) TO '{}' STORED AS ZARR OPTIONS ('dimension' 'a')",
            at("o.zarr")
        ),
    )
    .await;
    assert!(
        e.contains("invalid option 'dimension'")
            && e.contains("known: overwrite, compression, chunks"),
        "{e}"
    );
    let e = err(
        &ctx,
        &format!(
            "COPY (SELECT 1 AS a) TO '{}' STORED AS ZARR OPTIONS ('chunks' 'time=5')",
            at("c.zarr")
        ),
    )
    .await;
    assert!(e.contains("no dimension 'time'"), "{e}");
    wait_until_empty(dir.path());
}

/// On the loopback S3 server: a new store (metadata written last), a refused existing one,
/// an overwrite (staged beside it, then copied over), and a failed write that removes its
/// objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_are_written_to_s3_too() {
    let server = servers::seaweedfs(BUCKET);
    let options = s3_options(&server);
    let pairs: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("'{k}' '{v}'"))
        .collect();
    let storage = pairs.join(", ");
    let store = crate::object_stores::s3_store(&server);
    // An object beside the stores (it also makes sure the bucket is there).
    store
        .put(
            &object_store::path::Path::from("beside/marker"),
            b"m".to_vec().into(),
        )
        .await
        .unwrap();
    let ctx = ndfusion::new_session_context();
    let location = format!("s3://{BUCKET}/written/copy.zarr");
    let copy = |n: u32, more: &str| {
        format!("COPY (SELECT value, CAST(value AS DOUBLE) / 4 AS quarter FROM generate_series(1, {n})) TO '{location}' STORED AS ZARR OPTIONS ({storage}, 'chunks' 'dim_0=100'{more})")
    };
    ok(&ctx, &copy(1000, "")).await;
    let create = format!(
        "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{location}' OPTIONS ({storage})"
    );
    ok(&ctx, &create).await;
    assert!(
        ok(&ctx, "SELECT count(*) AS n, sum(quarter) AS q FROM back")
            .await
            .contains("| 1000 | 125125.0 |")
    );
    let e = err(&ctx, &copy(10, "")).await;
    assert!(
        e.contains(&format!(
            "cannot write {location}: something is already there"
        )),
        "{e}"
    );
    ok(&ctx, &copy(300, ", 'overwrite' 'true'")).await;
    ok(&ctx, "DROP TABLE back").await;
    ok(&ctx, &create).await;
    assert!(ok(&ctx, "SELECT count(*) AS n, max(value) AS m FROM back")
        .await
        .contains("| 300 | 300 |"));
    let failed = format!("s3://{BUCKET}/written/failed.zarr");
    let e = err(&ctx, &format!("COPY (SELECT CASE WHEN value > 150000 THEN value / (value - value) ELSE value END AS v FROM generate_series(1, 200000)) TO '{failed}' STORED AS ZARR OPTIONS ({storage}, 'chunks' 'dim_0=1000')")).await;
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    // Only the replaced store's objects remain below the prefix (3 chunks and zarr.json).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        use futures::TryStreamExt;
        let keys: Vec<String> = store
            .list(Some(&object_store::path::Path::from("written")))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        let mut keys = keys;
        keys.sort();
        let expected = [
            "written/copy.zarr/c/0",
            "written/copy.zarr/c/1",
            "written/copy.zarr/c/2",
            "written/copy.zarr/zarr.json",
        ];
        if keys == expected {
            break;
        }
        assert!(Instant::now() < deadline, "objects left: {keys:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A dataset with strings in Zarr 2 (its `.zgroup` put last), then replaced by a Zarr 3
    // one: none of the old store's objects are left.
    let grid = format!("s3://{BUCKET}/grids/g.zarr");
    let gridded = |version: &str, n: u32| {
        format!("COPY (SELECT concat('s', CAST(value % 3 AS VARCHAR)) AS station, value AS depth, concat('l', CAST(value AS VARCHAR)) AS label FROM generate_series(1, {n})) TO '{grid}' STORED AS ZARR OPTIONS ({storage}, 'dimensions' 'station,depth', 'zarr_format' '{version}', 'overwrite' 'true')")
    };
    let read =
        format!("CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{grid}' OPTIONS ({storage})");
    ok(&ctx, &gridded("2", 30)).await;
    ok(&ctx, &read).await;
    let counted = "SELECT count(*) AS cells, count(DISTINCT station) AS s, max(label) AS top FROM g WHERE label <> ''";
    assert!(ok(&ctx, counted).await.contains("| 30    | 3 | l9  |"));
    ok(&ctx, &gridded("3", 12)).await;
    ok(&ctx, "DROP TABLE g").await;
    ok(&ctx, &read).await;
    assert!(ok(&ctx, counted).await.contains("| 12    | 3 | l9  |"));
    use futures::TryStreamExt;
    let keys: Vec<String> = store
        .list(Some(&object_store::path::Path::from("grids")))
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    assert!(
        keys.contains(&"grids/g.zarr/zarr.json".to_string()),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .all(|k| !k.contains("/.z") && !k.contains("/0.")),
        "{keys:?}"
    );
}

fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Staging folders are removed in the background: waits (bounded) until `folder` is empty.
fn wait_until_empty(folder: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !entries(folder).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            entries(folder)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_the_client_writes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_standalone_context(2).await.unwrap();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{}'",
            repo(STRUCT_1D)
        ),
    )
    .await;
    let out = dir.path().join("from_cluster.zarr");
    let copy = format!(
        "COPY (SELECT id, point, value FROM s WHERE id > 0) TO '{}' STORED AS ZARR",
        out.display()
    );
    let plan = ok(&ctx, &format!("EXPLAIN {copy}")).await;
    assert!(
        plan.contains("ZarrSink: location=") && plan.contains("DistributedQueryExec"),
        "{plan}"
    );
    assert!(ok(&ctx, &copy).await.contains("| 7     |"));
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    assert_same_rows(
        &ctx,
        "SELECT id, point, value FROM s WHERE id > 0",
        "SELECT id, point, value FROM back",
    )
    .await;
    let e = err(&ctx, &copy).await;
    assert!(e.contains("something is already there"), "{e}");
    // A gridded write too: the rows come back from the cluster, sorted here by the dimension
    // (a NaN reads back as NULL, as xarray masks it: left out).
    let grid = dir.path().join("grid.zarr");
    ok(&ctx, &format!("COPY (SELECT id, value FROM s WHERE id > 0 AND NOT isnan(value) ORDER BY value) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'id')", grid.display())).await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{}'",
            grid.display()
        ),
    )
    .await;
    assert_same_rows(
        &ctx,
        "SELECT id, value FROM s WHERE id > 0 AND NOT isnan(value)",
        "SELECT id, value FROM g",
    )
    .await;
}

/// `OPTIONS ('dimensions' ...)`: a dataset on the grid of those columns. Read back by
/// ndfusion as a dataset table, it is the same rows where every cell had one; cells without
/// a row read as NULL, integers with such cells come back as floats (as xarray makes them).
/// What xarray opens is checked against `Dataset.from_dataframe` in python/tests/test_copy.py.
#[tokio::test]
async fn a_gridded_write_is_a_dataset_of_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    // 4 times x 3 latitudes x 5 longitudes, every cell once, in no particular order.
    let full = "SELECT to_timestamp_seconds(t * 86400) AS time, CAST(la AS DOUBLE) / 2 AS lat, \
                CAST(lo AS INT) AS lon, CAST(t * 100 + la * 10 + lo AS REAL) AS temp, \
                t * 100 + la * 10 + lo AS code, (t + la + lo) % 2 = 0 AS even \
                FROM unnest(range(4)) AS a(t), unnest(range(3)) AS b(la), unnest(range(5)) AS c(lo) \
                ORDER BY temp DESC";
    let out = dir.path().join("grid.zarr");
    let written = ok(&ctx, &format!("COPY ({full}) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat,lon', 'chunks' 'time=3,lon=2', 'attributes' '{{\"title\": \"grid\"}}')", out.display())).await;
    assert!(written.contains("| 60    |"), "{written}");
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    assert_same_rows(
        &ctx,
        &format!("SELECT time, lat, lon, temp, code, even FROM ({full})"),
        "SELECT time, lat, lon, temp, code, even FROM g",
    )
    .await;
    assert!(
        ok(&ctx, "SELECT __global_attrs__.title AS t FROM g LIMIT 1")
            .await
            .contains("grid")
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("temp/zarr.json")).unwrap()).unwrap();
    assert_eq!(
        meta["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([3, 3, 2])
    );
    assert_eq!(
        meta["dimension_names"],
        serde_json::json!(["time", "lat", "lon"])
    );
    assert_eq!(
        entries(&out),
        ["code", "even", "lat", "lon", "temp", "time", "zarr.json"]
    );

    // A chunk length past its dimension is the dimension's length: a write holds what the
    // grid needs, whatever number the option gives.
    let long = dir.path().join("long.zarr");
    ok(&ctx, &format!("COPY ({full}) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat,lon', 'chunks' 'time=1000000000000')", long.display())).await;
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(long.join("temp/zarr.json")).unwrap()).unwrap();
    assert_eq!(
        meta["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([4, 3, 5])
    );

    // Leave out some cells: those read NULL, and integers and booleans become floats.
    let sparse = dir.path().join("sparse.zarr");
    ok(&ctx, &format!("COPY (SELECT * FROM ({full}) WHERE code % 7 <> 0) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat,lon')", sparse.display())).await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{}'",
            sparse.display()
        ),
    )
    .await;
    let counts = ok(&ctx, "SELECT count(*) AS cells, count(temp) AS temps, count(code) AS codes, sum(code) AS total FROM s").await;
    let expected = ok(&ctx, &format!("SELECT 60 AS cells, count(*) AS temps, count(*) AS codes, CAST(sum(code) AS DOUBLE) AS total FROM ({full}) WHERE code % 7 <> 0")).await;
    assert_eq!(counts, expected);
    let types = ok(&ctx, "SELECT data_type FROM information_schema.columns WHERE table_name = 's' AND column_name IN ('code', 'even') ORDER BY column_name").await;
    assert_eq!(types.matches("Float64").count(), 2, "{types}");
}

/// Strings, as a dimension and as a variable, in both Zarr formats: read back by ndfusion as
/// the rows, a cell no row names as `""` (xarray writes a missing string so, and reads it
/// back so); each format's documents and chunk keys. xarray's view of the same writes is
/// checked in python/tests/test_copy.py.
#[tokio::test]
async fn gridded_writes_store_strings_in_either_zarr_format() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    // 3 stations x 3 depths but one cell ('a', 2): 'ç' (two bytes in UTF-8) sorts last.
    let rows = "SELECT station, CAST(d AS INT) AS depth, concat(station, '-', CAST(d AS VARCHAR)) \
                AS label, CAST(d AS DOUBLE) / 4 AS temp \
                FROM (VALUES ('b'), ('a'), ('ç')) AS s(station), unnest(range(3)) AS r(d) \
                WHERE NOT (station = 'a' AND d = 2)";
    let expected = format!(
        "SELECT * FROM (SELECT station, depth, label, temp FROM ({rows}) \
         UNION ALL SELECT 'a', CAST(2 AS INT), '', CAST(NULL AS DOUBLE))"
    );
    for version in ["2", "3"] {
        let out = dir.path().join(format!("strings{version}.zarr"));
        ok(&ctx, &format!("COPY ({rows}) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'station,depth', 'zarr_format' '{version}', 'chunks' 'station=2,depth=2')", out.display())).await;
        let table = format!("t{version}");
        ok(
            &ctx,
            &format!(
                "CREATE EXTERNAL TABLE {table} STORED AS ZARR LOCATION '{}'",
                out.display()
            ),
        )
        .await;
        assert_same_rows(
            &ctx,
            &expected,
            &format!("SELECT station, depth, label, temp FROM {table}"),
        )
        .await;
        let stations = ok(
            &ctx,
            &format!("SELECT DISTINCT station FROM {table} ORDER BY station"),
        )
        .await;
        assert!(
            stations.contains("| a       |\n| b       |\n| ç       |"),
            "{stations}"
        );
    }
    assert_eq!(
        entries(&dir.path().join("strings2.zarr")),
        [
            ".zattrs",
            ".zgroup",
            ".zmetadata",
            "depth",
            "label",
            "station",
            "temp"
        ]
    );
    assert_eq!(
        entries(&dir.path().join("strings2.zarr/label")),
        [".zarray", ".zattrs", "0.0", "0.1", "1.0", "1.1"]
    );
    let zarray: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("strings2.zarr/label/.zarray")).unwrap(),
    )
    .unwrap();
    assert_eq!(zarray["dtype"], "|O");
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("strings3.zarr/label/zarr.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["data_type"], "string");
    assert_eq!(
        entries(&dir.path().join("strings3.zarr/label/c")),
        ["0", "1"]
    );
}

/// Two rows on one cell, a dimension that is not a column, a column the grid cannot hold:
/// errors naming them, and nothing at the target.
#[tokio::test]
async fn gridded_writes_refuse_what_makes_no_grid() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    let at = |name: &str| dir.path().join(name).display().to_string();
    let e = err(&ctx, &format!("COPY (SELECT value % 3 AS x, value AS v FROM generate_series(1, 10)) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'x')", at("dup.zarr"))).await;
    assert!(
        e.contains("two rows have the same dimensions (x) = (0)") && e.contains("GROUP BY x"),
        "{e}"
    );
    let e = err(&ctx, &format!("COPY (SELECT value AS x FROM generate_series(1, 3)) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'x,time')", at("missing.zarr"))).await;
    assert!(
        e.contains("dimension 'time' is not a column of the query; its columns: x"),
        "{e}"
    );
    let e = err(&ctx, &format!("COPY (SELECT value AS x, arrow_cast('a', 'Binary') AS s FROM generate_series(1, 3)) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'x')", at("binary.zarr"))).await;
    assert!(
        e.contains("column 's' is Binary, which a gridded write does not store yet"),
        "{e}"
    );
    let e = err(&ctx, &format!("COPY (SELECT value AS x FROM generate_series(1, 3)) TO '{}' STORED AS ZARR OPTIONS ('zarr_format' '2')", at("v2.zarr"))).await;
    assert!(
        e.contains("'zarr_format'") && e.contains("applies with 'dimensions'"),
        "{e}"
    );
    let e = err(&ctx, &format!("COPY (SELECT value AS x, value AS y FROM generate_series(1, 3000)) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'x,y')", at("sparse.zarr"))).await;
    assert!(e.contains("would have 9000000 cells for 3000 rows"), "{e}");
    let e = err(&ctx, &format!("COPY (SELECT value AS x FROM generate_series(1, 3)) TO '{}' STORED AS ZARR OPTIONS ('attributes' '{{}}')", at("attrs.zarr"))).await;
    assert!(e.contains("applies with 'dimensions'"), "{e}");
    wait_until_empty(dir.path());
}
