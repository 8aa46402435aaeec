//! Grid aggregates (issue 67): `GROUP BY` over a grid's dimensions folded into dense
//! accumulators answers as xarray does. tests/data/grid/make_fixtures.py wrote the fixtures
//! (NaN cells, descending latitudes, chunks splitting every axis, a `noleap` calendar, a
//! packed netCDF-4 variable) and, per case, the SQL and what xarray (or pandas) computes
//! (expected.json). Each case runs with the grid aggregate and without it
//! (`SET ndfusion.grid_aggregate = false`: DataFusion's hash aggregate), and both must give
//! xarray's rows.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::prelude::SessionContext;
use serde_json::Value;

use ndfusion::new_session_context;

const DIR: &str = "tests/data/grid";

/// The fixtures' tables.
const TABLES: [(&str, &str, &str); 5] = [
    ("daily_v3", "ZARR", "daily_v3.zarr"),
    ("daily_v2", "ZARR", "daily_v2.zarr"),
    ("noleap_v3", "ZARR", "noleap_v3.zarr"),
    ("hourly_v3", "ZARR", "hourly_v3.zarr"),
    ("packed", "NETCDF", "packed.nc"),
];

/// A session with the fixtures' tables, the grid aggregate on or off.
pub(crate) async fn session(grid: bool) -> SessionContext {
    let ctx = new_session_context();
    for (table, kind, file) in TABLES {
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE {table} STORED AS {kind} LOCATION '{DIR}/{file}'"
        ))
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    if !grid {
        ctx.sql("SET ndfusion.grid_aggregate = false")
            .await
            .unwrap();
    }
    ctx
}

pub(crate) async fn collect(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    concat_batches(&schema, &batches).unwrap()
}

