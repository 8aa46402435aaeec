//! The REPL as a user meets it, driven through a pseudo-terminal: progress of a slow scan,
//! Ctrl-C stopping a statement (not the REPL), completion, `\x`, `\maxrows`, `\timing`; and
//! Ctrl-C in `-c` mode.
//!
//! The slow scan reads an array from nginx throttled to 32 KiB/s per request: each 64 KiB
//! chunk takes about 2 s.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rexpect::session::{spawn_command, PtySession};

use crate::servers::{nginx_throttled, Server};

/// Chunks of the slow array, and elements per chunk (float64: 64 KiB a chunk).
const CHUNKS: usize = 64;
const CHUNK_LEN: usize = 8192;

/// Writes `slow.zarr` under `root`: float64 values 0, 1, 2, ... in `chunks` uncompressed
/// chunks of `CHUNK_LEN` (sum: n(n-1)/2).
pub(crate) fn write_slow_array(root: &Path, chunks: usize) {
    let array = root.join("slow.zarr");
    std::fs::create_dir_all(array.join("c")).unwrap();
    let metadata = serde_json::json!({
        "zarr_format": 3, "node_type": "array", "shape": [chunks * CHUNK_LEN],
        "data_type": "float64", "dimension_names": ["i"],
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK_LEN]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    });
    std::fs::write(array.join("zarr.json"), metadata.to_string()).unwrap();
    for chunk in 0..chunks {
        let values =
            (chunk * CHUNK_LEN..(chunk + 1) * CHUNK_LEN).flat_map(|v| (v as f64).to_le_bytes());
        std::fs::write(
            array.join("c").join(chunk.to_string()),
            values.collect::<Vec<u8>>(),
        )
        .unwrap();
    }
}

/// A throttled nginx serving the slow array, and the statement that registers it as `slow`.
fn slow_store() -> (tempfile::TempDir, Server, String) {
    let root = tempfile::tempdir().unwrap();
    write_slow_array(root.path(), CHUNKS);
    let server = nginx_throttled(root.path(), 32 * 1024);
    let create = format!(
        "CREATE EXTERNAL TABLE slow STORED AS ZARR LOCATION '{}/slow.zarr' \
         OPTIONS ('client.allow_http' 'true');",
        server.endpoint()
    );
    (root, server, create)
}

/// The REPL in a pseudo-terminal `columns` wide, with `args`, history in a folder of its own.
fn repl(args: &[&str], columns: usize, state: &Path) -> PtySession {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
    command
        .args(args)
        .env("COLUMNS", columns.to_string())
        .env("XDG_STATE_HOME", state)
        .env("TERM", "xterm-256color");
    let mut session = spawn_command(command, Some(30_000)).unwrap();
    session.exp_string("ndfusion> ").unwrap();
    session
}

