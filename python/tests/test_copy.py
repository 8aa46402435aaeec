"""`COPY (query) TO 'out.zarr' STORED AS ZARR`, written by the `ndfusion` command line (built by
`cargo test`, which runs before these tests) and read by zarr-python 3.4.2, the reference reader:
a struct array whose fields, dtypes and values are the query's."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]
NDFUSION = ROOT / "target" / "debug" / "ndfusion"


def ndfusion(sql):
    if not NDFUSION.exists():
        pytest.fail(f"{NDFUSION} is missing: run cargo test (or cargo build) first")
    done = subprocess.run([str(NDFUSION), "--quiet", "--format", "csv", "-c", sql],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


QUERY = """SELECT CAST(value AS INT) AS id, CAST(value % 3 AS TINYINT UNSIGNED) AS flags,
    named_struct('x', CAST(value AS REAL) / 2, 'y', CAST(-value AS REAL)) AS point,
    CAST(value AS DOUBLE) / 10 AS value, value % 2 = 0 AS even,
    CASE WHEN value = 4 THEN NULL ELSE to_timestamp_seconds(value * 3600) END AS t,
    arrow_cast(value, 'Duration(Millisecond)') AS dur
    FROM generate_series(1, 1000) ORDER BY value"""


@pytest.mark.parametrize("compression", ["zstd", "gzip", "none"])
def test_zarr_python_reads_the_querys_rows(tmp_path, compression):
    out = tmp_path / "points.zarr"
    written = ndfusion(f"COPY ({QUERY}) TO '{out}' STORED AS ZARR "
                       f"OPTIONS ('chunks' 'dim_0=300', 'compression' '{compression}')")
    assert written.split() == ["count", "1000"]
    a = zarr.open_array(out, mode="r")
    assert a.metadata.zarr_format == 3
    assert a.shape == (1000,) and a.chunks == (300,)
    assert a.dtype.names == ("id", "flags", "point", "value", "even", "t", "dur")
    assert a.dtype["id"] == np.dtype("<i4") and a.dtype["flags"] == np.dtype("u1")
    assert a.dtype["point"].names == ("x", "y") and a.dtype["point"]["x"] == np.dtype("<f4")
    assert a.dtype["t"] == np.dtype("<M8[s]") and a.dtype["dur"] == np.dtype("<m8[ms]")
    data = a[:]
    v = np.arange(1, 1001)
    np.testing.assert_array_equal(data["id"], v)
    np.testing.assert_array_equal(data["flags"], v % 3)
    np.testing.assert_array_equal(data["point"]["x"], (v / 2).astype("f4"))
    np.testing.assert_array_equal(data["point"]["y"], -v.astype("f4"))
    np.testing.assert_array_equal(data["value"], v / 10)
    np.testing.assert_array_equal(data["even"], v % 2 == 0)
    expected_t = (v * 3600).astype("M8[s]")
    expected_t[3] = np.datetime64("NaT", "s")
    np.testing.assert_array_equal(data["t"], expected_t)
    assert np.isnat(data["t"][3])
    np.testing.assert_array_equal(data["dur"], v.astype("m8[ms]"))
    # A part read alone, across a chunk boundary.
    np.testing.assert_array_equal(a[295:305]["id"], np.arange(296, 306))


def test_an_empty_result_is_an_array_of_no_elements(tmp_path):
    out = tmp_path / "empty.zarr"
    ndfusion(f"COPY (SELECT value, value * 2 AS twice FROM generate_series(1, 10) WHERE value > 10) "
             f"TO '{out}' STORED AS ZARR")
    a = zarr.open_array(out, mode="r")
    assert a.shape == (0,)
    assert a.dtype.names == ("value", "twice")
    assert len(a[:]) == 0


def test_a_failed_copy_leaves_nothing(tmp_path):
    out = tmp_path / "failed.zarr"
    done = subprocess.run(
        [str(NDFUSION), "--quiet", "-c",
         f"COPY (SELECT 1 / (value - 500) AS v FROM generate_series(1, 1000)) TO '{out}' "
         "STORED AS ZARR OPTIONS ('chunks' 'dim_0=100')"],
        capture_output=True, text=True)
    assert done.returncode != 0
    assert "divide by zero" in done.stderr.lower(), done.stderr
    assert list(tmp_path.iterdir()) == []