/// The plan's text.
pub(crate) async fn explain(ctx: &SessionContext, sql: &str) -> String {
    let batch = collect(ctx, &format!("EXPLAIN {sql}")).await;
    let plans = batch.column(1).as_string::<i32>();
    (0..plans.len())
        .map(|i| plans.value(i))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell as the comparison sees it.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub(crate) enum Cell {
    Null,
    Bool(bool),
    Number(f64),
    Text(String),
}

/// The rows of `batch`, numbers as f64 (strings as they are: keys cast to text), sorted.
pub(crate) fn rows(batch: &RecordBatch) -> Vec<Vec<Cell>> {
    let columns: Vec<Vec<Cell>> = (batch.columns().iter())
        .map(|c| match c.data_type() {
            DataType::Boolean => {
                let b = c.as_boolean();
                (0..b.len())
                    .map(|i| match b.is_null(i) {
                        true => Cell::Null,
                        false => Cell::Bool(b.value(i)),
                    })
                    .collect()
            }
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => {
                let text = cast(c, &DataType::Utf8).unwrap();
                let text = text.as_string::<i32>();
                (0..text.len())
                    .map(|i| match text.is_null(i) {
                        true => Cell::Null,
                        false => Cell::Text(text.value(i).to_string()),
                    })
                    .collect()
            }
            _ => {
                let f = cast(c, &DataType::Float64).unwrap();
                let f = f.as_primitive::<Float64Type>();
                (0..f.len())
                    .map(|i| match f.is_null(i) {
                        true => Cell::Null,
                        false => Cell::Number(f.value(i)),
                    })
                    .collect()
            }
        })
        .collect();
    let mut rows: Vec<Vec<Cell>> = (0..batch.num_rows())
        .map(|r| columns.iter().map(|c| c[r].clone()).collect())
        .collect();
    sort(&mut rows);
    rows
}

fn sort(rows: &mut [Vec<Cell>]) {
    rows.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
}

fn expected_rows(case: &Value) -> Vec<Vec<Cell>> {
    let mut rows: Vec<Vec<Cell>> = (case["rows"].as_array().unwrap().iter())
        .map(|row| {
            (row.as_array().unwrap().iter())
                .map(|v| match v {
                    Value::Null => Cell::Null,
                    Value::Bool(b) => Cell::Bool(*b),
                    v => Cell::Number(v.as_f64().unwrap()),
                })
                .collect()
        })
        .collect();
    sort(&mut rows);
    rows
}

/// `got` equals `expected`, numbers to a relative 1e-9 (sums in another order).
pub(crate) fn assert_close(got: &[Vec<Cell>], expected: &[Vec<Cell>], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}: rows");
    for (r, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(
            g.len(),
            e.len(),
            "{what}: row {r} has {g:?}, expected {e:?}"
        );
        for (a, b) in g.iter().zip(e) {
            let close = match (a, b) {
                (Cell::Number(a), Cell::Number(b)) => {
                    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
                }
                (a, b) => a == b,
            };
            assert!(close, "{what}: row {r} is {g:?}, expected {e:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_aggregates_answer_as_xarray() {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let (grid, hash) = (session(true).await, session(false).await);
    for case in expected["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let sql = case["sql"].as_str().unwrap();
        let want = expected_rows(case);
        let plan = explain(&grid, sql).await;
        assert!(
            plan.contains("GridAggregateExec: mode=Single"),
            "{name}: {plan}"
        );
        // Anomalies: the climatology looked up by grid position, no join or window left.
        if sql.contains(" JOIN ") || sql.contains(" OVER ") {
            assert!(plan.contains("lookups=["), "{name}: {plan}");
            assert!(!plan.contains("HashJoinExec"), "{name}: {plan}");
            assert!(!plan.contains("WindowAggExec"), "{name}: {plan}");
        }
        let folded = rows(&collect(&grid, sql).await);
        assert_close(&folded, &want, &format!("{name} (grid aggregate)"));
        let plan = explain(&hash, sql).await;
        assert!(!plan.contains("GridAggregateExec"), "{name}: {plan}");
        let hashed = rows(&collect(&hash, sql).await);
        assert_close(&hashed, &want, &format!("{name} (hash aggregate)"));
    }
}

/// A grid for the property: its shape, chunks, time step and values.
#[derive(Debug, Clone)]
struct Grid {
    /// Cells along time, lat, lon.
    shape: [usize; 3],
    chunks: [usize; 3],
    /// The first time (days after 2001-01-01) and the step between times (hours).
    start_day: i64,
    step_hours: i64,
    /// Per cell, in C order: `temp` and `n` (NULL: missing), `flag` (a boolean with missing
    /// cells is written as floats with NaN, as xarray stores it).
    temp: Vec<Option<f32>>,
    n: Vec<Option<i32>>,
    flag: Vec<bool>,
}

fn grid() -> impl proptest::strategy::Strategy<Value = Grid> {
    use proptest::prelude::*;
    (1usize..=24, 1usize..=5, 1usize..=6)
        .prop_flat_map(|(nt, nlat, nlon)| {
            let cells = nt * nlat * nlon;
            (
                Just([nt, nlat, nlon]),
                (1..=nt, 1..=nlat, 1..=nlon),
                0i64..400,
                prop_oneof![Just(6i64), Just(24), Just(24 * 7)],
                proptest::collection::vec(proptest::option::weighted(0.85, -40.0f32..40.0), cells),
                proptest::collection::vec(proptest::option::weighted(0.9, -100i32..100), cells),
                proptest::collection::vec(any::<bool>(), cells),
            )
        })
        .prop_map(
            |(shape, (ct, clat, clon), start_day, step_hours, temp, n, flag)| Grid {
                shape,
                chunks: [ct, clat, clon],
                start_day,
                step_hours,
                temp,
                n,
                flag,
            },
        )
}

impl Grid {
    /// The grid written as a dataset `g` (its chunks the grid's) in a fresh folder, and two
    /// sessions with it: the grid aggregate on, and off (DataFusion's own plans).
    async fn sessions(&self) -> (tempfile::TempDir, SessionContext, SessionContext) {
        use datafusion::datasource::MemTable;
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("g.zarr");
        let writer = new_session_context();
        let batch = self.batch();
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap();
        writer.register_table("cells", Arc::new(table)).unwrap();
        let [ct, clat, clon] = self.chunks;
        let copy = format!(
            "COPY (SELECT * FROM cells) TO '{}' STORED AS ZARR OPTIONS \
             ('dimensions' 'time,lat,lon', 'chunks' 'time={ct},lat={clat},lon={clon}')",
            location.display()
        );
        collect(&writer, &copy).await;
        let create = format!(
            "CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{}'",
            location.display()
        );
        let (on, off) = (new_session_context(), new_session_context());
        collect(&on, &create).await;
        collect(&off, &create).await;
        collect(&off, "SET ndfusion.grid_aggregate = false").await;
        (dir, on, off)
    }

    /// The grid's cells as rows.
    fn batch(&self) -> RecordBatch {
        use arrow::array::TimestampNanosecondArray;
        use arrow::array::{BooleanArray, Float32Array, Float64Array, Int32Array};
        let [nt, nlat, nlon] = self.shape;
        let hour = 3_600_000_000_000i64;
        let start = 978_307_200_000_000_000i64 + self.start_day * 24 * hour;
        let (mut time, mut lat, mut lon) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..nt {
            for a in 0..nlat {
                for o in 0..nlon {
                    time.push(start + t as i64 * self.step_hours * hour);
                    lat.push(-10.0 + 5.0 * a as f64);
                    lon.push(o as f64 * 30.0);
                }
            }
        }
        RecordBatch::try_from_iter(vec![
            ("time", Arc::new(TimestampNanosecondArray::from(time)) as _),
            ("lat", Arc::new(Float64Array::from(lat)) as _),
            ("lon", Arc::new(Float64Array::from(lon)) as _),
            ("temp", Arc::new(Float32Array::from(self.temp.clone())) as _),
            ("n", Arc::new(Int32Array::from(self.n.clone())) as _),
            ("flag", Arc::new(BooleanArray::from(self.flag.clone())) as _),
        ])
        .unwrap()
    }
}

/// A WHERE for the properties (or none): on values, dimensions, both, and one no row of a
/// grid that ends before February passes.
fn filter() -> impl proptest::strategy::Strategy<Value = &'static str> + Clone {
    use proptest::prelude::*;
    prop_oneof![
        Just(""),
        Just("WHERE temp > 0"),
        Just("WHERE n IS NOT NULL AND lat < 5"),
        Just("WHERE time >= '2001-02-01'"),
        Just("WHERE lon > 40 OR flag"),
    ]
}

/// A query for the property: group keys (none, or of one or more axes), aggregates, and
/// perhaps a WHERE and a FILTER.
fn query() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let keys = proptest::sample::subsequence(
        vec![
            "date_trunc('month', time)",
            "extract(hour FROM time)",
            "extract(dow FROM time)",
            "time",
            "lat",
            "floor(lat / 10)",
            "lon",
            "CAST(lon AS BIGINT) % 60",
        ],
        0..=3,
    );
    let aggregates = proptest::sample::subsequence(
        vec![
            "avg(temp)",
            "sum(temp)",
            "count(temp)",
            "count(*)",
            "min(temp)",
            "max(n)",
            "sum(n)",
            "var(temp)",
            "stddev_pop(temp)",
            "bool_and(flag)",
            "bool_or(flag)",
            "avg(temp * lat + n)",
            "max(time)",
            "min(temp) FILTER (WHERE flag)",
            "count(n) FILTER (WHERE lat > 0)",
            "sum(temp * cos(radians(lat)))",
            "max(temp + sqrt(lon)) FILTER (WHERE lon % 3 = 1)",
            "avg(n + extract(day FROM time)) FILTER (WHERE extract(month FROM time) = 2)",
        ],
        1..=4,
    );
    let filter = filter();
    (keys, aggregates, filter).prop_map(|(keys, aggregates, filter)| {
        let select: Vec<String> = (keys.iter())
            .map(|k| format!("CAST({k} AS VARCHAR)"))
            .chain(aggregates.iter().map(|a| a.to_string()))
            .collect();
        let group = match keys.is_empty() {
            true => String::new(),
            false => format!("GROUP BY {}", keys.join(", ")),
        };
        format!("SELECT {} FROM g {filter} {group}", select.join(", "))
    })
}

/// An anomaly for the property: cells joined with an aggregate of the grid on that
/// aggregate's keys, or a window over whole partitions, then aggregated (perhaps by a key).
fn anomaly() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    // `{t}`: where the cells' table is named (`d.` in a join).
    let keys = proptest::sample::subsequence(
        vec![
            "extract(month FROM {t}time)",
            "extract(hour FROM {t}time)",
            "date_trunc('month', {t}time)",
            "{t}lat",
            "floor({t}lat / 10)",
            "{t}lon",
            "CAST({t}lon AS BIGINT) % 60",
            // NULL for half the latitudes: a join's NULL meets nothing, a window's NULLs
            // are one partition.
            "CASE WHEN {t}lat > 0 THEN {t}lat END",
        ],
        1..=3,
    );
    let climatology = prop_oneof![
        Just("avg(temp)"),
        Just("min(temp)"),
        Just("max(n)"),
        Just("count(temp)"),
        Just("sum(n)"),
    ];
    let outer = prop_oneof![
        Just("avg(temp - m), count(*)"),
        Just("max(abs(temp - m))"),
        Just("sum(m), count(n)"),
        Just("min(n - m) FILTER (WHERE flag)"),
    ];
    let by = prop_oneof![Just(""), Just("lat"), Just("date_trunc('month', time)")];
    let inner_filter = prop_oneof![Just(""), Just("WHERE lon > 40"), Just("WHERE temp > 0")];
    let outer_filter = prop_oneof![Just(""), Just("temp > 0"), Just("time >= '2001-02-01'")];
    (
        keys,
        climatology,
        outer,
        by,
        inner_filter,
        outer_filter,
        any::<bool>(),
    )
        .prop_map(
            |(keys, climatology, outer, by, inner_filter, outer_filter, join)| {
                let of = |t: &str| keys.iter().map(|k| k.replace("{t}", t)).collect::<Vec<_>>();
                let select = match by {
                    "" => outer.to_string(),
                    by => format!("CAST({by} AS VARCHAR), {outer}"),
                };
                let group = match by {
                    "" => String::new(),
                    by => format!("GROUP BY {by}"),
                };
                if join {
                    let c_keys: Vec<String> = (of("").iter().enumerate())
                        .map(|(i, k)| format!("{k} AS k{i}"))
                        .collect();
                    let on: Vec<String> = (of("d.").iter().enumerate())
                        .map(|(i, k)| format!("{k} = c.k{i}"))
                        .collect();
                    let numbers: Vec<String> = (1..=keys.len()).map(|i| i.to_string()).collect();
                    let filter = match outer_filter {
                        "" => String::new(),
                        f => format!("WHERE d.{f}"),
                    };
                    format!(
                    "WITH c AS (SELECT {}, {climatology} AS m FROM g {inner_filter} GROUP BY {}) \
                     SELECT {select} FROM g d JOIN c ON {} {filter} {group}",
                    c_keys.join(", "),
                    numbers.join(", "),
                    on.join(" AND ")
                )
                } else {
                    let filter = match outer_filter {
                        "" => String::new(),
                        f => format!("WHERE {f}"),
                    };
                    format!(
                    "SELECT {select} FROM (SELECT time, lat, lon, temp, n, flag, {climatology} \
                     OVER (PARTITION BY {}) AS m FROM g {inner_filter}) w {filter} {group}",
                    of("").join(", ")
                )
                }
            },
        )
}

