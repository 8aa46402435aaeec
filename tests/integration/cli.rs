//! The `ndfusion` binary: -c / -f / standard input, output formats, exit status.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn ndfusion(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

const CREATE: &str =
    "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 'tests/data/zarr_v3/struct_1d.zarr'";

#[test]
fn csv_quiet_answers_as_numpy_reads_the_array() {
    let out = ndfusion(
        &[
            "--format",
            "csv",
            "--quiet",
            "-c",
            CREATE,
            "-c",
            "SELECT dim_0, id, point.y FROM t WHERE dim_0 IN (0, 9) ORDER BY dim_0",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // numpy: id[0] == -3, point.y[0] == float32(1/3); element 9 is in the missing chunk: fill.
    assert_eq!(
        stdout(&out),
        "dim_0,id,t.point[y]\n0,-3,0.33333334\n9,-1,0.5\n"
    );
}

#[test]
fn one_string_may_hold_several_statements_and_files_run_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.sql");
    std::fs::write(
        &file,
        "SELECT count(*) AS n FROM t;\nSELECT sum(flags) AS s FROM t;\n",
    )
    .unwrap();
    let out = ndfusion(
        &[
            "--format",
            "tsv",
            "-q",
            "-c",
            &format!("{CREATE}; SELECT 1 AS one"),
            "-f",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "one\n1\nn\n10\ns\n1290\n");
}

#[test]
fn statements_come_from_standard_input_when_it_is_not_a_terminal() {
    let out = ndfusion(
        &["--format", "ndjson", "-q"],
        Some(&format!(
            "{CREATE};\nSELECT id FROM t WHERE dim_0 < 2 ORDER BY dim_0;"
        )),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"id\":-3}\n{\"id\":7}\n");
}

#[test]
fn json_and_table_formats() {
    let out = ndfusion(
        &[
            "--format",
            "json",
            "-q",
            "-c",
            CREATE,
            "-c",
            "SELECT dim_0 FROM t WHERE dim_0 = 3",
        ],
        None,
    );
    assert_eq!(stdout(&out), "[{\"dim_0\":3}]\n");
    let out = ndfusion(
        &["-c", CREATE, "-c", "SELECT dim_0 FROM t WHERE dim_0 = 3"],
        None,
    );
    let text = stdout(&out);
    assert!(
        text.contains("| dim_0 |") && text.contains("| 3     |"),
        "{text}"
    );
    assert!(text.contains("1 row(s) fetched."), "{text}");
}

#[test]
fn errors_go_to_stderr_with_a_non_zero_status() {
    let out = ndfusion(&["-q", "-c", "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 'tests/data/zarr_v3/bad/zero_fields.zarr'"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("zero_fields.zarr/zarr.json: struct data type has zero fields"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("panicked"));

    // Statements after a failing one do not run.
    let out = ndfusion(
        &[
            "-q",
            "--format",
            "csv",
            "-c",
            "SELECT nope",
            "-c",
            "SELECT 1",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");

    let out = ndfusion(&["-f", "/no/such/file.sql"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("/no/such/file.sql"));

    let out = ndfusion(&["--format", "xml"], None);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn demo_tables_answer_as_numpy_computed() {
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("tests/data/demo/expected.json").unwrap())
            .unwrap();
    let out = ndfusion(
        &["--demo", "-q", "--format", "csv", "-c",
          "SELECT count(*) AS n, count(*) FILTER (WHERE qc = 4) AS bad, avg(CAST(temperature AS DOUBLE)) FILTER (WHERE depth = 0) AS t0 FROM ocean"],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[0], expected["rows"].to_string());
    assert_eq!(row[1], expected["bad_qc"].to_string());
    let t0: f64 = row[2].parse().unwrap();
    let numpy: f64 = expected["mean_temperature_depth0"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // Summation order differs from numpy's pairwise sum: equal to the last few bits.
    assert!((t0 - numpy).abs() < 1e-12 * numpy.abs(), "{t0} vs {numpy}");

    // The demo dataset (xarray: 100 temperatures from 11 to 20 March north of 10 degrees).
    let out = ndfusion(
        &["--demo", "-q", "--format", "csv", "-c",
          "SELECT count(temp) AS n FROM sea WHERE time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10"],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n\n100\n");
}

#[test]
fn memory_limit_bounds_what_scans_hold() {
    let create = "CREATE EXTERNAL TABLE o STORED AS ZARR LOCATION 'tests/data/demo/ocean.zarr'";
    let query = "SELECT count(*) FROM o WHERE qc = 4";
    // 128 KiB holds one chunk read (33,480 bytes: sql/zarr_memory.slt) per partition: the
    // answer numpy gave.
    let out = ndfusion(
        &[
            "-q", "--format", "csv", "-m", "128K", "-c", create, "-c", query,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "count(*)\n444\n");

    let out = ndfusion(
        &["-q", "--memory-limit", "10K", "-c", create, "-c", query],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("one chunk read needs 33480 bytes"),
        "{}",
        stderr(&out)
    );

    for bad in ["12X", "lots", "0", "-5M", "1e30T"] {
        let flag = format!("--memory-limit={bad}");
        let out = ndfusion(&[&flag, "-c", "SELECT 1"], None);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(stderr(&out).contains("--memory-limit"), "{}", stderr(&out));
    }
}

/// A chunk read reserves what it holds (issue 38): one chunk of 10^8 uint8 elements
/// (`tests/data/memory/make_big_chunks.py`, whose zarr-python values are asserted) holds 2 x
/// 10^8 bytes fetched and decoded and a few batches, not 16 bytes of positions per element, so
/// 256 MiB reads it: absent (the fill value 7), stored, and as a dataset's block (xarray 2026.9
/// computes the same count, sum, min and max for the group: the fill value is not masked).
#[test]
fn memory_limit_counts_what_a_chunk_read_holds() {
    let cases = [
        ("missing.zarr", "value", "100000000,700000000,7,7"),
        ("stored.zarr", "value", "100000000,12499992621,0,250"),
        ("missing_group.zarr", "v", "100000000,700000000,7,7"),
    ];
    for (store, column, expected) in cases {
        let location = format!("tests/data/memory/{store}");
        let create = format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{location}'");
        let query = format!(
            "SELECT count(*), sum(CAST({column} AS BIGINT)), min({column}), max({column}) FROM t"
        );
        let out = ndfusion(
            &[
                "-q", "--format", "csv", "-m", "256M", "-c", &create, "-c", &query,
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{store}: {}", stderr(&out));
        let answer = stdout(&out);
        assert_eq!(answer.lines().nth(1), Some(expected), "{store}: {answer}");
    }
}

/// Runs the binary with `args` and returns its exit code, standard output and error, and its
/// peak resident memory in bytes (the kernel's count for this one process, from `wait4`).
// The child is reaped by `wait4`, which std's `Child` does not know of.
#[allow(clippy::zombie_processes)]
fn ndfusion_peak(args: &[&str]) -> (Option<i32>, String, String, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: plain out-parameters; the child is ours and not waited for elsewhere.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    // ru_maxrss is in KiB on Linux.
    let peak = usage.ru_maxrss as u64 * 1024;
    (code, out.join().unwrap(), err.join().unwrap(), peak)
}

const MIB: u64 = 1 << 20;

/// [`ndfusion_peak`] of the statement `copy` through a pool of `limit`, in CSV.
fn copy_peak(limit: &str, copy: &str) -> (Option<i32>, String, String, u64) {
    ndfusion_peak(&["-q", "--format", "csv", "--memory-limit", limit, "-c", copy])
}

/// `query` over the table `STORED AS kind` at `location`, registered as `t`, in CSV: the exit
/// code, the output and the errors.
fn query_csv(kind: &str, location: &std::path::Path, query: &str) -> (Option<i32>, String, String) {
    let create = format!(
        "CREATE EXTERNAL TABLE t STORED AS {kind} LOCATION '{}'",
        location.display()
    );
    let (code, out, err, _) = ndfusion_peak(&["-q", "--format", "csv", "-c", &create, "-c", query]);
    (code, out, err)
}

/// [`ndfusion_peak`] of `query` over the Zarr table at `location`, registered as `t`, in CSV.
fn query_peak(location: &std::path::Path, query: &str) -> (Option<i32>, String, String, u64) {
    let create = format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
        location.display()
    );
    ndfusion_peak(&["-q", "--format", "csv", "-c", &create, "-c", query])
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB of zeros each, with no content size in its
/// header: 4 bytes a block, so 16,384 of them (64 KiB) decompress to 2 GiB (RFC 8878: frame
/// header descriptor 0, window descriptor 2^17; block header = last | RLE << 1 | size << 3).
fn zstd_rle_bomb(blocks: usize) -> Vec<u8> {
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
    for b in 0..blocks {
        let last = u32::from(b + 1 == blocks);
        let header = last | (1 << 1) | ((128 << 10) << 3);
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(0);
    }
    frame
}

/// A 64 KiB zstd chunk that decompresses to 2 GiB where 1,000 bytes are expected (issue 23's
/// bomb, which reached 2.2 GB): an error naming the chunk, in a process that stays small.
#[test]
fn a_zstd_bomb_is_an_error_in_a_small_process() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("bomb.zarr");
    super::zarr_fixtures::copy_dir(
        std::path::Path::new("tests/data/zarr_v3/struct_1d.zarr"),
        &copy,
    );
    std::fs::write(copy.join("c/0"), zstd_rle_bomb(16_384)).unwrap();
    let (code, _, err, peak) = query_peak(&copy, "SELECT sum(id) FROM t");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("'c/0'") && err.contains("more than the") && err.contains("bytes expected"),
        "{err}"
    );
    assert!(peak < 200 * MIB, "peak RSS {} MiB", peak / MIB);
}

/// A chunk of 2 x 10^7 one-byte elements that is not stored (metadata only: a fill value of
/// 7): `max` of its dimension and `sum` of its values come from batches made a few at a
/// time, not from 2 x 10^7 rows of columns at once (444 MB before; a debug binary idles at
/// about 130 MB).
#[test]
fn a_missing_chunk_reads_in_a_small_process() {
    let dir = tempfile::tempdir().unwrap();
    let array = dir.path().join("missing.zarr");
    std::fs::create_dir(&array).unwrap();
    std::fs::write(
        array.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [20000000], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [20000000]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 7, "codecs": [{"name": "bytes"}], "dimension_names": ["i"]}"#,
    )
    .unwrap();
    let query = "SELECT max(i), sum(value), count(*) FROM t";
    let (code, out, err, peak) = query_peak(&array, query);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "max(t.i),sum(t.value),count(*)\n19999999,140000000,20000000\n"
    );
    assert!(peak < 256 * MIB, "peak RSS {} MiB", peak / MIB);
}

/// The defaults of the limits on what a file may make ndfusion do are the process's, from
/// `NDFUSION_MAX_*` (README, "Limits"; `SET ndfusion.*` in sql/limits.slt): a limit lowered refuses a file it did not before, naming the variable;
/// raised, it reads a file the default refuses (an array with 20,000 attributes); a variable
/// that is not a size is an error naming it.
#[test]
fn limits_come_from_the_environment() {
    let run = |vars: &[(&str, &str)], location: &str| {
        let create = format!("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{location}'");
        Command::new(env!("CARGO_BIN_EXE_ndfusion"))
            .args([
                "-q",
                "--format",
                "csv",
                "-c",
                &create,
                "-c",
                "SELECT count(*) FROM t",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .envs(vars.iter().copied())
            .output()
            .unwrap()
    };
    let fixture = "tests/data/zarr_v3/struct_1d.zarr";
    let out = run(&[("NDFUSION_MAX_METADATA_BYTES", "100")], fixture);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("more than the 100 a metadata document may have")
            && stderr(&out).contains("NDFUSION_MAX_METADATA_BYTES"),
        "{}",
        stderr(&out)
    );
    let out = run(&[("NDFUSION_MAX_METADATA_BYTES", "lots")], fixture);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid option 'NDFUSION_MAX_METADATA_BYTES'"),
        "{}",
        stderr(&out)
    );

    // zarr-python's struct_1d with 20,000 attributes added.
    let dir = tempfile::tempdir().unwrap();
    let flood = dir.path().join("flood.zarr");
    super::zarr_fixtures::copy_dir(std::path::Path::new(fixture), &flood);
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(flood.join("zarr.json")).unwrap()).unwrap();
    let attributes = (0..20_000)
        .map(|i| (format!("a{i}"), serde_json::Value::from(i)))
        .collect();
    meta["attributes"] = serde_json::Value::Object(attributes);
    std::fs::write(flood.join("zarr.json"), meta.to_string()).unwrap();
    let flood = flood.to_string_lossy();
    let out = run(&[], &flood);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("20000 attributes, more than the 10000")
            && stderr(&out).contains("NDFUSION_MAX_ATTRIBUTES"),
        "{}",
        stderr(&out)
    );
    let out = run(&[("NDFUSION_MAX_ATTRIBUTES", "20000")], &flood);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // numpy: the fixture's 10 records (tests/data/zarr_v3/expected.json).
    assert_eq!(stdout(&out), "count(*)\n10\n");
}

/// A dataset (a group with a variable `v` of 2 x 10^7 one-byte cells in one zstd chunk of
/// ones, and `w` of as many float32 cells, not stored: its fill value 2.5, not a mask in Zarr
/// v3 as xarray reads it; no coordinate): its one block's rows are made into batches one at a
/// time, and the missing chunk is its fill element, so the process holds the stored chunk and
/// a few batches, not 2 x 10^7 rows of columns (about 500 MB when the block was one batch) or
/// an 80 MB box of fill values.
#[test]
fn a_large_block_reads_in_a_small_process() {
    let dir = tempfile::tempdir().unwrap();
    let group = dir.path().join("big.zarr");
    std::fs::create_dir_all(group.join("v/c")).unwrap();
    std::fs::write(
        group.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {}}"#,
    )
    .unwrap();
    std::fs::write(
        group.join("v/zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [20000000], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [20000000]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "dimension_names": ["x"], "attributes": {},
            "codecs": [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 1, "checksum": false}}]}"#,
    )
    .unwrap();
    std::fs::create_dir(group.join("w")).unwrap();
    std::fs::write(
        group.join("w/zarr.json"),
        r#"{"zarr_format": 3, "node_type": "array", "shape": [20000000], "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [20000000]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 2.5, "dimension_names": ["x"], "attributes": {},
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}"#,
    )
    .unwrap();
    let ones = zstd::bulk::compress(&vec![1u8; 20_000_000], 1).unwrap();
    std::fs::write(group.join("v/c/0"), ones).unwrap();
    let query = "SELECT max(x), sum(v), sum(w) FROM t";
    let (code, out, err, peak) = query_peak(&group, query);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "max(t.x),sum(t.v),sum(t.w)\n19999999,20000000,50000000.0\n"
    );
    assert!(peak < 256 * MIB, "peak RSS {} MiB", peak / MIB);
}

/// A gzip member of `segments` copies of one deflate segment of 1 MiB of zeros (each ends in
/// a full flush, so it is byte-aligned and independent of the others): about 1 KiB a segment,
/// so 960 of them (just under the 1 MiB a 78-byte chunk may be stored as) inflate to 960 MiB.
/// The trailer's CRC is not the data's: a bounded reader stops long before it.
fn gzip_bomb(segments: usize) -> Vec<u8> {
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    let mut segment = Vec::with_capacity(1 << 16);
    deflate
        .compress_vec(&vec![0; 1 << 20], &mut segment, flate2::FlushCompress::Full)
        .unwrap();
    let mut member = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    for _ in 0..segments {
        member.extend_from_slice(&segment);
    }
    // A final, empty block of fixed codes, then CRC-32 and size.
    member.extend_from_slice(&[0x03, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
    member
}

/// The other small inputs issue 23 found taking gigabytes, each in a process of its own: a
/// 1 MiB gzip chunk that inflates to 960 MiB (a 2 MiB one took 4.3 GB before), a 20-byte zstd frame claiming
/// 2^40 bytes (a 1 TiB allocation), a 14 MB `zarr.json` with 10^6 attributes (1.15 GB) and a
/// 200 MB one (1.1 GB): each an error naming what is wrong, in a process that stays small.
#[test]
fn small_bombs_are_errors_in_small_processes() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |fixture: &str, name: &str| {
        let to = dir.path().join(name);
        super::zarr_fixtures::copy_dir(std::path::Path::new(fixture), &to);
        to
    };
    let gzip = copy("tests/data/zarr_v3/codec_big_endian.zarr", "gzip.zarr");
    std::fs::write(gzip.join("c/0/0"), gzip_bomb(960)).unwrap();
    let claim = copy("tests/data/zarr_v3/struct_1d.zarr", "claim.zarr");
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    frame.extend_from_slice(&(1u64 << 40).to_le_bytes());
    frame.extend_from_slice(&[1, 0, 0]);
    std::fs::write(claim.join("c/0"), frame).unwrap();
    let flood = copy("tests/data/zarr_v3/struct_1d.zarr", "flood.zarr");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(flood.join("zarr.json")).unwrap()).unwrap();
    meta["attributes"] = serde_json::Value::Object(
        (0..1_000_000)
            .map(|i| (format!("a{i}"), serde_json::Value::from(i)))
            .collect(),
    );
    std::fs::write(flood.join("zarr.json"), meta.to_string()).unwrap();
    let huge = copy("tests/data/zarr_v3/struct_1d.zarr", "huge.zarr");
    // 200 MB of metadata (a sparse file: its size is what is checked).
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(huge.join("zarr.json"))
        .unwrap();
    file.set_len(200_000_000).unwrap();
    for (array, query, says) in [
        (
            &gzip,
            "SELECT sum(pressure) FROM t",
            "gzip stream inflates to more than the 78 bytes expected",
        ),
        (
            &claim,
            "SELECT sum(id) FROM t",
            "decompresses to 1099511627776 bytes, expected",
        ),
        (
            &flood,
            "SELECT count(*) FROM t",
            "1000000 attributes, more than the 10000",
        ),
        (
            &huge,
            "SELECT count(*) FROM t",
            "200000000 bytes, more than the 67108864",
        ),
    ] {
        let (code, _, err, peak) = query_peak(array, query);
        assert_eq!(code, Some(1), "{}: {err}", array.display());
        assert!(err.contains(says), "{}: {err}", array.display());
        assert!(
            peak < 400 * MIB,
            "{}: peak RSS {} MiB",
            array.display(),
            peak / MIB
        );
    }
}

/// A COPY of a result several times larger than `--memory-limit` (10^7 rows of 24 bytes:
/// 240 MB, through a 64 MiB pool) finishes, in a process that holds only the chunks in
/// flight (README, "Writing Zarr"; a debug binary idles at about 130 MB), and the store holds
/// every row.
#[test]
fn a_copy_larger_than_the_memory_limit_writes_in_a_small_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.zarr");
    let copy = format!(
        "COPY (SELECT value, value * 2 AS twice, CAST(value AS DOUBLE) / 2 AS half \
         FROM generate_series(1, 10000000)) TO '{}' STORED AS ZARR",
        out.display()
    );
    let (code, written, err, peak) = copy_peak("64M", &copy);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(written, "count\n10000000\n");
    assert!(peak < 256 * MIB, "peak RSS {} MiB", peak / MIB);
    let (code, sums, err, _) = query_peak(&out, "SELECT count(*), sum(twice), max(half) FROM t");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        sums,
        "count(*),sum(t.twice),max(t.half)\n10000000,100000010000000,5000000.0\n"
    );
}

