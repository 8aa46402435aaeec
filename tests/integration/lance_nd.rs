//! lance-nd: tables written by pylance 14.0.2 read back exactly; ndfusion's writes round-trip,
//! evolve the schema, and have the schema pylance's tables have.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Float32Array, Float64Array, Int32Array, Int64Array, StringArray,
};
use arrow::datatypes::{DataType, Float64Type, Schema};
use serde_json::Value;

use ndfusion::{
    read_nd_batches, write_nd_batches, Casting, Dim, Error, NdArrowArray, NdRecordBatch,
    ReadOptions, WriteOptions,
};

const DATA: &str = "tests/data/lance_nd";

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{DATA}/expected.json")).unwrap())
        .unwrap()
}

/// A JSON rendering of one Arrow value, as pyarrow's to_pylist gives it.
fn json_value(a: &ArrayRef, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Float64 => Value::from(a.as_primitive::<Float64Type>().value(i)),
        DataType::Float32 => {
            Value::from(a.as_primitive::<arrow::datatypes::Float32Type>().value(i) as f64)
        }
        DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
        other => panic!("no JSON rendering for {other}"),
    }
}

fn nd_json(a: &NdArrowArray, attr_keys: Option<&[String]>) -> Value {
    let mut o = serde_json::Map::new();
    o.insert(
        "values".into(),
        Value::Array(
            (0..a.values().len())
                .map(|i| json_value(a.values(), i))
                .collect(),
        ),
    );
    o.insert(
        "dim_names".into(),
        Value::Array(
            a.dims()
                .iter()
                .map(|d| Value::from(d.name.clone()))
                .collect(),
        ),
    );
    o.insert(
        "dim_sizes".into(),
        Value::Array(a.dims().iter().map(|d| Value::from(d.size)).collect()),
    );
    if let Some(keys) = attr_keys {
        let attrs: serde_json::Map<String, Value> = keys
            .iter()
            .map(|k| {
                let v = a
                    .attrs()
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or(Value::Null, |(_, v)| json_value(v, 0));
                (k.clone(), v)
            })
            .collect();
        o.insert("attrs".into(), Value::Object(attrs));
    }
    Value::Object(o)
}

/// Compares read batches with pyarrow's rows (absent arrays are null; present ones compared
/// field by field, attributes by key).
fn assert_rows_match(batches: &[NdRecordBatch], rows: &Value) {
    let rows = rows.as_array().unwrap();
    assert_eq!(batches.len(), rows.len());
    for (i, (batch, row)) in batches.iter().zip(rows).enumerate() {
        for (column, want) in row.as_object().unwrap() {
            if column == "__global_attrs__" {
                for (k, v) in want.as_object().unwrap() {
                    let got = batch
                        .global_attrs()
                        .iter()
                        .find(|(n, _)| n == k)
                        .map_or(Value::Null, |(_, a)| json_value(a, 0));
                    assert_eq!(&got, v, "row {i}: global attribute {k}");
                }
                continue;
            }
            match (batch.array(column), want) {
                (None, Value::Null) => {}
                (Some(a), Value::Object(o)) => {
                    let keys: Option<Vec<String>> = match o.get("attrs") {
                        Some(Value::Object(attrs)) => Some(attrs.keys().cloned().collect()),
                        _ => None,
                    };
                    let mut want = want.clone();
                    if o.get("attrs") == Some(&Value::Null) {
                        want.as_object_mut().unwrap().remove("attrs");
                        assert!(a.attrs().is_empty(), "row {i}: {column} has attributes");
                    }
                    assert_eq!(nd_json(a, keys.as_deref()), want, "row {i}: array {column}");
                }
                (got, want) => panic!("row {i}: array {column}: got {got:?}, pyarrow has {want}"),
            }
        }
    }
}

#[tokio::test]
async fn pylance_tables_read_back_exactly() {
    let expected = expected();
    for name in ["doc_example", "evolved"] {
        let batches = read_nd_batches(&format!("{DATA}/{name}.lance"), &ReadOptions::new())
            .await
            .unwrap();
        assert_rows_match(&batches, &expected[name]["rows"]);
    }
    let doc = read_nd_batches(&format!("{DATA}/doc_example.lance"), &ReadOptions::new())
        .await
        .unwrap();
    // Row 0's grid comes from its arrays: temperature (x=3, y=4).
    assert_eq!(doc[0].grid(), &[Dim::new("x", 3), Dim::new("y", 4)]);
    assert_eq!(doc[1].grid(), &[Dim::new("station", 3)]);
    // A filter and a projection.
    let scan = ReadOptions::new()
        .with_arrays(["temperature"])
        .with_filter("__global_attrs__.id = 'c'");
    let c = read_nd_batches(&format!("{DATA}/doc_example.lance"), &scan)
        .await
        .unwrap();
    assert_eq!(c.len(), 1);
    // The filter the SQL provider pushes uses pylance's BTREE index on __global_attrs__.id.
    let many = lance::Dataset::open(&format!("{DATA}/many.lance"))
        .await
        .unwrap();
    let mut scanner = many.scan();
    scanner.filter("__global_attrs__.id = 'id01234'").unwrap();
    let plan = scanner.explain_plan(false).await.unwrap();
    assert!(plan.contains("ScalarIndexQuery"), "{plan}");
    assert_eq!(c[0].arrays().len(), 1);
    assert_eq!(c[0].grid(), &[Dim::new("x", 2), Dim::new("y", 4)]);
}