/// A runtime of two workers, and a runner of `PROPTEST_CASES` cases (24 unless set).
fn property_runner() -> (tokio::runtime::Runtime, proptest::test_runner::TestRunner) {
    use proptest::test_runner::{Config, TestRunner};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    (runtime, runner)
}

/// Random grids, key sets, filters and aggregates, and anomalies against random
/// climatologies: the grid aggregate answers as DataFusion's own plan does (the rule
/// switched off).
#[test]
fn grid_aggregates_answer_as_datafusion_on_random_grids() {
    let (runtime, mut runner) = property_runner();
    let queries = proptest::prop_oneof![3 => query(), 1 => anomaly()];
    let strategy = (grid(), proptest::collection::vec(queries, 4));
    runner
        .run(&strategy, |(grid, queries)| {
            runtime.block_on(async {
                // The folder lives as long as the sessions read from it.
                let (_dir, folded, hashed) = grid.sessions().await;
                for sql in &queries {
                    // Folded, or answered from the scan's statistics (no aggregate runs).
                    let plan = explain(&folded, sql).await;
                    let hashes = (plan.lines().map(str::trim_start))
                        .any(|l| l.starts_with("AggregateExec") || l.starts_with("RunAggregate"));
                    assert!(!hashes, "{sql}: {plan}");
                    // An anomaly's climatology is looked up, not joined (or the scan's
                    // metadata answers: it reads no cell).
                    let joins = (plan.lines().map(str::trim_start))
                        .any(|l| l.starts_with("HashJoinExec") || l.contains("WindowAggExec"));
                    assert!(!joins, "{sql}: {plan}");
                    let want = rows(&collect(&hashed, sql).await);
                    let got = rows(&collect(&folded, sql).await);
                    assert_close(&got, &want, &format!("{grid:?}: {sql}"));
                }
            });
            Ok(())
        })
        .unwrap();
}

