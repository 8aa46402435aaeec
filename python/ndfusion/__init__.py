"""ndfusion from Python: its own session (`SessionContext`: every kind's `STORED AS`, the
table functions, the optimizer rules such as the grid aggregate, `SET ndfusion.*`, `COPY`),
whose results (`DataFrame`) go to pyarrow, pandas and polars through the Arrow C stream
interface; its tables for datafusion-python (Zarr arrays, groups and collections, netCDF and
HDF5 files, Icechunk repositories, lance-nd tables), with their filters pushed into the scan
as in Rust; and lance-nd tables written from and read into xarray Datasets."""

_SUPPORTED_MAJOR = 54


def _check_datafusion() -> None:
    """Refuses another datafusion major before a table crosses the FFI to it (mismatched
    majors can crash the process there). Called by the FFI path only, so `import ndfusion`
    and its own session do not import datafusion-python (0.3 s)."""
    import datafusion

    major = int(datafusion.__version__.split(".")[0])
    if major != _SUPPORTED_MAJOR:
        raise ImportError(
            f"ndfusion needs datafusion {_SUPPORTED_MAJOR}.x, found datafusion "
            f"{datafusion.__version__}: pip install "
            f"'datafusion>={_SUPPORTED_MAJOR},<{_SUPPORTED_MAJOR + 1}'"
        )


from ._ndfusion import (
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
from .nd_batches import read_nd_batches, write_nd_batches

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


def register_table_factories(ctx: "datafusion.SessionContext") -> None:  # noqa: F821
    """Lets `ctx` (a datafusion-python session) run `CREATE EXTERNAL TABLE ... STORED AS
    <kind>` for every kind of table ndfusion reads (`table_kinds()`: ZARR, NETCDF, HDF5,
    ICECHUNK, LANCE_ND)."""
    _check_datafusion()
    for fmt in table_kinds():
        ctx.register_table_factory(fmt, TableFactory(fmt))
