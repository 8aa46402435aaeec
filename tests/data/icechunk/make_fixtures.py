"""Writes the Icechunk fixtures of ndfusion's tests with icechunk 2.3.0, xarray 2026.9.0
(zarr-python 3.4.2) and VirtualiZarr 2.8.0 over netCDF4 files written by h5netcdf 1.8.2.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m venv /tmp/icevenv
    /tmp/icevenv/bin/pip install icechunk==2.3.0 xarray==2026.9.0 zarr==3.4.2 \
        virtualizarr==2.8.0 h5netcdf==1.8.2 h5py==3.16.0 pandas
    /tmp/icevenv/bin/python tests/data/icechunk/make_fixtures.py

Writes:
- `ocean.icechunk`: group `surface` (a dataset: time x lat x lon, CF-encoded salinity) and
  array `points` (a `struct` array). `main`: commit 1 writes both (tagged `v1`), commit 2
  appends 6 days along time, commit 3 rewrites `points`. Branch `experiment` starts at commit 2
  and has one commit of its own (temperature doubled). Commits are 1.5 s apart, so an `as_of`
  between two of them picks the first.
- `nc/day0.nc`, `nc/day1.nc`: netCDF4 files (h5netcdf), two days of a small grid each.
- `virtual_local.icechunk`: VirtualiZarr's references to those files (concatenated along time),
  renamed to the relative `vcc://nc/<file>` form of a container named `nc`, so the repository
  reads wherever the checkout lies (the reader says where the container is).
- `virtual_s3.icechunk`: the same references as VirtualiZarr writes them by default, absolute
  URLs, under `s3://data/tests/data/icechunk/nc/` (where the S3 tests upload tests/data).

`expected.json`: for each version, the rows `xr.open_zarr(session.store, group=...)
.to_dataframe().reset_index()` gives (as tests/data/datasets/make_fixtures.py records them),
the struct array's fields as numpy reads them, the snapshot ids, messages and parents of each
branch (icechunk's `ancestry`), branches and tags, and `as_of` instants.
"""

import datetime as dt
import json
import shutil
import sys
import time
import warnings
from pathlib import Path

import icechunk
import numpy as np
import pandas as pd
import xarray as xr
import zarr

assert icechunk.__version__ == "2.3.0", icechunk.__version__
assert xr.__version__ == "2026.9.0", xr.__version__
assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import dataframe_column, dataframe_table  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPECTED = {}
# Virtual chunks carry the time their file was last seen: a file changed after it is refused.
# A fresh checkout gives the files a new mtime, so the references say a time far ahead.
LAST_UPDATED = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return path


def version_answers(session):
    """What xarray and numpy read at one snapshot."""
    ds = xr.open_zarr(session.store, group="surface", consolidated=False)
    points = zarr.open_array(session.store, path="points", mode="r")[...]
    raw = xr.open_zarr(session.store, group="surface", consolidated=False, decode_times=False)
    return {
        "surface": dataframe_table(ds),
        # The stored times, as xarray shows them undecoded.
        "raw_time": dataframe_column(raw["time"].values),
        "count_temp": int(ds["temp"].count()),
        "sum_salt": repr(float(ds["salt"].sum(dtype="float64"))),
        # In float64, as SQL avg computes it (xarray averages float32 in float32).
        "mean_temp": repr(float(ds["temp"].mean(dtype="float64").values)),
        "points": {name: dataframe_column(points[name]) for name in points.dtype.names},
    }