/// The files of a store under `root` (paths relative to it), sorted.
fn files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut left = vec![root.to_path_buf()];
    while let Some(dir) = left.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => left.push(path),
                false => found.push(path.strip_prefix(root).unwrap().to_path_buf()),
            }
        }
    }
    found.sort();
    found
}

/// `COPY (<grid aggregate>) ... ('dimensions' ...)` is written from the aggregate's grid
/// (GridWriteExec: no row per group, no sort, no spill) and makes the dataset the rows of
/// DataFusion's own plan make: the same arrays, metadata documents and chunks, the same
/// values (sums in another order: to 1e-9) and the same missing cells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_aggregate_copies_write_the_dataset_their_rows_make() {
    let month = "date_trunc('month', time) AS time";
    let cases = [
        // NaN cells (a group of them only: avg NULL, count 0), descending latitudes, chunks
        // splitting every axis.
        (
            format!(
                "SELECT {month}, lat, lon, CAST(avg(temp) AS REAL) AS temp, count(temp) AS n \
                 FROM daily_v3 GROUP BY 1, 2, 3"
            ),
            "time,lat,lon",
            "time=5,lat=4",
        ),
        // Groups no row reaches: missing cells, and the counts stored as floats with NaN.
        (
            format!(
                "SELECT {month}, lat, lon, max(temp) - min(temp) AS spread, count(*) AS n, \
                 bool_or(temp > 27) AS hot FROM daily_v3 WHERE temp > 26 GROUP BY 1, 2, 3"
            ),
            "time,lat,lon",
            "time=4",
        ),
        // A latitude and months no row has are no coordinate; the dimensions in another
        // order than the axes.
        (
            format!(
                "SELECT {month}, lat, lon, stddev(temp) AS sd FROM daily_v3 \
                 WHERE lat <> 0.5 AND time >= '2001-03-01' GROUP BY 1, 2, 3"
            ),
            "lon,time,lat",
            "lon=3",
        ),
        // An axis without a key (zonal means); a key of numbers (a calendar month) on a
        // noleap calendar.
        (
            "SELECT time, lat, avg(temp) AS temp FROM daily_v3 GROUP BY time, lat".to_string(),
            "time,lat",
            "time=64",
        ),
        (
            "SELECT extract(month FROM time) AS month, lat, lon, avg(tas) AS tas, \
             var_pop(tas) AS v FROM noleap_v3 GROUP BY 1, 2, 3"
                .to_string(),
            "month,lat,lon",
            "month=5",
        ),
        // A packed netCDF-4 variable.
        (
            format!(
                "SELECT {month}, lat, lon, avg(t2m) AS t2m, min(t2m) AS low FROM packed \
                 GROUP BY 1, 2, 3"
            ),
            "time,lat,lon",
            "time=2",
        ),
        // An anomaly: the climatology looked up.
        (
            "SELECT lat, lon, avg(abs(d.temp - c.m)) AS anomaly FROM daily_v3 d JOIN \
             (SELECT extract(month FROM time) AS mo, lat AS clat, lon AS clon, avg(temp) AS m \
             FROM daily_v3 GROUP BY 1, 2, 3) c ON extract(month FROM d.time) = c.mo \
             AND d.lat = c.clat AND d.lon = c.clon GROUP BY lat, lon"
                .to_string(),
            "lat,lon",
            "lat=2",
        ),
    ];
    let (grid, rows_session) = (session(true).await, session(false).await);
    let dir = tempfile::tempdir().unwrap();
    for (i, (query, dimensions, chunks)) in cases.iter().enumerate() {
        let at = dir.path().join(i.to_string());
        let written = same_dataset(&grid, &rows_session, &at, query, dimensions, chunks).await;
        if i == 1 {
            // Groups no row reached: counts with missing cells are floats, as xarray's.
            let n = std::fs::read_to_string(written.join("n/zarr.json")).unwrap();
            assert!(n.contains("\"float64\""), "{n}");
        }
    }
}

