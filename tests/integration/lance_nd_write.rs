//! `COPY ... STORED AS LANCE_ND` and `INSERT INTO` a lance-nd table (README, "Writing
//! lance-nd"): the batches written, read back with `read_nd_batches`; index dimensions; a
//! query failing midway, a cancelled one, and one larger than the memory pool commit nothing;
//! the loopback S3 server; a cluster, where the client writes. The SQL answers are in
//! sql/lance_nd_copy.slt; what pylance reads in python/tests/test_copy.py.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, StringArray};
use arrow::datatypes::Float64Type;
use arrow::util::pretty::pretty_format_batches;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

use ndfusion::{read_nd_batches, write_nd_batches, Dim, NdArrowArray, NdRecordBatch};

use crate::object_stores::{s3_options, BUCKET};
use crate::servers;

const DOC: &str = "tests/data/lance_nd/doc_example.lance";

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

/// The Lance versions of the table at `location` (none when there is no table).
fn versions(location: &std::path::Path) -> usize {
    std::fs::read_dir(location.join("_versions")).map_or(0, |d| {
        d.filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".manifest")
        })
        .count()
    })
}

/// A table whose array `temp` is on dimension `i`, which has no coordinate (an index column
/// in SQL), written by `write_nd_batches` as an application would.
async fn indexed_table(location: &str) {
    let temp = NdArrowArray::try_new(
        Arc::new(Float64Array::from(vec![1.0, 2.0])),
        vec![Dim::new("i", 2)],
        vec![],
    )
    .unwrap();
    let id: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    let batch =
        NdRecordBatch::try_new(vec![("temp".into(), temp)], vec![("id".into(), id)]).unwrap();
    write_nd_batches(location, &[batch], &Default::default())
        .await
        .unwrap();
}

/// An INSERT names cells of an index dimension by position: the batch's grid runs from 0 to
/// the largest, NULL where no row is.
#[tokio::test]
async fn an_insert_writes_index_dimensions_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("indexed.lance");
    let location = location.to_str().unwrap();
    indexed_table(location).await;
    let ctx = ndfusion::new_session_context();
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE_ND LOCATION '{location}'"),
    )
    .await;
    let inserted = ok(
        &ctx,
        "INSERT INTO t (i, temp, __global_attrs__) VALUES (2, 30.0, named_struct('id', 'b')), \
         (0, 10.0, named_struct('id', 'b'))",
    )
    .await;
    assert!(inserted.contains("| 2     |"), "{inserted}");
    let batches = read_nd_batches(location, &Default::default())
        .await
        .unwrap();
    assert_eq!(batches.len(), 2);
    let b = &batches[1];
    assert_eq!(b.grid(), &[Dim::new("i", 3)]);
    assert!(
        b.array("i").is_none(),
        "an index dimension has no coordinate"
    );
    let temp = b.array("temp").unwrap().values();
    assert_eq!(temp.as_primitive::<Float64Type>().value(0), 10.0);
    assert!(temp.is_null(1));
    assert_eq!(temp.as_primitive::<Float64Type>().value(2), 30.0);
    let (key, id) = &b.global_attrs()[0];
    assert_eq!((key.as_str(), id.as_string::<i32>().value(0)), ("id", "b"));
    // The table reads its own insert.
    let sums = ok(
        &ctx,
        "SELECT __global_attrs__.id AS id, count(*) AS n, sum(temp) AS s, max(i) AS m FROM t \
         GROUP BY 1 ORDER BY 1",
    )
    .await;
    assert!(
        sums.contains("| a  | 2 | 3.0  | 1 |") && sums.contains("| b  | 3 | 40.0 | 2 |"),
        "{sums}"
    );
    let e = err(&ctx, "INSERT INTO t (i, temp) VALUES (-1, 1.0)").await;
    assert!(
        e.contains("its values are positions from 0, found -1"),
        "{e}"
    );
}

