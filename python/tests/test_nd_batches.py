"""lance-nd tables written from and read into xarray Datasets: the round trip, pylance reading
what ndfusion wrote, ndfusion reading what pylance wrote. Every answer is one xarray, numpy or
pylance computed when the fixtures were written (their expected.json), or the input itself."""

import datafusion
import lance
import numpy as np
import pytest
import xarray as xr

import ndfusion
from answers import DATA, expected, one

OCEAN = DATA / "datasets" / "ocean_v3.zarr"


@pytest.fixture(scope="module")
def ocean():
    return xr.open_zarr(OCEAN).load()


def test_a_dataset_round_trips_and_answers_as_xarray(tmp_path, ocean):
    location = str(tmp_path / "ocean.lance")
    ndfusion.write_nd_batches(location, ocean)

    [back] = ndfusion.read_nd_batches(location)
    xr.testing.assert_identical(back, ocean)
    assert back.attrs["calibrated"] is True and back.attrs["version"] == 3
    # basin is a coordinate that is no dimension: named in `coordinates`, decoded back.
    assert "basin" in back.coords and "coordinates" not in back.temp.attrs

    ctx = datafusion.SessionContext()
    ctx.register_table("o", ndfusion.LanceNdTable(location))
    answers = expected("datasets")["ocean_v3"]["answers"]
    assert one(ctx, "SELECT count(*), count(temp), count(sal) FROM o") == [
        expected("datasets")["ocean_v3"]["rows"],
        answers["count_temp_all"],
        answers["count_sal_all"],
    ]
    total, = one(ctx, "SELECT sum(sal) FROM o")
    assert total == pytest.approx(float(answers["sum_sal_all"]), rel=1e-12)
    mean, count = one(
        ctx,
        "SELECT avg(temp), count(temp) FROM o "
        "WHERE time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10",
    )
    assert count == answers["count_temp_11_20_north_of_10"]
    assert mean == pytest.approx(float(answers["avg_temp_11_20_north_of_10"]), rel=1e-6)
    assert one(ctx, "SELECT max(tide) FROM o") == [float(answers["max_tide"])]


def test_pylance_reads_what_ndfusion_wrote(tmp_path, ocean):
    location = str(tmp_path / "ocean.lance")
    ndfusion.write_nd_batches(location, [ocean, ocean.isel(time=slice(0, 2))])
    table = lance.dataset(location).to_table()
    assert table.schema.metadata[b"lance_nd:format"] == b"1"
    assert table.num_rows == 2
    temp = table.column("temp")[0].as_py()
    assert temp["dim_names"] == ["time", "lat", "lon"]
    assert temp["dim_sizes"] == [24, 6, 5]
    answers = expected("datasets")["ocean_v3"]["answers"]
    # xarray's NaN are Arrow nulls: count() skips them in Lance, DataFusion and xarray alike.
    assert sum(v is not None for v in temp["values"]) == answers["count_temp_all"]
    assert np.allclose(
        np.array(temp["values"], dtype=np.float64).reshape(24, 6, 5),
        ocean.temp.values,
        equal_nan=True,
    )
    assert temp["attrs"] == {"units": "degC", "long_name": "sea temperature", "coordinates": "basin"}
    attrs = expected("datasets")["ocean_v3"]["attrs"]
    assert table.column("__global_attrs__")[1].as_py() == attrs
    assert table.column("time")[1].as_py()["dim_sizes"] == [2]


def test_ndfusion_reads_what_pylance_wrote():
    doc = expected("lance_nd")["doc_example"]["rows"]
    location = str(DATA / "lance_nd" / "doc_example.lance")
    batches = ndfusion.read_nd_batches(location)
    assert [b.attrs for b in batches] == [r["__global_attrs__"] for r in doc]
    for ds, row in zip(batches, doc):
        for name in ("x", "y", "temperature", "pressure"):
            if row[name] is None:
                assert name not in ds.variables
                continue
            var = ds[name]
            assert list(var.dims) == row[name]["dim_names"]
            assert list(var.shape) == row[name]["dim_sizes"]
            assert var.values.ravel().tolist() == row[name]["values"]
            # An attribute the row does not have (null) is left out.
            attrs = {k: v for k, v in (row[name].get("attrs") or {}).items() if v is not None}
            assert var.attrs == attrs
        # x and y are named like their dimensions: coordinates.
        assert set(ds.coords) == {n for n in ("x", "y") if row[n] is not None}

    [a] = ndfusion.read_nd_batches(location, "__global_attrs__.id = 'a'", {"arrays": "temperature"})
    assert list(a.variables) == ["temperature"] and a.attrs == {"id": "a"}
    assert a.temperature.dtype == np.float32

    # A table whose schema grew over three pylance appends: older rows lack what came later.
    evolved = expected("lance_nd")["evolved"]["rows"]
    batches = ndfusion.read_nd_batches(str(DATA / "lance_nd" / "evolved.lance"))
    assert [sorted(b.data_vars) for b in batches] == [
        sorted(n for n in ("temperature", "salinity") if r[n] is not None) for r in evolved
    ]
    assert [b.attrs for b in batches] == [
        {k: v for k, v in r["__global_attrs__"].items() if v is not None} for r in evolved
    ]
    assert batches[2].temperature.shape == () and batches[2].temperature.item() == 9.0


