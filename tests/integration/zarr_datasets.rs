//! Zarr groups written by xarray 2026.9.0 and zarr-python 3.4.2 read back as
//! `xr.open_zarr(path).to_dataframe().reset_index()` shows them (tests/data/datasets/expected.json,
//! written by tests/data/datasets/make_fixtures.py).

use arrow::array::{AsArray, RecordBatch};
use arrow::compute::concat_batches;
use serde_json::Value;

use super::xarray_cells::{assert_rows, column_names, Cell};

use ndfusion::new_session_context;

const DIR: &str = "tests/data/datasets";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn table(sql_location: &str) -> RecordBatch {
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{sql_location}'"
    ))
    .await
    .unwrap();
    let df = ctx.sql("SELECT * FROM t").await.unwrap();
    let schema = df.schema().as_arrow().clone();
    let batches = df.collect().await.unwrap();
    concat_batches(&std::sync::Arc::new(schema), &batches).unwrap()
}

#[tokio::test]
async fn xarray_datasets_read_back_as_to_dataframe_shows_them() {
    let expected = expected();
    for (name, dims) in [
        ("ocean_v3", 3),
        ("ocean_v2", 3),
        ("stations_v3", 2),
        ("stations_v2", 2),
    ] {
        let want = &expected[name];
        let batch = table(&format!("{DIR}/{name}.zarr")).await;
        let columns: Vec<String> = want["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        // The columns of to_dataframe, in its order, then the group's attributes.
        let ours = column_names(&batch);
        assert_eq!(ours[..columns.len()], columns[..], "{name}");
        assert_eq!(ours.last().unwrap(), "__global_attrs__", "{name}");
        let rows = want["rows"].as_u64().unwrap() as usize;
        assert_eq!(batch.num_rows(), rows, "{name}");

        let dtype = |c: &str| want["dtypes"][c].as_str().unwrap().to_string();
        assert_rows(name, &batch, want, &columns, dtype, dims);

        // __global_attrs__ holds the group's attributes.
        let attrs = batch.column(batch.num_columns() - 1).as_struct();
        for (key, value) in want["attrs"].as_object().unwrap() {
            let child = attrs.column_by_name(key).unwrap();
            let cell = Cell::from_arrow(child, 0);
            let expected = match value {
                Value::Number(n) if n.is_f64() => Cell::Float(n.as_f64().unwrap().to_bits()),
                other => Cell::from_json(other, ""),
            };
            assert_eq!(cell, expected, "{name}: attribute {key}");
        }
    }
}

#[tokio::test]
async fn a_struct_variable_of_a_zarr_python_group_contributes_its_fields() {
    let want = &expected()["struct_group"];
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{DIR}/struct_group.zarr'"
    ))
    .await
    .unwrap();
    let batches = ctx
        .sql("SELECT step, u, v, quality, __global_attrs__.id AS id FROM t ORDER BY step")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
    for (c, key) in ["step", "u", "v", "quality"].iter().enumerate() {
        let dtype = if c == 1 || c == 2 { "float" } else { "int" };
        let want: Vec<Cell> = want[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| Cell::from_json(v, dtype))
            .collect();
        let ours: Vec<Cell> = (0..batch.num_rows())
            .map(|r| Cell::from_arrow(batch.column(c), r))
            .collect();
        assert_eq!(ours, want, "{key}");
    }
    assert_eq!(
        Cell::from_arrow(batch.column(4), 0),
        Cell::Text(want["attrs"]["id"].as_str().unwrap().to_string())
    );
}