/// A gridded COPY of more rows than `--memory-limit` holds (5·10^6 rows of 24 bytes onto a
/// 2000 × 2500 grid, through a 64 MiB pool) finishes: the sort it needs spills within the
/// pool (`memory_limited_runtime`, `sorts_within`); it failed in DataFusion's
/// `ExternalSorterMerge` before. The store holds every cell. (A debug binary peaks at about
/// 300 MB here, 460 MB with no limit: the bound fails a process that ignores the pool.)
#[test]
fn a_gridded_copy_larger_than_the_memory_limit_completes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grid.zarr");
    let copy = format!(
        "COPY (SELECT value % 2000 AS x, value / 2000 AS y, CAST(value AS DOUBLE) AS v \
         FROM generate_series(0, 4999999) ORDER BY random()) TO '{}' STORED AS ZARR \
         OPTIONS ('dimensions' 'x,y')",
        out.display()
    );
    let (code, written, err, peak) = copy_peak("64M", &copy);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(written, "count\n5000000\n");
    assert!(peak < 400 * MIB, "peak RSS {} MiB", peak / MIB);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("v").join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["shape"], serde_json::json!([2000, 2500]));
    let (code, sums, err) = query_csv(
        "ZARR",
        &out,
        "SELECT count(v), sum(v), sum(CASE WHEN v = y * 2000 + x THEN 1 ELSE 0 END) FROM t",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        sums.ends_with("\n5000000,12499997500000.0,5000000\n"),
        "{sums}"
    );
}

