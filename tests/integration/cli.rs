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
    // 64 KiB holds one chunk read (22,320 bytes) per partition: the answer numpy gave.
    let out = ndfusion(
        &[
            "-q", "--format", "csv", "-m", "64K", "-c", create, "-c", query,
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
        stderr(&out).contains("one chunk read needs 22320 bytes"),
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
