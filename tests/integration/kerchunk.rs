//! Kerchunk reference files (tests/data/kerchunk, written by make_fixtures.py with
//! netCDF4-python 1.7.5 and kerchunk 0.2.10): each reads as the netCDF file it describes reads
//! in xarray (`expected.json`); references outside the file's folder need a grant; damaged
//! references are errors naming the reference file and what is wrong. The SQL answers are in
//! sql/kerchunk.slt (run locally, on the object stores and on the clusters).

use std::path::Path;

use datafusion::prelude::SessionContext;
use ndfusion::{new_session_context, Error};
use serde_json::Value;

use super::xarray_cells::{all_rows, assert_rows, column_names};

const DIR: &str = "tests/data/kerchunk";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn create(ctx: &SessionContext, location: &str, options: &str) -> Result<(), String> {
    let sql = format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{location}' {options}");
    match ctx.sql(&sql).await {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::user_message(&e)),
    }
}

#[tokio::test]
async fn reference_files_read_as_xarray_reads_the_netcdf_file() {
    let expected = expected();
    for (file, name, dims) in [
        ("refs_v1.json", "demo", 3),
        ("refs_v0_inline.json", "demo", 3),
        ("refs.parq", "demo", 3),
        ("refs_gen.json", "grid", 2),
    ] {
        let want = &expected[name];
        let ctx = new_session_context();
        create(&ctx, &format!("{DIR}/{file}"), "").await.unwrap();
        let columns: Vec<String> = (want["columns"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        // The same columns as xarray's; their order is a group's without consolidated
        // metadata (sorted by name), not the netCDF file's, which the references do not keep.
        let all = all_rows(&ctx, "SELECT * FROM t").await.unwrap();
        let mut ours = column_names(&all);
        assert_eq!(ours.pop().as_deref(), Some("__global_attrs__"), "{file}");
        let mut theirs = columns.clone();
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs, "{file}");
        let batch = all_rows(&ctx, &format!("SELECT {} FROM t", columns.join(", ")))
            .await
            .unwrap();
        assert_eq!(
            batch.num_rows(),
            want["rows"].as_u64().unwrap() as usize,
            "{file}"
        );
        let dtype = |c: &str| want["dtypes"][c].as_str().unwrap().to_string();
        assert_rows(file, &batch, want, &columns, dtype, dims);
    }
}

#[tokio::test]
async fn references_outside_the_files_folder_need_a_grant() {
    let location = format!("{DIR}/elsewhere/refs_up.json");
    let ctx = new_session_context();
    let refused = create(&ctx, &location, "").await.unwrap_err();
    let folder = std::fs::canonicalize(DIR).unwrap();
    let prefix = format!("file://{}/", folder.display());
    assert!(
        refused.contains(&format!("'virtual_chunk_containers' '{prefix}'")),
        "{refused}"
    );
    assert!(refused.contains(&location), "{refused}");
    let options = format!("OPTIONS ('virtual_chunk_containers' '{prefix}')");
    create(&ctx, &location, &options).await.unwrap();
    let batch = all_rows(&ctx, "SELECT count(temp) FROM t").await.unwrap();
    assert_eq!(
        arrow::util::display::array_value_to_string(batch.column(0), 0).unwrap(),
        "71"
    );

    // Icechunk's named containers mean nothing to a reference file.
    let named = format!("OPTIONS ('virtual_chunk_containers' 'nc={prefix}')");
    let err = create(&new_session_context(), &location, &named)
        .await
        .unwrap_err();
    assert!(err.contains("virtual_chunk_containers"), "{err}");
    assert!(err.contains("named container"), "{err}");
}

/// VirtualiZarr names the file by its absolute path (written for a copy of demo.nc in
/// `/tmp/ndfusion-virtualizarr`, replaced here by a folder of the test's own): a folder the
/// reference file is not in, so it needs a grant; then it reads as xarray reads it.
#[tokio::test]
async fn virtualizarr_references_read_as_xarray_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::copy(format!("{DIR}/demo.nc"), data.join("demo.nc")).unwrap();
    let text = std::fs::read_to_string(format!("{DIR}/virtualizarr.json")).unwrap();
    let text = text.replace(
        "/tmp/ndfusion-virtualizarr/",
        &format!("{}/", data.display()),
    );
    std::fs::create_dir(dir.path().join("refs")).unwrap();
    let location = dir
        .path()
        .join("refs/refs.json")
        .to_string_lossy()
        .to_string();
    std::fs::write(&location, text).unwrap();

    let ctx = new_session_context();
    let refused = create(&ctx, &location, "").await.unwrap_err();
    let prefix = format!("file://{}/", data.display());
    assert!(refused.contains(&prefix), "{refused}");
    let options = format!("OPTIONS ('virtual_chunk_containers' '{prefix}')");
    create(&ctx, &location, &options).await.unwrap();

    let text = std::fs::read_to_string(format!("{DIR}/expected_virtualizarr.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let want = &expected["demo"];
    let columns: Vec<String> = (want["columns"].as_array().unwrap().iter())
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let batch = all_rows(&ctx, &format!("SELECT {} FROM t", columns.join(", ")))
        .await
        .unwrap();
    assert_eq!(batch.num_rows(), want["rows"].as_u64().unwrap() as usize);
    let dtype = |c: &str| want["dtypes"][c].as_str().unwrap().to_string();
    assert_rows("virtualizarr.json", &batch, want, &columns, dtype, 3);
}

/// The refs of refs_v1.json with `edit` applied, written beside a copy of demo.nc.
fn damaged(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
    std::fs::copy(format!("{DIR}/demo.nc"), dir.join("demo.nc")).unwrap();
    let text = std::fs::read_to_string(format!("{DIR}/refs_v1.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    edit(doc["refs"].as_object_mut().unwrap());
    let path = dir.join("refs.json");
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    path.to_string_lossy().to_string()
}

/// A copy of refs.parq (next to a copy of demo.nc) with `file` replaced by `bytes`.
fn damaged_parquet(dir: &std::path::Path, file: &str, bytes: &[u8]) -> String {
    let copy = dir.join("refs.parq");
    for entry in walk(std::path::Path::new(DIR).join("refs.parq")) {
        let to = copy.join(entry.strip_prefix(format!("{DIR}/refs.parq")).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    std::fs::copy(format!("{DIR}/demo.nc"), dir.join("demo.nc")).unwrap();
    std::fs::write(copy.join(file), bytes).unwrap();
    copy.to_string_lossy().to_string()
}

fn walk(dir: std::path::PathBuf) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => files.extend(walk(path)),
            false => files.push(path),
        }
    }
    files
}

#[tokio::test]
async fn damaged_parquet_references_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = new_session_context();
    let cases: [(&str, &[u8], &str); 3] = [
        ("temp/refs.1.parq", b"not parquet", "temp/refs.1.parq: not a Parquet file"),
        (".zmetadata", b"{\"metadata\": {}}", "no positive 'record_size'"),
        (
            ".zmetadata",
            br#"{"record_size": 2, "metadata": {".zgroup": {"zarr_format": 2}, "a/.zarray": {"shape": [4000000000000], "chunks": [1]}}}"#,
            "array 'a' has 4000000000000 chunks",
        ),
    ];
    for (file, bytes, want) in cases {
        let location = damaged_parquet(dir.path(), file, bytes);
        let err = create(&ctx, &location, "").await.unwrap_err();
        assert!(
            err.contains("refs.parq") && err.contains(want),
            "{file}: {err}"
        );
    }
    // A record file that is not there.
    let location = damaged_parquet(dir.path(), "temp/refs.1.parq", b"");
    std::fs::remove_file(dir.path().join("refs.parq/temp/refs.1.parq")).unwrap();
    let err = create(&ctx, &location, "").await.unwrap_err();
    assert!(
        err.contains("temp/refs.1.parq") && err.contains("no such file"),
        "{err}"
    );
}

#[tokio::test]
async fn damaged_references_are_errors_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let query = "SELECT sum(temp) FROM t";

    // A chunk in a file that is not there.
    let location = damaged(dir.path(), |refs| {
        refs.insert(
            "temp/1.0.0".into(),
            serde_json::json!(["nowhere.nc", 0, 40]),
        );
    });
    let ctx = new_session_context();
    create(&ctx, &location, "").await.unwrap();
    let err = all_rows(&ctx, query).await.unwrap_err();
    assert!(err.contains("nowhere.nc"), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    // A chunk past the end of the file (the file changed since the references were made).
    let location = damaged(dir.path(), |refs| {
        refs.insert(
            "temp/2.0.0".into(),
            serde_json::json!(["demo.nc", 12200, 4000]),
        );
    });
    let ctx = new_session_context();
    create(&ctx, &location, "").await.unwrap();
    let err = all_rows(&ctx, query).await.unwrap_err();
    assert!(err.contains("demo.nc"), "{err}");
    assert!(err.contains("bytes 12200..16200 were referenced"), "{err}");

    // A chunk longer than its decoded size allows is refused before it is read.
    let location = damaged(dir.path(), |refs| {
        refs.insert(
            "temp/0.0.0".into(),
            serde_json::json!(["demo.nc", 0, 1u64 << 40]),
        );
    });
    let ctx = new_session_context();
    create(&ctx, &location, "").await.unwrap();
    let err = all_rows(&ctx, query).await.unwrap_err();
    assert!(err.contains("1099511627776 bytes"), "{err}");

    // A reference that is neither text nor a list.
    let location = damaged(dir.path(), |refs| {
        refs.insert("temp/0.0.0".into(), serde_json::json!(17));
    });
    let err = create(&new_session_context(), &location, "")
        .await
        .unwrap_err();
    assert!(err.contains(&location), "{err}");
    assert!(err.contains("key 'temp/0.0.0'"), "{err}");

    // Not JSON at all.
    let path = dir.path().join("garbage.json");
    std::fs::write(&path, b"\x00\x01 not json").unwrap();
    let location = path.to_string_lossy().to_string();
    let err = create(&new_session_context(), &location, "")
        .await
        .unwrap_err();
    assert!(err.contains(&location) && err.contains("JSON"), "{err}");

    // A gen entry that would make more keys than a document may hold.
    let path = dir.path().join("bomb.json");
    std::fs::write(
        &path,
        r#"{"version": 1, "refs": {".zgroup": "{\"zarr_format\":2}"},
            "gen": [{"key": "a/{{i}}", "url": "demo.nc", "offset": "{{i}}", "length": "1",
                     "dimensions": {"i": {"stop": 1000000000000}}}]}"#,
    )
    .unwrap();
    let location = path.to_string_lossy().to_string();
    let err = create(&new_session_context(), &location, "")
        .await
        .unwrap_err();
    assert!(err.contains("gen entry 0"), "{err}");
    assert!(err.contains("max_metadata_bytes"), "{err}");

    // A reference file larger than the session's metadata limit is not read.
    let ctx = new_session_context();
    ctx.sql("SET ndfusion.max_metadata_bytes = '1K'")
        .await
        .unwrap();
    let err = create(&ctx, &format!("{DIR}/refs_v1.json"), "")
        .await
        .unwrap_err();
    assert!(err.contains("more than the 1024"), "{err}");

    // A missing reference file.
    let err = create(&new_session_context(), &format!("{DIR}/missing.json"), "")
        .await
        .unwrap_err();
    assert!(err.contains("missing.json"), "{err}");
}