fn f64s(v: &[f64], dims: &[(&str, usize)], attrs: Vec<(&str, ArrayRef)>) -> NdArrowArray {
    NdArrowArray::try_new(
        Arc::new(Float64Array::from(v.to_vec())),
        dims.iter().map(|(n, s)| Dim::new(*n, *s)).collect(),
        attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    )
    .unwrap()
}

fn text(s: &str) -> ArrayRef {
    Arc::new(StringArray::from(vec![s]))
}

/// The documentation's example, built in Rust as pylance built it in make_fixtures.py.
fn doc_example_batches() -> Vec<NdRecordBatch> {
    let temp_a: Vec<f32> = (0..12).map(|i| i as f32 / 2.0 + 10.0).collect();
    let temp_c: Vec<f32> = (0..8).map(|i| i as f32 * -1.5).collect();
    let temp = |v: Vec<f32>, x: usize, attrs: Vec<(String, ArrayRef)>| {
        NdArrowArray::try_new(
            Arc::new(Float32Array::from(v)),
            vec![Dim::new("x", x), Dim::new("y", 4)],
            attrs,
        )
        .unwrap()
    };
    vec![
        NdRecordBatch::try_new(
            vec![
                ("x".into(), f64s(&[0.0, 0.5, 1.0], &[("x", 3)], vec![])),
                (
                    "y".into(),
                    f64s(&[10.0, 20.0, 30.0, 40.0], &[("y", 4)], vec![]),
                ),
                (
                    "temperature".into(),
                    temp(temp_a, 3, vec![("units".into(), text("K"))]),
                ),
            ],
            vec![("id".into(), text("a"))],
        )
        .unwrap(),
        NdRecordBatch::try_new(
            vec![(
                "pressure".into(),
                f64s(&[1000.0, 1001.5, 999.0], &[("station", 3)], vec![]),
            )],
            vec![("id".into(), text("b"))],
        )
        .unwrap(),
        NdRecordBatch::try_new(
            vec![
                ("x".into(), f64s(&[5.0, 6.0], &[("x", 2)], vec![])),
                ("y".into(), f64s(&[1.0, 2.0, 3.0, 4.0], &[("y", 4)], vec![])),
                ("temperature".into(), temp(temp_c, 2, vec![])),
            ],
            vec![("id".into(), text("c"))],
        )
        .unwrap(),
    ]
}

async fn arrow_schema(uri: &str) -> Schema {
    Schema::from(lance::Dataset::open(uri).await.unwrap().schema())
}

#[tokio::test]
async fn ndfusion_writes_what_pylance_writes() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("doc.lance").to_string_lossy().to_string();
    let batches = doc_example_batches();
    write_nd_batches(&uri, &batches, &WriteOptions::new())
        .await
        .unwrap();
    // Same schema as pylance's table: field order, types, nullability, extension metadata,
    // format marker.
    let ours = arrow_schema(&uri).await;
    let theirs = arrow_schema(&format!("{DATA}/doc_example.lance")).await;
    assert_eq!(ours.fields(), theirs.fields());
    assert_eq!(
        ours.metadata().get("lance_nd:format"),
        Some(&"1".to_string())
    );
    // Created with Lance file version 2.2 (nested field addition needs it).
    let dataset = lance::Dataset::open(&uri).await.unwrap();
    assert_eq!(
        dataset.manifest().data_storage_format.version.to_string(),
        "2.2"
    );
    // Same rows.
    let back = read_nd_batches(&uri, &ReadOptions::new()).await.unwrap();
    assert_eq!(back, batches);
    assert_rows_match(&back, &expected()["doc_example"]["rows"]);
}

