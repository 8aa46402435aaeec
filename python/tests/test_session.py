"""ndfusion's own session from Python (`ndfusion.SessionContext`, issue 69): its optimizer
rules, `SET ndfusion.*` and `COPY` apply, and its results reach pyarrow, pandas and xarray.
Every answer is one xarray, zarr-python or pyarrow computes on the same files."""

import numpy as np
import pyarrow as pa
import pytest

import ndfusion
from answers import DATA, expected

DAILY = DATA / "grid" / "daily_v3.zarr"


def rows(df):
    return df.to_arrow().to_pylist()


@pytest.fixture
def ctx():
    return ndfusion.SessionContext()


def test_every_kind_is_stored_as_in_the_session(ctx):
    ctx.sql(f"CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{DATA / 'zarr_v3' / 'struct_1d.zarr'}'")
    ids = expected("zarr_v3")["struct_1d"]["columns"]["id"]
    assert rows(ctx.sql("SELECT count(*) AS n, sum(id) AS total FROM s")) == [
        {"n": len(ids), "total": sum(ids)}
    ]
    ctx.sql(f"CREATE EXTERNAL TABLE h STORED AS HDF5 LOCATION '{DATA / 'hdf5' / 'strings.h5'}' "
            "OPTIONS ('path' '/names')")
    names = [r["value"] for r in expected("hdf5")["strings.h5:/names"]["rows"]]
    assert [r["value"] for r in rows(ctx.sql("SELECT value FROM h ORDER BY dim_0"))] == names
    assert ctx.tables() == ["h", "s"]
    # The session's information schema is on, as the CLI's is.
    kinds = rows(ctx.sql("SELECT count(*) AS n FROM information_schema.tables "
                         "WHERE table_name IN ('h', 's')"))
    assert kinds == [{"n": 2}]


def one_row(ctx, sql):
    """The one row `sql` answers, as Python values."""
    table = ctx.sql(sql).to_arrow()
    assert table.num_rows == 1, sql
    return [table.column(i)[0].as_py() for i in range(table.num_columns)]


def test_netcdf_icechunk_and_lance_nd_answer_as_their_references(ctx):
    """The other kinds through the session, each against what its reference computed on the
    same file (xarray for netCDF and the Icechunk snapshot, pylance for lance-nd), with the
    scans' own pruning in EXPLAIN and the Icechunk table functions of the session."""
    records = expected("netcdf")["records"]
    ctx.sql(f"CREATE EXTERNAL TABLE r STORED AS NETCDF LOCATION '{DATA / 'netcdf' / 'records.nc'}'")
    weeks = records["weeks_3_to_5"]
    where = "time >= '2000-01-22' AND time < '2000-02-12'"
    got = one_row(ctx, f"SELECT count(sst), min(sst), max(sst) FROM r WHERE {where}")
    assert got == [weeks["count"], float(weeks["min"]), float(weeks["max"])]
    assert "chunks=[sst 1/3]" in ctx.sql(f"SELECT sst FROM r WHERE {where}").explain()

    ocean = DATA / "icechunk" / "ocean.icechunk"
    want = expected("icechunk")["ocean"]["versions"]["v1"]
    ctx.sql(f"CREATE EXTERNAL TABLE s STORED AS ICECHUNK LOCATION '{ocean}' "
            "OPTIONS ('tag' 'v1', 'path' 'surface')")
    rows_, count, mean = one_row(ctx, "SELECT count(*), count(temp), avg(temp) FROM s")
    assert [rows_, count] == [want["surface"]["rows"], want["count_temp"]]
    assert mean == pytest.approx(float(want["mean_temp"]), rel=1e-12)
    tags = ctx.sql(f"SELECT name FROM icechunk_refs('{ocean}') WHERE kind = 'tag'").to_arrow()
    assert tags.column("name").to_pylist() == ["v1"]

    sql = expected("lance_nd")["doc_example"]["sql"]
    ctx.sql(f"CREATE EXTERNAL TABLE doc STORED AS LANCE_ND LOCATION "
            f"'{DATA / 'lance_nd' / 'doc_example.lance'}'")
    got = one_row(ctx, "SELECT sum(temperature), count(*) FROM doc WHERE __global_attrs__.id = 'a'")
    assert got == [sql["sum_temperature_a"], 12]
    shown = ctx.sql("SELECT temperature FROM doc WHERE __global_attrs__.id = 'a'").explain()
    assert "lance_filter=" in shown, shown


