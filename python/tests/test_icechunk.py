"""Icechunk repositories through datafusion-python: each version answers as xarray answered on
the same snapshot (tests/data/icechunk/expected.json)."""

import shutil

import datafusion
import pytest

import ndfusion
from answers import DATA, expected, one, plan

OCEAN = DATA / "icechunk" / "ocean.icechunk"


@pytest.fixture
def ctx():
    return datafusion.SessionContext()


@pytest.mark.parametrize(
    "options,version",
    [
        ({}, "main"),
        ({"tag": "v1"}, "v1"),
        ({"branch": "experiment"}, "experiment"),
        ({"snapshot": expected("icechunk")["ocean"]["commits"]["appended"]}, "appended"),
    ],
)
def test_each_version_answers_as_xarray_does(ctx, options, version):
    want = expected("icechunk")["ocean"]["versions"][version]
    table = ndfusion.IcechunkTable(str(OCEAN), {**options, "path": "surface"})
    ctx.register_table("s", table)
    rows, count, mean = one(ctx, "SELECT count(*), count(temp), avg(temp) FROM s")
    assert rows == want["surface"]["rows"]
    assert count == want["count_temp"]
    assert mean == pytest.approx(float(want["mean_temp"]), rel=1e-12)
    total, = one(ctx, "SELECT sum(salt) FROM s")
    assert total == pytest.approx(float(want["sum_salt"]), rel=1e-12)


def test_stored_as_icechunk_and_the_snapshot_in_explain(ctx):
    ndfusion.register_table_factories(ctx)
    ctx.sql(
        f"CREATE EXTERNAL TABLE s STORED AS ICECHUNK LOCATION '{OCEAN}' "
        "OPTIONS ('tag' 'v1', 'path' 'surface')"
    ).collect()
    first = expected("icechunk")["ocean"]["commits"]["first"]
    assert f"ocean.icechunk@{first}/surface" in plan(ctx, "SELECT avg(temp) FROM s")
    assert one(ctx, "SELECT count(*) FROM s") == [expected("icechunk")["ocean"]["versions"]["v1"]["surface"]["rows"]]


def test_version_errors_name_what_is_missing():
    with pytest.raises(ndfusion.Error, match="no tag 'v9'; its tags: v1"):
        ndfusion.IcechunkTable(str(OCEAN), {"tag": "v9"})
    with pytest.raises(ndfusion.Error, match="'branch' and 'tag' both choose a version"):
        ndfusion.IcechunkTable(str(OCEAN), {"tag": "v1", "branch": "main"})
