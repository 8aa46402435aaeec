"""xarray Datasets as the nd record batches of lance-nd tables.

One Dataset is one nd record batch (one table row): each of its variables, coordinates
included, is a named array with its dimensions and attributes; `ds.attrs` are the global
attributes. Missing values (NaN, NaT) are stored as Arrow nulls, so SQL aggregates skip them
as xarray's do, and read back as NaN/NaT. Coordinates that are not dimensions are named in a
`coordinates` attribute, as xarray does in netCDF and Zarr, and become coordinates again on
read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np
import pyarrow as pa

from . import _ndfusion
from ._ndfusion import Error

if TYPE_CHECKING:
    import xarray


def write_nd_batches(
    location: str,
    datasets: "xarray.Dataset | Iterable[xarray.Dataset]",
    options: Mapping[str, object] | None = None,
) -> None:
    """Appends `datasets` (one Dataset or several) to the lance-nd table at `location` in one
    commit, creating it when nothing is there; a write with new variables or attribute keys
    adds them to the table's schema first. `options`: `casting` (`no`, `safe`, `unsafe`),
    `statistics` (`true`, `false`) and the storage settings of SQL's `OPTIONS`."""
    import xarray as xr

    if isinstance(datasets, xr.Dataset):
        datasets = [datasets]
    batches = [_batch_of(ds, i) for i, ds in enumerate(datasets)]
    _ndfusion.write_nd_batches(str(location), batches, _strings(options))


def read_nd_batches(
    location: str,
    filter: str | None = None,
    options: Mapping[str, object] | None = None,
) -> "list[xarray.Dataset]":
    """The rows of the lance-nd table at `location` that pass `filter` (Lance SQL on
    `__global_attrs__`, such as `"__global_attrs__.id = 'a'"`), one Dataset each. `options`:
    `arrays` (comma-separated names to read) and the storage settings of SQL's `OPTIONS`."""
    batches = _ndfusion.read_nd_batches(str(location), filter, _strings(options))
    return [_dataset_of(arrays, globals_) for arrays, globals_ in batches]


def _strings(options: Mapping[str, object] | None) -> dict[str, str] | None:
    if options is None:
        return None
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}


# Writing: Dataset -> (arrays, global attributes)


def _batch_of(ds: "xarray.Dataset", index: int):
    attrs = {name: dict(var.attrs) for name, var in ds.variables.items()}
    global_attrs = dict(ds.attrs)
    _encode_coordinates(ds, attrs, global_attrs)
    arrays = []
    for name, var in ds.variables.items():
        what = f"dataset {index}, variable '{name}'"
        arrays.append((
            str(name),
            _values(var.values, what),
            [str(d) for d in var.dims],
            [int(s) for s in var.shape],
            _attributes(attrs[name], what),
        ))
    return arrays, _attributes(global_attrs, f"dataset {index}, global attributes")


def _encode_coordinates(ds, attrs, global_attrs) -> None:
    """Names each non-dimension coordinate in the `coordinates` attribute of the data variables
    whose dimensions hold its own, and the rest in a global `coordinates` (xarray's rule)."""
    others = [str(c) for c in ds.coords if c not in ds.dims]
    unattached = set(others)
    for name, var in ds.data_vars.items():
        mine = [c for c in others if set(ds[c].dims) <= set(var.dims)]
        if mine:
            attrs[name]["coordinates"] = " ".join(mine)
            unattached -= set(mine)
    if unattached:
        global_attrs["coordinates"] = " ".join(c for c in others if c in unattached)


def _values(data: np.ndarray, what: str) -> pa.Array:
    flat = np.ravel(data, order="C")
    try:
        # NaN and NaT are missing values: Arrow nulls, which SQL aggregates skip.
        return pa.array(flat, from_pandas=flat.dtype.kind in "fcmM")
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise Error(f"{what}: values of dtype {data.dtype} cannot be stored: {e}") from None


def _attributes(attrs: Mapping, what: str) -> pa.RecordBatch | None:
    if not attrs:
        return None
    names, columns = [], []
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise Error(f"{what}: attribute key {key!r} is not a string")
        if value is None:
            raise Error(f"{what}: attribute '{key}' is None, which has no type to store")
        try:
            columns.append(_one_value(value))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise Error(f"{what}: attribute '{key}' cannot be stored: {e}") from None
        names.append(key)
    return pa.RecordBatch.from_arrays(columns, names=names)


def _one_value(value) -> pa.Array:
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return pa.array(value.reshape(1))
        return pa.array([value.ravel()], type=pa.list_(pa.from_numpy_dtype(value.dtype)))
    if isinstance(value, np.generic):
        return pa.array(np.asarray(value).reshape(1))
    if isinstance(value, tuple):
        value = list(value)
    return pa.array([value])


# Reading: (arrays, global attributes) -> Dataset


def _dataset_of(arrays, globals_) -> "xarray.Dataset":
    import xarray as xr

    attrs = {name: _attribute_dict(a) for name, _, _, _, a in arrays}
    global_attrs = _attribute_dict(globals_)
    coords = {name for name, _, dims, _, _ in arrays if list(dims) == [name]}
    coords |= _decode_coordinates(attrs, global_attrs, {name for name, *_ in arrays})
    variables = {
        name: xr.Variable(tuple(dims), _numpy(values, shape), attrs[name])
        for name, values, dims, shape, _ in arrays
    }
    return xr.Dataset(
        {n: v for n, v in variables.items() if n not in coords},
        coords={n: v for n, v in variables.items() if n in coords},
        attrs=global_attrs,
    )


def _decode_coordinates(attrs, global_attrs, names) -> set[str]:
    """The names in `coordinates` attributes (taken out, as xarray decodes them), where each
    names arrays of the batch."""
    coords = set()
    for holder in [*attrs.values(), global_attrs]:
        listed = str(holder.get("coordinates", "")).split()
        if listed and all(c in names for c in listed):
            coords |= set(listed)
            del holder["coordinates"]
    return coords


def _attribute_dict(batch: pa.RecordBatch | None) -> dict:
    if batch is None:
        return {}
    # A null attribute means that array (or row) does not have it.
    values = ((name, batch.column(i)[0].as_py()) for i, name in enumerate(batch.schema.names))
    return {name: value for name, value in values if value is not None}


def _numpy(values: pa.Array, shape) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False).reshape(tuple(shape))