/// Writes `COPY (query) ... ('dimensions' dimensions, 'chunks' chunks)` (`""`: no chunks
/// option) under `dir` with `grid` (where it is a GridWriteExec) and `rows` (the row path),
/// and requires the same dataset of both: the same files, metadata documents and values (to
/// 1e-9), the same missing cells. Returns where `grid` wrote it.
async fn same_dataset(
    grid: &SessionContext,
    rows_session: &SessionContext,
    dir: &std::path::Path,
    query: &str,
    dimensions: &str,
    chunks: &str,
) -> std::path::PathBuf {
    let chunks = match chunks {
        "" => String::new(),
        chunks => format!(", 'chunks' '{chunks}'"),
    };
    let copy = |name: &str| {
        format!(
            "COPY ({query}) TO '{}' STORED AS ZARR OPTIONS ('dimensions' '{dimensions}'{chunks})",
            dir.join(format!("{name}.zarr")).display()
        )
    };
    let plan = explain(grid, &copy("explained")).await;
    assert!(plan.contains("GridWriteExec"), "{query}: {plan}");
    assert!(!plan.contains("SortExec"), "{query}: {plan}");
    let plan = explain(rows_session, &copy("explained")).await;
    assert!(!plan.contains("GridWriteExec"), "{query}: {plan}");
    let written = rows(&collect(grid, &copy("grid")).await);
    assert_eq!(written, rows(&collect(rows_session, &copy("rows")).await));
    let (a, b) = (dir.join("grid.zarr"), dir.join("rows.zarr"));
    assert_eq!(files(&a), files(&b), "{query}");
    for file in files(&a).iter().filter(|f| f.ends_with("zarr.json")) {
        let read = |root: &std::path::Path| std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(read(&a), read(&b), "{query}: {}", file.display());
    }
    let reader = new_session_context();
    for (name, root) in [("a", &a), ("b", &b)] {
        let create = format!(
            "CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{}'",
            root.display()
        );
        collect(&reader, &create).await;
    }
    let got = rows(&collect(&reader, "SELECT * FROM a").await);
    let want = rows(&collect(&reader, "SELECT * FROM b").await);
    assert_close(&got, &want, query);
    a
}

