"""`COPY (query) TO 'out.zarr' STORED AS ZARR`, written by the `ndfusion` command line (built by
`cargo test`, which runs before these tests) and read by zarr-python 3.4.2, the reference reader:
a struct array whose fields, dtypes and values are the query's."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]
NDFUSION = ROOT / "target" / "debug" / "ndfusion"


def ndfusion(sql):
    if not NDFUSION.exists():
        pytest.fail(f"{NDFUSION} is missing: run cargo test (or cargo build) first")
    done = subprocess.run([str(NDFUSION), "--quiet", "--format", "csv", "-c", sql],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


QUERY = """SELECT CAST(value AS INT) AS id, CAST(value % 3 AS TINYINT UNSIGNED) AS flags,
    named_struct('x', CAST(value AS REAL) / 2, 'y', CAST(-value AS REAL)) AS point,
    CAST(value AS DOUBLE) / 10 AS value, value % 2 = 0 AS even,
    CASE WHEN value = 4 THEN NULL ELSE to_timestamp_seconds(value * 3600) END AS t,
    arrow_cast(value, 'Duration(Millisecond)') AS dur
    FROM generate_series(1, 1000) ORDER BY value"""


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_zarr_python_reads_the_querys_rows(tmp_path, compression):
    out = tmp_path / "points.zarr"
    written = ndfusion(f"COPY ({QUERY}) TO '{out}' STORED AS ZARR "
                       f"OPTIONS ('chunks' 'dim_0=300', 'compression' '{compression}')")
    assert written.split() == ["count", "1000"]
    a = zarr.open_array(out, mode="r")
    assert a.metadata.zarr_format == 3
    assert a.shape == (1000,) and a.chunks == (300,)
    assert a.dtype.names == ("id", "flags", "point", "value", "even", "t", "dur")
    assert a.dtype["id"] == np.dtype("<i4") and a.dtype["flags"] == np.dtype("u1")
    assert a.dtype["point"].names == ("x", "y") and a.dtype["point"]["x"] == np.dtype("<f4")
    assert a.dtype["t"] == np.dtype("<M8[s]") and a.dtype["dur"] == np.dtype("<m8[ms]")
    data = a[:]
    v = np.arange(1, 1001)
    np.testing.assert_array_equal(data["id"], v)
    np.testing.assert_array_equal(data["flags"], v % 3)
    np.testing.assert_array_equal(data["point"]["x"], (v / 2).astype("f4"))
    np.testing.assert_array_equal(data["point"]["y"], -v.astype("f4"))
    np.testing.assert_array_equal(data["value"], v / 10)
    np.testing.assert_array_equal(data["even"], v % 2 == 0)
    expected_t = (v * 3600).astype("M8[s]")
    expected_t[3] = np.datetime64("NaT", "s")
    np.testing.assert_array_equal(data["t"], expected_t)
    assert np.isnat(data["t"][3])
    np.testing.assert_array_equal(data["dur"], v.astype("m8[ms]"))
    # A part read alone, across a chunk boundary.
    np.testing.assert_array_equal(a[295:305]["id"], np.arange(296, 306))


def test_an_empty_result_is_an_array_of_no_elements(tmp_path):
    out = tmp_path / "empty.zarr"
    ndfusion(f"COPY (SELECT value, value * 2 AS twice FROM generate_series(1, 10) WHERE value > 10) "
             f"TO '{out}' STORED AS ZARR")
    a = zarr.open_array(out, mode="r")
    assert a.shape == (0,)
    assert a.dtype.names == ("value", "twice")
    assert len(a[:]) == 0


def test_a_tables_own_rows_read_back_as_zarr_python_reads_them(tmp_path):
    """`COPY (SELECT * FROM t WHERE ...)` of zarr-python's struct array: its `dim_0` is kept
    as a field and the dimension is named `index`; zarr-python reads the rows selected, in
    order, and ndfusion reads the same ones."""
    source = ROOT / "tests" / "data" / "zarr_v3" / "struct_1d.zarr"
    out = tmp_path / "subset.zarr"
    ndfusion(f"CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{source}'; "
             f"COPY (SELECT * FROM s WHERE dim_0 BETWEEN 2 AND 8 ORDER BY dim_0) TO '{out}' "
             "STORED AS ZARR")
    whole = zarr.open_array(source, mode="r")[:]
    a = zarr.open_array(out, mode="r")
    assert a.metadata.dimension_names == ("index",)
    assert a.dtype.names == ("dim_0",) + whole.dtype.names
    data = a[:]
    np.testing.assert_array_equal(data["dim_0"], np.arange(2, 9))
    for name in whole.dtype.names:
        # Bit for bit (a NaN in a nested field is equal to itself only so).
        assert data[name].tobytes() == whole[2:9][name].tobytes(), name
    back = ndfusion(f"CREATE EXTERNAL TABLE b STORED AS ZARR LOCATION '{out}'; "
                    "SELECT index, dim_0, id, value FROM b ORDER BY index")
    rows = [line.split(",") for line in back.split()[1:]]
    assert [int(r[0]) for r in rows] == list(range(7))
    assert [int(r[1]) for r in rows] == list(range(2, 9))
    assert [int(r[2]) for r in rows] == whole[2:9]["id"].tolist()
    np.testing.assert_array_equal([float(r[3]) for r in rows], whole[2:9]["value"])


def test_a_failed_copy_leaves_nothing(tmp_path):
    out = tmp_path / "failed.zarr"
    done = subprocess.run(
        [str(NDFUSION), "--quiet", "-c",
         f"COPY (SELECT 1 / (value - 500) AS v FROM generate_series(1, 1000)) TO '{out}' "
         "STORED AS ZARR OPTIONS ('chunks' 'dim_0=100')"],
        capture_output=True, text=True)
    assert done.returncode != 0
    assert "divide by zero" in done.stderr.lower(), done.stderr
    assert list(tmp_path.iterdir()) == []


GRID = """SELECT to_timestamp_seconds(t * 86400) AS time, CAST(la AS DOUBLE) / 2 AS lat,
    CAST(lo AS INT) AS lon, CAST(t * 100 + la * 10 + lo AS REAL) AS temp,
    t * 100 + la * 10 + lo AS code, (t + la + lo) % 2 = 0 AS even
    FROM unnest(range(4)) AS a(t), unnest(range(3)) AS b(la), unnest(range(5)) AS c(lo)
    WHERE (t * 100 + la * 10 + lo) % 7 <> 0 ORDER BY random()"""


def grid_frame():
    """The rows of GRID, made by pandas."""
    import pandas as pd
    rows = []
    for t in range(4):
        for la in range(3):
            for lo in range(5):
                code = t * 100 + la * 10 + lo
                if code % 7 == 0:
                    continue
                rows.append({"time": np.datetime64(t * 86400, "s"), "lat": la / 2, "lon": lo,
                             "temp": code, "code": code, "even": (t + la + lo) % 2 == 0})
    df = pd.DataFrame(rows)
    return df.astype({"lon": "int32", "temp": "float32", "code": "int64"})


def test_xarray_opens_a_gridded_write_as_from_dataframe_makes_it(tmp_path):
    import xarray as xr
    out = tmp_path / "grid.zarr"
    written = ndfusion(f"COPY ({GRID}) TO '{out}' STORED AS ZARR OPTIONS ('dimensions' "
                       "'time,lat,lon', 'chunks' 'time=3,lon=2', 'attributes' '{\"title\": \"grid\"}')")
    assert written.split() == ["count", "51"]
    got = xr.open_zarr(out)
    # What xarray makes of the same rows, written and opened by xarray itself.
    expected = xr.Dataset.from_dataframe(grid_frame().set_index(["time", "lat", "lon"]))
    expected.to_zarr(tmp_path / "xarray.zarr", zarr_format=3)
    reference = xr.open_zarr(tmp_path / "xarray.zarr")
    xr.testing.assert_equal(got.load(), reference.load())
    assert dict(got.sizes) == {"time": 4, "lat": 3, "lon": 5}
    assert got["temp"].dtype == np.float32 and got["lon"].dtype == np.int32
    # Integers and booleans with cells no row names are float64 with NaN, as from_dataframe
    # makes them.
    assert got["code"].dtype == np.float64 and int(got["code"].isnull().sum()) == 9
    assert got.attrs == {"title": "grid"}
    assert str(got["time"].values[1]) .startswith("1970-01-02")


STRINGS = """SELECT station, CAST(d AS INT) AS depth,
    concat(station, '-', CAST(d AS VARCHAR)) AS label, CAST(d AS DOUBLE) / 4 AS temp,
    CASE WHEN d = 1 THEN NULL ELSE to_timestamp_seconds(d * 3600) END AS seen
    FROM (VALUES ('b'), ('a'), ('ç')) AS s(station), unnest(range(3)) AS r(d)
    WHERE NOT (station = 'a' AND d = 2)"""


def strings_frame():
    """The rows of STRINGS, made by pandas."""
    import pandas as pd
    rows = [{"station": s, "depth": d, "label": f"{s}-{d}", "temp": d / 4,
             "seen": np.datetime64("NaT", "s") if d == 1 else np.datetime64(d * 3600, "s")}
            for s in ["b", "a", "ç"] for d in range(3) if not (s == "a" and d == 2)]
    return pd.DataFrame(rows).astype({"depth": "int32"})


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_opens_strings_and_either_zarr_format_as_it_writes_them(tmp_path, zarr_format):
    import xarray as xr
    out = tmp_path / "strings.zarr"
    written = ndfusion(f"COPY ({STRINGS}) TO '{out}' STORED AS ZARR OPTIONS ('dimensions' "
                       f"'station,depth', 'zarr_format' '{zarr_format}', 'chunks' 'station=2', "
                       "'compression' 'gzip', 'attributes' '{\"source\": \"sql\"}')")
    assert written.split() == ["count", "8"]
    got = xr.open_zarr(out)
    # What xarray makes of the same rows, written in the same format and opened by xarray: a
    # missing string is "" (xarray's note: variable-length strings have no missing value).
    expected = xr.Dataset.from_dataframe(strings_frame().set_index(["station", "depth"]))
    expected.to_zarr(tmp_path / "xarray.zarr", zarr_format=zarr_format)
    reference = xr.open_zarr(tmp_path / "xarray.zarr")
    xr.testing.assert_equal(got.load(), reference.load())
    assert list(got["station"].values) == ["a", "b", "ç"]
    assert got["label"].sel(station="a", depth=2).item() == ""
    assert np.isnat(got["seen"].sel(station="b", depth=1).values)
    assert got.attrs == {"source": "sql"}
    group = zarr.open_group(out, mode="r")
    assert group.metadata.zarr_format == zarr_format
    assert group["label"].chunks == (2, 3)
    # Consolidated: zarr-python finds every array in the group's metadata alone.
    consolidated = zarr.open_consolidated(out, zarr_format=zarr_format)
    assert sorted(consolidated.metadata.consolidated_metadata.metadata) == [
        "depth", "label", "seen", "station", "temp"]


def test_two_rows_on_one_cell_leave_nothing(tmp_path):
    out = tmp_path / "dup.zarr"
    done = subprocess.run(
        [str(NDFUSION), "--quiet", "-c",
         f"COPY (SELECT value % 3 AS x, value AS v FROM generate_series(1, 10)) TO '{out}' "
         "STORED AS ZARR OPTIONS ('dimensions' 'x')"],
        capture_output=True, text=True)
    assert done.returncode != 0
    assert "two rows have the same dimensions (x) = (0)" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_pylance_reads_a_lance_nd_copy(tmp_path):
    """COPY ... STORED AS LANCE_ND: one table row per station (its global attributes), each
    row's arrays on that station's own depths, as pylance 14.0.2 reads them."""
    import lance

    out = tmp_path / "profiles.lance"
    rows = ("(VALUES ('b', 10.0, 4.0, 35.0), ('a', 0.0, 12.0, 35.1), ('a', 5.0, 11.0, NULL), "
            "('b', 0.0, 13.0, 34.9), ('a', 20.0, 3.5, 35.3)) AS v(station, depth, temp, sal)")
    written = ndfusion(f"COPY (SELECT * FROM {rows}) TO '{out}' STORED AS LANCE_ND "
                       "OPTIONS ('dimensions' 'depth', 'batch_by' 'station')")
    assert written.split() == ["count", "5"]
    table = lance.dataset(str(out)).to_table()
    assert table.schema.metadata[b"lance_nd:format"] == b"1"
    assert table.num_rows == 2
    by_station = {r["__global_attrs__"]["station"]: r for r in table.to_pylist()}
    a, b = by_station["a"], by_station["b"]
    assert a["depth"] == {"values": [0.0, 5.0, 20.0], "dim_names": ["depth"], "dim_sizes": [3]}
    assert a["temp"]["values"] == [12.0, 11.0, 3.5]
    assert a["temp"]["dim_names"] == ["depth"] and a["temp"]["dim_sizes"] == [3]
    assert a["sal"]["values"] == [35.1, None, 35.3]
    assert b["depth"]["values"] == [0.0, 10.0]
    assert b["temp"]["values"] == [13.0, 4.0]
    # An INSERT appends in the table's own columns; pylance sees the new row.
    ndfusion(f"CREATE EXTERNAL TABLE p STORED AS LANCE_ND LOCATION '{out}'; "
             "INSERT INTO p (depth, temp, __global_attrs__) VALUES "
             "(1.0, 7.5, named_struct('station', 'c')), (2.0, 7.0, named_struct('station', 'c'))")
    table = lance.dataset(str(out)).to_table()
    assert table.num_rows == 3
    c = [r for r in table.to_pylist() if r["__global_attrs__"]["station"] == "c"][0]
    assert c["temp"]["values"] == [7.5, 7.0] and c["sal"] is None


def test_xarray_reads_a_grid_aggregates_copy_as_it_computes_it(tmp_path):
    """A grid aggregate's COPY is written from its grid (GridWriteExec, issue 67): monthly
    means and counts per cell of xarray's daily fixture (NaN cells, descending latitudes,
    chunks splitting every axis) read back as xarray's own resample computes them."""
    import xarray as xr
    source = ROOT / "tests" / "data" / "grid" / "daily_v3.zarr"
    out = tmp_path / "monthly.zarr"
    copy = (f"COPY (SELECT date_trunc('month', time) AS time, lat, lon, avg(temp) AS temp, "
            f"count(temp) AS n FROM d GROUP BY 1, 2, 3) TO '{out}' STORED AS ZARR "
            "OPTIONS ('dimensions' 'time,lat,lon', 'chunks' 'time=5')")
    create = f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{source}'; "
    assert "GridWriteExec" in ndfusion(create + "EXPLAIN " + copy)
    assert ndfusion(create + copy).split() == ["count", str(14 * 6 * 8)]
    got = xr.open_zarr(out).load()
    ds = xr.open_zarr(source).load()
    monthly = ds["temp"].astype("float64").resample(time="MS")
    expected_mean = monthly.mean().sortby("lat")
    expected_count = monthly.count().sortby("lat")
    assert list(got["lat"].values) == sorted(ds["lat"].values)
    np.testing.assert_array_equal(got["time"].values, expected_mean["time"].values)
    xr.testing.assert_allclose(got["temp"], expected_mean.transpose("time", "lat", "lon"),
                               rtol=1e-12)
    # Every group has a row (count 0 where every day was NaN): the counts stay integers.
    assert got["n"].dtype == np.int64
    xr.testing.assert_equal(got["n"], expected_count.transpose("time", "lat", "lon"))


