"""The same tables on the loopback S3 server (SeaweedFS, conftest.py): a Zarr dataset uploaded
there, a lance-nd table written there from xarray. Answers are xarray's (expected.json)."""

import json
from pathlib import Path

import datafusion
import pytest
import xarray as xr

import ndfusion
from conftest import upload

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
OCEAN = DATA / "datasets" / "ocean_v3.zarr"
ANSWERS = json.loads((DATA / "datasets" / "expected.json").read_text())["ocean_v3"]["answers"]
RANGE = "time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10"


def one(ctx, sql):
    table = ctx.sql(sql).to_arrow_table()
    assert table.num_rows == 1, sql
    return [table.column(i)[0].as_py() for i in range(table.num_columns)]


def plan(ctx, sql):
    return "\n".join(r["plan"] for r in ctx.sql("EXPLAIN " + sql).to_arrow_table().to_pylist())


@pytest.fixture(scope="module")
def remote_ocean(s3):
    upload(s3, OCEAN, "ocean_v3.zarr")
    return f"s3://{s3['bucket']}/ocean_v3.zarr"


def test_a_zarr_dataset_on_s3_answers_as_xarray_and_selects_blocks(s3, remote_ocean):
    ctx = datafusion.SessionContext()
    ctx.register_table("o", ndfusion.ZarrTable(remote_ocean, s3["options"]))
    mean, count = one(ctx, f"SELECT avg(temp), count(temp) FROM o WHERE {RANGE}")
    assert count == ANSWERS["count_temp_11_20_north_of_10"]
    assert mean == pytest.approx(float(ANSWERS["avg_temp_11_20_north_of_10"]), rel=1e-6)
    assert "blocks=2/6" in plan(ctx, f"SELECT temp FROM o WHERE {RANGE}")

    ndfusion.register_table_factories(ctx)
    options = ", ".join(f"'{k}' '{v}'" for k, v in s3["options"].items())
    ctx.sql(f"CREATE EXTERNAL TABLE o2 STORED AS ZARR LOCATION '{remote_ocean}' OPTIONS ({options})")
    assert one(ctx, "SELECT count(sal) FROM o2") == [ANSWERS["count_sal_all"]]


def test_lance_nd_written_to_s3_from_xarray_reads_back(s3):
    ocean = xr.open_zarr(OCEAN).load()
    location = f"s3://{s3['bucket']}/ocean.lance"
    ndfusion.write_nd_batches(location, [ocean, ocean.assign_attrs(id="ocean-b")], s3["options"])

    [back] = ndfusion.read_nd_batches(location, "__global_attrs__.id = 'ocean-b'", s3["options"])
    xr.testing.assert_identical(back, ocean.assign_attrs(id="ocean-b"))

    ctx = datafusion.SessionContext()
    ctx.register_table("o", ndfusion.LanceNdTable(location, s3["options"]))
    mean, count = one(
        ctx, f"SELECT avg(temp), count(temp) FROM o WHERE __global_attrs__.id = 'ocean-a' AND {RANGE}"
    )
    assert count == ANSWERS["count_temp_11_20_north_of_10"]
    assert mean == pytest.approx(float(ANSWERS["avg_temp_11_20_north_of_10"]), rel=1e-6)
    assert "lance_filter=" in plan(ctx, "SELECT temp FROM o WHERE __global_attrs__.id = 'ocean-a'")


def test_remote_errors_name_the_location_or_option(s3, remote_ocean):
    with pytest.raises(ndfusion.Error, match="nope.zarr"):
        ndfusion.ZarrTable(f"s3://{s3['bucket']}/nope.zarr", s3["options"])
    wrong = dict(s3["options"], **{"aws.secret_access_key": "wrong"})
    with pytest.raises(ndfusion.Error, match="ocean_v3.zarr"):
        ndfusion.ZarrTable(remote_ocean, wrong)
    with pytest.raises(ndfusion.Error, match="invalid option 'aws.regoin'"):
        ndfusion.read_nd_batches(f"s3://{s3['bucket']}/ocean.lance", options={"aws.regoin": "x"})
