"""Data and expected values shared by the fixture scripts of every Zarr format.

Each script writes the same arrays with its own zarr-python version, reads them back with that
version and records, in `expected.json` beside it, every leaf column in C order as numpy sees it
(struct fields flattened to dotted paths, complex numbers to `.re` / `.im`, subarray items to
`[i]`). Floats are Python `repr` strings so they compare bit for bit; datetimes are integers in
the Arrow unit ndfusion uses (null for NaT); bytes are hex.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import zarr

POINT = np.dtype([("id", "<i4"), ("flags", "u1"), ("point", [("x", "<f4"), ("y", "<f4")]), ("value", "<f8")])
POINT_FILL = np.array((-1, 255, (np.nan, 0.5), -9.5), dtype=POINT)[()]
GRID = np.dtype([("temp", "<f4"), ("pressure", "<f8"), ("ok", "?")])
GRID_SHAPE = (5, 7)
GRID_CHUNKS = (2, 3)

# Arrow unit multipliers for datetime64/timedelta64 units ndfusion maps (D -> seconds).
TIME_MULTIPLIER = {"s": 1, "ms": 1, "us": 1, "ns": 1, "D": 86400, "h": 3600, "m": 60, "W": 604800}


def point_data(n):
    x = np.zeros(n, dtype=POINT)
    x["id"] = np.arange(n) * 10 - 3
    x["flags"] = (np.arange(n) * 37) % 256
    x["point"]["x"] = np.linspace(-1.5, 2.25, n, dtype=np.float32)
    x["point"]["y"] = np.float32(1) / (np.arange(n, dtype=np.float32) + 3)
    x["value"] = np.sqrt(np.arange(n)) * 1e3
    if n > 2:
        x["value"][2] = np.nan
    return x


def grid_data(shape=GRID_SHAPE, dtype=GRID):
    x = np.zeros(shape, dtype=dtype)
    t, s = np.indices(shape)
    x["temp"] = (t * 1.25 - s * 0.5).astype(np.float32)
    x["pressure"] = 1013.25 + t * 100 + s
    x["ok"] = (t + s) % 3 == 0
    return x


def leaf_values(arr, prefix=""):
    """Flattens a numpy array (C order) into {leaf path: [json values]}."""
    dt = arr.dtype
    out = {}
    if dt.names:
        for name in dt.names:
            path = f"{prefix}.{name}" if prefix else name
            out.update(leaf_values(arr[name], path))
        return out
    flat = arr.reshape(-1)
    kind = dt.kind
    if kind == "c":
        out[f"{prefix}.re"] = [repr(float(v)) for v in flat.real]
        out[f"{prefix}.im"] = [repr(float(v)) for v in flat.imag]
    elif kind == "f":
        out[prefix] = [repr(float(v)) for v in flat]
    elif kind in "iu":
        out[prefix] = [int(v) for v in flat]
    elif kind == "b":
        out[prefix] = [bool(v) for v in flat]
    elif kind in "Mm":
        unit, _ = np.datetime_data(dt)
        ints = flat.view("i8")
        out[prefix] = [None if np.isnat(v) else int(i) * TIME_MULTIPLIER[unit] for v, i in zip(flat, ints)]
    elif kind == "U":
        out[prefix] = [str(v) for v in flat]
    elif kind in "SV":
        out[prefix] = [bytes(v).hex() for v in flat]
    else:
        raise TypeError(dt)
    return out


def subarray_leaves(arr, field):
    """A subarray field ("c", "<f4", (3,)) as one leaf per item: c[0], c[1], ..."""
    out = {}
    items = arr[field].reshape(arr.size, -1)
    for k in range(items.shape[1]):
        out.update(leaf_values(np.ascontiguousarray(items[:, k]), f"{field}[{k}]"))
    return out


class Recorder:
    def __init__(self, here):
        self.here = Path(here).resolve().parent
        self.expected = {}

    def fresh(self, name):
        path = self.here / name
        if path.exists():
            shutil.rmtree(path)
        return str(path)

    def record(self, name, store, dims):
        """Reads the array back with this zarr-python and stores what numpy sees."""
        data = np.asarray(zarr.open_array(store, mode="r")[...])
        columns = {}
        for d, n in enumerate(dims):
            columns[n] = [int(v) for v in np.indices(data.shape)[d].reshape(-1)]
        if data.dtype.names is None:
            columns.update({"value" + k: v for k, v in leaf_values(data).items()})
        else:
            for field in data.dtype.names:
                if data.dtype[field].subdtype is not None:
                    columns.update(subarray_leaves(data, field))
                else:
                    columns.update(leaf_values(data[field], field))
        self.expected[name] = {"shape": list(data.shape), "dims": dims, "columns": columns}

    def write(self):
        (self.here / "expected.json").write_text(json.dumps(self.expected, indent=1, sort_keys=True) + "\n")
        print("wrote", ", ".join(sorted(self.expected)))


def dataframe_column(values):
    """One column of `to_dataframe()` as the dataset fixtures record it (floats as `repr`
    strings, NaN and NaT as null, times as integer nanoseconds since 1970)."""
    import pandas as pd  # only the xarray scripts have it

    if np.issubdtype(values.dtype, np.datetime64):
        return [None if pd.isna(v) else int(v) for v in values.astype("datetime64[ns]").astype("int64")]
    if np.issubdtype(values.dtype, np.floating):
        return [None if np.isnan(v) else repr(float(v)) for v in values]
    if np.issubdtype(values.dtype, np.integer):
        return [int(v) for v in values]
    if values.dtype == bool:
        return [bool(v) for v in values]
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in values]


def dataframe_table(ds):
    """What `ds.to_dataframe().reset_index()` shows, as the dataset fixtures record it: the
    columns in order, their dtypes, the row count, each column's values (`dataframe_column`)
    and the dataset's attributes."""
    df = ds.to_dataframe().reset_index()
    return {
        "columns": list(df.columns),
        "dtypes": {c: str(df[c].dtype) for c in df.columns},
        "rows": len(df),
        "values": {c: dataframe_column(df[c].to_numpy()) for c in df.columns},
        "attrs": {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in ds.attrs.items()},
    }
