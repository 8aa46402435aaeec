"""Writes `virtualizarr.json`: VirtualiZarr 2.8.0's Kerchunk references (`.vz.to_kerchunk`,
format "json") to `demo.nc` (written by make_fixtures.py), and `expected_virtualizarr.json`:
what xarray 2026.9.0 reads through fsspec's reference file system from them.

VirtualiZarr needs its own environment (as tests/data/icechunk/make_fixtures.py):

    PYENV_VERSION=3.12.1 python3.12 -m venv /tmp/icevenv
    /tmp/icevenv/bin/pip install xarray==2026.9.0 zarr==3.4.2 virtualizarr==2.8.0 \
        h5py==3.16.0 pandas fsspec
    /tmp/icevenv/bin/python tests/data/kerchunk/make_virtualizarr.py

VirtualiZarr names the file by its absolute path. The references are written for a copy of
demo.nc at `/tmp/ndfusion-virtualizarr/demo.nc`; the tests replace that folder with their
own. What differs from kerchunk's references of the same file (and what xarray then shows):
the fill value of every variable is in `.zarray` (so `land`, uint8 with fill 255, is masked
and shows as float32), and `_FillValue` attributes are base64 strings of the value's bytes.
"""

import json
import shutil
import sys
import warnings
from pathlib import Path

import fsspec
import virtualizarr
import xarray as xr
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset
from virtualizarr.parsers import HDFParser

assert xr.__version__ == "2026.9.0", xr.__version__
assert virtualizarr.__version__.startswith("2.8."), virtualizarr.__version__
warnings.filterwarnings("ignore")
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from fixture_common import dataframe_table  # noqa: E402

FOLDER = Path("/tmp/ndfusion-virtualizarr")
shutil.rmtree(FOLDER, ignore_errors=True)
FOLDER.mkdir()
shutil.copy(HERE / "demo.nc", FOLDER / "demo.nc")

registry = ObjectStoreRegistry({"file://": LocalStore()})
vds = open_virtual_dataset(f"file://{FOLDER}/demo.nc", registry=registry, parser=HDFParser())
out = FOLDER / "virtualizarr.json"
vds.vz.to_kerchunk(str(out), format="json")
refs = json.loads(out.read_text())
paths = {v[0] for v in refs["refs"].values() if isinstance(v, list)}
assert paths == {f"{FOLDER}/demo.nc"}, paths

fs = fsspec.filesystem("reference", fo=str(out), remote_protocol="file")
through = xr.open_dataset(fs.get_mapper(""), engine="zarr", consolidated=False, zarr_format=2)
# The values are the netCDF file's; only `land`'s type and mask differ (see above).
reference = xr.open_dataset(HERE / "demo.nc")
for name in ("temp", "pres", "time", "lat", "lon"):
    xr.testing.assert_equal(through[name].load(), reference[name].load())
assert str(through["land"].dtype) == "float32"

(HERE / "virtualizarr.json").write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n")
expected = {"demo": dataframe_table(through.load())}
(HERE / "expected_virtualizarr.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
shutil.rmtree(FOLDER)
print("wrote virtualizarr.json, expected_virtualizarr.json")
