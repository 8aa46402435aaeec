"""The same tables on the loopback S3 server (SeaweedFS, conftest.py): a Zarr dataset uploaded
there, a lance-nd table written there from xarray. Answers are xarray's (expected.json)."""

import datafusion
import pytest
import xarray as xr

import ndfusion
from answers import DATA, expected, one, plan
from conftest import upload

OCEAN = DATA / "datasets" / "ocean_v3.zarr"
ANSWERS = expected("datasets")["ocean_v3"]["answers"]
RANGE = "time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10"


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


def test_a_zarr_array_and_a_collection_on_s3(s3):
    upload(s3, DATA / "zarr_v3" / "struct_1d.zarr", "struct_1d.zarr")
    for member in ("f1", "f2", "f3", "f4"):
        upload(s3, DATA / "collections" / "floats" / f"{member}.zarr", f"floats/{member}.zarr")
    ctx = datafusion.SessionContext()
    bucket = s3["bucket"]
    ctx.register_table("s", ndfusion.ZarrTable(f"s3://{bucket}/struct_1d.zarr", s3["options"]))
    ids = expected("zarr_v3")["struct_1d"]["columns"]["id"]
    assert one(ctx, "SELECT count(*), sum(id) FROM s WHERE dim_0 >= 8") == [len(ids[8:]), sum(ids[8:])]
    assert "chunks=1/3" in plan(ctx, "SELECT id FROM s WHERE dim_0 >= 8")

    ctx.register_table("f", ndfusion.ZarrTable(f"s3://{bucket}/floats/*.zarr", s3["options"]))
    floats = expected("collections")["floats"]
    assert one(ctx, "SELECT count(*) FROM f WHERE __global_attrs__.id = 'f2'") == [floats["f2"]["rows"]]
    shown = plan(ctx, "SELECT temp FROM f WHERE __global_attrs__.project = 'argo' "
                      "AND __global_attrs__.id <> 'f4' AND level < 3")
    assert "members=2/4" in shown, shown


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