#[tokio::test]
async fn schema_grows_over_three_appends() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir
        .path()
        .join("evolved.lance")
        .to_string_lossy()
        .to_string();
    let opts = WriteOptions::new();
    let first = NdRecordBatch::try_new(
        vec![(
            "temperature".into(),
            f64s(
                &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                &[("x", 2), ("y", 3)],
                vec![],
            ),
        )],
        vec![("id".into(), text("a"))],
    )
    .unwrap();
    write_nd_batches(&uri, std::slice::from_ref(&first), &opts)
        .await
        .unwrap();
    // A new array and a new attribute key.
    let salinity = NdArrowArray::try_new(
        Arc::new(Float32Array::from(vec![35.0, 35.5])),
        vec![Dim::new("x", 2)],
        vec![],
    )
    .unwrap();
    let second = NdRecordBatch::try_new(
        vec![
            (
                "temperature".into(),
                f64s(&[7.0, 8.0], &[("x", 2)], vec![("units", text("C"))]),
            ),
            ("salinity".into(), salinity),
        ],
        vec![("id".into(), text("b"))],
    )
    .unwrap();
    write_nd_batches(&uri, std::slice::from_ref(&second), &opts)
        .await
        .unwrap();
    // A new global attribute key.
    let third = NdRecordBatch::try_new(
        vec![("temperature".into(), f64s(&[9.0], &[], vec![]))],
        vec![("id".into(), text("c")), ("group".into(), text("g1"))],
    )
    .unwrap();
    write_nd_batches(&uri, std::slice::from_ref(&third), &opts)
        .await
        .unwrap();

    let back = read_nd_batches(&uri, &ReadOptions::new()).await.unwrap();
    assert_eq!(back, vec![first, second, third]);
    // The same rows pylance's evolved table holds.
    assert_rows_match(&back, &expected()["evolved"]["rows"]);
    let ours = arrow_schema(&uri).await;
    let theirs = arrow_schema(&format!("{DATA}/evolved.lance")).await;
    assert_eq!(ours.fields(), theirs.fields());
}

fn int_batch(name: &str, values: ArrayRef, id: &str) -> NdRecordBatch {
    let n = values.len();
    NdRecordBatch::try_new(
        vec![(
            name.into(),
            NdArrowArray::try_new(values, vec![Dim::new("t", n)], vec![]).unwrap(),
        )],
        vec![("id".into(), text(id))],
    )
    .unwrap()
}

#[tokio::test]
async fn type_changes_fail_unless_a_cast_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let opts = WriteOptions::new();
    write_nd_batches(
        &uri,
        &[int_batch("a", Arc::new(Int64Array::from(vec![1, 2])), "1")],
        &opts,
    )
    .await
    .unwrap();

    let narrower = int_batch("a", Arc::new(Int32Array::from(vec![3])), "2");
    let err = write_nd_batches(&uri, std::slice::from_ref(&narrower), &opts)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }));
    let message = err.to_string();
    assert!(
        message.contains("array 'a'") && message.contains("Int64") && message.contains("Int32"),
        "{message}"
    );
    // The failed write left the table as it was.
    assert_eq!(
        read_nd_batches(&uri, &ReadOptions::new())
            .await
            .unwrap()
            .len(),
        1
    );

    let safe = WriteOptions::new().with_casting(Casting::Safe);
    write_nd_batches(&uri, std::slice::from_ref(&narrower), &safe)
        .await
        .unwrap();
    let floats = int_batch("a", Arc::new(Float64Array::from(vec![4.0])), "3");
    assert!(write_nd_batches(&uri, std::slice::from_ref(&floats), &safe)
        .await
        .is_err());
    let unsafe_ = WriteOptions::new().with_casting(Casting::Unsafe);
    write_nd_batches(&uri, std::slice::from_ref(&floats), &unsafe_)
        .await
        .unwrap();

    let back = read_nd_batches(&uri, &ReadOptions::new()).await.unwrap();
    let values: Vec<i64> = back
        .iter()
        .flat_map(|b| {
            b.array("a")
                .unwrap()
                .values()
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(values, vec![1, 2, 3, 4]);

    // A value an unsafe cast cannot fit is an error naming the array; nothing is written.
    let huge = int_batch("a", Arc::new(Float64Array::from(vec![1e30])), "4");
    let err = write_nd_batches(&uri, std::slice::from_ref(&huge), &unsafe_)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("array 'a'"), "{err}");
    assert_eq!(
        read_nd_batches(&uri, &ReadOptions::new())
            .await
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn a_write_with_conflicting_types_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let batches = [
        int_batch("a", Arc::new(Int64Array::from(vec![1])), "1"),
        int_batch("a", Arc::new(Float64Array::from(vec![1.5])), "2"),
    ];
    let err = write_nd_batches(&uri, &batches, &WriteOptions::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("array 'a'"), "{err}");
    assert!(matches!(
        read_nd_batches(&uri, &ReadOptions::new()).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn lance_tables_without_the_marker_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("plain.lance").to_string_lossy().to_string();
    let batch = arrow::array::RecordBatch::try_from_iter(vec![(
        "a",
        Arc::new(Int32Array::from(vec![1])) as ArrayRef,
    )])
    .unwrap();
    let schema = batch.schema();
    lance::Dataset::write(
        arrow::array::RecordBatchIterator::new(vec![Ok(batch)], schema),
        uri.as_str(),
        None,
    )
    .await
    .unwrap();
    let err = write_nd_batches(
        &uri,
        &[int_batch("a", Arc::new(Int64Array::from(vec![1])), "1")],
        &WriteOptions::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::NotLanceNd { .. }), "{err}");
    assert!(err.to_string().contains("without the lance-nd marker"));
    let err = read_nd_batches(&uri, &ReadOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotLanceNd { .. }));
}

#[tokio::test]
async fn concurrent_appends_both_land_or_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("c.lance").to_string_lossy().to_string();
    let opts = WriteOptions::new();
    write_nd_batches(
        &uri,
        &[int_batch("a", Arc::new(Int64Array::from(vec![0])), "0")],
        &opts,
    )
    .await
    .unwrap();
    let writers: Vec<_> = (1..=4)
        .map(|i| {
            let uri = uri.clone();
            tokio::spawn(async move {
                let batch = int_batch("a", Arc::new(Int64Array::from(vec![i])), &i.to_string());
                write_nd_batches(&uri, &[batch], &WriteOptions::new()).await
            })
        })
        .collect();
    let mut landed = 1;
    for w in writers {
        match w.await.unwrap() {
            Ok(()) => landed += 1,
            Err(e) => assert!(matches!(e, Error::Conflict { .. }), "{e}"),
        }
    }
    let back = read_nd_batches(&uri, &ReadOptions::new()).await.unwrap();
    assert_eq!(back.len(), landed);
    assert!(landed >= 2);
}

