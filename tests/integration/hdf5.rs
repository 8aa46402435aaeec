//! Plain HDF5 files (tests/data/hdf5, written by make_fixtures.py with h5py 3.16 and
//! hdf5plugin 7.1): each dataset reads as h5py reads it (`f[path][()]`), element for element
//! and member for member (`expected.json`), its attributes as `__global_attrs__`; a group
//! reads as xarray (h5netcdf engine) reads it; bad paths and types ndfusion does not read
//! are errors naming the file and what is wrong. The SQL answers are in sql/hdf5.slt.

use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;
use ndfusion::{new_session_context, Error};
use serde_json::{json, Map, Value};

use super::xarray_cells::{all_rows, assert_rows, column_names};

const DIR: &str = "tests/data/hdf5";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn create(ctx: &SessionContext, location: &str, options: &str) -> Result<(), String> {
    let sql = format!("CREATE EXTERNAL TABLE t STORED AS HDF5 LOCATION '{location}' {options}");
    match ctx.sql(&sql).await {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::user_message(&e)),
    }
}

/// One cell as `expected.json` writes h5py's values: floats as their shortest text (compared
/// as numbers by `same`), bytes as hex, compounds as objects, array members and lists as
/// lists.
pub(super) fn cell(array: &dyn Array, row: usize) -> Value {
    match ScalarValue::try_from_array(array, row).unwrap() {
        ScalarValue::Struct(s) => {
            let mut out = Map::new();
            for (field, column) in s.fields().iter().zip(s.columns()) {
                out.insert(field.name().clone(), cell(column.as_ref(), 0));
            }
            Value::Object(out)
        }
        ScalarValue::FixedSizeList(list) => {
            let items = list.value(0);
            Value::Array((0..items.len()).map(|i| cell(items.as_ref(), i)).collect())
        }
        ScalarValue::List(list) => {
            let items = list.value(0);
            Value::Array((0..items.len()).map(|i| cell(items.as_ref(), i)).collect())
        }
        ScalarValue::Float32(Some(f)) => json!(format!("{:?}", f64::from(f))),
        ScalarValue::Float64(Some(f)) => json!(format!("{f:?}")),
        ScalarValue::Binary(Some(b)) => {
            json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
        }
        ScalarValue::Boolean(Some(b)) => json!(b),
        other if other.is_null() => Value::Null,
        other => {
            serde_json::from_str(&other.to_string()).unwrap_or_else(|_| json!(other.to_string()))
        }
    }
}

/// Whether two cells agree: floats as numbers (NaN equal to NaN; `-0.0` and `0.0` told apart),
/// the rest exactly.
pub(super) fn same(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::String(a), Value::String(b)) => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) if x.is_nan() || y.is_nan() => x.is_nan() && y.is_nan(),
            (Ok(x), Ok(y)) => x.to_bits() == y.to_bits(),
            _ => a == b,
        },
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => ours == theirs,
    }
}

pub(super) fn rows_of(batch: &RecordBatch) -> Vec<Map<String, Value>> {
    (0..batch.num_rows())
        .map(|r| {
            let mut row = Map::new();
            for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                if field.name() != "__global_attrs__" {
                    row.insert(field.name().clone(), cell(column.as_ref(), r));
                }
            }
            row
        })
        .collect()
}

/// The `__global_attrs__` of the first row, as JSON.
fn attrs_of(batch: &RecordBatch) -> Value {
    match batch.column_by_name("__global_attrs__") {
        None => json!({}),
        Some(column) => {
            let s = column.as_struct();
            let mut out = Map::new();
            for (field, c) in s.fields().iter().zip(s.columns()) {
                let v = match ScalarValue::try_from_array(c.as_ref(), 0).unwrap() {
                    ScalarValue::Utf8(Some(text)) => json!(text),
                    ScalarValue::List(list) => {
                        let items = list.value(0);
                        Value::Array((0..items.len()).map(|i| cell(items.as_ref(), i)).collect())
                    }
                    other => cell(c.as_ref(), 0).as_str().map_or_else(
                        || serde_json::from_str(&other.to_string()).unwrap(),
                        |t| serde_json::from_str(t).unwrap_or(json!(t)),
                    ),
                };
                out.insert(field.name().clone(), v);
            }
            Value::Object(out)
        }
    }
}