def test_monthly_means_are_a_grid_aggregate_and_equal_xarrays(ctx):
    """The session's own rules apply (datafusion-python's FFI session has none of them):
    per-cell monthly means fold chunks into dense accumulators, and equal xarray's resample
    on its own fixture (NaN cells, descending latitudes, chunks splitting every axis)."""
    import xarray as xr
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    query = ("SELECT date_trunc('month', time) AS time, lat, lon, avg(temp) AS temp "
             "FROM d GROUP BY 1, 2, 3")
    assert "GridAggregateExec" in ctx.sql(query).explain()
    got = ctx.sql(query + " ORDER BY 1, 2, 3").to_pandas().set_index(["time", "lat", "lon"])
    ds = xr.open_zarr(DAILY).load()
    want = (ds["temp"].astype("float64").resample(time="MS").mean()
            .to_dataframe()["temp"].dropna().sort_index())
    got = got["temp"].dropna()
    assert len(got) == len(want) > 0
    np.testing.assert_array_equal(got.index.get_level_values("lat"),
                                  want.index.get_level_values("lat"))
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-12)


def test_config_is_what_set_takes(ctx):
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    query = "SELECT lat, avg(temp) AS mean FROM d GROUP BY lat ORDER BY lat"
    assert "GridAggregateExec" in ctx.sql(query).explain()
    off = ndfusion.SessionContext({"ndfusion.grid_aggregate": "false"})
    off.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    assert "GridAggregateExec" not in off.sql(query).explain()
    hashed, folded = off.sql(query).to_arrow(), ctx.sql(query).to_arrow()
    assert hashed.column("lat").equals(folded.column("lat"))
    assert hashed.column("mean").to_pylist() == pytest.approx(folded.column("mean").to_pylist(),
                                                              rel=1e-12)
    # SET in SQL changes the same setting.
    ctx.sql("SET ndfusion.grid_aggregate = false")
    assert "GridAggregateExec" not in ctx.sql(query).explain()
    with pytest.raises(ndfusion.Error, match="config key 'ndfusion.no_such_key'"):
        ndfusion.SessionContext({"ndfusion.no_such_key": "1"})
    with pytest.raises(ndfusion.Error, match="config key 'a b' is not a setting's name"):
        ndfusion.SessionContext({"a b": "1"})


def test_arrow_data_joins_the_grids(ctx):
    """A station list from pyarrow (and a RecordBatch) joined with a grid's cells."""
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    ds = __import__("xarray").open_zarr(DAILY).load()
    lat, lon = float(ds["lat"][1]), float(ds["lon"][2])
    stations = pa.table({"name": ["buoy"], "lat": [lat], "lon": [lon]})
    ctx.register_arrow("stations", stations)
    ctx.register_arrow("one", pa.record_batch({"k": [1, 2]}))
    got = rows(ctx.sql("SELECT s.name, count(d.temp) AS n, avg(d.temp) AS mean FROM d "
                       "JOIN stations s ON d.lat = s.lat AND d.lon = s.lon GROUP BY s.name"))
    cell = ds["temp"].sel(lat=lat, lon=lon).astype("float64")
    assert got[0]["name"] == "buoy" and got[0]["n"] == int(cell.count())
    assert got[0]["mean"] == pytest.approx(float(cell.mean()), rel=1e-12)
    assert rows(ctx.sql("SELECT sum(k) AS s FROM one")) == [{"s": 3}]
    with pytest.raises(ndfusion.Error, match="register_arrow\\('x', ...\\) takes Arrow data"):
        ctx.register_arrow("x", [1, 2])


def test_ndfusions_tables_register(ctx):
    ctx.register_table("s", ndfusion.ZarrTable(str(DATA / "zarr_v3" / "struct_1d.zarr")))
    ids = expected("zarr_v3")["struct_1d"]["columns"]["id"]
    assert rows(ctx.sql("SELECT sum(id) AS total FROM s WHERE dim_0 >= 8")) == [
        {"total": sum(ids[8:])}
    ]
    with pytest.raises(ndfusion.Error, match="register_table takes one of ndfusion's tables"):
        ctx.register_table("x", pa.table({"a": [1]}))