#[tokio::test]
async fn statistics_columns_hold_min_and_max() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s.lance").to_string_lossy().to_string();
    let opts = WriteOptions::new().with_statistics(true);
    let batches = [
        NdRecordBatch::try_new(
            vec![(
                "v".into(),
                f64s(&[3.0, f64::NAN, -1.0], &[("t", 3)], vec![]),
            )],
            vec![],
        )
        .unwrap(),
        NdRecordBatch::try_new(
            vec![("v".into(), f64s(&[7.5], &[("t", 1)], vec![]))],
            vec![],
        )
        .unwrap(),
    ];
    write_nd_batches(&uri, &batches, &opts).await.unwrap();
    let dataset = lance::Dataset::open(&uri).await.unwrap();
    let mut scanner = dataset.scan();
    scanner.project(&["__stats__:v"]).unwrap();
    let batch = scanner.try_into_batch().await.unwrap();
    let stats = batch.column(0).as_struct();
    let min = stats
        .column_by_name("min")
        .unwrap()
        .as_primitive::<Float64Type>();
    let max = stats
        .column_by_name("max")
        .unwrap()
        .as_primitive::<Float64Type>();
    // NaN is the largest value, as Arrow and DataFusion order floats (issue 23).
    assert_eq!(min.value(0), -1.0);
    assert!(max.value(0).is_nan());
    assert_eq!((min.value(1), max.value(1)), (7.5, 7.5));
    // Reads at the nd level ignore the statistics columns.
    assert_eq!(
        read_nd_batches(&uri, &ReadOptions::new()).await.unwrap(),
        batches.to_vec()
    );
}

async fn run(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
) -> Vec<arrow::array::RecordBatch> {
    ctx.sql(sql).await.unwrap().collect().await.unwrap()
}

fn pretty(batches: &[arrow::array::RecordBatch]) -> String {
    arrow::util::pretty::pretty_format_batches(batches)
        .unwrap()
        .to_string()
}

