//! netCDF-3 files (tests/data/netcdf, written by make_fixtures.py with netCDF4-python 1.7.5 and
//! scipy 1.18, and the files xarray's and scipy's packages ship): each reads as
//! `xr.open_dataset(path).to_dataframe().reset_index()` shows it, column for column (names,
//! order, types) and value for value (`expected.json`); a query reads only the records it
//! selects; damaged and crafted files are errors naming the file and what is wrong. The SQL
//! answers are in sql/netcdf.slt (run locally, on the object stores and on the clusters).

use arrow::array::AsArray;
use arrow::datatypes::{DataType, TimestampNanosecondType};
use arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use ndfusion::{new_session_context, Error};
use serde_json::Value;

use super::xarray_cells::{all_rows, assert_rows, column_names};

const DIR: &str = "tests/data/netcdf";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn create(ctx: &SessionContext, location: &str, options: &str) -> Result<(), String> {
    let sql = format!("CREATE EXTERNAL TABLE t STORED AS NETCDF LOCATION '{location}' {options}");
    match ctx.sql(&sql).await {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::user_message(&e)),
    }
}

/// The pandas dtype of a column of `to_dataframe()` that an Arrow column of type `t` holds.
fn pandas_dtype(t: &DataType) -> &'static str {
    match t {
        DataType::Int8 => "int8",
        DataType::Int16 => "int16",
        DataType::Int32 => "int32",
        DataType::Int64 => "int64",
        DataType::UInt8 => "uint8",
        DataType::UInt16 => "uint16",
        DataType::UInt32 => "uint32",
        DataType::UInt64 => "uint64",
        DataType::Float32 => "float32",
        DataType::Float64 => "float64",
        DataType::Timestamp(_, None) => "datetime64[ns]",
        // pandas keeps text and bytes as objects (xarray 2026.9: text as `str`).
        DataType::Utf8 => "str",
        DataType::Binary => "object",
        other => panic!("no pandas dtype for {other}"),
    }
}

/// Timestamps of a non-standard calendar as xarray shows its cftime labels.
fn as_labels(batch: &RecordBatch, column: &str) -> RecordBatch {
    let schema = batch.schema();
    let (i, _) = schema.column_with_name(column).unwrap();
    let times = batch.column(i).as_primitive::<TimestampNanosecondType>();
    let labels: arrow::array::StringArray = (0..times.len())
        .map(|r| {
            times
                .value_as_datetime(r)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        })
        .collect();
    let mut columns = batch.columns().to_vec();
    columns[i] = std::sync::Arc::new(labels);
    let mut fields: Vec<_> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[i] = arrow::datatypes::Field::new(column, DataType::Utf8, true);
    RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
    )
    .unwrap()
}