/// A gridded COPY for the property: a grid aggregate (a key per axis of some axes, named
/// `k0`, ...) or a selection of the cells, perhaps filtered, with its dimensions in some
/// order; `(query, dimensions)`.
fn grid_copy() -> impl proptest::strategy::Strategy<Value = (String, String)> {
    use proptest::prelude::*;
    let axes = [
        vec![
            "time",
            "date_trunc('month', time)",
            "extract(hour FROM time)",
        ],
        vec!["lat", "floor(lat / 10)"],
        vec!["lon", "CAST(lon AS BIGINT) % 60"],
    ];
    let keys = (
        proptest::option::of(proptest::sample::select(axes[0].clone())),
        proptest::option::of(proptest::sample::select(axes[1].clone())),
        proptest::option::of(proptest::sample::select(axes[2].clone())),
    );
    let aggregates = proptest::sample::subsequence(
        vec![
            "avg(temp)",
            "count(temp)",
            "count(*)",
            "max(n)",
            "var(temp)",
            "bool_or(flag)",
            "max(time)",
            "min(temp) FILTER (WHERE flag)",
            "sum(temp * cos(radians(lat)))",
        ],
        1..=3,
    );
    let values = proptest::sample::subsequence(
        vec![
            "temp",
            "n",
            "flag",
            "temp * 2 + n AS mixed",
            "CAST(n AS DOUBLE) / 3 AS third",
        ],
        1..=3,
    );
    let filter = filter();
    let aggregate = (
        keys,
        aggregates,
        filter.clone(),
        any::<proptest::sample::Index>(),
    )
        .prop_filter("a key", |(k, ..)| {
            k.0.is_some() || k.1.is_some() || k.2.is_some()
        })
        .prop_map(|((t, a, o), aggregates, filter, turn)| {
            let keys: Vec<&str> = [t, a, o].into_iter().flatten().collect();
            let mut names: Vec<String> = (0..keys.len()).map(|i| format!("k{i}")).collect();
            let select: Vec<String> = (keys.iter().enumerate())
                .map(|(i, k)| format!("{k} AS k{i}"))
                .chain((aggregates.iter().enumerate()).map(|(i, a)| format!("{a} AS v{i}")))
                .collect();
            let group: Vec<String> = (1..=keys.len()).map(|i| i.to_string()).collect();
            let by = turn.index(names.len());
            names.rotate_left(by);
            (
                format!(
                    "SELECT {} FROM g {filter} GROUP BY {}",
                    select.join(", "),
                    group.join(", ")
                ),
                names.join(","),
            )
        });
    let selection =
        (values, filter, any::<proptest::sample::Index>()).prop_map(|(values, filter, turn)| {
            let mut names = ["time", "lat", "lon"];
            names.rotate_left(turn.index(3));
            (
                format!(
                    "SELECT time, lat, lon, {} FROM g {filter}",
                    values.join(", ")
                ),
                names.join(","),
            )
        });
    prop_oneof![aggregate, selection]
}

