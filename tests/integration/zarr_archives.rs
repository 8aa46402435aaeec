//! Datasets shaped like real archives (packed `_Unsigned` data, time units as archives spell
//! them, non-standard calendars, character arrays, byte and string fill values, coordinate-only
//! dimensions, the netCDF files that ship with scipy and xarray converted by `to_zarr`), read
//! back as xarray 2026.9 reads them. tests/data/archives/make_fixtures.py wrote the stores and
//! what xarray computed on them (expected.json); every dataset there, those of
//! tests/data/datasets included, is walked: columns, rows, every value, and `count`, `sum`,
//! `min`, `max` per column through SQL.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::prelude::SessionContext;
use serde_json::Value;

use ndfusion::new_session_context;

use super::xarray_cells::{assert_rows, column_names, Cell};

const DIR: &str = "tests/data/archives";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn open(location: &str, options: &str) -> SessionContext {
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{location}' {options}"
    ))
    .await
    .unwrap_or_else(|e| panic!("{location}: {e}"));
    ctx
}

async fn query(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    concat_batches(&schema, &batches).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// The SQL aggregates of a column, over its values with NaN read as missing (as pandas does).
fn aggregates(column: &str, kind: &str) -> Vec<String> {
    let c = format!("\"{column}\"");
    let v = if kind == "float" {
        format!("CASE WHEN isnan({c}) THEN NULL ELSE {c} END")
    } else {
        c
    };
    match kind {
        "float" | "int" => vec![
            format!("count({v})"),
            format!("sum(CAST({v} AS DOUBLE))"),
            format!("min({v})"),
            format!("max({v})"),
        ],
        "time" | "cftime" => vec![
            format!("count({v})"),
            format!("CAST(min({v}) AS BIGINT)"),
            format!("CAST(max({v}) AS BIGINT)"),
        ],
        "bytes" => vec![
            format!("count({v})"),
            format!("encode(min({v}), 'hex')"),
            format!("encode(max({v}), 'hex')"),
        ],
        "bool" => vec![format!("count({v})")],
        _ => vec![
            format!("count({v})"),
            format!("min({v})"),
            format!("max({v})"),
        ],
    }
}

#[tokio::test]
async fn every_fixture_dataset_reads_as_xarray_reads_it() {
    let expected = expected();
    let mut walked = 0;
    for (name, want) in expected.as_object().unwrap() {
        if want.get("columns").is_none() {
            continue; // a bad store: see the error tests
        }
        walked += 1;
        let location = want["path"].as_str().unwrap();
        let ctx = open(location, "").await;
        let batch = query(&ctx, "SELECT * FROM t").await;
        let columns = strings(&want["columns"]);
        let dims = strings(&want["dims"]).len();
        let kinds = &want["kinds"];

        // The columns of to_dataframe().reset_index(), in its order, then __global_attrs__.
        let ours = column_names(&batch);
        let extra: Vec<&String> = ours[columns.len().min(ours.len())..].iter().collect();
        assert_eq!(ours[..columns.len().min(ours.len())], columns[..], "{name}");
        assert!(
            extra.is_empty() || extra == ["__global_attrs__"],
            "{name}: {extra:?}"
        );
        let rows = want["rows"].as_u64().unwrap() as usize;
        assert_eq!(batch.num_rows(), rows, "{name}: rows");

        // Every value, rows sorted by the dimension columns.
        let kind = |c: &str| kinds[c].as_str().unwrap().to_string();
        assert_rows(name, &batch, want, &columns, kind, dims);

        // count(*), and count / sum / min / max of each column as SQL computes them.
        let n = query(&ctx, "SELECT count(*) FROM t").await;
        let n = n.column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(n as usize, rows, "{name}: count(*)");
        for column in &columns {
            let kind = kinds[column].as_str().unwrap();
            let aggs = aggregates(column, kind);
            let got = query(&ctx, &format!("SELECT {} FROM t", aggs.join(", "))).await;
            let summary = &want["summary"][column];
            let what = |agg: &str| format!("{name}: {agg} of {column}");
            let count = got.column(0).as_primitive::<Int64Type>().value(0);
            assert_eq!(
                count,
                summary["count"].as_i64().unwrap(),
                "{}",
                what("count")
            );
            if count == 0 {
                continue;
            }
            let mut at = 1;
            if matches!(kind, "float" | "int") {
                let sum = got.column(1).as_primitive::<Float64Type>().value(0);
                let want_sum: f64 = summary["sum"].as_str().unwrap().parse().unwrap();
                let close = (sum - want_sum).abs() <= 1e-9 * want_sum.abs().max(1.0);
                assert!(close, "{}: {sum} against {want_sum}", what("sum"));
                at = 2;
            }
            if kind == "bool" {
                continue;
            }
            for (i, agg) in ["min", "max"].into_iter().enumerate() {
                let ours = Cell::from_arrow(got.column(at + i), 0);
                let theirs = Cell::from_json(&summary[agg], kind);
                assert_eq!(ours, theirs, "{}", what(agg));
            }
        }
    }
    assert!(walked >= 20, "walked {walked} datasets");
}

#[test]
fn select_star_works_in_every_output_format_on_every_fixture() {
    // The CLI's formats: csv and tsv write struct values (__global_attrs__) as JSON text. One
    // process a format runs `SELECT *` on every fixture; it exits non-zero if any fails.
    let expected = expected();
    let mut statements = Vec::new();
    let mut rows = Vec::new();
    for (i, want) in expected.as_object().unwrap().values().enumerate() {
        let Some(location) = want.get("path").and_then(Value::as_str) else {
            continue;
        };
        statements.push(format!(
            "CREATE EXTERNAL TABLE t{i} STORED AS ZARR LOCATION '{location}'"
        ));
        statements.push(format!("SELECT * FROM t{i}"));
        rows.push(want["rows"].as_u64().unwrap() as usize);
    }
    for format in ["table", "csv", "tsv", "json", "ndjson"] {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ndfusion"));
        command.args(["--quiet", "--format", format]);
        for statement in &statements {
            command.args(["-c", statement]);
        }
        let out = command
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {stderr}");
        let lines = String::from_utf8_lossy(&out.stdout).lines().count();
        let least: usize = match format {
            "csv" | "tsv" => rows.iter().map(|r| r + 1).sum(),
            "ndjson" | "table" => rows.iter().sum(),
            _ => rows.len(),
        };
        assert!(lines >= least, "{format}: {lines} lines, {least} expected");
    }
}

#[tokio::test]
async fn unsigned_packed_values_read_as_xarray_decodes_them() {
    // The cells of expected.json hold xarray's values; these are the ones the issue names.
    let expected = expected();
    let want = &expected["packed_v3"];
    let ctx = open("tests/data/archives/packed_v3.zarr", "").await;
    let schema = query(&ctx, "SELECT * FROM t LIMIT 0").await.schema();
    let types: Vec<(String, DataType)> = ["tb", "quality", "pixels", "ticks", "anomaly"]
        .iter()
        .map(|c| {
            let t = schema.field_with_name(c).unwrap().data_type().clone();
            (c.to_string(), t)
        })
        .collect();
    assert_eq!(
        types,
        vec![
            ("tb".into(), DataType::Float64),
            ("quality".into(), DataType::Float32),
            ("pixels".into(), DataType::UInt32),
            ("ticks".into(), DataType::UInt64),
            ("anomaly".into(), DataType::Float32),
        ]
    );
    // 40000 stored as int16 (-25536) at time 1, lat 0.0, lon 90.0: 40000 * 0.005 + 150.
    let got = query(
        &ctx,
        "SELECT tb FROM t WHERE time = '1979-01-01T06:00:00' AND lat = 0.0 AND lon = 90.0",
    )
    .await;
    assert_eq!(got.column(0).as_primitive::<Float64Type>().value(0), 350.0);
    let max = want["summary"]["ticks"]["max"].as_u64().unwrap();
    let got = query(&ctx, "SELECT max(ticks) FROM t").await;
    assert_eq!(
        got.column(0)
            .as_primitive::<arrow::datatypes::UInt64Type>()
            .value(0),
        max
    );
}

#[tokio::test]
async fn non_standard_calendars_decode_to_their_labels_and_prune() {
    let expected = expected();
    for fmt in ["v2", "v3"] {
        let want = &expected[format!("calendars_{fmt}").as_str()];
        let ctx = open(&format!("{DIR}/calendars_{fmt}.zarr"), "").await;
        // Each calendar's labels as xr.open_zarr(..., use_cftime=True) gives them.
        for (column, labels) in want["labels"].as_object().unwrap() {
            let got = query(
                &ctx,
                &format!("SELECT to_char(\"{column}\", '%Y-%m-%dT%H:%M:%S') FROM t ORDER BY time"),
            )
            .await;
            let ours: Vec<String> = got
                .column(0)
                .as_string::<i32>()
                .iter()
                .map(|s| s.unwrap().to_string())
                .collect();
            assert_eq!(ours, strings(labels), "{fmt}: {column}");
        }
        // Pushdown on a decoded noleap time: chunk selection, and xarray's answer.
        let sql = "SELECT sum(tas) FROM t WHERE time >= '2000-03-01'";
        let plan = query(&ctx, &format!("EXPLAIN {sql}")).await;
        let plan = format!(
            "{}",
            arrow::util::pretty::pretty_format_batches(&[plan]).unwrap()
        );
        assert!(plan.contains("blocks=2/3"), "{plan}");
        let got = query(&ctx, sql).await;
        let want_sum: f64 = want["answers"]["sum_tas_from_march_2000"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            got.column(0).as_primitive::<Float64Type>().value(0),
            want_sum
        );
    }
}

#[tokio::test]
async fn impossible_calendar_labels_and_unknown_calendars_are_errors_naming_them() {
    let expected = expected();
    let labels = strings(&expected["bad/calendar_360_day"]["labels"]);
    assert_eq!(labels[1], "2000-02-30T00:00:00"); // what cftime says the label is
    let ctx = new_session_context();
    let err = ctx
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{DIR}/bad/calendar_360_day.zarr'"
        ))
        .await
        .unwrap_err()
        .to_string();
    for part in [
        "variable 'time'",
        "360_day label 2000-02-30",
        "'decode_times' 'false'",
    ] {
        assert!(err.contains(part), "{err}");
    }
    // decode_times off reads the stored numbers.
    let ctx = open(
        &format!("{DIR}/bad/calendar_360_day.zarr"),
        "OPTIONS ('decode_times' 'false')",
    )
    .await;
    let got = query(&ctx, "SELECT max(time) FROM t").await;
    assert_eq!(got.column(0).as_primitive::<Int64Type>().value(0), 60);
    let err = new_session_context()
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{DIR}/bad/calendar_unknown.zarr'"
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("calendar 'lunar'"), "{err}");
    assert!(err.contains("bad/calendar_unknown.zarr"), "{err}");
}