def write_ocean():
    """ocean.icechunk: commits on main, a tag, a second branch."""
    TIME = pd.date_range("2026-01-01", periods=18, freq="D")
    LAT = np.array([10.0, 0.0, -10.0])
    LON = np.array([100.0, 110.0, 120.0, 130.0], dtype="float32")
    rng = np.random.default_rng(27)
    shape = (len(TIME), len(LAT), len(LON))
    TEMP = (25 + rng.normal(0, 1, shape)).astype("float32")
    TEMP[4, 1, 2] = np.nan
    SALT = 35 + rng.normal(0, 0.3, shape)


    def surface(days):
        ds = xr.Dataset(
            {
                "temp": (("time", "lat", "lon"), TEMP[days], {"units": "degC"}),
                "salt": (("time", "lat", "lon"), SALT[days], {"units": "psu"}),
            },
            coords={"time": TIME[days], "lat": LAT, "lon": LON},
            attrs={"title": "surface ocean", "source": "ndfusion icechunk fixture"},
        )
        ds["salt"].encoding = {
            "dtype": "int16", "scale_factor": 0.001, "add_offset": 35.0, "_FillValue": -32768,
        }
        ds["time"].encoding = {"units": "days since 2026-01-01", "calendar": "proleptic_gregorian"}
        return ds


    POINT = np.dtype([("id", "<i4"), ("depth", "<f8"), ("ok", "?")])


    def points(survey):
        x = np.zeros(10, dtype=POINT)
        x["id"] = np.arange(10) + 100 * survey
        x["depth"] = np.linspace(5.0, 50.0, 10) * survey
        x["ok"] = (np.arange(10) + survey) % 2 == 0
        return x


    def write_points(store, survey, create):
        if create:
            arr = zarr.create_array(store, name="points", shape=(10,), chunks=(4,), dtype=POINT,
                                    zarr_format=3)
        else:
            arr = zarr.open_array(store, path="points", mode="r+")
        arr[...] = points(survey)


    path = fresh("ocean.icechunk")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    commits = {}

    session = repo.writable_session("main")
    surface(slice(0, 12)).to_zarr(session.store, group="surface", zarr_format=3, consolidated=False)
    write_points(session.store, 1, create=True)
    commits["first"] = session.commit("surface: first 12 days; points: survey 1")
    repo.create_tag("v1", snapshot_id=commits["first"])
    time.sleep(1.5)

    session = repo.writable_session("main")
    surface(slice(12, 18)).to_zarr(session.store, group="surface", append_dim="time", consolidated=False)
    commits["appended"] = session.commit("surface: 6 more days")
    time.sleep(1.5)

    repo.create_branch("experiment", snapshot_id=commits["appended"])
    session = repo.writable_session("experiment")
    doubled = surface(slice(0, 18))
    doubled["temp"] = doubled["temp"] * 2
    doubled[["temp"]].to_zarr(session.store, group="surface", mode="r+", consolidated=False)
    commits["experiment"] = session.commit("experiment: temperature doubled")
    time.sleep(1.5)

    session = repo.writable_session("main")
    write_points(session.store, 2, create=False)
    commits["points2"] = session.commit("points: survey 2")

    log = {
        branch: [
            {
                "id": s.id,
                "parent_id": s.parent_id,
                "written_at": s.written_at.isoformat(),
                "written_at_us": int(s.written_at.timestamp() * 1_000_000),
                "message": s.message,
            }
            for s in repo.ancestry(branch=branch)
        ]
        for branch in ["main", "experiment"]
    }
    first_at = repo.readonly_session(snapshot_id=commits["first"]).snapshot_id
    info = {s["id"]: s for s in log["main"]}
    # Half a second after the first commit: before the second (1.5 s later).
    as_of_first = (
        dt.datetime.fromisoformat(info[commits["first"]]["written_at"]) + dt.timedelta(seconds=0.5)
    ).astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    EXPECTED["ocean"] = {
        "commits": commits,
        "log": log,
        "branches": sorted(repo.list_branches()),
        "tags": sorted(repo.list_tags()),
        "as_of_first": as_of_first,
        "versions": {
            "main": version_answers(repo.readonly_session(branch="main")),
            "v1": version_answers(repo.readonly_session(tag="v1")),
            "appended": version_answers(repo.readonly_session(snapshot_id=commits["appended"])),
            "experiment": version_answers(repo.readonly_session(branch="experiment")),
        },
    }



