"""Zarr v3 fixtures with the legacy `structured` data type, written by zarr-python 3.1.x.

    python3.11 -m venv /tmp/zp31 && /tmp/zp31/bin/pip install zarr==3.1.6 numpy
    /tmp/zp31/bin/python tests/data/zarr_v3_structured/make_fixtures.py

Same arrays as tests/data/zarr_v3 (see ../fixture_common.py); expected.json holds what numpy
reads back.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec, GzipCodec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fixture_common import GRID, GRID_CHUNKS, GRID_SHAPE, POINT, POINT_FILL, Recorder, grid_data, point_data  # noqa: E402

assert zarr.__version__.startswith("3.1."), zarr.__version__
warnings.filterwarnings("ignore")  # "structured has no v3 spec"

rec = Recorder(__file__)

store = rec.fresh("struct_1d.zarr")
a = zarr.create_array(store, shape=(10,), chunks=(4,), dtype=POINT, fill_value=POINT_FILL)
a[0:8] = point_data(8)
rec.record("struct_1d", store, ["dim_0"])

store = rec.fresh("grid_2d.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID,
                      fill_value=np.zeros((), dtype=GRID)[()], dimension_names=["time", "station"],
                      compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")])
a[...] = grid_data()
rec.record("grid_2d", store, ["time", "station"])

# (zarr-python 3.1.6 cannot write sharded structured arrays: its sharding codec fails on
# the void fill value, so there is no sharded fixture here.)
store = rec.fresh("grid_2d_gzip.zarr")
a = zarr.create_array(store, shape=GRID_SHAPE, chunks=GRID_CHUNKS, dtype=GRID,
                      fill_value=np.zeros((), dtype=GRID)[()], dimension_names=["time", "station"],
                      compressors=[GzipCodec(level=1)])
a[...] = grid_data()
rec.record("grid_2d_gzip", store, ["time", "station"])

rec.write()