#[tokio::test]
async fn netcdf_files_read_as_xarray_reads_them() {
    let expected = expected();
    for name in [
        "classic",
        "offset64",
        "one_record_var",
        "cdf5",
        "scipy",
        "nc4",
        "nc4_classic",
        "h5netcdf",
        "indexes",
        "groups/obs",
        "groups/obs/deep",
        "strings",
        "user_block",
        "szip",
        "enum",
        // Bounds variables decoded with their coordinate's time units and calendar.
        "bounds",
        // Variables netCDF4-python leaves out are left out (below: named, read or refused).
        "skipped",
        "shipped/xarray_example_1.nc",
        "shipped/xarray_bears.nc",
        "shipped/scipy_example_1.nc",
        "shipped/scipy_example_2.nc",
        "shipped/scipy_example_3_maskedvals.nc",
    ] {
        let want = &expected[name];
        // A group of a netCDF-4 file: `groups/obs/deep` is group `obs/deep` of groups.nc.
        let (file, options) = match (name.strip_prefix("shipped/"), name.split_once('/')) {
            (Some(_), _) => (format!("{DIR}/{name}"), String::new()),
            (None, Some((file, group))) => (
                format!("{DIR}/{file}.nc"),
                format!("OPTIONS ('path' '{group}')"),
            ),
            (None, None) => (format!("{DIR}/{name}.nc"), String::new()),
        };
        let ctx = new_session_context();
        create(&ctx, &file, &options).await.unwrap();
        let columns: Vec<String> = (want["columns"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        // xarray's columns in xarray's order, then the file's attributes.
        let mut batch = all_rows(&ctx, "SELECT * FROM t").await.unwrap();
        let mut ours = column_names(&batch);
        let attrs = want["attrs"].as_object().unwrap();
        if !attrs.is_empty() {
            assert_eq!(ours.pop().as_deref(), Some("__global_attrs__"), "{name}");
        }
        assert_eq!(ours, columns, "{name}");
        assert_eq!(
            batch.num_rows(),
            want["rows"].as_u64().unwrap() as usize,
            "{name}"
        );
        for (c, field) in columns.iter().zip(batch.schema().fields()) {
            let theirs = want["dtypes"][c].as_str().unwrap();
            let ours = pandas_dtype(field.data_type());
            match theirs {
                // cftime labels of a non-standard calendar: compared as text.
                "object" if ours == "datetime64[ns]" => batch = as_labels(&batch, c),
                _ => assert_eq!(ours, theirs, "{name}: the type of column '{c}'"),
            }
        }
        // Rows compared as sets: sorted by every column.
        let dtype = |c: &str| want["dtypes"][c].as_str().unwrap().to_string();
        assert_rows(name, &batch, want, &columns, dtype, columns.len());
    }
}

/// Rows of `name` (compound.nc, vlen.nc) as xarray shows them, records as objects and arrays
/// as lists; the table's batch, ordered by `order`.
async fn assert_xarray_rows(ctx: &SessionContext, name: &str, order: &str) -> RecordBatch {
    let want = &expected()[name];
    create(ctx, &format!("{DIR}/{name}.nc"), "").await.unwrap();
    let batch = all_rows(ctx, &format!("SELECT * FROM t ORDER BY {order}"))
        .await
        .unwrap();
    let columns: Vec<&str> = (want["columns"].as_array().unwrap().iter())
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut ours = column_names(&batch);
    if !want["attrs"].as_object().unwrap().is_empty() {
        assert_eq!(ours.pop().as_deref(), Some("__global_attrs__"), "{name}");
    }
    assert_eq!(ours, columns, "{name}");
    let want_rows = want["rows"].as_array().unwrap();
    let rows = super::hdf5::rows_of(&batch);
    assert_eq!(rows.len(), want_rows.len(), "{name}");
    for (i, (row, theirs)) in rows.iter().zip(want_rows).enumerate() {
        for (k, v) in row {
            assert!(
                super::hdf5::same(v, &theirs[k]),
                "{name} row {i} column {k}: {v} vs xarray's {}",
                theirs[k]
            );
        }
    }
    batch
}

/// A compound variable is one `Struct` column of records, as xarray shows netCDF4-python's
/// structured values: nested compounds nested, array members lists, character members
/// lists of bytes; an unwritten chunk reads as HDF5's zero fill, as xarray shows it.
#[tokio::test]
async fn compound_variables_read_as_xarray_reads_them() {
    let ctx = new_session_context();
    let batch = assert_xarray_rows(&ctx, "compound", "time, s").await;
    let obs = batch.schema().field_with_name("obs").unwrap().clone();
    assert_eq!(
        obs.data_type().to_string(),
        "Struct(\"id\": non-null Int32, \"pos\": non-null FixedSizeList(2 x non-null Float64), \
         \"meta\": non-null Struct(\"level\": non-null Int16, \"flag\": non-null UInt8), \
         \"name\": non-null FixedSizeList(4 x non-null Binary))"
    );
    // Members are fields: filtered, projected and aggregated in SQL.
    let batch = all_rows(
        &ctx,
        "SELECT sum(obs['id']) AS a, min(obs['meta']['level']) AS b, max(obs['pos'][2]) AS c \
         FROM t \
         WHERE time < '2000-01-03' AND obs['meta']['flag'] < 255",
    )
    .await
    .unwrap();
    let row = &super::hdf5::rows_of(&batch)[0];
    let cells: Vec<String> = row.values().map(Value::to_string).collect();
    assert_eq!(cells, ["51", "-3", "\"0.75\""], "{row:?}");
}

/// A vlen variable is a `List` column, as xarray shows netCDF4-python's arrays of numbers
/// (elements never written are empty lists).
#[tokio::test]
async fn vlen_variables_read_as_xarray_reads_them() {
    let ctx = new_session_context();
    let batch = assert_xarray_rows(&ctx, "vlen", "x, y").await;
    let types: Vec<String> = (batch.schema().fields().iter())
        .map(|f| f.data_type().to_string())
        .collect();
    assert_eq!(
        types[2..4],
        ["List(non-null Int16)", "List(non-null Float64)"]
    );
    let batch = all_rows(
        &ctx,
        "SELECT sum(cardinality(ragged)) AS a, max(array_max(waves)) AS b FROM t WHERE x >= 20",
    )
    .await
    .unwrap();
    let row = &super::hdf5::rows_of(&batch)[0];
    let cells: Vec<String> = row.values().map(Value::to_string).collect();
    assert_eq!(cells, ["6", "\"inf\""], "{row:?}");
}

#[tokio::test]
async fn variables_netcdf4_python_leaves_out_are_read_only_when_named() {
    // Named, a compound with h5py's bool (an enum member) reads as h5py reads it.
    let ctx = new_session_context();
    let file = format!("{DIR}/skipped.nc");
    create(&ctx, &file, "OPTIONS ('variables' 'flags')")
        .await
        .unwrap();
    let batch = all_rows(&ctx, "SELECT x, flags FROM t ORDER BY x")
        .await
        .unwrap();
    let rows = super::hdf5::rows_of(&batch);
    let flags: Vec<String> = rows.iter().map(|r| r["flags"].to_string()).collect();
    assert_eq!(
        flags,
        [
            r#"{"ok":true,"code":0}"#,
            r#"{"ok":false,"code":7}"#,
            r#"{"ok":true,"code":7}"#
        ]
    );
    // Named, what ndfusion does not read is an error naming the variable.
    for (variable, why) in [
        ("pairs", "its type is a vlen of Compound"),
        ("ragged", "its type (member 'l') is variable-length"),
    ] {
        let ctx = new_session_context();
        let options = format!("OPTIONS ('variables' 'plain,{variable}')");
        let err = create(&ctx, &file, &options).await.unwrap_err();
        assert!(
            err.contains("skipped.nc") && err.contains(&format!("variable '{variable}': {why}")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_time_range_reads_only_its_records() {
    let expected = expected();
    let want = &expected["records"]["weeks_3_to_5"];
    let ctx = new_session_context();
    create(&ctx, &format!("{DIR}/records.nc"), "")
        .await
        .unwrap();
    let where_ = "time >= '2000-01-22' AND time < '2000-02-12'";
    let batch = all_rows(
        &ctx,
        &format!("SELECT count(sst), min(sst), max(sst) FROM t WHERE {where_}"),
    )
    .await
    .unwrap();
    let shown = |c: usize| arrow::util::display::array_value_to_string(batch.column(c), 0).unwrap();
    assert_eq!(shown(0), want["count"].as_u64().unwrap().to_string());
    assert_eq!(shown(1), want["min"].as_str().unwrap());
    assert_eq!(shown(2), want["max"].as_str().unwrap());
    // Records 3..6 of 24, 128 KiB each: those bytes and no others, in one request.
    let plan = all_rows(
        &ctx,
        &format!("EXPLAIN ANALYZE SELECT sst FROM t WHERE {where_}"),
    )
    .await
    .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&[plan])
        .unwrap()
        .to_string();
    assert!(text.contains("chunks=[sst 1/3]"), "{text}");
    assert!(text.contains("bytes_read=393.2 K"), "{text}");
    assert!(text.contains("requests=1,"), "{text}");

    // A box of each record: its cells of the 24 records (30 x 20 int16 each), no more.
    let box_ = "y BETWEEN 10 AND 24.5 AND x BETWEEN 120 AND 129.5";
    let plan = all_rows(
        &ctx,
        &format!("EXPLAIN ANALYZE SELECT sst FROM t WHERE {box_}"),
    )
    .await
    .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&[plan])
        .unwrap()
        .to_string();
    // 24 x 30 x 20 x 2 bytes.
    assert!(text.contains("bytes_read=28.80 K"), "{text}");
    assert!(text.contains("chunks_read_in_part=3"), "{text}");
}

/// A CDF-1 header: `dims` (name, size; 0 is the record dimension), no attributes, and
/// `vars` (name, dimension ids, nc_type, begin), with `numrecs` records.
fn header(numrecs: u32, dims: &[(&str, u32)], vars: &[(&str, &[u32], u32, u32)]) -> Vec<u8> {
    fn name(out: &mut Vec<u8>, n: &str) {
        out.extend((n.len() as u32).to_be_bytes());
        out.extend(n.as_bytes());
        out.resize(out.len().div_ceil(4) * 4, 0);
    }
    let mut out = b"CDF\x01".to_vec();
    out.extend(numrecs.to_be_bytes());
    out.extend(10u32.to_be_bytes()); // NC_DIMENSION
    out.extend((dims.len() as u32).to_be_bytes());
    for (n, size) in dims {
        name(&mut out, n);
        out.extend(size.to_be_bytes());
    }
    out.extend([0u8; 8]); // no attributes
    out.extend(11u32.to_be_bytes()); // NC_VARIABLE
    out.extend((vars.len() as u32).to_be_bytes());
    for (n, ids, nc_type, begin) in vars {
        name(&mut out, n);
        out.extend((ids.len() as u32).to_be_bytes());
        for id in *ids {
            out.extend(id.to_be_bytes());
        }
        out.extend([0u8; 8]); // no attributes
        out.extend(nc_type.to_be_bytes());
        out.extend(4u32.to_be_bytes()); // vsize (not trusted)
        out.extend(begin.to_be_bytes());
    }
    out
}

#[tokio::test]
async fn damaged_and_crafted_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let classic = std::fs::read(format!("{DIR}/classic.nc")).unwrap();
    // netCDF-4 (HDF5) files cut short or scrambled.
    let nc4 = std::fs::read(format!("{DIR}/nc4.nc")).unwrap();
    let mut scrambled = nc4.clone();
    for (i, b) in scrambled[200..2000].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    let cut_nc4 = format!("but the file holds {} (truncated?)", nc4.len() / 2);
    // The chunk B-tree (v1) of nc4.nc's `time`: a leaf whose one entry is at byte 13570 (its
    // key is 24 bytes). Made an inner node pointing at itself, and pointing outside the file.
    let node = 13522;
    assert_eq!(
        &nc4[node..node + 6],
        b"TREE\x01\x00",
        "nc4.nc was rewritten: find the node again"
    );
    let mut looping = nc4.clone();
    looping[node + 5] = 1;
    looping[node + 48..node + 56].copy_from_slice(&(node as u64).to_le_bytes());
    let mut outside = nc4.clone();
    outside[node + 48..node + 56].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "garbage.nc",
            b"not a netCDF file at all".to_vec(),
            "not a netCDF file: it starts with bytes 6e 6f 74 20",
        ),
        ("empty.nc", Vec::new(), "an empty file"),
        (
            "btree_loop.nc",
            looping,
            "variable 'time': its chunk index: its B-tree node at byte 13522 is at level 1, \
             where its parent's children are at level 0",
        ),
        (
            "btree_outside.nc",
            outside,
            "variable 'time': its chunk index: its data needs bytes 1099511627776..",
        ),
        (
            "cut_header.nc",
            classic[..40].to_vec(),
            "ends inside its header",
        ),
        (
            "cut_data.nc",
            classic[..classic.len() - 100].to_vec(),
            "truncated?",
        ),
        // 2^31 records of a 4-byte variable in a file of a few bytes.
        (
            "many_records.nc",
            {
                let mut h = header(i32::MAX as u32, &[("t", 0)], &[("v", &[0], 4, 200)]);
                h.resize(256, 0);
                h
            },
            "variable 'v' needs bytes 200..",
        ),
        // A fixed variable of 2^31 x 2^31 x 2^31 doubles: larger than 2^64 bytes.
        (
            "huge_dims.nc",
            header(
                0,
                &[("a", 1 << 31), ("b", 1 << 31), ("c", 1 << 31)],
                &[("v", &[0, 1, 2], 6, 200)],
            ),
            "variable 'v' is larger than 2^64 bytes",
        ),
        // A dimension id past the dimensions.
        (
            "bad_dim.nc",
            header(0, &[("a", 2)], &[("v", &[7], 4, 100)]),
            "dimension index 7",
        ),
        // A header claiming 2^30 dimensions in a few bytes: read to the end, then refused.
        (
            "dimension_flood.nc",
            {
                let mut h = b"CDF\x01\0\0\0\0\0\0\0\x0a\x40\0\0\0".to_vec();
                h.extend([0u8; 64]);
                h
            },
            "ends inside its header",
        ),
        (
            "path_name.nc",
            header(0, &[("a", 1)], &[("../x", &[0], 4, 100)]),
            "a variable is named '../x'",
        ),
        ("nc4_head.nc", nc4[..100].to_vec(), "unexpected end of data"),
        ("nc4_half.nc", nc4[..nc4.len() / 2].to_vec(), &cut_nc4),
        (
            "nc4_magic_only.nc",
            [&nc4[..8], &[0u8; 4000][..]].concat(),
            "its netCDF-4 metadata: HDF5 error",
        ),
        ("nc4_scrambled.nc", scrambled, "HDF5 error"),
    ];
    for (name, bytes, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let location = path.to_string_lossy().to_string();
        let ctx = new_session_context();
        let err = create(&ctx, &location, "").await.unwrap_err();
        assert!(err.contains(&location), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
    }

    // A netCDF-4 file with a filter ndfusion does not decode.
    let ctx = new_session_context();
    let err = create(&ctx, &format!("{DIR}/bitshuffle.nc"), "")
        .await
        .unwrap_err();
    assert!(
        err.contains("bitshuffle.nc")
            && err.contains("'packed'")
            && err.contains("HDF5 filter 'bitshuffle' (id 32008)"),
        "{err}"
    );
    // The metadata limit bounds what is read of headers and chunk indexes.
    ctx.sql("SET ndfusion.max_metadata_bytes = '1K'")
        .await
        .unwrap();
    let err = create(&ctx, &format!("{DIR}/nc4.nc"), "")
        .await
        .unwrap_err();
    assert!(
        err.contains("nc4.nc") && err.contains("NDFUSION_MAX_METADATA_BYTES"),
        "{err}"
    );

    // A folder, a Zarr store, a path that is not there.
    let ctx = new_session_context();
    let err = create(&ctx, "tests/data/datasets/ocean_v3.zarr", "")
        .await
        .unwrap_err();
    assert!(
        err.contains("a Zarr store, read it with STORED AS ZARR"),
        "{err}"
    );
    let err = create(&ctx, "tests/data/netcdf", "").await.unwrap_err();
    assert!(err.contains("a folder, not a file"), "{err}");
    let err = create(&ctx, "tests/data/netcdf/nope.nc", "")
        .await
        .unwrap_err();
    assert!(
        err.contains("tests/data/netcdf/nope.nc") && err.contains("no such file"),
        "{err}"
    );
    // And the reverse: a netCDF file opened as a Zarr store.
    let sql = "CREATE EXTERNAL TABLE z STORED AS ZARR LOCATION 'tests/data/netcdf/classic.nc'";
    let err = Error::user_message(&ctx.sql(sql).await.unwrap_err());
    assert!(
        err.contains("a netCDF file: read it with STORED AS NETCDF"),
        "{err}"
    );
    // Options a netCDF table does not take are named.
    let err = create(
        &ctx,
        "tests/data/netcdf/classic.nc",
        "OPTIONS ('piece_bytes' '1')",
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("piece_bytes") && err.contains("STORED AS NETCDF"),
        "{err}"
    );
    // A group that is not there, and a group of a file that has none.
    let groups = format!("{DIR}/groups.nc");
    let err = create(&ctx, &groups, "OPTIONS ('path' 'obs/shallow')")
        .await
        .unwrap_err();
    assert!(
        err.contains("groups.nc")
            && err.contains("group 'obs' has no group 'shallow' (its groups: deep)"),
        "{err}"
    );
    let err = create(&ctx, &groups, "OPTIONS ('path' 'nope')")
        .await
        .unwrap_err();
    assert!(
        err.contains("the root group has no group 'nope' (its groups: obs)"),
        "{err}"
    );
    let err = create(&ctx, &format!("{DIR}/classic.nc"), "OPTIONS ('path' 'obs')")
        .await
        .unwrap_err();
    assert!(
        err.contains("classic.nc") && err.contains("a netCDF-3 file has no groups"),
        "{err}"
    );
}

/// A variable's chunk index is read when a query first needs its chunks, not when the table
/// opens: a damaged index of a data variable is an error naming it at the query that reads
/// it, and the other variables read meanwhile. (Coordinates are read when the table opens,
/// their indexes with them: see `damaged_and_crafted_files_are_errors_naming_the_file`.)
#[tokio::test]
async fn chunk_indexes_are_read_when_a_query_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut nc4 = std::fs::read(format!("{DIR}/nc4.nc")).unwrap();
    // The chunk B-trees (v1, one leaf each) of nc4.nc's chunked variables: `time`'s at byte
    // 13522, then those of temp, pres, counts, big, sparse and sparse_filled. Every one but
    // time's signature damaged.
    let nodes: Vec<usize> = (0..nc4.len() - 6)
        .filter(|&i| nc4[i..i + 6] == *b"TREE\x01\x00")
        .collect();
    assert_eq!(nodes.len(), 7, "nc4.nc was rewritten: find the nodes again");
    assert_eq!(
        nodes[0], 13522,
        "nc4.nc was rewritten: find the nodes again"
    );
    for &node in &nodes[1..] {
        nc4[node + 2] = b'X';
    }
    let path = dir.path().join("damaged_indexes.nc");
    std::fs::write(&path, &nc4).unwrap();
    let location = path.to_string_lossy().to_string();
    let ctx = new_session_context();
    create(&ctx, &location, "").await.unwrap();
    // Variables stored without a chunk index read (land: contiguous, with the coordinates).
    let batch = all_rows(
        &ctx,
        "SELECT count(DISTINCT time) AS n, sum(land) AS s FROM t",
    )
    .await
    .unwrap();
    let row = &super::hdf5::rows_of(&batch)[0];
    assert_eq!(row["n"], serde_json::json!(5), "{row:?}");
    let err = all_rows(&ctx, "SELECT sum(temp) FROM t").await.unwrap_err();
    assert!(
        err.contains(&location)
            && err.contains(
                "variable 'temp': its chunk index: its B-tree node at byte 17666: \
                             invalid B-tree signature"
            ),
        "{err}"
    );
}

#[tokio::test]
async fn a_file_that_shrinks_after_opening_is_an_error_at_the_query() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.nc");
    std::fs::copy(format!("{DIR}/records.nc"), &path).unwrap();
    let location = path.to_string_lossy().to_string();
    let ctx = new_session_context();
    create(&ctx, &location, "").await.unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(1 << 20).unwrap();
    let err = all_rows(&ctx, "SELECT max(sst) FROM t").await.unwrap_err();
    assert!(err.contains(&location), "{err}");
    assert!(err.contains("were referenced, the file holds"), "{err}");
}