def test_results_cross_as_arrow_streams(ctx):
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    df = ctx.sql("SELECT lat, count(temp) AS n FROM d GROUP BY lat ORDER BY lat")
    # The PyCapsule interface: pyarrow reads the stream as it is computed.
    table = pa.table(df)
    assert table.schema == df.schema()
    assert table.equals(df.to_arrow())
    assert df.count() == 6 == table.num_rows
    reader = pa.RecordBatchReader.from_stream(df)
    assert reader.read_all().num_rows == 6
    # A stream given up after its first batch stops the query (its stream is dropped).
    cells = pa.RecordBatchReader.from_stream(ctx.sql("SELECT * FROM d"))
    assert cells.read_next_batch().num_rows > 0
    cells.close()
    ds = __import__("xarray").open_zarr(DAILY).load()
    counts = ds["temp"].count(["time", "lon"]).sortby("lat")
    assert table.column("n").to_pylist() == [int(c) for c in counts.values]
    assert df.to_pandas()["n"].sum() == int(counts.sum())
    shown = repr(df)
    assert "| lat" in shown and "(6 rows)" in shown, shown
    assert "(the first 10 rows)" in repr(ctx.sql("SELECT * FROM d"))
    html = df._repr_html_()
    assert html.startswith("<div>") and "<th>lat</th>" in html and "(6 rows)" in html, html
    # Iteration yields the batches.
    assert sum(b.num_rows for b in df) == 6
    assert "GridAggregateExec" in df.explain(analyze=True)


def test_polars_and_duckdb_read_the_stream(ctx):
    """The Arrow PyCapsule stream is what polars and DuckDB read (no pandas between)."""
    import duckdb
    import polars as pl
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    query = "SELECT lat, count(temp) AS n, avg(temp) AS mean FROM d GROUP BY lat ORDER BY lat"
    want = ctx.sql(query).to_arrow()
    frame = pl.DataFrame(ctx.sql(query))
    # (polars keeps no NOT NULL, so the values are compared.)
    assert frame.to_dicts() == want.to_pylist()
    assert ctx.sql(query).to_polars().equals(frame)
    result = ctx.sql(query)
    got = duckdb.sql("SELECT sum(n) AS n FROM result").fetchall()
    assert got == [(sum(want.column("n").to_pylist()),)]


def test_copy_and_errors(ctx, tmp_path):
    """COPY runs when `sql` is called (its row count is the result), and xarray reads what
    it wrote; a bad statement is an ndfusion.Error with DataFusion's message."""
    import xarray as xr
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    out = tmp_path / "zonal.zarr"
    copy = ctx.sql(f"COPY (SELECT time, lat, avg(temp) AS temp FROM d GROUP BY 1, 2) TO '{out}' "
                   "STORED AS ZARR OPTIONS ('dimensions' 'time,lat')")
    assert out.exists()
    assert rows(copy) == [{"count": 400 * 6}]
    got = xr.open_zarr(out).load()
    want = xr.open_zarr(DAILY).load()["temp"].astype("float64").mean("lon").sortby("lat")
    xr.testing.assert_allclose(got["temp"], want.transpose("time", "lat"), rtol=1e-12)
    with pytest.raises(ndfusion.Error, match="table '.*nope' not found"):
        ctx.sql("SELECT * FROM nope")
    with pytest.raises(ndfusion.Error, match="no_such"):
        ctx.sql(f"CREATE EXTERNAL TABLE e STORED AS ZARR LOCATION '{DAILY}' OPTIONS ('no_such' '1')")


