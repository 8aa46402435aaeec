"""Zarr v2 fixtures written by zarr-python 3.4.2 with zarr_format=2.

    PYENV_VERSION=3.12.1 python3.12 tests/data/zarr_v2_by_zarr3/make_fixtures.py

Same arrays as tests/data/zarr_v3 (see ../fixture_common.py), and `fletcher32_odd` (numcodecs'
Fletcher32 over chunks of an odd number of bytes); expected.json holds what numpy reads back.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import zarr
from numcodecs import Fletcher32, Zstd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import GRID, GRID_CHUNKS, GRID_SHAPE, POINT, POINT_FILL, Recorder, grid_data, point_data  # noqa: E402

assert zarr.__version__ == "3.4.2", zarr.__version__
warnings.filterwarnings("ignore")
rec = Recorder(__file__)

store = rec.fresh("struct_1d.zarr")
a = zarr.create_array(store, shape=(10,), chunks=(4,), dtype=POINT, fill_value=POINT_FILL, zarr_format=2)
a[0:8] = point_data(8)
rec.record("struct_1d", store, ["dim_0"])

store = rec.fresh("grid_2d.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID, zarr_format=2,
                      fill_value=np.zeros((), dtype=GRID)[()], attributes={"_ARRAY_DIMENSIONS": ["time", "station"]},
                      compressors=Zstd(level=1))
a[...] = grid_data()
rec.record("grid_2d", store, ["time", "station"])

store = rec.fresh("grid_2d_fortran.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID, zarr_format=2, order="F",
                      fill_value=np.zeros((), dtype=GRID)[()], attributes={"_ARRAY_DIMENSIONS": ["time", "station"]})
a[...] = grid_data()
rec.record("grid_2d_fortran", store, ["time", "station"])

# numcodecs' Fletcher32 over chunks of an odd number of bytes (3 records of 13 bytes), whose
# last byte the checksum counts.
store = rec.fresh("fletcher32_odd.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=(1, 3), dtype=GRID, zarr_format=2,
                      fill_value=np.zeros((), dtype=GRID)[()], attributes={"_ARRAY_DIMENSIONS": ["time", "station"]},
                      filters=[Fletcher32()], compressors=None)
a[...] = grid_data()
rec.record("fletcher32_odd", store, ["time", "station"])

rec.write()