#[tokio::test]
async fn hdf5_datasets_read_as_h5py_reads_them() {
    let expected = expected();
    for (file, path, options) in [
        ("single.h5", "/counts", ""),
        (
            "records.h5",
            "/obs/records",
            "OPTIONS ('path' '/obs/records')",
        ),
        ("records.h5", "/obs/grid", "OPTIONS ('path' 'obs/grid')"),
        ("records.h5", "/flags", "OPTIONS ('path' '/flags')"),
        ("records.h5", "/padded", "OPTIONS ('path' '/padded')"),
        // HDF5's scale-offset (integer, and float D-scale) and n-bit filters.
        (
            "filters.h5",
            "/scaleoffset_int",
            "OPTIONS ('path' '/scaleoffset_int')",
        ),
        (
            "filters.h5",
            "/scaleoffset_float",
            "OPTIONS ('path' '/scaleoffset_float')",
        ),
        ("filters.h5", "/nbit", "OPTIONS ('path' '/nbit')"),
        ("filters.h5", "/nbit_be", "OPTIONS ('path' '/nbit_be')"),
        // Fletcher-32 over chunks of an odd number of bytes (compounds of 35 bytes).
        (
            "filters.h5",
            "/fletcher32_records",
            "OPTIONS ('path' '/fletcher32_records')",
        ),
        (
            "filters.h5",
            "/fletcher32_grid",
            "OPTIONS ('path' '/fletcher32_grid')",
        ),
        // Integers in fewer bits than their size, without n-bit.
        ("bits.h5", "/bits", "OPTIONS ('path' '/bits')"),
        ("bits.h5", "/bits_be", "OPTIONS ('path' '/bits_be')"),
        // Chunk B-trees four levels deep, chunks written out of order and some never.
        ("btree.h5", "/grid", "OPTIONS ('path' '/grid')"),
        ("btree.h5", "/line", "OPTIONS ('path' '/line')"),
        // Variable-length strings (h5py's string_dtype), as h5py's asstr() reads them.
        ("strings.h5", "/names", "OPTIONS ('path' '/names')"),
        ("strings.h5", "/grid", "OPTIONS ('path' '/grid')"),
        ("strings.h5", "/ascii", "OPTIONS ('path' '/ascii')"),
        // Compound records with string members (one column each), chunks never written.
        ("strings.h5", "/records", "OPTIONS ('path' '/records')"),
    ] {
        let name = format!("{file}:{path}");
        let want = &expected[&name];
        let ctx = new_session_context();
        create(&ctx, &format!("{DIR}/{file}"), options)
            .await
            .unwrap();
        let want_rows = want["rows"].as_array().unwrap();
        let dims: Vec<String> = (want_rows[0].as_object().unwrap().keys())
            .filter(|k| k.starts_with("dim_") || *k == "x" || *k == "y")
            .cloned()
            .collect();
        // In C order of the dimensions, as h5py lists the elements.
        let order = match name.as_str() {
            "records.h5:/obs/grid" => "y, x".to_string(),
            _ => dims.join(", "),
        };
        let batch = all_rows(&ctx, &format!("SELECT * FROM t ORDER BY {order}"))
            .await
            .unwrap();
        let ours = rows_of(&batch);
        assert_eq!(ours.len(), want_rows.len(), "{name}");
        for (i, (row, theirs)) in ours.iter().zip(want_rows).enumerate() {
            let theirs = theirs.as_object().unwrap();
            let same_keys =
                row.keys().collect::<std::collections::BTreeSet<_>>() == theirs.keys().collect();
            assert!(
                same_keys,
                "{name} row {i}: columns {row:?} vs h5py's {theirs:?}"
            );
            for (k, v) in row {
                assert!(
                    same(v, &theirs[k]),
                    "{name} row {i} column {k}: {v} vs h5py's {}",
                    theirs[k]
                );
            }
        }
        let attrs = want["attrs"].as_object().unwrap();
        if attrs.is_empty() {
            assert!(batch.column_by_name("__global_attrs__").is_none(), "{name}");
        } else {
            assert_eq!(attrs_of(&batch), want["attrs"], "{name}: attributes");
        }
    }
}