/// What the terminal showed as text: rexpect hands each byte over as a character.
fn utf8(shown: &str) -> String {
    let bytes: Vec<u8> = shown.chars().map(|c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Types `keys`.
fn typed(session: &mut PtySession, keys: &str) {
    session.send(keys).unwrap();
    session.flush().unwrap();
}

/// Types `line` and Enter.
fn enter(session: &mut PtySession, line: &str) {
    typed(session, &format!("{line}\r"));
}

/// Types `line` and Enter, and waits for `answer` and the prompt (the line editor drops
/// what is typed before it prompts again).
fn command(session: &mut PtySession, line: &str, answer: &str) {
    enter(session, line);
    session.exp_string(answer).unwrap();
    session.exp_string("ndfusion> ").unwrap();
}

#[test]
fn a_slow_scan_shows_progress_and_ctrl_c_stops_it_not_the_repl() {
    let (_root, server, create) = slow_store();
    let state = tempfile::tempdir().unwrap();
    let mut session = repl(&["--no-demo"], 100, state.path());
    enter(&mut session, &create);
    session.exp_string("ndfusion> ").unwrap();

    enter(&mut session, "SELECT sum(value) FROM slow;");
    // After a second: chunks done of the 64 planned, bytes, rows, time.
    let (_, progress) = session
        .exp_regex(r"chunks \d+/64 .+ rows .+ \d+\.\d s")
        .unwrap();
    assert!(progress.contains("/64"), "{progress}");
    let interrupted = Instant::now();
    session.send_control('c').unwrap();
    session.exp_string("cancelled").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    assert!(
        interrupted.elapsed() < Duration::from_secs(5),
        "the statement stopped only after {:?}",
        interrupted.elapsed()
    );
    // The REPL answers the next statement.
    enter(&mut session, "SELECT 40 + 2 AS answer;");
    session.exp_string("| 42 ").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    // The scan stopped fetching: the chunks in flight when it stopped were asked for, not
    // the rest (had it gone on, the second half would have been served and logged by now).
    std::thread::sleep(Duration::from_secs(5));
    let chunk_requests = (server.requests().iter())
        .filter(|r| r.contains("/slow.zarr/c/"))
        .count();
    assert!(chunk_requests < CHUNKS, "{chunk_requests} chunks requested");

    // Ctrl-C twice at an empty prompt quits.
    session.send_control('c').unwrap();
    session.exp_string("Ctrl-C again").unwrap();
    session.send_control('c').unwrap();
    session.exp_eof().unwrap();
}

/// Sends SIGINT to `child` and waits for it to exit (at most `limit`): its output and how
/// long the exit took.
fn interrupt(mut child: std::process::Child, limit: Duration) -> (std::process::Output, Duration) {
    // SAFETY: a signal to the child this test started and still holds.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), start.elapsed());
        }
        assert!(start.elapsed() < limit, "no exit {limit:?} after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CPU seconds the process marked with `NDFUSION_TEST_MARK=mark` has used (the REPL runs in
/// a pseudo-terminal, whose process id rexpect keeps to itself).
fn cpu_seconds_of(mark: &str) -> f64 {
    let wanted = format!("NDFUSION_TEST_MARK={mark}");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()) {
            let pid = entry.file_name().to_string_lossy().parse().unwrap();
            return crate::servers::cpu_seconds(pid);
        }
    }
    panic!("no process marked {mark}");
}

/// Ctrl-C stops a statement that computes without waiting for anything (a five-way cross
/// join of 100 rows: 10^10 combinations, small batches of work each): the prompt comes back,
/// the process stops using the cores, and the next statement answers at once.
#[test]
fn ctrl_c_stops_a_cpu_bound_join_and_its_work() {
    let state = tempfile::tempdir().unwrap();
    let mark = format!("join-{}", std::process::id());
    let mut command = Command::new(env!("CARGO_BIN_EXE_ndfusion"));
    command
        .arg("--no-demo")
        .env("COLUMNS", "100")
        .env("XDG_STATE_HOME", state.path())
        .env("TERM", "xterm-256color")
        .env("NDFUSION_TEST_MARK", &mark);
    let mut session = spawn_command(command, Some(30_000)).unwrap();
    session.exp_string("ndfusion> ").unwrap();
    command_line(
        &mut session,
        "CREATE TABLE r AS SELECT value AS id FROM generate_series(1, 100);",
    );
    enter(
        &mut session,
        "SELECT count(*) FROM r a, r b, r c, r d, r e \
         WHERE a.id + b.id + c.id + d.id + e.id = 7;",
    );
    std::thread::sleep(Duration::from_secs(2));
    let busy = cpu_seconds_of(&mark);
    assert!(busy > 1.0, "the join used {busy} CPU seconds in 2 s");
    let interrupted = Instant::now();
    session.send_control('c').unwrap();
    session.exp_string("cancelled").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    let stopped = interrupted.elapsed();
    // Given a moment to wind down, the process then idles.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_seconds_of(&mark);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds_of(&mark) - before;
    assert!(
        used < 0.5,
        "{used} CPU seconds used in the 2 s after the join was stopped (in {stopped:?})"
    );
    let asked = Instant::now();
    enter(&mut session, "SELECT 40 + 2 AS answer;");
    session.exp_string("| 42 ").unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
}

/// Ctrl-C stops a command whose statement computes without waiting — a big hash aggregate
/// and a sort (TopK), each over a cross join of in-memory rows — and the process exits at
/// once: its runtime's shutdown waits for no task still computing (it would give them 10 s).
#[test]
fn ctrl_c_stops_a_cpu_bound_aggregate_and_sort_in_a_command() {
    let make_r = "CREATE TABLE r AS SELECT value AS id FROM generate_series(1, 1000)";
    for query in [
        "SELECT k, count(*) AS n FROM (SELECT a.id * 1000 + b.id AS k FROM r a, r b, r c) \
         GROUP BY k ORDER BY n DESC LIMIT 1",
        "SELECT a.id + b.id * c.id AS s FROM r a, r b, r c ORDER BY s DESC LIMIT 3",
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
            .args(["-c", make_r, "-c", query])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let busy = crate::servers::cpu_seconds(child.id());
        assert!(busy > 1.0, "{query}: {busy} CPU seconds in 2 s");
        let (output, took) = interrupt(child, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{query}: {stderr}");
        assert!(
            took < Duration::from_secs(8),
            "{query}: exit {took:?} after SIGINT"
        );
    }
}

/// Types `line` and Enter, and waits for the prompt.
fn command_line(session: &mut PtySession, line: &str) {
    enter(session, line);
    session.exp_string("ndfusion> ").unwrap();
}

#[test]
fn ctrl_c_during_a_copy_leaves_nothing_at_its_target() {
    let (_root, _server, create) = slow_store();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("copy.zarr");
    let mut session = repl(&["--no-demo"], 100, state.path());
    enter(&mut session, &create);
    session.exp_string("ndfusion> ").unwrap();
    let copy = format!(
        "COPY (SELECT i, value * 2 AS twice FROM slow) TO '{}' STORED AS ZARR;",
        target.display()
    );
    enter(&mut session, &copy);
    session.exp_regex(r"chunks \d+/64").unwrap();
    // Stopped once the write has begun: what it staged must go.
    let left = || std::fs::read_dir(out.path()).unwrap().count();
    let start = Instant::now();
    while left() == 0 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(left() > 0, "the COPY wrote nothing in 20 s");
    session.send_control('c').unwrap();
    session.exp_string("cancelled").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    let start = Instant::now();
    while left() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let names: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
    assert!(names.is_empty(), "left behind: {names:?}");
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
}

#[test]
fn ctrl_c_stops_a_command_with_status_130() {
    let (_root, _server, create) = slow_store();
    let child = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["-c", &create, "-c", "SELECT sum(value) FROM slow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let (output, _) = interrupt(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
}

#[test]
fn tab_completes_tables_columns_and_option_keys() {
    let state = tempfile::tempdir().unwrap();
    let mut session = repl(&[], 100, state.path());
    // A table name.
    typed(&mut session, "SELECT count(*) FROM oce");
    typed(&mut session, "\t");
    typed(&mut session, ";\r");
    session.exp_string("| 14600 ").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    // A column of the table the statement names, and a struct field after the dot.
    typed(&mut session, "SELECT max(tempe");
    typed(&mut session, "\t");
    typed(&mut session, ") FROM ocean;\r");
    session.exp_string("max(ocean.temperature)").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    typed(&mut session, "SELECT min(point.");
    // The common part first (nothing more here), the choices on the second Tab.
    typed(&mut session, "\t\t");
    session.exp_string("point.x").unwrap();
    session.exp_string("point.y").unwrap();
    typed(&mut session, "x) FROM points;\r");
    session.exp_string("min(points.point[x])").unwrap();
    session.exp_string("ndfusion> ").unwrap();
    // An option key of the format the statement names: the table opens with it.
    typed(
        &mut session,
        "CREATE EXTERNAL TABLE sea2 STORED AS ZARR LOCATION \
         'tests/data/datasets/ocean_v3.zarr' OPTIONS ('variab",
    );
    typed(&mut session, "\t");
    typed(&mut session, "' 'temp');\r");
    session.exp_string("ndfusion> ").unwrap();
    enter(
        &mut session,
        "SELECT count(*) AS n FROM sea2 WHERE temp IS NOT NULL;",
    );
    session.exp_regex(r"\| \d+ +\|").unwrap();
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
}

#[test]
fn tables_fit_the_terminal_and_x_maxrows_timing_change_them() {
    let state = tempfile::tempdir().unwrap();
    let mut session = repl(&["--maxrows", "3"], 60, state.path());
    enter(&mut session, "SELECT id, point, 'a value far too long for a terminal sixty columns wide' AS note FROM points;");
    let (table, _) = session.exp_regex(r"10 row\(s\) fetched \(3 shown").unwrap();
    let table = utf8(&table);
    let lines: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with(['|', '+']))
        .collect();
    assert_eq!(lines.len(), 3 + 1 + 4, "{table}");
    for line in &lines {
        assert!(
            line.chars().count() <= 60,
            "{line:?} wider than the terminal"
        );
    }
    assert!(table.contains('…'), "{table}");
    session.exp_string("Elapsed").unwrap();

    session.exp_string("ndfusion> ").unwrap();
    command(&mut session, "\\timing off", "Timing is off.");
    command(&mut session, "\\x", "Expanded display is on.");
    command(&mut session, "\\maxrows all", "Tables show every row.");
    enter(&mut session, "SELECT id, value FROM points WHERE id = 7;");
    let record = session.exp_string("1 row(s) fetched.").unwrap();
    assert!(record.contains("-[ RECORD 1 ]"), "{record}");
    assert!(record.contains("id    | 7"), "{record}");
    assert!(record.contains("value | 1000.0"), "{record}");
    session.exp_string("\r\n").unwrap();
    // No time after the count with timing off.
    let (line, _) = session.exp_regex(r"ndfusion> ").unwrap();
    assert!(!line.contains("Elapsed"), "{line}");
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
    // History is kept under the XDG state folder.
    let history = std::fs::read_to_string(state.path().join("ndfusion/history")).unwrap();
    assert!(history.contains("WHERE id = 7;"), "{history}");
}

/// A picture's size and pixels.
type Picture = ((u32, u32), Vec<(u8, u8, u8)>);

/// The size and pixels of a PNG.
fn png_pixels(path: &Path) -> Picture {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    let pixels = (buffer[..info.buffer_size()].chunks(channels))
        .map(|p| (p[0], p[1], p[2]))
        .collect();
    ((info.width, info.height), pixels)
}

/// Whether a pixel is within 8 of `colour` in each channel.
fn has_colour(pixels: &[(u8, u8, u8)], colour: (u8, u8, u8)) -> bool {
    pixels.iter().any(|p| {
        (p.0 as i32 - colour.0 as i32).abs() < 8
            && (p.1 as i32 - colour.1 as i32).abs() < 8
            && (p.2 as i32 - colour.2 as i32).abs() < 8
    })
}

/// Viridis' ends: the colours of the smallest and the largest value.
const LOWEST: (u8, u8, u8) = (0x44, 0x01, 0x54);
const HIGHEST: (u8, u8, u8) = (0xfd, 0xe7, 0x25);

/// The demo `sea` table's mean temperature per cell: a heat map of 5 x 6 cells.
const SEA_MAP: &str = "SELECT lon, lat, avg(temp) AS temp FROM sea GROUP BY lon, lat";

#[test]
fn plot_draws_a_heat_map_in_the_terminal_and_as_a_png() {
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut session = repl(&[], 80, state.path());
    command(&mut session, "\\plot", "Nothing to plot yet");
    command(&mut session, &format!("{SEA_MAP};"), "30 row(s) fetched");
    enter(&mut session, "\\plot");
    session.exp_string("temp over lon and lat").unwrap();
    let drawn = utf8(&session.exp_string("ndfusion> ").unwrap());
    // Half blocks in 24-bit colour, from the lowest mean's colour to the highest's.
    assert!(drawn.contains('▀'), "{drawn}");
    assert!(drawn.contains("\x1b[38;2;68;1;84m"), "{drawn}");
    assert!(drawn.contains("\x1b[38;2;253;231;37m"), "{drawn}");
    // The axes' extremes: latitudes 25 at the top and -25 at the bottom, longitudes -30 to 10.
    let lines: Vec<&str> = drawn.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert!(lines[1].starts_with(" 25 "), "{drawn}");
    assert!(lines.iter().any(|l| l.starts_with("-25 ")), "{drawn}");
    assert!(lines
        .iter()
        .any(|l| l.trim_start().starts_with("-30") && l.trim_end().ends_with("10")));
    let png = out.path().join("sea.png");
    command(
        &mut session,
        &format!("\\plot {}", png.display()),
        &format!("Wrote {}", png.display()),
    );
    let (size, pixels) = png_pixels(&png);
    assert_eq!(size, (1000, 640));
    assert!(has_colour(&pixels, LOWEST) && has_colour(&pixels, HIGHEST));
    // What cannot be drawn says why.
    command(
        &mut session,
        "SELECT lon, lat, temp, sal FROM sea LIMIT 3;",
        "3 row(s)",
    );
    command(&mut session, "\\plot", "the result has 4");
    command(
        &mut session,
        "SELECT name, 1 FROM (VALUES ('a')) AS t(name);",
        "1 row(s)",
    );
    command(
        &mut session,
        "\\plot",
        "column name is Utf8, not numbers or times",
    );
    session.send_control('d').unwrap();
    session.exp_eof().unwrap();
}

#[test]
fn plot_from_a_command_writes_a_png_and_a_line_chart_of_times() {
    let out = tempfile::tempdir().unwrap();
    let heat = out.path().join("heat.png");
    let status = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["--demo", "-q", "-c", SEA_MAP, "--plot"])
        .arg(&heat)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let (size, pixels) = png_pixels(&heat);
    assert_eq!(size, (1000, 640));
    assert!(has_colour(&pixels, LOWEST) && has_colour(&pixels, HIGHEST));
    // Not blank: most of the picture is the map, not the white page.
    let white = pixels.iter().filter(|p| **p == (255, 255, 255)).count();
    assert!(
        white < pixels.len() * 3 / 4,
        "{white} of {} white",
        pixels.len()
    );

    let line = out.path().join("line.png");
    let daily = "SELECT time, avg(temp) FROM sea GROUP BY time ORDER BY time";
    let output = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["--demo", "-q", "-c", daily, "--plot"])
        .arg(&line)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (_, pixels) = png_pixels(&line);
    assert!(has_colour(&pixels, (0x1f, 0x77, 0xb4)), "no line drawn");

    // No query to draw: an error, and nothing written.
    let none = out.path().join("none.png");
    let output = Command::new(env!("CARGO_BIN_EXE_ndfusion"))
        .args(["-c", "CREATE VIEW v AS SELECT 1", "--plot"])
        .arg(&none)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--plot: no query ran"));
    assert!(!none.exists());
}