def test_ctrl_c_stops_a_running_query(ctx):
    """A KeyboardInterrupt (here `_thread.interrupt_main`, what Ctrl-C and a Jupyter kernel
    interrupt raise) ends a CPU-bound query within a second and stops its work; the session
    answers the next one. Without the signal checks the cross join below runs for minutes."""
    import _thread
    import threading
    import time
    # A join whose every batch is small work (as in the CLI's pty test, tests/terminal.rs).
    ctx.sql("CREATE TABLE r AS SELECT value AS id FROM generate_series(1, 100)")
    slow = ctx.sql("SELECT count(*) FROM r a, r b, r c, r d, r e "
                   "WHERE a.id + b.id + c.id + d.id + e.id = 7")
    timer = threading.Timer(1.0, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        slow.to_arrow()
    stopped = time.monotonic() - started
    timer.join()
    assert stopped < 2.0, stopped
    # The query's work stopped too: the process is idle in the next second.
    cpu = time.process_time()
    time.sleep(1.0)
    assert time.process_time() - cpu < 0.5
    assert rows(ctx.sql("SELECT count(*) AS n FROM r")) == [{"n": 100}]


def from_dataframe(df, dims):
    """What xarray makes of the same result through pandas (the reference)."""
    import xarray as xr
    return xr.Dataset.from_dataframe(df.to_pandas().set_index(dims))


def test_to_xarray_lays_a_result_as_from_dataframe_does(ctx):
    """Monthly means (a grid aggregate: every cell; latitudes descending in the store,
    ascending here as from_dataframe sorts them), a selection with
    missing cells and an integer column (float64 with NaN there, as pandas makes it), and a
    string dimension: each equal to xarray's from_dataframe of the same result."""
    import xarray as xr
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    monthly = ctx.sql("SELECT date_trunc('month', time) AS time, lat, lon, avg(temp) AS temp, "
                      "count(temp) AS n FROM d GROUP BY 1, 2, 3")
    dims = ["time", "lat", "lon"]
    got = monthly.to_xarray(dims)
    xr.testing.assert_identical(got, from_dataframe(monthly, dims))
    assert got["temp"].dims == ("time", "lat", "lon")
    ds = xr.open_zarr(DAILY).load()
    want = ds["temp"].astype("float64").resample(time="MS").mean().sortby("lat")
    xr.testing.assert_allclose(got["temp"], want.transpose(*dims), rtol=1e-12)

    warm = ctx.sql("SELECT time, lat, lon, temp, CAST(lon * 10 AS BIGINT) AS k FROM d "
                   "WHERE temp > 26 AND time < '2001-02-01'")
    got = warm.to_xarray(dims)
    xr.testing.assert_identical(got, from_dataframe(warm, dims))
    assert got["k"].dtype == np.float64 and bool(got["k"].isnull().any())

    hemis = ctx.sql("SELECT CASE WHEN lat > 0 THEN 'north' ELSE 'south' END AS hemi, lon, "
                    "avg(temp) AS temp FROM d GROUP BY 1, 2")
    got = hemis.to_xarray(["hemi", "lon"])
    want = from_dataframe(hemis, ["hemi", "lon"])
    assert list(got["hemi"].values) == list(want["hemi"].values) == ["north", "south"]
    np.testing.assert_array_equal(got["lon"].values, want["lon"].values)
    np.testing.assert_allclose(got["temp"].values, want["temp"].values, rtol=1e-12)


def test_to_xarray_refuses_two_rows_on_a_cell(ctx):
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{DAILY}'")
    # (xarray's from_dataframe keeps a repeated index value as a repeated coordinate.)
    rows_ = ctx.sql("SELECT lat, temp FROM d")
    with pytest.raises(ndfusion.Error, match=r"to_xarray: .*same dimensions \(lat\) = \("):
        rows_.to_xarray(["lat"])
    with pytest.raises(ndfusion.Error, match="'depth'"):
        rows_.to_xarray(["depth"])


def test_the_session_needs_no_datafusion_python(monkeypatch):
    """`import ndfusion` and its session leave datafusion-python unimported (0.3 s of the
    import); the FFI path checks its major when a table or factory crosses to it."""
    import subprocess
    import sys
    code = ("import sys, ndfusion; ndfusion.SessionContext().sql('SELECT 1').to_arrow(); "
            "assert 'datafusion' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    import datafusion
    monkeypatch.setattr(datafusion, "__version__", "53.0.0")
    with pytest.raises(ImportError, match="ndfusion needs datafusion 54.x, found datafusion 53.0.0"):
        ndfusion.register_table_factories(datafusion.SessionContext())
    with pytest.raises(ImportError, match="needs datafusion 54.x"):
        datafusion.SessionContext().register_table(
            "s", ndfusion.ZarrTable(str(DATA / "zarr_v3" / "struct_1d.zarr")))


def test_a_memory_limit_is_the_clis(tmp_path):
    """`memory_limit` is the CLI's `--memory-limit` (a fair pool, sorts spilling within
    their part): a gridded COPY of rows in random order, whose sort holds more than the
    pool, completes and zarr-python reads every cell back."""
    import zarr
    ctx = ndfusion.SessionContext(memory_limit="32M")
    out = tmp_path / "grid.zarr"
    copy = (f"COPY (SELECT value % 1000 AS x, value / 1000 AS y, CAST(value AS DOUBLE) AS v "
            f"FROM generate_series(0, 999999) ORDER BY random()) TO '{out}' STORED AS ZARR "
            "OPTIONS ('dimensions' 'x,y')")
    # EXPLAIN ANALYZE runs the COPY and shows its sort spilling.
    analyzed = " ".join(ctx.sql("EXPLAIN ANALYZE " + copy).to_arrow().column(1).to_pylist())
    spills = [int(n) for n in __import__("re").findall(r"spill_count=(\d+)", analyzed)]
    assert max(spills) > 0, analyzed
    v = zarr.open_group(str(out), mode="r")["v"][:]
    assert v.shape == (1000, 1000)
    np.testing.assert_array_equal(v, np.arange(1_000_000, dtype="f8").reshape(1000, 1000).T)
    with pytest.raises(ndfusion.Error, match="memory_limit 'lots' is not a size"):
        ndfusion.SessionContext(memory_limit="lots")