#[tokio::test]
async fn a_variables_option_leaves_out_the_dimensions_of_the_variables_it_leaves_out() {
    // coordinate_dims: radiance(y, x); band and l are spanned by coordinates only.
    let ctx = open(
        &format!("{DIR}/coordinate_dims_v3.zarr"),
        "OPTIONS ('variables' 'radiance')",
    )
    .await;
    let got = query(&ctx, "SELECT * FROM t").await;
    let names = column_names(&got);
    // As xarray's ds[["radiance"]].to_dataframe(): lat, lon and site_name stay (on y, x), band_id and l go.
    assert_eq!(
        names,
        [
            "y",
            "x",
            "radiance",
            "lat",
            "lon",
            "site_name",
            "__global_attrs__"
        ]
    );
    assert_eq!(got.num_rows(), 6);
}

#[tokio::test]
async fn filters_on_casts_that_reorder_coordinates_are_exact() {
    // lat = [60, 30, 0, -30]: as text, '60.0' >= '5' and '-30.0' < '5'; the numeric order
    // cannot select them. The reference: the same query over the table's rows in memory.
    let ctx = open(&format!("{DIR}/packed_v3.zarr"), "").await;
    let all = query(&ctx, "SELECT lat, lon, time, tb FROM t").await;
    let memory = datafusion::datasource::MemTable::try_new(all.schema(), vec![vec![all]]).unwrap();
    ctx.register_table("m", Arc::new(memory)).unwrap();
    for filter in [
        "CAST(lat AS VARCHAR) >= '5'",
        "CAST(lat AS VARCHAR) < '2'",
        "CAST(lon AS VARCHAR) = '90.0'",
        "CAST(lat AS BIGINT) > 0",
    ] {
        let count = |table: &str| format!("SELECT count(*), sum(tb) FROM {table} WHERE {filter}");
        let ours = query(&ctx, &count("t")).await;
        let reference = query(&ctx, &count("m")).await;
        let n = ours.column(0).as_primitive::<Int64Type>().value(0);
        let want = reference.column(0).as_primitive::<Int64Type>().value(0);
        assert_eq!(n, want, "{filter}");
        assert!(n > 0 && n < 72, "{filter}: {n}");
        let sum = |b: &RecordBatch| b.column(1).as_primitive::<Float64Type>().value(0);
        assert!((sum(&ours) - sum(&reference)).abs() < 1e-9, "{filter}");
    }
}

