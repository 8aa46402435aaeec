"""Writes the Kerchunk reference fixtures of ndfusion's tests: a netCDF-4 file written by
netCDF4-python 1.7.5 (through xarray 2026.9.0), its references written by kerchunk 0.2.10, and
a raw binary file with hand-written v1 references that use `templates` and `gen`.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install xarray==2026.9.0 zarr==3.4.2 \
        netCDF4==1.7.5 h5py==3.16.0 kerchunk==0.2.10 fsspec jinja2
    PYENV_VERSION=3.12.1 python3.12 tests/data/kerchunk/make_fixtures.py

Files:
- `demo.nc`: time x lat x lon `temp` (float32, zlib + shuffle, chunks 2 x 3 x 4, a _FillValue
  and one masked cell), `pres` (int16 packed with scale_factor / add_offset, one missing),
  `land` (uint8, contiguous), CF times, global attributes.
- `refs_v1.json`: kerchunk's `SingleHdf5ToZarr(inline_threshold=0)`: every chunk a
  `["demo.nc", offset, length]` reference (the URL relative to the reference file).
- `refs.parq/`: the inline references below as kerchunk's Parquet references
  (`kerchunk.df.refs_to_dataframe`, 2 chunks a record).
- `refs_v0_inline.json`: the same references as version 0 (a plain map), chunks under 300
  bytes inline (kerchunk writes them as text or `base64:`).
- `grid.bin`, `refs_gen.json`: 4 x 6 float64 in 2 x 3 chunks stored one after another; the
  chunk keys made by a `gen` entry from a `templates` URL.
- `elsewhere/refs_up.json`: references to `../demo.nc`, outside its own folder.

`expected.json` holds, for `demo`, what `xr.open_dataset("demo.nc").to_dataframe()
.reset_index()` shows (floats as `repr` strings, NaN as null, times as integer nanoseconds),
and for `grid`, what xarray reads through fsspec's reference file system (the reference
implementation of `gen`). The script checks that xarray reads every reference file as it
reads the netCDF file itself.
"""

import base64
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import fsspec
import kerchunk
import netCDF4
import numpy as np
import pandas as pd
import xarray as xr
from kerchunk.df import refs_to_dataframe
from kerchunk.hdf import SingleHdf5ToZarr

assert xr.__version__ == "2026.9.0", xr.__version__
assert kerchunk.__version__ == "0.2.10", kerchunk.__version__
assert netCDF4.__version__ == "1.7.5", netCDF4.__version__
warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import dataframe_table  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPECTED = {}


def open_refs(refs):
    """xarray's reading of references through fsspec, URLs made absolute (fsspec resolves
    relative ones against the working folder, not the reference file)."""
    # simple_templates=False: fsspec renders templates and gen with Jinja (else it skips gen).
    fs = fsspec.filesystem("reference", fo=refs, remote_protocol="file", simple_templates=False)
    return xr.open_dataset(fs.get_mapper(""), engine="zarr", consolidated=False, zarr_format=2)


def absolute(refs):
    def fix(v):
        if isinstance(v, list):
            return [str(HERE / v[0])] + v[1:]
        return v

    out = dict(refs)
    if "refs" in out:
        out["refs"] = {k: fix(v) for k, v in out["refs"].items()}
    if "templates" in out:
        out["templates"] = {k: str(HERE / v) for k, v in out["templates"].items()}
    if "version" not in out:
        out = {k: fix(v) for k, v in out.items()}
    return out


# ---------------------------------------------------------------- demo.nc
time = pd.date_range("2020-01-01", periods=6, freq="D")
lat = np.array([10.0, 20.0, 30.0])
lon = np.array([1.5, 2.5, 3.5, 4.5], dtype="float32")
temp = (np.arange(6 * 3 * 4, dtype="float32").reshape(6, 3, 4) / 4 + 10).astype("float32")
temp[4, 1, 2] = np.nan
pres = np.array([1000.5, 1001.0, np.nan, 1002.5, 999.9, 1000.0])
land = np.array([[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1]], dtype="uint8")
ds = xr.Dataset(
    {
        "temp": (("time", "lat", "lon"), temp, {"units": "degC"}),
        "pres": (("time",), pres, {"units": "hPa"}),
        "land": (("lat", "lon"), land),
    },
    coords={"time": time, "lat": lat, "lon": lon},
    attrs={"title": "kerchunk demo", "id": "demo-1", "version": 2},
)
nc = HERE / "demo.nc"
nc.unlink(missing_ok=True)
ds.to_netcdf(
    nc,
    engine="netcdf4",
    encoding={
        "temp": {"zlib": True, "shuffle": True, "chunksizes": (2, 3, 4), "_FillValue": -999.0},
        "pres": {"dtype": "int16", "scale_factor": 0.1, "add_offset": 1000.0, "_FillValue": -32767},
        "land": {"contiguous": True},
        "time": {"units": "days since 2020-01-01", "calendar": "proleptic_gregorian"},
    },
)
reference = xr.open_dataset(nc)
EXPECTED["demo"] = dataframe_table(reference)

