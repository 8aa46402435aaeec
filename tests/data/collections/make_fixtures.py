"""Writes the collection fixtures of ndfusion's tests: many Zarr stores of one shape, each with
attributes saying what it is. zarr-python 3.4.2 writes the arrays, xarray 2026.9.0 the groups.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install zarr==3.4.2 xarray==2026.9.0 numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/collections/make_fixtures.py

`expected.json` holds what numpy computes over the members (per member and in all).
"""

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import zarr

assert zarr.__version__ == "3.4.2", zarr.__version__
assert xr.__version__ == "2026.9.0", xr.__version__
warnings.filterwarnings("ignore")

HERE = Path(__file__).resolve().parent
EXPECTED = {"floats": {}, "groups": {}}

PROFILE = np.dtype([("pres", "<f4"), ("temp", "<f4"), ("qc", "u1")])
EXTRA = np.dtype([("pres", "<f4"), ("temp", "<f4"), ("qc", "u1"), ("salt", "<f8")])
WIDER = np.dtype([("pres", "<f4"), ("temp", "<f8"), ("qc", "u1")])


def fresh(path):
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def profile(n, seed, dtype=PROFILE):
    rng = np.random.default_rng(seed)
    data = np.zeros(n, dtype=dtype)
    data["pres"] = np.arange(n, dtype="float32") * 10
    data["temp"] = (20 - np.arange(n) * 0.5 + rng.normal(0, 0.1, n)).astype(dtype["temp"])
    data["qc"] = (np.arange(n) % 4).astype("uint8")
    if "salt" in dtype.names:
        data["salt"] = 35 + np.arange(n) * 0.01
    return data


def write(path, data, attrs, chunk=4):
    a = zarr.create_array(fresh(path), shape=data.shape, chunks=(chunk,), dtype=data.dtype,
                          fill_value=np.zeros((), dtype=data.dtype)[()], dimension_names=["level"],
                          attributes=attrs)
    a[...] = data
    return a


# floats/: four profiles; f3 has an extra field; f4 has a corrupt chunk.
floats = {
    "f1": (profile(10, 1), {"id": "f1", "platform_number": 4901, "active": True, "depth": 5, "project": "argo"}),
    "f2": (profile(7, 2), {"id": "f2", "platform_number": 4902, "active": False, "depth": 7.5, "project": "argo"}),
    "f3": (profile(9, 3, EXTRA), {"id": "f3", "platform_number": 4903, "active": True, "project": "bgc"}),
    "f4": (profile(6, 4), {"id": "f4", "platform_number": 4904, "active": True, "depth": 2, "project": "argo"}),
}
for name, (data, attrs) in floats.items():
    write(HERE / "floats" / f"{name}.zarr", data, attrs)
    EXPECTED["floats"][name] = {
        "rows": int(data.shape[0]),
        "temp_sum": repr(float(data["temp"].astype("float64").sum())),
        "pres_max": repr(float(data["pres"].max())),
        "qc3": int((data["qc"] == 3).sum()),
        "attrs": attrs,
    }
EXPECTED["floats"]["f3"]["salt_sum"] = repr(float(floats["f3"][0]["salt"].sum()))
EXPECTED["floats"]["f3"]["salt_above_35_05"] = int((floats["f3"][0]["salt"] > 35.05).sum())
# project argo without f4, levels 0..2: f1 and f2.
EXPECTED["floats"]["argo_but_f4_levels_0_2_temp_sum"] = repr(float(sum(
    floats[f][0]["temp"][:3].astype("float64").sum() for f in ("f1", "f2"))))
# f4's second chunk (levels 4..5) is garbage: only a filter that excludes f4 reads the rest.
(HERE / "floats" / "f4.zarr" / "c" / "1").write_bytes(b"garbage, not zstd")

# A nested layout for `**`: regions/<area>/<id>/profile.zarr.
for area, ids in {"north": ["n1", "n2"], "south": ["s1"]}.items():
    for i, pid in enumerate(ids):
        data = profile(5 + i, 10 + i)
        write(HERE / "regions" / area / pid / "profile.zarr", data, {"id": pid, "area": area})
        EXPECTED.setdefault("regions", {})[pid] = {"rows": int(data.shape[0])}

# bad_types/: the field `temp` is float32 in one member, float64 in the other.
write(HERE / "bad_types" / "a.zarr", profile(4, 5), {"id": "a"})
write(HERE / "bad_types" / "b.zarr", profile(4, 6, WIDER), {"id": "b"})

# bad_attrs/: the attribute `depth` is a number in one member, a string in the other.
write(HERE / "bad_attrs" / "a.zarr", profile(4, 7), {"id": "a", "depth": 5})
write(HERE / "bad_attrs" / "b.zarr", profile(4, 8), {"id": "b", "depth": "shallow"})

# groups/: daily mooring datasets written by xarray, one per station.
for i, station in enumerate(["m1", "m2", "m3"]):
    time = pd.date_range("2020-01-01", periods=6 + i, freq="D")
    ds = xr.Dataset(
        {"speed": (("time",), np.arange(len(time), dtype="float64") * (i + 1))},
        coords={"time": time},
        attrs={"id": station, "depth_m": 10 * (i + 1)},
    )
    path = fresh(HERE / "groups" / f"{station}.zarr")
    ds.to_zarr(path, zarr_format=3, consolidated=True)
    EXPECTED["groups"][station] = {
        "rows": len(time),
        "speed_sum": repr(float(ds.speed.sum())),
    }

(HERE / "expected.json").write_text(json.dumps(EXPECTED, indent=1, sort_keys=True) + "\n")
print("wrote", sorted(EXPECTED))