#[tokio::test]
async fn a_metadata_document_past_the_limit_is_an_error_naming_it() {
    // 65 MiB of attributes: refused by its size, before it is read.
    let dir = tempfile::tempdir().unwrap();
    let group = dir.path().join("big.zarr");
    std::fs::create_dir_all(&group).unwrap();
    let pad = "x".repeat(65 << 20);
    let doc =
        format!(r#"{{"zarr_format": 3, "node_type": "group", "attributes": {{"pad": "{pad}"}}}}"#);
    std::fs::write(group.join("zarr.json"), doc).unwrap();
    let err = new_session_context()
        .sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
            group.display()
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("big.zarr/zarr.json"), "{err}");
    assert!(
        err.contains("more than the 67108864 a metadata document may have"),
        "{err}"
    );
}

#[tokio::test]
async fn structs_nested_past_the_limit_are_an_error_saying_so() {
    // 20 levels fit the JSON parser and are refused by ndfusion's limit; 40 are refused while
    // the document is parsed. Either way the error says what nests too deep.
    for (levels, expected) in [
        (20, "struct nesting deeper than 16 levels"),
        (40, "the document nests more than 128 levels deep"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let array = dir.path().join("deep.zarr");
        std::fs::create_dir_all(&array).unwrap();
        let mut t = serde_json::json!("float32");
        for i in 0..levels {
            t = serde_json::json!({"name": "struct", "configuration": {"fields": [
                {"name": format!("f{i}"), "data_type": t}]}});
        }
        let doc = serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": [2], "data_type": t,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": null,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]
        });
        std::fs::write(array.join("zarr.json"), doc.to_string()).unwrap();
        let err = new_session_context()
            .sql(&format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
                array.display()
            ))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{levels}: {err}");
        assert!(err.contains("deep.zarr/zarr.json"), "{levels}: {err}");
    }
}

#[tokio::test]
async fn an_attribute_flood_is_an_error_naming_the_file() {
    // 200,000 keys (3 MB of JSON) would each become a column of __global_attrs__.
    let dir = tempfile::tempdir().unwrap();
    let keys: serde_json::Map<String, serde_json::Value> = (0..200_000)
        .map(|i| (format!("k{i}"), serde_json::json!(i)))
        .collect();
    for (name, doc) in [
        (
            "group.zarr",
            serde_json::json!({"zarr_format": 3, "node_type": "group", "attributes": keys}),
        ),
        (
            "array.zarr",
            serde_json::json!({
                "zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "float32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 0.0,
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "attributes": keys
            }),
        ),
    ] {
        let node = dir.path().join(name);
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("zarr.json"), doc.to_string()).unwrap();
        let err = new_session_context()
            .sql(&format!(
                "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
                node.display()
            ))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("{name}/zarr.json")), "{err}");
        assert!(
            err.contains("200000 attributes, more than the 10000"),
            "{err}"
        );
    }
}