def test_writes_evolve_the_schema_and_cast_only_when_allowed(tmp_path):
    location = str(tmp_path / "t.lance")
    first = xr.Dataset(
        {"temp": (("x",), np.array([1.5, 2.5], dtype=np.float32), {"units": "K"})},
        coords={"x": [10, 20]},
        attrs={"id": "a"},
    )
    ndfusion.write_nd_batches(location, first)
    # A new variable, a new attribute key and a new global attribute key.
    second = xr.Dataset(
        {
            "temp": (("x",), np.array([3.5], dtype=np.float32), {"units": "K", "note": "n"}),
            "sal": (("x",), np.array([35.0])),
        },
        coords={"x": [30]},
        attrs={"id": "b", "group": "g"},
    )
    ndfusion.write_nd_batches(location, [second])
    int_temp = xr.Dataset({"temp": (("x",), np.array([7], dtype=np.int16))}, attrs={"id": "c"})
    with pytest.raises(ndfusion.Error, match="array .temp. holds Float32 in the table, the write has Int16.*.casting. option in SQL and Python"):
        ndfusion.write_nd_batches(location, int_temp)
    ndfusion.write_nd_batches(location, int_temp, {"casting": "safe", "statistics": True})

    a, b, c = ndfusion.read_nd_batches(location)
    xr.testing.assert_identical(a, first)
    xr.testing.assert_identical(b, second)
    assert c.temp.dtype == np.float32 and c.temp.values.tolist() == [7.0]
    assert c.attrs == {"id": "c"}

    ctx = datafusion.SessionContext()
    ctx.register_table("t", ndfusion.LanceNdTable(location))
    assert one(ctx, "SELECT count(*), sum(temp), count(sal) FROM t") == [4, 1.5 + 2.5 + 3.5 + 7.0, 1]
    assert one(ctx, "SELECT sum(temp) FROM t WHERE __global_attrs__.\"group\" = 'g'") == [3.5]


def test_bad_input_names_the_option_variable_or_path(tmp_path):
    ds = xr.Dataset({"v": (("x",), [1.0, 2.0])})
    with pytest.raises(ndfusion.Error, match="invalid option 'cast': write_nd_batches does not know"):
        ndfusion.write_nd_batches(str(tmp_path / "t.lance"), ds, {"cast": "safe"})
    with pytest.raises(ndfusion.Error, match="invalid option 'casting': expected one of no, safe, unsafe"):
        ndfusion.write_nd_batches(str(tmp_path / "t.lance"), ds, {"casting": "maybe"})
    with pytest.raises(ndfusion.Error, match="variable 'v': attribute 'bad' is None"):
        ndfusion.write_nd_batches(str(tmp_path / "t.lance"), ds.assign(v=ds.v.assign_attrs(bad=None)))
    mixed = xr.Dataset({"m": (("x",), np.array([1, "a"], dtype=object))})
    with pytest.raises(ndfusion.Error, match="variable 'm': values of dtype object"):
        ndfusion.write_nd_batches(str(tmp_path / "t.lance"), mixed)
    assert not (tmp_path / "t.lance").exists()
    with pytest.raises(ndfusion.Error, match="without the lance-nd marker"):
        ndfusion.write_nd_batches(str(DATA / "lance_nd" / "bad_no_marker.lance"), ds)
    with pytest.raises(ndfusion.Error, match="nope.lance"):
        ndfusion.read_nd_batches(str(tmp_path / "nope.lance"))
    with pytest.raises(ndfusion.Error, match="invalid option 'filter': read_nd_batches"):
        ndfusion.read_nd_batches(str(DATA / "lance_nd" / "doc_example.lance"), options={"filter": "x"})
    with pytest.raises(ndfusion.Error, match="no array 'nope'"):
        ndfusion.read_nd_batches(str(DATA / "lance_nd" / "doc_example.lance"), options={"arrays": "nope"})