/// What ndfusion's scans and sessions plan from metadata (group keys of one dimension
/// computed per coordinate value, declared orders, sorts pushed into scans read backwards,
/// statistics answering aggregates, members pruned) answers as DataFusion does over the same
/// rows in memory, which it knows nothing about: datasets, arrays and a collection, with row
/// filters and limits.
#[tokio::test]
async fn ndfusion_sessions_answer_as_plain_datafusion_does() {
    let tables = [
        ("w", "tests/data/ordered/weather.zarr"),
        ("o", "tests/data/datasets/ocean_v3.zarr"),
        ("g", "tests/data/zarr_v3/grid_2d.zarr"),
        ("s", "tests/data/zarr_v3/struct_1d.zarr"),
        ("m", "tests/data/ordered/weather_months/*.zarr"),
        ("d", "tests/data/ordered/daily_grid.zarr"),
        ("e", "tests/data/ordered/era5_like_v2.zarr"),
    ];
    let queries = [
        "SELECT date_trunc('month', time) k, count(*), sum(temp) FROM w GROUP BY 1 ORDER BY 1",
        "SELECT date_trunc('week', time) k, max(temp) FROM w WHERE temp > 20 GROUP BY 1 ORDER BY 1",
        "SELECT floor(lat / 20) b, lon, avg(temp) FROM w WHERE time < '2001-02-10' GROUP BY 1, 2 ORDER BY 1, 2",
        "SELECT extract(day FROM time) d, count(*) FROM o WHERE lat > 0 GROUP BY 1 ORDER BY 1",
        "SELECT time % 2 a, station / 3 b, count(*), sum(temp) FROM g GROUP BY 1, 2 ORDER BY 1, 2",
        "SELECT dim_0 / 4 q, sum(value) FROM s WHERE id > 0 GROUP BY 1 ORDER BY 1",
        "SELECT time, lat, lon, temp FROM w ORDER BY time DESC, lat, lon DESC LIMIT 7",
        "SELECT time, lat, lon, temp FROM w WHERE temp < 20 ORDER BY time DESC, lat, lon DESC LIMIT 5",
        "SELECT time, lat, lon, temp FROM w WHERE lat < 35 ORDER BY time DESC, lat, lon DESC",
        "SELECT dim_0, id FROM s ORDER BY dim_0 DESC LIMIT 4",
        "SELECT time, lat, lon, temp FROM m ORDER BY time DESC, lat, lon DESC LIMIT 20",
        "SELECT time, lat, lon, temp FROM m WHERE time > '2001-02-20' ORDER BY time, lat DESC, lon LIMIT 20",
        "SELECT min(time), max(time), min(lat), max(lon), count(*) FROM m WHERE lat BETWEEN 15 AND 35",
        "SELECT count(*), sum(temp) FROM m WHERE temp > 25 AND time > '2001-03-15'",
        "SELECT count(*) FROM m WHERE time IS NULL OR lat > 100",
        "SELECT __global_attrs__.month, count(*) FROM m WHERE time BETWEEN '2001-01-30' AND '2001-02-02' GROUP BY 1 ORDER BY 1",
        // Runs of a day's 1280 cells: the run aggregate.
        "SELECT date_trunc('month', time) k, count(*), sum(t), min(t), max(t), round(stddev(t), 9), count(DISTINCT x) FROM d GROUP BY 1 ORDER BY 1",
        "SELECT date_trunc('week', time) k, round(avg(t), 9), sum(x), count(t), round(var_pop(t), 6) FROM d WHERE t > 10 GROUP BY 1 ORDER BY 1",
        "SELECT time, y, sum(t) FROM d WHERE x < 3 GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 50",
        "SELECT extract(dow FROM time) w, round(avg(t), 3), count(*) FROM d WHERE time > '2002-01-20' GROUP BY 1 ORDER BY 1",
        "SELECT time, avg(t), bool_and(t > 0), array_agg(y ORDER BY y DESC)[1] FROM d GROUP BY 1 ORDER BY 1",
        // Sorts the scan cannot keep, over chunks dealt slab by slab (a TopK prunes by its
        // threshold): along each axis, from either end; with no limit every row comes.
        "SELECT time, latitude, longitude, t2m FROM e ORDER BY longitude DESC, t2m LIMIT 7",
        "SELECT time, latitude, longitude, t2m FROM e ORDER BY latitude, t2m DESC LIMIT 7",
        "SELECT time, latitude, longitude, t2m FROM e WHERE longitude > 12 ORDER BY time, t2m LIMIT 7",
        "SELECT time, latitude, longitude, t2m FROM e ORDER BY time DESC, latitude, longitude",
        "SELECT count(*), sum(e.t2m) FROM e JOIN (SELECT max(time) m FROM e) x ON e.time = x.m",
    ];
    let ndfusion = new_session_context();
    let plain = datafusion::prelude::SessionContext::new();
    for (name, location) in tables {
        let create = format!("CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{location}'");
        ndfusion.sql(&create).await.unwrap();
        let df = ndfusion
            .sql(&format!("SELECT * FROM {name}"))
            .await
            .unwrap();
        let schema = std::sync::Arc::new(df.schema().as_arrow().clone());
        let rows = df.collect().await.unwrap();
        let memory = datafusion::datasource::MemTable::try_new(schema, vec![rows]).unwrap();
        plain
            .register_table(name, std::sync::Arc::new(memory))
            .unwrap();
    }
    for query in queries {
        let ours = ndfusion.sql(query).await.unwrap().collect().await.unwrap();
        let theirs = plain.sql(query).await.unwrap().collect().await.unwrap();
        let ours = arrow::util::pretty::pretty_format_batches(&ours)
            .unwrap()
            .to_string();
        let theirs = arrow::util::pretty::pretty_format_batches(&theirs)
            .unwrap()
            .to_string();
        assert_eq!(ours, theirs, "{query}");
        assert!(ours.lines().count() > 4, "{query}: no rows\n{ours}");
    }
}