/// The statistics a lance-nd scan states per partition (one run of fragments each) and for
/// the whole scan, on pylance's `stats.lance` (three appends, so three fragments): cells and
/// index columns exact, `__stats__` bounds inexact and only where every row with the array
/// has them (the third fragment's row has none). Values from numpy (expected.json "stats").
#[tokio::test]
async fn lance_nd_scans_state_statistics_per_fragment_run() {
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;
    use datafusion::physical_plan::ExecutionPlan;

    let ctx = ndfusion::new_session_context();
    ctx.sql("SET datafusion.execution.target_partitions = 3")
        .await
        .unwrap();
    let table = ndfusion::LanceNdTable::open(&format!("{DATA}/stats.lance"))
        .await
        .unwrap();
    ctx.register_table("s", Arc::new(table)).unwrap();
    async fn scan_of(
        ctx: &datafusion::prelude::SessionContext,
        sql: &str,
    ) -> Arc<dyn ExecutionPlan> {
        let frame = ctx.sql(sql).await.unwrap();
        let mut plan = frame.create_physical_plan().await.unwrap();
        while plan.name() != "LanceNdScanExec" {
            plan = Arc::clone(plan.children()[0]);
        }
        plan
    }
    let scan = scan_of(&ctx, "SELECT t, v FROM s").await;
    let expected = &expected()["stats"]["fragments"];
    let int = |v: &Value| Precision::Exact(ScalarValue::Int64(Some(v.as_i64().unwrap())));
    let float = |v: &Value| Precision::Inexact(ScalarValue::Float64(Some(v.as_f64().unwrap())));
    for (p, fragment) in expected.as_array().unwrap().iter().enumerate() {
        let stats = scan.partition_statistics(Some(p)).unwrap();
        let cells = fragment["cells"].as_u64().unwrap() as usize;
        assert_eq!(stats.num_rows, Precision::Exact(cells), "partition {p}");
        let t = &stats.column_statistics[0];
        assert_eq!(t.min_value, int(&Value::from(0)), "partition {p}");
        assert_eq!(t.max_value, int(&fragment["t_max"]), "partition {p}");
        let nulls = fragment["t_nulls"].as_u64().unwrap() as usize;
        assert_eq!(t.null_count, Precision::Exact(nulls), "partition {p}");
        let v = &stats.column_statistics[1];
        if p < 2 {
            assert_eq!(v.min_value, float(&fragment["v_min"]), "partition {p}");
            assert_eq!(v.max_value, float(&fragment["v_max"]), "partition {p}");
        } else {
            assert_eq!(v.min_value, Precision::Absent, "no __stats__ on its row");
        }
    }
    let all = scan.partition_statistics(None).unwrap();
    let fragments = expected.as_array().unwrap();
    let cells: u64 = fragments.iter().map(|f| f["cells"].as_u64().unwrap()).sum();
    assert_eq!(all.num_rows, Precision::Exact(cells as usize));
    let t_max = fragments.iter().map(|f| f["t_max"].as_i64().unwrap()).max();
    assert_eq!(
        all.column_statistics[0].max_value,
        int(&Value::from(t_max.unwrap()))
    );
    assert_eq!(all.column_statistics[0].distinct_count, Precision::Exact(4));
    assert_eq!(all.column_statistics[1].max_value, Precision::Absent);

    // A filter Lance evaluates leaves bounds only.
    let filtered = scan_of(&ctx, "SELECT t FROM s WHERE __global_attrs__.id = 'p'").await;
    let stats = filtered.partition_statistics(None).unwrap();
    assert_eq!(stats.num_rows, Precision::Inexact(cells as usize));
    assert!(!stats.column_statistics[0].max_value.is_exact().unwrap());
}

/// SQL over a table ndfusion wrote, with statistics: value filters skip rows through
/// `__stats__`, and the answers equal what the nd-level read gives.
#[tokio::test]
async fn sql_over_an_ndfusion_table_with_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("stats.lance").to_string_lossy().to_string();
    let opts = WriteOptions::new().with_statistics(true);
    let batches: Vec<NdRecordBatch> = (0..5)
        .map(|i| {
            let values: Vec<f64> = (0..4).map(|k| (i * 10 + k) as f64).collect();
            NdRecordBatch::try_new(
                vec![("v".into(), f64s(&values, &[("t", 4)], vec![]))],
                vec![("id".into(), text(&format!("r{i}")))],
            )
            .unwrap()
        })
        .collect();
    write_nd_batches(&uri, &batches, &opts).await.unwrap();

    let ctx = ndfusion::new_session_context();
    ctx.register_table(
        "s",
        Arc::new(ndfusion::LanceNdTable::open(&uri).await.unwrap()),
    )
    .unwrap();
    let plan = run(&ctx, "EXPLAIN SELECT t, v FROM s WHERE v > 25").await;
    let text = pretty(&plan);
    assert!(
        text.contains("stats_filter=get_field(__stats__:v, Utf8(\"max\")) > Float64(25)"),
        "{text}"
    );
    assert!(
        text.contains("FilterExec"),
        "value filters stay inexact: {text}"
    );

    let rows = run(
        &ctx,
        "SELECT t, v, __global_attrs__.id FROM s WHERE v > 25 ORDER BY v",
    )
    .await;
    let rows = arrow::compute::concat_batches(&rows[0].schema(), &rows).unwrap();
    let v: Vec<f64> = rows
        .column(1)
        .as_primitive::<Float64Type>()
        .values()
        .to_vec();
    assert_eq!(v, vec![30.0, 31.0, 32.0, 33.0, 40.0, 41.0, 42.0, 43.0]);
    let t: Vec<i64> = rows
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .values()
        .to_vec();
    assert_eq!(t, vec![0, 1, 2, 3, 0, 1, 2, 3]);

    // count(*) reads no values: the grids' cells, counted when the table opened, answer it.
    let plan = run(&ctx, "EXPLAIN SELECT count(*) FROM s").await;
    let text = pretty(&plan);
    assert!(text.contains("PlaceholderRowExec"), "{text}");
    let n = run(&ctx, "SELECT count(*) FROM s").await;
    assert_eq!(
        n[0].column(0)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .value(0),
        20
    );

    // A limit reaches the scan when every filter is exact.
    let plan = run(
        &ctx,
        "EXPLAIN SELECT v FROM s WHERE __global_attrs__.id = 'r3' LIMIT 2",
    )
    .await;
    let text = pretty(&plan);
    assert!(text.contains("limit=2"), "{text}");
    let rows = run(
        &ctx,
        "SELECT v FROM s WHERE __global_attrs__.id = 'r3' LIMIT 2",
    )
    .await;
    assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
}