def write_virtual():
    """nc/*.nc and the virtual repositories over them."""
    from virtualizarr import open_virtual_dataset  # noqa: E402
    from virtualizarr.parsers import HDFParser  # noqa: E402
    from obstore.store import LocalStore  # noqa: E402
    from virtualizarr.registry import ObjectStoreRegistry  # noqa: E402

    nc = HERE / "nc"
    if nc.exists():
        shutil.rmtree(nc)
    nc.mkdir()
    days = []
    for day in range(2):
        ds = xr.Dataset(
            {"sst": (("time", "y", "x"), (280 + day + np.arange(12, dtype="float32").reshape(1, 3, 4) / 4),
                     {"units": "K"})},
            coords={"time": pd.date_range("2026-02-01", periods=2, freq="D")[day:day + 1],
                    "y": np.array([1.0, 2.0, 3.0]), "x": np.array([10, 20, 30, 40], dtype="int32")},
            attrs={"title": "virtual sst"},
        )
        ds.to_netcdf(nc / f"day{day}.nc", engine="h5netcdf", encoding={"time": {"units": "days since 2026-01-01"}})
        days.append(ds)

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    virtual = [
        open_virtual_dataset(url=f"file://{nc}/day{day}.nc", parser=HDFParser(), registry=registry,
                             loadable_variables=["time", "y", "x"])
        for day in range(2)
    ]
    vds = xr.concat(virtual, dim="time", coords="minimal", compat="override", combine_attrs="override")
    from_files = xr.concat([xr.open_dataset(nc / f"day{d}.nc", engine="h5netcdf").load() for d in range(2)], dim="time")

    # Local: a container named `nc`, references relative to it.
    path = fresh("virtual_local.icechunk")
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(f"file://{nc}/", icechunk.local_filesystem_store(str(nc)), name="nc")
    )
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)), config,
        authorize_virtual_chunk_access={f"file://{nc}/": None},
    )
    session = repo.writable_session("main")
    relative = vds.vz.rename_paths(lambda p: "vcc://nc/" + p.rsplit("/", 1)[1])
    relative.vz.to_icechunk(session.store, validate_containers=False, last_updated_at=LAST_UPDATED)
    session.commit("virtual: two netCDF days")
    read = xr.open_zarr(repo.readonly_session(branch="main").store, consolidated=False).load()
    xr.testing.assert_identical(read.drop_attrs(), from_files.drop_attrs())
    EXPECTED["virtual"] = {"table": dataframe_table(read), "container": "nc"}

    # S3: VirtualiZarr's default, absolute URLs in the bucket the tests upload the files to.
    # The bucket and path the S3 tests upload tests/data/ to.
    S3_PREFIX = "s3://data/tests/data/icechunk/nc/"
    path = fresh("virtual_s3.icechunk")
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(S3_PREFIX, icechunk.s3_store(region="us-east-1", allow_http=True))
    )
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)), config)
    session = repo.writable_session("main")
    absolute = vds.vz.rename_paths(lambda p: S3_PREFIX + p.rsplit("/", 1)[1])
    absolute.vz.to_icechunk(session.store, last_updated_at=LAST_UPDATED)
    session.commit("virtual: two netCDF days on S3")
    EXPECTED["virtual_s3"] = {"container": S3_PREFIX}



def write_sharded():
    """sharded.icechunk: a sharded array and an uncompressed one (read through partial
    decoders: byte ranges of a chunk or shard)."""
    path = fresh("sharded.icechunk")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    grid = (np.arange(8 * 6, dtype="int32").reshape(8, 6) * 7) % 50
    arr = zarr.create_array(session.store, name="sharded", shape=grid.shape, chunks=(2, 3),
                            shards=(4, 6), dtype="int32", zarr_format=3)
    arr[...] = grid
    plain = np.linspace(-1.0, 1.0, 40).reshape(10, 4)
    arr = zarr.create_array(session.store, name="plain", shape=plain.shape, chunks=(5, 4),
                            dtype="float64", compressors=None, zarr_format=3)
    arr[...] = plain
    session.commit("a sharded and an uncompressed array")
    read = repo.readonly_session(branch="main").store
    sharded = zarr.open_array(read, path="sharded", mode="r")[...]
    plain = zarr.open_array(read, path="plain", mode="r")[...]
    EXPECTED["sharded"] = {
        "sharded": {"values": sharded.reshape(-1).tolist(), "shape": list(sharded.shape)},
        "plain": {"values": [repr(float(v)) for v in plain.reshape(-1)], "shape": list(plain.shape)},
    }


FIXTURES = {"ocean": write_ocean, "virtual": write_virtual, "sharded": write_sharded}
# `make_fixtures.py sharded` writes that fixture alone, keeping the others' answers.
chosen = sys.argv[1:] or list(FIXTURES)
if sys.argv[1:]:
    EXPECTED.update(json.loads((HERE / "expected.json").read_text()))
for name in chosen:
    FIXTURES[name]()
(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", HERE)