/// The statistics scans give DataFusion, per partition and in all, against the fixtures'
/// values: exact bounds and counts of dimension and coordinate columns from the selection,
/// bounds only (`Inexact`) under a row filter.
#[tokio::test]
async fn scans_state_exact_statistics_of_their_dimension_columns() {
    use datafusion::common::stats::Precision;
    use datafusion::common::ScalarValue;
    use datafusion::physical_plan::ExecutionPlan;
    use std::sync::Arc;

    async fn scan_of(
        ctx: &datafusion::prelude::SessionContext,
        sql: &str,
    ) -> Arc<dyn ExecutionPlan> {
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let mut node = plan;
        while !node.name().ends_with("ScanExec") {
            node = Arc::clone(node.children()[0]);
        }
        node
    }
    let ctx = new_session_context();
    ctx.sql("SET datafusion.execution.target_partitions = 2")
        .await
        .unwrap();
    for (name, location) in [
        ("s", "tests/data/zarr_v3/struct_1d.zarr"),
        ("w", "tests/data/ordered/weather.zarr"),
    ] {
        let create = format!("CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{location}'");
        ctx.sql(&create).await.unwrap();
    }
    let int = |v: i64| Precision::Exact(ScalarValue::Int64(Some(v)));

    // struct_1d: 10 elements in chunks of 4 (expected.json: dim_0 0..9); 3 chunks over two
    // partitions, the first two chunks and the last.
    let scan = scan_of(&ctx, "SELECT dim_0, id FROM s").await;
    let all = scan.partition_statistics(None).unwrap();
    assert_eq!(all.num_rows, Precision::Exact(10));
    let dim = &all.column_statistics[0];
    assert_eq!(
        (dim.min_value.clone(), dim.max_value.clone()),
        (int(0), int(9))
    );
    assert_eq!(
        (dim.distinct_count, dim.null_count),
        (Precision::Exact(10), Precision::Exact(0))
    );
    assert_eq!(all.column_statistics[1].min_value, Precision::Absent);
    let first = scan.partition_statistics(Some(0)).unwrap();
    let second = scan.partition_statistics(Some(1)).unwrap();
    assert_eq!(first.num_rows, Precision::Exact(8));
    assert_eq!(first.column_statistics[0].max_value, int(7));
    assert_eq!(second.column_statistics[0].min_value, int(8));
    assert_eq!(
        second.column_statistics[0].distinct_count,
        Precision::Exact(2)
    );

    // A dimension filter narrows them exactly; a row filter leaves bounds.
    let scan = scan_of(&ctx, "SELECT dim_0 FROM s WHERE dim_0 > 2 AND dim_0 < 6").await;
    let narrowed = scan.partition_statistics(None).unwrap();
    assert_eq!(narrowed.num_rows, Precision::Exact(3));
    assert_eq!(narrowed.column_statistics[0].min_value, int(3));
    let scan = scan_of(&ctx, "SELECT dim_0 FROM s WHERE id > 20").await;
    let filtered = scan.partition_statistics(None).unwrap();
    assert!(matches!(filtered.num_rows, Precision::Inexact(_)));
    let bound = Precision::Inexact(ScalarValue::Int64(Some(9)));
    assert_eq!(filtered.column_statistics[0].max_value, bound);

    // weather.zarr: the time coordinate's values over the selected days (expected.json: the
    // first day 978307200000000000 ns, the last 985996800000000000); lat descends 40..10.
    let scan = scan_of(&ctx, "SELECT time, lat FROM w WHERE lat < 35").await;
    let all = scan.partition_statistics(None).unwrap();
    let time = |ns: i64| Precision::Exact(ScalarValue::TimestampNanosecond(Some(ns), None));
    assert_eq!(all.num_rows, Precision::Exact(90 * 3 * 3));
    assert_eq!(all.column_statistics[0].min_value, time(978307200000000000));
    assert_eq!(all.column_statistics[0].max_value, time(985996800000000000));
    assert_eq!(
        all.column_statistics[0].distinct_count,
        Precision::Exact(90)
    );
    let lat = &all.column_statistics[1];
    let float = |v: f64| Precision::Exact(ScalarValue::Float64(Some(v)));
    assert_eq!(
        (lat.min_value.clone(), lat.max_value.clone()),
        (float(10.0), float(30.0))
    );
    // Nine 10-day chunks over two partitions: days 0..50 and 50..90.
    let first = scan.partition_statistics(Some(0)).unwrap();
    assert_eq!(
        first.column_statistics[0].max_value,
        time(978307200000000000 + 49 * 86_400_000_000_000)
    );
    assert_eq!(first.num_rows, Precision::Exact(50 * 9));
}

