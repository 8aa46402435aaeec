"""lance-nd tables written by pylance 14.0.2 with pyarrow, in the layout of the lance-nd
"Table Layout" page (../../../shared/seeds/001_*.txt) and nd-arrow-array's encoding.

    PYENV_VERSION=3.12.1 python3.12 -m pip install pylance==14.0.2 pyarrow numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/lance_nd/make_fixtures.py

expected.json holds, per table, every row as nd arrays (values, dim_names, dim_sizes, attrs)
plus global attributes, and the numpy aggregates the SQL tests assert.
"""

import json
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

assert lance.__version__ == "14.0.2", lance.__version__
HERE = Path(__file__).resolve().parent
EXT = {"ARROW:extension:name": "nd_arrow.array", "ARROW:extension:metadata": '{"version":1}'}
GEXT = {"ARROW:extension:name": "nd_arrow.global_attributes", "ARROW:extension:metadata": '{"version":1}'}
META = {"lance_nd:format": "1"}
expected = {}


def nd_type(value_type, attrs=None):
    fields = [
        pa.field("values", pa.list_(pa.field("item", value_type, True)), False),
        pa.field("dim_names", pa.list_(pa.field("item", pa.utf8(), False)), False),
        pa.field("dim_sizes", pa.list_(pa.field("item", pa.uint32(), False)), False),
    ]
    if attrs:
        fields.append(pa.field("attrs", pa.struct(attrs), False))
    return pa.struct(fields)


def nd_field(name, value_type, attrs=None):
    return pa.field(name, nd_type(value_type, attrs), True, metadata=EXT)


def globals_field(keys):
    return pa.field("__global_attrs__", pa.struct([pa.field(k, t, True) for k, t in keys]), True, metadata=GEXT)


def nd(values, dims, attrs=None):
    values = np.asarray(values)
    assert values.size == int(np.prod([s for _, s in dims])) if dims else values.size == 1
    row = {"values": values.reshape(-1).tolist(), "dim_names": [n for n, _ in dims], "dim_sizes": [s for _, s in dims]}
    if attrs is not None:
        row["attrs"] = attrs
    return row


def fresh(name):
    path = HERE / name
    if path.exists():
        shutil.rmtree(path)
    return str(path)


def record(name, uri):
    ds = lance.dataset(uri)
    expected.setdefault(name, {})["rows"] = ds.to_table().to_pylist()
    expected[name]["schema"] = str(ds.schema)


def write(uri, table, mode="create"):
    return lance.write_dataset(table, uri, mode=mode, data_storage_version="2.2")


# 1. The documentation's example: three nd record batches.
temp_attrs = [pa.field("units", pa.utf8(), True)]
schema = pa.schema([
    nd_field("x", pa.float64()),
    nd_field("y", pa.float64()),
    nd_field("temperature", pa.float32(), temp_attrs),
    nd_field("pressure", pa.float64()),
    globals_field([("id", pa.utf8())]),
], metadata=META)
temp_a = (np.arange(12, dtype=np.float32).reshape(3, 4) / 2 + 10)
temp_c = (np.arange(8, dtype=np.float32).reshape(2, 4) * -1.5)
rows = {
    "x": [nd([0.0, 0.5, 1.0], [("x", 3)]), None, nd([5.0, 6.0], [("x", 2)])],
    "y": [nd([10.0, 20.0, 30.0, 40.0], [("y", 4)]), None, nd([1.0, 2.0, 3.0, 4.0], [("y", 4)])],
    "temperature": [nd(temp_a, [("x", 3), ("y", 4)], {"units": "K"}), None, nd(temp_c, [("x", 2), ("y", 4)], {"units": None})],
    "pressure": [None, nd([1000.0, 1001.5, 999.0], [("station", 3)]), None],
    "__global_attrs__": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
}
uri = fresh("doc_example.lance")
write(uri, pa.table(rows, schema=schema))
record("doc_example", uri)
expected["doc_example"]["sql"] = {
    "cells": 12 + 3 + 8,
    "sum_temperature": float(temp_a.astype(np.float64).sum() + temp_c.astype(np.float64).sum()),
    "sum_temperature_a": float(temp_a.astype(np.float64).sum()),
    # x broadcast over y in batch a: sum over the 3 x 4 grid
    "sum_x_a": float(np.broadcast_to(np.array([0.0, 0.5, 1.0])[:, None], (3, 4)).sum()),
    "sum_pressure": 1000.0 + 1001.5 + 999.0,
}