/// Random grids and gridded COPYs of grid aggregates and selections: written from the grid
/// (GridWriteExec), they make the dataset the rows of DataFusion's plan make.
#[test]
fn grid_copies_write_what_their_rows_write_on_random_grids() {
    let (runtime, mut runner) = property_runner();
    let strategy = (grid(), proptest::collection::vec(grid_copy(), 2));
    runner
        .run(&strategy, |(grid, copies)| {
            runtime.block_on(async {
                let (dir, folded, rows_session) = grid.sessions().await;
                for (i, (query, dimensions)) in copies.iter().enumerate() {
                    let at = dir.path().join(i.to_string());
                    same_dataset(&folded, &rows_session, &at, query, dimensions, "").await;
                }
            });
            Ok(())
        })
        .unwrap();
}

/// `COPY (SELECT <dimensions>, <variables> FROM <grid> WHERE ...) ... ('dimensions' ...)`
/// copies the cells the scan decodes into the dataset as blocks (a grid aggregate whose
/// every group is one cell), and makes the dataset the rows make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_selection_copies_write_the_dataset_their_rows_make() {
    let cases = [
        // A time range (chunks cut): NaN cells missing, latitudes descending in the store.
        (
            "SELECT time, lat, lon, temp, u FROM daily_v3 \
             WHERE time BETWEEN '2001-02-03' AND '2001-03-10'",
            "time,lat,lon",
            "time=7,lat=4,lon=3",
        ),
        // A filter on values: the cells it drops are missing, values no row has are no
        // coordinate; expressions of variables; the dimensions in another order.
        (
            "SELECT time, lat, lon, temp - 273.15 AS k, u * u + v * v AS speed2 \
             FROM daily_v3 WHERE temp > 26.5 AND lat < 1",
            "lat,lon,time",
            "time=50",
        ),
        // Every cell of a packed netCDF-4 variable, and of a noleap calendar.
        ("SELECT * FROM packed", "time,lat,lon", "time=40"),
        (
            "SELECT time, lat, lon, tas FROM noleap_v3 WHERE lat <> 0",
            "time,lat,lon",
            "time=100",
        ),
    ];
    let (grid, rows_session) = (session(true).await, session(false).await);
    let dir = tempfile::tempdir().unwrap();
    for (i, (query, dimensions, chunks)) in cases.iter().enumerate() {
        let at = dir.path().join(i.to_string());
        same_dataset(&grid, &rows_session, &at, query, dimensions, chunks).await;
    }
    // Rows that meet on a cell (a month is no cell) are the row path's: its error.
    let copy = format!(
        "COPY (SELECT date_trunc('month', time) AS time, lat, lon, temp FROM daily_v3) TO \
         '{}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat,lon')",
        dir.path().join("months.zarr").display()
    );
    assert!(!explain(&grid, &copy).await.contains("GridWriteExec"));
    let error = grid.sql(&copy).await.unwrap().collect().await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("two rows have the same dimensions"),
        "{error}"
    );
}