#[tokio::test]
async fn an_hdf5_group_reads_as_xarray_reads_it() {
    let expected = expected();
    // bits.h5's group holds integers in 12 of 16 bits (no n-bit filter).
    for (file, group) in [("scales.h5", "/"), ("bits.h5", "/g")] {
        let name = format!("{file}:{group}");
        let want = &expected[&name];
        let ctx = new_session_context();
        let options = format!("OPTIONS ('path' '{group}')");
        create(&ctx, &format!("{DIR}/{file}"), &options)
            .await
            .unwrap();
        let columns: Vec<String> = (want["columns"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let batch = all_rows(&ctx, "SELECT * FROM t").await.unwrap();
        let mut ours = column_names(&batch);
        // The group's attributes, when it has any, come last.
        if !want["attrs"].as_object().unwrap().is_empty() {
            assert_eq!(ours.pop().as_deref(), Some("__global_attrs__"), "{name}");
        }
        assert_eq!(ours, columns, "{name}");
        let dtype = |c: &str| want["dtypes"][c].as_str().unwrap().to_string();
        assert_rows(&name, &batch, want, &columns, dtype, columns.len());
    }
}

#[tokio::test]
async fn bad_paths_and_unread_types_are_errors_naming_the_file() {
    let ctx = new_session_context();
    let records = format!("{DIR}/records.h5");
    let cases = [
        // Several datasets and no path: they are listed.
        ("", "it holds 6 datasets (/flags, /padded, /obs/grid"),
        (
            "OPTIONS ('path' '/obs/nope')",
            "'path' names '/obs/nope', but '/obs' holds no 'nope' (it holds: grid, records, x, y)",
        ),
        (
            "OPTIONS ('path' '/nope/records')",
            "there is no group '/nope' in it",
        ),
    ];
    for (options, want) in cases {
        let err = create(&ctx, &records, options).await.unwrap_err();
        assert!(
            err.contains("records.h5") && err.contains(want),
            "{options}: {err}"
        );
    }
    // Not an HDF5 file: a netCDF-3 file is named as one.
    let err = create(&ctx, "tests/data/netcdf/classic.nc", "")
        .await
        .unwrap_err();
    assert!(
        err.contains("classic.nc")
            && err.contains("not an HDF5 file")
            && err.contains("read it with STORED AS NETCDF"),
        "{err}"
    );
    // A file's one dataset is searched for 32 groups down, no deeper; a path reads it.
    let deep = format!("{DIR}/deep.h5");
    let err = create(&ctx, &deep, "").await.unwrap_err();
    assert!(
        err.contains("deep.h5") && err.contains("its groups nest deeper than 32 levels"),
        "{err}"
    );
    // A group read as a dataset: the whole tree of groups is read, so its depth is bounded.
    let err = create(&ctx, &deep, "OPTIONS ('path' '/g0')")
        .await
        .unwrap_err();
    assert!(
        err.contains("its groups nest deeper than 32 levels"),
        "{err}"
    );
    let path: Vec<String> = (0..40).map(|i| format!("g{i}")).collect();
    let options = format!("OPTIONS ('path' '/{}/v')", path.join("/"));
    let read = new_session_context();
    create(&read, &deep, &options).await.unwrap();
    let batch = all_rows(&read, "SELECT sum(value) FROM t").await.unwrap();
    assert_eq!(cell(batch.column(0).as_ref(), 0), json!("4.0"));
    // An integer in fewer bits than its size, as a compound's member: not read (its stored
    // bits are not its value).
    let err = create(
        &ctx,
        &format!("{DIR}/bits.h5"),
        "OPTIONS ('path' '/compound')",
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("bits.h5")
            && err.contains("dataset '/compound'")
            && err.contains("its compound type holds a number that keeps its value in fewer bits"),
        "{err}"
    );
    // A variable-length string in a nested compound: not read yet, the member named.
    let err = create(
        &ctx,
        &format!("{DIR}/strings.h5"),
        "OPTIONS ('path' '/nested')",
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("strings.h5")
            && err.contains("dataset '/nested'")
            && err.contains("member 'tag.label'")
            && err.contains("variable-length"),
        "{err}"
    );
    // Options of other kinds are named.
    let err = create(&ctx, &records, "OPTIONS ('group' 'obs')")
        .await
        .unwrap_err();
    assert!(
        err.contains("'group'") && err.contains("STORED AS HDF5"),
        "{err}"
    );
}

#[tokio::test]
async fn a_dimension_range_reads_only_its_chunks() {
    let ctx = new_session_context();
    let options = "OPTIONS ('path' '/obs/records')";
    create(&ctx, &format!("{DIR}/records.h5"), options)
        .await
        .unwrap();
    // Records 4 and 5 lie in the second of three chunks of 4.
    let sql = "EXPLAIN SELECT sum(id) FROM t WHERE dim_0 >= 4 AND dim_0 < 6";
    let batch = all_rows(&ctx, sql).await.unwrap();
    let plan = batch.column(1).as_string::<i32>().value(1).to_string();
    assert!(plan.contains("chunks=1/3"), "{plan}");
    let batch = all_rows(&ctx, "SELECT sum(id) FROM t WHERE dim_0 >= 4 AND dim_0 < 6")
        .await
        .unwrap();
    assert_eq!(cell(batch.column(0).as_ref(), 0), json!(209));
}