# 2. A table whose schema grew over three appends (pylance's add_columns, then append).
uri = fresh("evolved.lance")
s1 = pa.schema([nd_field("temperature", pa.float64()), globals_field([("id", pa.utf8())])], metadata=META)
t1 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
ds = write(uri, pa.table({"temperature": [nd(t1, [("x", 2), ("y", 3)])], "__global_attrs__": [{"id": "a"}]}, schema=s1))
# Append 2: a new array (salinity) and a new attribute key on temperature.
ds.add_columns(pa.schema([nd_field("salinity", pa.float32())]))
ds.add_columns(pa.schema([pa.field("temperature", pa.struct([pa.field("attrs", pa.struct([pa.field("units", pa.utf8(), True)]), True)]), True)]))
ds = lance.dataset(uri)
s2 = ds.schema
t2 = np.array([7.0, 8.0])
sal2 = np.array([35.0, 35.5], dtype=np.float32)
write(uri, pa.table({
    "temperature": [nd(t2, [("x", 2)], {"units": "C"})],
    "__global_attrs__": [{"id": "b"}],
    "salinity": [nd(sal2, [("x", 2)])],
}, schema=s2), mode="append")
# Append 3: a new global attribute key.
ds = lance.dataset(uri)
ds.add_columns(pa.schema([pa.field("__global_attrs__", pa.struct([pa.field("group", pa.utf8(), True)]), True)]))
ds = lance.dataset(uri)
write(uri, pa.table({
    "temperature": [nd([9.0], [])],
    "__global_attrs__": [{"id": "c", "group": "g1"}],
    "salinity": [None],
}, schema=ds.schema), mode="append")
record("evolved", uri)
expected["evolved"]["sql"] = {"cells": 6 + 2 + 1, "sum_temperature": float(t1.sum() + t2.sum() + 9.0), "sum_salinity": float(sal2.astype(np.float64).sum())}

# 3. Thousands of rows, a BTREE index on __global_attrs__.id.
N = 3000
rng = np.random.default_rng(7)
uri = fresh("many.lance")
schema = pa.schema([nd_field("v", pa.float64()), globals_field([("id", pa.utf8()), ("group", pa.utf8())])], metadata=META)
vs, gs, lens = [], [], []
for i in range(N):
    n = int(rng.integers(1, 20))
    v = np.round(rng.normal(0, 1, n), 6)
    vs.append(nd(v, [("t", n)]))
    gs.append({"id": f"id{i:05d}", "group": f"g{i % 10}"})
    lens.append((n, float(v.sum())))
ds = write(uri, pa.table({"v": vs, "__global_attrs__": gs}, schema=schema))
ds.create_scalar_index("__global_attrs__.id", "BTREE")
expected["many"] = {"sql": {
    "rows": N,
    "cells": sum(n for n, _ in lens),
    "cells_id01234": lens[1234][0],
    "sum_v_id01234": lens[1234][1],
    "cells_g3": sum(n for i, (n, _) in enumerate(lens) if i % 10 == 3),
}, "indices": [i["name"] for i in ds.list_indices()]}

# 5. `__stats__:v` columns ({min, max} of each row's values, the lance-nd convention) written
# by pylance over three appends (three fragments): the third fragment's row has v but no
# statistics, as a writer that does not keep them would leave it; a row without v has w.
uri = fresh("stats.lance")
schema = pa.schema([
    nd_field("v", pa.float64()),
    nd_field("w", pa.int32()),
    pa.field("__stats__:v", pa.struct([pa.field("min", pa.float64(), True), pa.field("max", pa.float64(), True)]), True),
    globals_field([("id", pa.utf8())]),
], metadata=META)
fragments = [
    [("p", np.array([3.5, -2.0, 7.25, 0.0]), None), ("q", np.array([[1.5, 9.0], [4.0, -6.5]]), None)],
    [("r", np.array([11.0, 2.0]), None), ("s", None, np.array([1, 2, 3], dtype=np.int32))],
    [("u", np.array([100.0, -100.0, 5.0]), None)],
]
summary = []
for n, rows in enumerate(fragments):
    vs, ws, st, gs = [], [], [], []
    for id_, v, w in rows:
        if v is None:
            vs.append(None)
            st.append(None)
        else:
            vs.append(nd(v, [("t", v.shape[0])] if v.ndim == 1 else [("t", v.shape[0]), ("k", v.shape[1])]))
            st.append(None if n == 2 else {"min": float(v.min()), "max": float(v.max())})
        ws.append(None if w is None else nd(w, [("station", w.shape[0])]))
        gs.append({"id": id_})
    write(uri, pa.table({"v": vs, "w": ws, "__stats__:v": st, "__global_attrs__": gs}, schema=schema), mode="create" if n == 0 else "append")
    cells = [v.size if v is not None else w.size for _, v, w in rows]
    t_sizes = [v.shape[0] for _, v, _ in rows if v is not None]
    values = [v for _, v, _ in rows if v is not None]
    summary.append({
        "cells": int(sum(cells)),
        "t_max": int(max(t_sizes)) - 1,
        "t_nulls": int(sum(c for c, (_, v, _) in zip(cells, rows) if v is None)),
        "v_min": float(min(v.min() for v in values)),
        "v_max": float(max(v.max() for v in values)),
    })
ds = lance.dataset(uri)
expected["stats"] = {"fragments": summary, "fragment_rows": [f.count_rows() for f in ds.get_fragments()]}

# 4. Bad input: a Lance table without the lance-nd marker, and a row that breaks the rules
# (5 values for dimensions x=2, y=3).
write(fresh("bad_no_marker.lance"), pa.table({"a": [1, 2]}))
schema = pa.schema([nd_field("temperature", pa.float64()), globals_field([("id", pa.utf8())])], metadata=META)
write(fresh("bad_row.lance"), pa.table({
    "temperature": [nd([1.0, 2.0], [("x", 2)]), {"values": [1.0, 2.0, 3.0, 4.0, 5.0], "dim_names": ["x", "y"], "dim_sizes": [2, 3]}],
    "__global_attrs__": [{"id": "ok"}, {"id": "broken"}],
}, schema=schema))

(HERE / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
print("wrote", ", ".join(sorted(expected)))