/// Integer statistics are exact, beyond what an f64 can hold.
#[tokio::test]
async fn integer_statistics_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("i.lance").to_string_lossy().to_string();
    let opts = WriteOptions::new().with_statistics(true);
    let big = i64::MAX - 1;
    let batches = [
        int_batch("a", Arc::new(Int64Array::from(vec![big, -3, 7])), "1"),
        int_batch("b", Arc::new(Int64Array::from(vec![1])), "2"),
    ];
    write_nd_batches(&uri, &batches, &opts).await.unwrap();
    let dataset = lance::Dataset::open(&uri).await.unwrap();
    let mut scanner = dataset.scan();
    scanner.project(&["__stats__:a"]).unwrap();
    let batch = scanner.try_into_batch().await.unwrap();
    let stats = batch.column(0).as_struct();
    let min = stats
        .column_by_name("min")
        .unwrap()
        .as_primitive::<arrow::datatypes::Int64Type>();
    let max = stats
        .column_by_name("max")
        .unwrap()
        .as_primitive::<arrow::datatypes::Int64Type>();
    assert_eq!((min.value(0), max.value(0)), (-3, big));
    // The row without the array has no statistics.
    assert!(min.is_null(1) && max.is_null(1));
}

/// A table whose `__stats__:<array>` column was written by someone else with another shape:
/// a statistics write is an error naming the column (it was a panic), and nothing is written.
#[tokio::test]
async fn a_statistics_column_of_another_shape_is_an_error() {
    use lance::dataset::NewColumnTransform;

    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s.lance").to_string_lossy().to_string();
    let first = NdRecordBatch::try_new(
        vec![("v".into(), f64s(&[1.0], &[("t", 1)], vec![]))],
        vec![],
    )
    .unwrap();
    write_nd_batches(&uri, &[first], &WriteOptions::new())
        .await
        .unwrap();
    // Someone adds `__stats__:w` as a plain Int32 column.
    let mut dataset = lance::Dataset::open(&uri).await.unwrap();
    let column = arrow::datatypes::Field::new("__stats__:w", DataType::Int32, true);
    dataset
        .add_columns(
            NewColumnTransform::AllNulls(Arc::new(Schema::new(vec![column]))),
            None,
            None,
        )
        .await
        .unwrap();
    let second = NdRecordBatch::try_new(
        vec![("w".into(), f64s(&[2.0, 3.0], &[("t", 2)], vec![]))],
        vec![],
    )
    .unwrap();
    let err = write_nd_batches(&uri, &[second], &WriteOptions::new().with_statistics(true))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("column __stats__:w is Int32, not a struct {min, max}"),
        "{err}"
    );
    assert!(matches!(err, Error::InvalidTable { .. }), "{err}");
    let back = read_nd_batches(&uri, &ReadOptions::new()).await.unwrap();
    assert_eq!(back.len(), 1);
}

