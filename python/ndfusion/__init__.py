"""ndfusion from Python: its own session (`SessionContext`: every kind's `STORED AS`, the
table functions, the optimizer rules such as the grid aggregate, `SET ndfusion.*`, `COPY`),
whose results (`DataFrame`) go to pyarrow, pandas and polars through the Arrow C stream
interface; its tables for datafusion-python (Zarr arrays, groups and collections, netCDF and
HDF5 files, Icechunk repositories, lance-nd tables), with their filters pushed into the scan
as in Rust; and lance-nd tables written from and read into xarray Datasets."""

import datafusion as _datafusion

_SUPPORTED_MAJOR = 54
_major = int(_datafusion.__version__.split(".")[0])
if _major != _SUPPORTED_MAJOR:
    # A provider built for another DataFusion major can crash the process through the FFI.
    raise ImportError(
        f"ndfusion needs datafusion {_SUPPORTED_MAJOR}.x, found datafusion "
        f"{_datafusion.__version__}: pip install 'datafusion>={_SUPPORTED_MAJOR},<{_SUPPORTED_MAJOR + 1}'"
    )

from ._ndfusion import (  # noqa: E402
    DataFrame,
    Error,
    HDF5Table,
    IcechunkTable,
    LanceNdTable,
    NetCDFTable,
    SessionContext,
    TableFactory,
    ZarrTable,
    table_kinds,
)
from .nd_batches import read_nd_batches, write_nd_batches  # noqa: E402

__all__ = [
    "DataFrame",
    "Error",
    "HDF5Table",
    "IcechunkTable",
    "LanceNdTable",
    "NetCDFTable",
    "SessionContext",
    "ZarrTable",
    "read_nd_batches",
    "register_table_factories",
    "table_kinds",
    "write_nd_batches",
]


def register_table_factories(ctx: _datafusion.SessionContext) -> None:
    """Lets `ctx` run `CREATE EXTERNAL TABLE ... STORED AS <kind>` for every kind of table
    ndfusion reads (`table_kinds()`: ZARR, NETCDF, HDF5, ICECHUNK, LANCE_ND)."""
    for fmt in table_kinds():
        ctx.register_table_factory(fmt, TableFactory(fmt))