def test_xarray_reads_a_selections_copy_as_its_own_selection(tmp_path):
    """A selection of a dataset's cells is copied as blocks of cells (GridWriteExec, issue
    67): a time range of xarray's daily fixture reads back as xarray's own `sel` (NaN cells,
    latitudes ascending as from_dataframe makes them)."""
    import xarray as xr
    source = ROOT / "tests" / "data" / "grid" / "daily_v3.zarr"
    out = tmp_path / "range.zarr"
    copy = (f"COPY (SELECT time, lat, lon, temp, u, v FROM d WHERE time BETWEEN '2001-02-03' "
            f"AND '2001-03-10') TO '{out}' STORED AS ZARR OPTIONS ('dimensions' 'time,lat,lon')")
    create = f"CREATE EXTERNAL TABLE d STORED AS ZARR LOCATION '{source}'; "
    assert "GridWriteExec" in ndfusion(create + "EXPLAIN " + copy)
    assert ndfusion(create + copy).split() == ["count", str(36 * 6 * 8)]
    got = xr.open_zarr(out).load()
    ds = xr.open_zarr(source).load()
    expected = ds.sel(time=slice("2001-02-03", "2001-03-10")).sortby("lat")
    assert int(expected["temp"].isnull().sum()) > 0
    xr.testing.assert_equal(got[["temp", "u", "v"]], expected[["temp", "u", "v"]])