/// What the rows would make no grid of, or the pool cannot lay out, is written from rows:
/// a NULL key is the row path's error, and a pool that refuses the values laid out gets
/// the row path's dataset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grid_aggregate_copies_fall_back_to_rows() {
    use datafusion::execution::memory_pool::{
        GreedyMemoryPool, MemoryLimit, MemoryPool, MemoryReservation,
    };
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    let dir = tempfile::tempdir().unwrap();
    let null_key = format!(
        "COPY (SELECT CASE WHEN lat > 0 THEN lat END AS lat, lon, avg(temp) AS temp FROM \
         daily_v3 GROUP BY 1, 2) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'lat,lon')",
        dir.path().join("null.zarr").display()
    );
    let grid = session(true).await;
    assert!(explain(&grid, &null_key).await.contains("GridWriteExec"));
    let error = grid
        .sql(&null_key)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("dimension 'lat' is NULL in a row"),
        "{error}"
    );
    assert!(!dir.path().join("null.zarr").exists());

    /// A pool that refuses the reservations of consumers named with a prefix (what a
    /// gridded COPY lays out, or its sink's slabs), and gives everyone else what they ask.
    #[derive(Debug)]
    struct RefusingLayouts(GreedyMemoryPool, &'static str);
    impl std::fmt::Display for RefusingLayouts {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "refusing layouts")
        }
    }
    impl MemoryPool for RefusingLayouts {
        fn name(&self) -> &str {
            "refusing layouts"
        }
        fn grow(&self, reservation: &MemoryReservation, additional: usize) {
            self.0.grow(reservation, additional)
        }
        fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
            self.0.shrink(reservation, shrink)
        }
        fn try_grow(
            &self,
            reservation: &MemoryReservation,
            additional: usize,
        ) -> datafusion::common::Result<()> {
            if reservation.consumer().name().starts_with(self.1) {
                return Err(datafusion::common::DataFusionError::ResourcesExhausted(
                    "refused".into(),
                ));
            }
            self.0.try_grow(reservation, additional)
        }
        fn reserved(&self) -> usize {
            self.0.reserved()
        }
        fn memory_limit(&self) -> MemoryLimit {
            MemoryLimit::Infinite
        }
    }
    let refusing = |prefix: &'static str| {
        let pool: Arc<dyn MemoryPool> =
            Arc::new(RefusingLayouts(GreedyMemoryPool::new(1 << 34), prefix));
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(pool)
            .build_arc()
            .unwrap();
        ndfusion::new_session_context_with_runtime(Default::default(), runtime)
    };
    let create =
        format!("CREATE EXTERNAL TABLE daily_v3 STORED AS ZARR LOCATION '{DIR}/daily_v3.zarr'");
    let refused = refusing("GridWriteExec");
    collect(&refused, &create).await;
    let query = "SELECT date_trunc('month', time) AS time, lat, avg(temp) AS temp FROM daily_v3 \
                 GROUP BY 1, 2";
    let copy = |ctx_name: &str| {
        format!(
            "COPY ({query}) TO '{}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat')",
            dir.path().join(format!("{ctx_name}.zarr")).display()
        )
    };
    assert!(explain(&refused, &copy("refused"))
        .await
        .contains("GridWriteExec"));
    collect(&refused, &copy("refused")).await;
    collect(&grid, &copy("laid_out")).await;
    let reader = new_session_context();
    for name in ["refused", "laid_out"] {
        let location = dir.path().join(format!("{name}.zarr"));
        let create = format!(
            "CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{}'",
            location.display()
        );
        collect(&reader, &create).await;
    }
    let got = rows(&collect(&reader, "SELECT * FROM refused").await);
    let want = rows(&collect(&reader, "SELECT * FROM laid_out").await);
    assert_eq!(got.len(), 14 * 6);
    assert_close(&got, &want, "refused");

    // A write from the grid that fails (its slabs refused) names why and leaves nothing.
    let failing = refusing("ZarrGridSink");
    collect(&failing, &create).await;
    assert!(explain(&failing, &copy("failed"))
        .await
        .contains("GridWriteExec"));
    let error = failing
        .sql(&copy("failed"))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("failed.zarr") && error.contains("cannot hold one slab"),
        "{error}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(
        left.iter()
            .all(|e| !e.file_name().to_string_lossy().contains("failed")),
        "{left:?}"
    );
}