/// A query that fails after rows arrived, one cancelled, and one larger than the memory pool
/// leave no table (a COPY) and no new version (an INSERT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_cancelled_and_too_large_writes_commit_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_session_context();
    let failing = "SELECT CASE WHEN value > 150000 THEN value / (value - value) ELSE value END \
                   AS v, value % 7 AS k FROM generate_series(1, 200000)";
    let out = dir.path().join("failed.lance");
    let e = err(
        &ctx,
        &format!(
            "COPY ({failing}) TO '{}' STORED AS LANCE_ND OPTIONS ('dimensions' 'v', 'batch_by' 'k')",
            out.display()
        ),
    )
    .await;
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    assert!(!out.exists());

    let kept = dir.path().join("kept.lance");
    ok(&ctx, &format!("COPY (SELECT value AS v, value % 7 AS k FROM generate_series(1, 70)) TO '{}' STORED AS LANCE_ND OPTIONS ('dimensions' 'v', 'batch_by' 'k')", kept.display())).await;
    assert_eq!(versions(&kept), 1);
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE kept STORED AS LANCE_ND LOCATION '{}'",
            kept.display()
        ),
    )
    .await;
    let e = err(
        &ctx,
        &format!(
            "INSERT INTO kept (v, __global_attrs__) SELECT v, named_struct('k', k) FROM ({failing})"
        ),
    )
    .await;
    assert!(e.to_lowercase().contains("divide by zero"), "{e}");
    assert_eq!(versions(&kept), 1);

    // Cancelled while it takes its rows.
    let cancelled = dir.path().join("cancelled.lance");
    let sql = format!(
        "COPY (SELECT value AS v FROM generate_series(1, 1000000000)) TO '{}' STORED AS \
         LANCE_ND OPTIONS ('dimensions' 'v')",
        cancelled.display()
    );
    let copying = ctx.clone();
    let task = tokio::spawn(async move { run(&copying, &sql).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!task.is_finished());
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(!cancelled.exists());

    // More rows than the pool holds: an error naming the sink, nothing written.
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(8 << 20, 1.0)
        .build_arc()
        .unwrap();
    let small = ndfusion::new_session_context_with_runtime(SessionConfig::new(), runtime);
    let large = dir.path().join("large.lance");
    let e = err(
        &small,
        &format!(
            "COPY (SELECT value AS v, value * 2 AS w FROM generate_series(1, 2000000)) TO '{}' \
             STORED AS LANCE_ND OPTIONS ('dimensions' 'v')",
            large.display()
        ),
    )
    .await;
    assert!(e.contains("LanceNdSink"), "{e}");
    assert!(!large.exists());
}

/// A table on the loopback S3 server, written by COPY and INSERT with the storage keys.
#[tokio::test]
async fn tables_are_written_to_s3_too() {
    let server = servers::seaweedfs(BUCKET);
    let storage: Vec<String> = (s3_options(&server).iter())
        .map(|(k, v)| format!("'{k}' '{v}'"))
        .collect();
    let storage = storage.join(", ");
    let ctx = ndfusion::new_session_context();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE doc STORED AS LANCE_ND LOCATION '{}'",
            repo(DOC)
        ),
    )
    .await;
    let location = format!("s3://{BUCKET}/written/doc.lance");
    ok(&ctx, &format!("COPY (SELECT * FROM doc) TO '{location}' STORED AS LANCE_ND OPTIONS ({storage}, 'dimensions' 'station,x,y')")).await;
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE back STORED AS LANCE_ND LOCATION '{location}' OPTIONS ({storage})"),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO back (x, y, temperature, __global_attrs__) VALUES (1.0, 2.0, 3.5, named_struct('id', 'd'))",
    )
    .await;
    let answer = ok(
        &ctx,
        "SELECT count(*) AS n, sum(temperature) AS t, sum(pressure) AS p FROM back",
    )
    .await;
    assert!(answer.contains("| 24 | 114.5 | 3000.5 |"), "{answer}");
    let batches = read_nd_batches(
        &location,
        &ndfusion::ReadOptions::from_map(
            &s3_options(&server)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(batches.len(), 4);
}

/// On a cluster the query runs there and the client writes: COPY and INSERT alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_the_client_writes_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ndfusion::new_standalone_context(2).await.unwrap();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE doc STORED AS LANCE_ND LOCATION '{}'",
            repo(DOC)
        ),
    )
    .await;
    let out = dir.path().join("from_cluster.lance");
    let copy = format!(
        "COPY (SELECT * FROM doc WHERE __global_attrs__.id <> 'b') TO '{}' STORED AS LANCE_ND \
         OPTIONS ('dimensions' 'x,y')",
        out.display()
    );
    let plan = ok(&ctx, &format!("EXPLAIN {copy}")).await;
    assert!(
        plan.contains("LanceNdSink: COPY location=") && plan.contains("DistributedQueryExec"),
        "{plan}"
    );
    assert!(ok(&ctx, &copy).await.contains("| 20    |"));
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE back STORED AS LANCE_ND LOCATION '{}'",
            out.display()
        ),
    )
    .await;
    let insert = "INSERT INTO back (x, y, temperature, __global_attrs__) SELECT x, y, \
                  temperature, named_struct('id', 'copied') FROM doc WHERE __global_attrs__.id = 'c'";
    let plan = ok(&ctx, &format!("EXPLAIN {insert}")).await;
    assert!(
        plan.contains("LanceNdSink: INSERT location=") && plan.contains("DistributedQueryExec"),
        "{plan}"
    );
    assert!(ok(&ctx, insert).await.contains("| 8     |"));
    let answer = ok(
        &ctx,
        "SELECT __global_attrs__.id AS id, count(*) AS n, sum(temperature) AS t FROM back \
         GROUP BY 1 ORDER BY 1",
    )
    .await;
    assert!(
        answer.contains("| a      | 12 | 153.0 |")
            && answer.contains("| c      | 8  | -42.0 |")
            && answer.contains("| copied | 8  | -42.0 |"),
        "{answer}"
    );
    let batches = read_nd_batches(out.to_str().unwrap(), &Default::default())
        .await
        .unwrap();
    let index = batches[2].array("x").unwrap().values();
    assert_eq!(
        index.as_primitive::<Float64Type>().values().to_vec(),
        vec![5.0, 6.0]
    );
}
