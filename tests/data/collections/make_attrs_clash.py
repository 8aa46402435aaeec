"""Writes the collections whose member has a column named `__global_attrs__` (issue 38): in a
collection that name is the column of the members' attributes, so such a member is refused.
zarr-python 3.4.2 writes them.

Run from the repository root:

    PYENV_VERSION=3.12.1 python3.12 -m pip install zarr==3.4.2 numpy
    PYENV_VERSION=3.12.1 python3.12 tests/data/collections/make_attrs_clash.py
"""

import shutil
from pathlib import Path

import numpy as np
import zarr

assert zarr.__version__ == "3.4.2", zarr.__version__

HERE = Path(__file__).resolve().parent
CLASH = np.dtype([("__global_attrs__", "u1"), ("v", "<f4")])


def fresh(path):
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def field_member(path):
    """A struct array with a field named `__global_attrs__` (values 5) and no attributes."""
    data = np.zeros(3, dtype=CLASH)
    data["__global_attrs__"] = 5
    data["v"] = [1.5, 2.5, 3.5]
    a = zarr.create_array(fresh(path), shape=(3,), chunks=(3,), dtype=CLASH,
                          fill_value=np.zeros((), dtype=CLASH)[()], dimension_names=["level"])
    a[...] = data


def attrs_member(path):
    """A plain array with attributes {"id": "b"}."""
    a = zarr.create_array(fresh(path), shape=(3,), chunks=(3,), dtype="<f4", fill_value=0,
                          dimension_names=["level"], attributes={"id": "b"})
    a[...] = np.array([10, 20, 30], dtype="<f4")


def dataset_member(path, clash, attrs):
    """A group: a `level` coordinate and one variable on it, with the group's `attrs`; with
    `clash`, the variable is a struct whose fields (columns of the dataset) are
    `__global_attrs__` (values 5) and `v`. Zarr reserves node names that start with `__`, so
    a variable itself cannot be named so."""
    g = zarr.create_group(fresh(path), attributes=attrs)
    level = g.create_array("level", shape=(3,), dtype="<i8", dimension_names=["level"])
    level[...] = np.arange(3)
    if clash:
        data = np.zeros(3, dtype=CLASH)
        data["__global_attrs__"] = 5
        data["v"] = [1.5, 2.5, 3.5]
        v = g.create_array("flow", shape=(3,), dtype=CLASH, dimension_names=["level"],
                           fill_value=np.zeros((), dtype=CLASH)[()])
        v[...] = data
    else:
        v = g.create_array("temp", shape=(3,), dtype="<f4", dimension_names=["level"])
        v[...] = np.array([1, 2, 3], dtype="<f4")


# The field's member first, then the attributes' member; and the other way round.
field_member(HERE / "attrs_clash" / "a.zarr")
attrs_member(HERE / "attrs_clash" / "b.zarr")
attrs_member(HERE / "attrs_clash_reversed" / "a.zarr")
field_member(HERE / "attrs_clash_reversed" / "b.zarr")
# Datasets: a struct variable's field named `__global_attrs__` in a group without attributes.
dataset_member(HERE / "attrs_clash_datasets" / "a.zarr", True, {})
dataset_member(HERE / "attrs_clash_datasets" / "b.zarr", False, {"id": "b"})
# Alone, with attributes: the field and the attributes' column clash in one dataset.
dataset_member(HERE / "attrs_clash_dataset_alone.zarr", True, {"id": "a"})