/// 8 writers append rows (each `v = [n, n]` with global attribute `id = n`) while 4 readers
/// read the table over and over: readers never see a half-written row, and in the end every
/// acknowledged row is there exactly once. Conflicts are retried, as a caller would.
pub async fn writers_and_readers(uri: &str, storage: ndfusion::StorageOptions) {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};

    const WRITERS: i64 = 8;
    const APPENDS: i64 = 5;
    // Each writer's first row brings an array of its own (`e<writer>`): a schema change and
    // rows in one commit, racing the other writers' appends and schema changes.
    let own_array = |n: i64| (n >= 0 && n % 100 == 0).then(|| format!("e{}", n / 100));
    let row = move |n: i64| {
        let mut arrays = vec![("v".into(), f64s(&[n as f64, n as f64], &[("t", 2)], vec![]))];
        if let Some(name) = own_array(n) {
            arrays.push((name, f64s(&[n as f64], &[("t", 1)], vec![])));
        }
        NdRecordBatch::try_new(
            arrays,
            vec![("id".into(), Arc::new(Int64Array::from(vec![n])) as ArrayRef)],
        )
        .unwrap()
    };
    let write = WriteOptions::new().with_storage(storage.clone());
    let read = ReadOptions::new().with_storage(storage);
    // The table exists before the race (creating it is not what is tested).
    write_nd_batches(uri, &[row(-1)], &write).await.unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let check = move |batches: &[NdRecordBatch]| -> BTreeSet<i64> {
        let mut ids = BTreeSet::new();
        for b in batches {
            let id = b.global_attrs()[0]
                .1
                .as_primitive::<arrow::datatypes::Int64Type>()
                .value(0);
            let v = b.array("v").expect("a row without its array");
            let values = v.values().as_primitive::<Float64Type>();
            assert_eq!(
                values.values().as_ref(),
                &[id as f64, id as f64],
                "row {id}"
            );
            if let Some(name) = own_array(id) {
                let own = b.array(&name).expect("a row without the array it brought");
                assert_eq!(
                    own.values().as_primitive::<Float64Type>().value(0),
                    id as f64
                );
            }
            assert!(ids.insert(id), "row {id} read twice");
        }
        ids
    };
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (uri, read, done) = (uri.to_string(), read.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                let mut reads = 0;
                while !done.load(Ordering::SeqCst) {
                    let batches = read_nd_batches(&uri, &read).await.unwrap();
                    check(&batches);
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (uri, write) = (uri.to_string(), write.clone());
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for k in 0..APPENDS {
                    let n = w * 100 + k;
                    for attempt in 0.. {
                        match write_nd_batches(&uri, &[row(n)], &write).await {
                            Ok(()) => {
                                acknowledged.push(n);
                                break;
                            }
                            Err(Error::Conflict { .. }) if attempt < 100 => continue,
                            Err(e) => panic!("writer {w}: {e}"),
                        }
                    }
                }
                acknowledged
            })
        })
        .collect();
    let deadline = std::time::Duration::from_secs(180);
    let mut acknowledged = BTreeSet::from([-1]);
    for w in writers {
        let ids = tokio::time::timeout(deadline, w)
            .await
            .expect("a writer hung")
            .unwrap();
        acknowledged.extend(ids);
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        let reads = tokio::time::timeout(deadline, r)
            .await
            .expect("a reader hung")
            .unwrap();
        assert!(reads > 0);
    }
    let batches = read_nd_batches(uri, &read).await.unwrap();
    assert_eq!(check(&batches), acknowledged);
    assert_eq!(acknowledged.len() as i64, WRITERS * APPENDS + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_writers_and_four_readers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("race.lance").to_string_lossy().to_string();
    writers_and_readers(&uri, ndfusion::StorageOptions::new()).await;
}

/// An object store that refuses to write data files while `refuse_data` is set: a storage
/// failure that lands between a write's schema commits and its row commit.
#[derive(Debug)]
struct DataWritesFail {
    inner: object_store::memory::InMemory,
    refuse_data: std::sync::atomic::AtomicBool,
}

impl DataWritesFail {
    fn check(&self, location: &object_store::path::Path) -> object_store::Result<()> {
        let data = location.parts().any(|p| p.as_ref() == "data");
        if data && self.refuse_data.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(object_store::Error::Generic {
                store: "DataWritesFail",
                source: format!("refused to write {location}").into(),
            });
        }
        Ok(())
    }
}

impl std::fmt::Display for DataWritesFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataWritesFail({})", self.inner)
    }
}

#[async_trait::async_trait]
impl object_store::ObjectStore for DataWritesFail {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.check(location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.check(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<
            'static,
            object_store::Result<object_store::path::Path>,
        >,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A write that brings a new array and whose rows fail to reach storage: one commit would
/// have added the column and the rows, so nothing of it is in the table (no column, no row),
/// the error says so, and retrying the write completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_rows_fail_to_reach_storage_leaves_the_table_as_it_was() {
    use std::sync::atomic::Ordering;

    let store = Arc::new(DataWritesFail {
        inner: object_store::memory::InMemory::new(),
        refuse_data: false.into(),
    });
    let storage = ndfusion::StorageOptions::new().with_object_store(store.clone());
    let write = WriteOptions::new().with_storage(storage.clone());
    let read = ReadOptions::new().with_storage(storage.clone());
    let uri = "tables/fault.lance";
    let row = |id: &str, arrays: &[&str]| {
        NdRecordBatch::try_new(
            arrays
                .iter()
                .map(|a| (a.to_string(), f64s(&[1.0, 2.0], &[("t", 2)], vec![])))
                .collect(),
            vec![("id".into(), text(id))],
        )
        .unwrap()
    };
    write_nd_batches(uri, &[row("a", &["v"])], &write)
        .await
        .unwrap();

    store.refuse_data.store(true, Ordering::SeqCst);
    let err = write_nd_batches(uri, &[row("b", &["v", "w"])], &write)
        .await
        .unwrap_err();
    match &err {
        Error::WriteFailed { uri: at, left, .. } => {
            assert_eq!(at, uri);
            assert_eq!(left, "nothing was written");
        }
        other => panic!("expected WriteFailed, got {other}"),
    }
    assert!(err.to_string().contains("refused to write"), "{err}");
    let err = write_nd_batches(uri, &[row("c", &["v"])], &write)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::WriteFailed { left, .. } if left == "nothing was written"),
        "{err}"
    );