/// A lance-nd COPY of more rows than `--memory-limit` holds (5·10^6 rows in 10 batches
/// through a 64 MiB pool) finishes: the rows arrive sorted by their batch (the sort spills
/// within the pool) and each batch is written as soon as its rows are complete, then all
/// are committed at once. It failed in the sink before (`LanceNdSink ... can spill: false`),
/// which held every row. (A debug binary peaks at about 330 MB here; the old sink, holding
/// every row, at 600 MB with no limit.)
#[test]
fn a_lance_nd_copy_larger_than_the_memory_limit_completes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.lance");
    let copy = format!(
        "COPY (SELECT value % 10 AS b, value / 10 AS x, CAST(value AS DOUBLE) AS v \
         FROM generate_series(0, 4999999) ORDER BY random()) TO '{}' STORED AS LANCE_ND \
         OPTIONS ('dimensions' 'x', 'batch_by' 'b')",
        out.display()
    );
    let (code, written, err, peak) = copy_peak("64M", &copy);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(written, "count\n5000000\n");
    assert!(peak < 400 * MIB, "peak RSS {} MiB", peak / MIB);
    let (code, sums, err) = query_csv(
        "LANCE_ND",
        &out,
        "SELECT count(*), count(DISTINCT __global_attrs__.b), sum(v), \
         sum(CASE WHEN v = x * 10 + __global_attrs__.b THEN 1 ELSE 0 END) FROM t",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        sums.ends_with("\n5000000,10,12499997500000.0,5000000\n"),
        "{sums}"
    );
}

/// ndfusion's own warnings reach the command line's user on stderr (a netCDF variable xarray
/// leaves out, left out too); other libraries' log records do not, unless RUST_LOG asks.
#[test]
fn ndfusion_warnings_are_shown_on_stderr() {
    let create = "CREATE EXTERNAL TABLE t STORED AS NETCDF \
                  LOCATION 'tests/data/netcdf/skipped.nc'";
    let args = [
        "--quiet",
        "--format",
        "csv",
        "-c",
        create,
        "-c",
        "SELECT count(*) AS n FROM t",
    ];
    let out = ndfusion(&args, None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n\n3\n");
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().collect();
    assert_eq!(warnings.len(), 5, "{err}");
    assert!(
        warnings[1].starts_with(
            "Warning: tests/data/netcdf/skipped.nc: variable 'blob' left out: its type is opaque"
        ),
        "{err}"
    );
    // Named in `variables`, nothing is left out, nothing said.
    let named = format!("{create} OPTIONS ('variables' 'plain')");
    let out = ndfusion(&["--quiet", "-c", &named], None);
    assert!(
        out.status.success() && stderr(&out).is_empty(),
        "{}",
        stderr(&out)
    );
}