/// `ORDER BY time DESC LIMIT 10` on an ERA5-shaped store whose chunks split the spatial
/// dimensions (no order declared): the scan deals the last time slab's chunks out first and
/// DataFusion's TopK threshold prunes the rest, so one slab's 4 chunks of 12 are fetched on up
/// to 4 partitions, and the rows are xarray's. Ascending, the first slab's.
#[tokio::test]
async fn top_k_by_time_reads_one_time_slab_of_spatially_split_chunks() {
    use datafusion::prelude::SessionConfig;

    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string("tests/data/ordered/expected.json").unwrap())
            .unwrap();
    let rows = |batches: &[RecordBatch]| -> Vec<Vec<String>> {
        let batch = concat_batches(&batches[0].schema(), batches).unwrap();
        (0..batch.num_rows())
            .map(|r| {
                (batch.columns().iter())
                    .map(|c| arrow::util::display::array_value_to_string(c, r).unwrap())
                    .collect()
            })
            .collect()
    };
    let want = |key: &str| -> Vec<Vec<String>> {
        (expected[key].as_array().unwrap().iter())
            .map(|r| {
                let r = r.as_array().unwrap();
                let mut row = vec![r[0].as_i64().unwrap().to_string()];
                row.extend(r[1..].iter().map(|v| v.as_str().unwrap().to_string()));
                row
            })
            .collect()
    };
    let select = "SELECT CAST(time AS BIGINT) t, latitude, longitude, CAST(t2m AS DOUBLE) k FROM e";
    for partitions in [1, 2, 3, 4, 8] {
        let config = SessionConfig::new().with_target_partitions(partitions);
        let ctx = ndfusion::new_session_context_with_config(config);
        ctx.sql("CREATE EXTERNAL TABLE e STORED AS ZARR LOCATION 'tests/data/ordered/era5_like_v2.zarr'")
            .await
            .unwrap();
        for (order, key) in [
            ("time DESC, t2m DESC", "era5_top10"),
            ("time, t2m", "era5_first10"),
        ] {
            let query = format!("{select} ORDER BY {order} LIMIT 10");
            let got = ctx.sql(&query).await.unwrap().collect().await.unwrap();
            assert_eq!(rows(&got), want(key), "{query} on {partitions} partitions");
            let plan = ctx.sql(&format!("EXPLAIN ANALYZE {query}")).await.unwrap();
            let plan = arrow::util::pretty::pretty_format_batches(&plan.collect().await.unwrap())
                .unwrap()
                .to_string();
            let direction = if order.contains("DESC") {
                "DESC"
            } else {
                "ASC"
            };
            assert!(
                plan.contains(&format!("read_first=time {direction}")),
                "{plan}"
            );
            // Beyond 4 partitions (a slab's chunks), each further one reads its first chunk
            // before the threshold reaches it.
            let fetched = 4 + partitions.saturating_sub(4);
            assert!(
                plan.contains(&format!("chunks_fetched={fetched},")),
                "{partitions}: {plan}"
            );
            assert!(
                plan.contains(&format!("blocks_pruned={}", 12 - fetched)),
                "{partitions}: {plan}"
            );
        }
    }
}