with open(nc, "rb") as f:
    v1 = SingleHdf5ToZarr(f, "demo.nc", inline_threshold=0).translate()
assert v1["version"] == 1
(HERE / "refs_v1.json").write_text(json.dumps(v1, indent=1, sort_keys=True) + "\n")
with open(nc, "rb") as f:
    v0 = SingleHdf5ToZarr(f, "demo.nc", inline_threshold=300).translate()["refs"]
inline = [k for k, v in v0.items() if isinstance(v, str) and "/" in k and not k.split("/")[-1].startswith(".")]
assert any(v0[k].startswith("base64:") for k in inline) and any(not v0[k].startswith("base64:") for k in inline), inline
(HERE / "refs_v0_inline.json").write_text(json.dumps(v0, indent=1, sort_keys=True) + "\n")
for refs in (v1, v0):
    xr.testing.assert_identical(open_refs(absolute(refs)).load(), reference.load())

# refs.parq: the inline references as kerchunk's Parquet references (2 chunks a record, so
# `temp` has two record files; paths categorical). fsspec reads them lazily; xarray's reading
# through it (of a copy with absolute paths) must be the netCDF file's.
parq = HERE / "refs.parq"
shutil.rmtree(parq, ignore_errors=True)
refs_to_dataframe(v0, str(parq), record_size=2, categorical_threshold=10)
with tempfile.TemporaryDirectory() as tmp:
    refs_to_dataframe(absolute(v0), f"{tmp}/refs.parq", record_size=2, categorical_threshold=10)
    fs = fsspec.filesystem("reference", fo=f"{tmp}/refs.parq", remote_protocol="file")
    through = xr.open_dataset(fs.get_mapper(""), engine="zarr", consolidated=False, zarr_format=2)
    xr.testing.assert_identical(through.load(), reference.load())

(HERE / "elsewhere").mkdir(exist_ok=True)
up = json.loads(json.dumps(v1))
up["refs"] = {k: (["../demo.nc"] + v[1:] if isinstance(v, list) else v) for k, v in up["refs"].items()}
(HERE / "elsewhere" / "refs_up.json").write_text(json.dumps(up, indent=1, sort_keys=True) + "\n")

# ---------------------------------------------------------------- grid.bin + gen
grid = np.arange(24, dtype="<f8").reshape(4, 6) * 1.5 - 3
chunks = [grid[i * 2 : i * 2 + 2, j * 3 : j * 3 + 3] for i in range(2) for j in range(2)]
(HERE / "grid.bin").write_bytes(b"".join(np.ascontiguousarray(c).tobytes() for c in chunks))
gen = {
    "version": 1,
    "templates": {"f": "grid.bin"},
    "refs": {
        ".zgroup": json.dumps({"zarr_format": 2}),
        ".zattrs": json.dumps({"source": "hand-written references"}),
        "grid/.zarray": json.dumps(
            {"shape": [4, 6], "chunks": [2, 3], "dtype": "<f8", "fill_value": None, "order": "C",
             "filters": None, "compressor": None, "zarr_format": 2, "dimension_separator": "."}
        ),
        "grid/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"]}),
    },
    "gen": [
        {
            "key": "grid/{{i}}.{{j}}",
            "url": "{{f}}",
            "offset": "{{(i * 2 + j) * 48}}",
            "length": "48",
            "dimensions": {"i": {"stop": 2}, "j": {"start": 0, "stop": 2, "step": 1}},
        }
    ],
}
(HERE / "refs_gen.json").write_text(json.dumps(gen, indent=1) + "\n")
through_fsspec = open_refs(absolute(gen)).load()
np.testing.assert_array_equal(through_fsspec["grid"].values, grid)
EXPECTED["grid"] = dataframe_table(through_fsspec)

# An inline chunk holding bytes that are not UTF-8 is written as base64 (checked above);
# this one spells out the decoding the tests assert for a text one.
assert base64.b64decode("AAEC") == b"\x00\x01\x02"

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", sorted(p.name for p in HERE.iterdir()))