    let ids = |batches: &[NdRecordBatch]| -> Vec<(String, bool)> {
        batches
            .iter()
            .map(|b| {
                let id = b.global_attrs()[0]
                    .1
                    .as_string::<i32>()
                    .value(0)
                    .to_string();
                (id, b.array("w").is_some())
            })
            .collect()
    };
    let after_failure = read_nd_batches(uri, &read).await.unwrap();
    assert_eq!(ids(&after_failure), vec![("a".to_string(), false)]);
    let columns = |table: ndfusion::LanceNdTable| -> Vec<String> {
        use datafusion::catalog::TableProvider;
        table
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    let options = ndfusion::LanceNdOptions::new().with_storage(storage.clone());
    let table = ndfusion::LanceNdTable::open_with(uri, options.clone())
        .await
        .unwrap();
    assert!(!columns(table).contains(&"w".to_string()));

    store.refuse_data.store(false, Ordering::SeqCst);
    write_nd_batches(uri, &[row("b", &["v", "w"])], &write)
        .await
        .unwrap();
    let mut after_retry = ids(&read_nd_batches(uri, &read).await.unwrap());
    after_retry.sort();
    assert_eq!(
        after_retry,
        vec![("a".to_string(), false), ("b".to_string(), true)]
    );
    let table = ndfusion::LanceNdTable::open_with(uri, options)
        .await
        .unwrap();
    assert!(columns(table).contains(&"w".to_string()));
}

#[tokio::test]
async fn statistics_never_skip_a_row_whose_nan_matches() {
    // DataFusion orders NaN above every number (`NaN > 1` is true): a row whose only match is
    // NaN must be read, so the answer is the same with statistics and without.
    let dir = tempfile::tempdir().unwrap();
    let rows = || -> Vec<NdRecordBatch> {
        [
            vec![0.5, f64::NAN],
            vec![0.2, 0.3],
            vec![f64::NAN, f64::NAN],
        ]
        .iter()
        .enumerate()
        .map(|(i, values)| {
            NdRecordBatch::try_new(
                vec![("v".into(), f64s(values, &[("t", 2)], vec![]))],
                vec![("id".into(), text(&format!("r{i}")))],
            )
            .unwrap()
        })
        .collect()
    };
    let mut answers = Vec::new();
    for statistics in [true, false] {
        let uri = dir.path().join(format!("nan_{statistics}.lance"));
        let uri = uri.to_string_lossy().to_string();
        let opts = WriteOptions::new().with_statistics(statistics);
        write_nd_batches(&uri, &rows(), &opts).await.unwrap();
        let ctx = ndfusion::new_session_context();
        let table = ndfusion::LanceNdTable::open(&uri).await.unwrap();
        ctx.register_table("s", Arc::new(table)).unwrap();
        let mut counts = Vec::new();
        for filter in [
            "v > 1",
            "v >= 0.5",
            "v < 0.25",
            "v = 'NaN'",
            "v BETWEEN 0.4 AND 100",
        ] {
            let got = run(&ctx, &format!("SELECT count(*) FROM s WHERE {filter}")).await;
            counts.push(
                got[0]
                    .column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .value(0),
            );
        }
        answers.push(counts);
    }
    // NaN > 1, >= 0.5 and = NaN hold for the three NaN cells; 0.5 >= 0.5; 0.2 < 0.25.
    assert_eq!(answers[0], vec![3, 4, 1, 3, 1]);
    assert_eq!(answers[0], answers[1]);
}

/// A lance-nd table whose data file was cut short (pylance's doc example, its one data file
/// truncated to half): reading it is an error that names the file, not Lance's "failed to
/// fill whole buffer".
#[tokio::test]
async fn a_truncated_data_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("doc_example.lance");
    super::zarr_fixtures::copy_dir(
        std::path::Path::new("tests/data/lance_nd/doc_example.lance"),
        &copy,
    );
    let data = std::fs::read_dir(copy.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    let uri = copy.to_string_lossy().to_string();
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes[..bytes.len() / 2]).unwrap();
    let file = data.file_name().unwrap().to_string_lossy().to_string();
    let err = read_nd_batches(&uri, &ReadOptions::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&file), "{err}");
    // SQL: a table's grids are read when it is created, so the error comes from there.
    let ctx = ndfusion::new_session_context();
    let err = ctx
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE_ND LOCATION '{uri}'"
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&file) && err.contains("not ending in Lance's footer"),
        "{err}"
    );
}
