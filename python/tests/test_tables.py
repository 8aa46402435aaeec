"""ndfusion's tables through datafusion-python (PyPI `datafusion` 54.x): every answer is
one numpy, pyarrow or xarray computed when the fixtures were written (their expected.json)."""

import datafusion
import pytest

import ndfusion
from answers import DATA, expected, one, plan


@pytest.fixture
def ctx():
    return datafusion.SessionContext()


def test_a_zarr_array_answers_and_selects_chunks(ctx):
    ctx.register_table("s", ndfusion.ZarrTable(str(DATA / "zarr_v3" / "struct_1d.zarr")))
    ids = expected("zarr_v3")["struct_1d"]["columns"]["id"]
    assert one(ctx, "SELECT count(*), sum(id) FROM s") == [len(ids), sum(ids)]
    assert one(ctx, "SELECT sum(id) FROM s WHERE dim_0 >= 8") == [sum(ids[8:])]
    # The scan's own EXPLAIN line crosses the FFI: the dimension filter chose one chunk.
    shown = plan(ctx, "SELECT id FROM s WHERE dim_0 >= 8")
    assert "FFI_ExecutionPlan: ZarrScanExec: array=" in shown, shown
    assert "chunks=1/3, selection=dim_0=[8..10]" in shown, shown


def test_a_dataset_decodes_times_as_xarray_does(ctx):
    ctx.register_table("o", ndfusion.ZarrTable(str(DATA / "datasets" / "ocean_v3.zarr")))
    ocean = expected("datasets")["ocean_v3"]
    assert one(ctx, "SELECT count(*) FROM o") == [ocean["rows"]]
    answers = ocean["answers"]
    count, = one(ctx, "SELECT count(temp) FROM o")
    assert count == answers["count_temp_all"]
    # Scaled, masked and time-decoded values, with coordinate filters choosing 2 of 6 blocks.
    where = "time BETWEEN '2001-03-11' AND '2001-03-20' AND lat > 10"
    mean, count = one(ctx, f"SELECT avg(temp), count(temp) FROM o WHERE {where}")
    assert count == answers["count_temp_11_20_north_of_10"]
    assert mean == pytest.approx(float(answers["avg_temp_11_20_north_of_10"]), rel=1e-6)
    total, = one(ctx, "SELECT sum(sal) FROM o")
    assert total == pytest.approx(float(answers["sum_sal_all"]), rel=1e-12)
    assert one(ctx, "SELECT max(tide) FROM o") == [float(answers["max_tide"])]
    shown = plan(ctx, f"SELECT temp FROM o WHERE {where}")
    assert "FFI_ExecutionPlan: ZarrDatasetScanExec: group=" in shown, shown
    assert "blocks=2/6" in shown, shown


def test_a_kerchunk_reference_file_reads_the_netcdf_file_it_describes(ctx):
    # refs_v1.json: kerchunk 0.2.10's references into demo.nc (netCDF4-python 1.7.5).
    ctx.register_table("k", ndfusion.ZarrTable(str(DATA / "kerchunk" / "refs_v1.json")))
    demo = expected("kerchunk")["demo"]
    temps = [float(t) for t in demo["values"]["temp"] if t is not None]
    count, total = one(ctx, "SELECT count(temp), sum(temp) FROM k")
    assert count == len(temps)
    assert total == pytest.approx(sum(temps), rel=1e-12)
    # References outside the reference file's folder need the option.
    with pytest.raises(Exception, match="virtual_chunk_containers"):
        ndfusion.ZarrTable(str(DATA / "kerchunk" / "elsewhere" / "refs_up.json"))


def test_a_netcdf_file_reads_as_xarray_reads_it(ctx):
    # records.nc: netCDF4-python 1.7.5, CDF-1; xarray 2026.9 computed the answers.
    ctx.register_table("r", ndfusion.NetCDFTable(str(DATA / "netcdf" / "records.nc")))
    records = expected("netcdf")["records"]
    weeks = records["weeks_3_to_5"]
    where = "time >= '2000-01-22' AND time < '2000-02-12'"
    got = one(ctx, f"SELECT count(sst), min(sst), max(sst) FROM r WHERE {where}")
    assert got == [weeks["count"], float(weeks["min"]), float(weeks["max"])]
    count, total = one(ctx, "SELECT count(sst), sum(sst) FROM r")
    assert count == records["count"]
    assert total == pytest.approx(float(records["sum"]), rel=1e-12)
    shown = plan(ctx, f"SELECT sst FROM r WHERE {where}")
    assert "FFI_ExecutionPlan: ZarrDatasetScanExec: group=" in shown, shown
    assert "chunks=[sst 1/3]" in shown, shown
    ndfusion.register_table_factories(ctx)
    ctx.sql(f"CREATE EXTERNAL TABLE c STORED AS NETCDF LOCATION '{DATA / 'netcdf' / 'classic.nc'}'")
    assert one(ctx, "SELECT count(*), count(temp) FROM c") == [60, 59]
    # nc4.nc: netCDF-4 (HDF5, deflate + shuffle chunks); xarray 2026.9's answers.
    ctx.register_table("n", ndfusion.NetCDFTable(str(DATA / "netcdf" / "nc4.nc")))
    assert one(ctx, "SELECT count(temp), sum(temp) FROM n WHERE lon > 101") == [440, 5275.0]
    with pytest.raises(ndfusion.Error, match="'bitshuffle' \\(id 32008\\)"):
        ndfusion.NetCDFTable(str(DATA / "netcdf" / "bitshuffle.nc"))


def test_an_hdf5_dataset_reads_as_h5py_reads_it(ctx):
    # records.h5: h5py 3.16 wrote a compound dataset; h5py's reading is in expected.json.
    path = str(DATA / "hdf5" / "records.h5")
    ctx.register_table("h", ndfusion.HDF5Table(path, {"path": "/obs/records"}))
    rows = expected("hdf5")["records.h5:/obs/records"]["rows"]
    written = [r for r in rows if r["id"] >= 0]
    got = one(ctx, "SELECT count(*), sum(id), sum(meta.level) FROM h WHERE id >= 0")
    assert got == [len(written), sum(r["id"] for r in written),
                   sum(r["meta"]["level"] for r in written)]
    assert "chunks=1/3" in plan(ctx, "SELECT id FROM h WHERE dim_0 >= 4 AND dim_0 < 6")
    with pytest.raises(ndfusion.Error, match="it holds 6 datasets"):
        ndfusion.HDF5Table(path)
    # STORED AS HDF5 too: every kind the extension reads is registered.
    assert ndfusion.table_kinds() == ["ZARR", "NETCDF", "HDF5", "ICECHUNK", "LANCE_ND"]
    ndfusion.register_table_factories(ctx)
    ctx.sql(f"CREATE EXTERNAL TABLE s STORED AS HDF5 LOCATION '{path}' "
            "OPTIONS ('path' '/obs/records')")
    assert one(ctx, "SELECT count(*), sum(id) FROM s WHERE id >= 0") == got[:2]


def test_a_collection_is_chosen_by_its_members_attributes(ctx):
    pattern = str(DATA / "collections" / "floats" / "*.zarr")
    ctx.register_table("f", ndfusion.ZarrTable(pattern))
    floats = expected("collections")["floats"]
    assert one(ctx, "SELECT count(*) FROM f WHERE __global_attrs__.id = 'f2'") == [
        floats["f2"]["rows"]
    ]
    shown = plan(ctx, "SELECT temp FROM f WHERE __global_attrs__.project = 'argo' "
                      "AND __global_attrs__.id <> 'f4' AND level < 3")
    assert "members=2/4" in shown, shown


def test_lance_nd_filters_run_in_lance(ctx):
    ctx.register_table("doc", ndfusion.LanceNdTable(str(DATA / "lance_nd" / "doc_example.lance")))
    sql = expected("lance_nd")["doc_example"]["sql"]
    got = one(ctx, "SELECT sum(temperature), count(*) FROM doc WHERE __global_attrs__.id = 'a'")
    assert got == [sql["sum_temperature_a"], 12]
    assert one(ctx, "SELECT count(*) FROM doc") == [sql["cells"]]
    shown = plan(ctx, "SELECT temperature FROM doc WHERE __global_attrs__.id = 'a'")
    assert "lance_filter=" in shown, shown


def test_stored_as_goes_through_the_factories(ctx):
    ndfusion.register_table_factories(ctx)
    location = DATA / "collections" / "floats" / "*.zarr"
    ctx.sql(f"CREATE EXTERNAL TABLE f STORED AS ZARR LOCATION '{location}'")
    floats = expected("collections")["floats"]
    assert one(ctx, "SELECT count(*) FROM f WHERE __global_attrs__.id = 'f3'") == [
        floats["f3"]["rows"]
    ]
    doc = DATA / "lance_nd" / "doc_example.lance"
    ctx.sql(f"CREATE EXTERNAL TABLE d STORED AS LANCE_ND LOCATION '{doc}'")
    assert one(ctx, "SELECT count(*) FROM d") == [expected("lance_nd")["doc_example"]["sql"]["cells"]]


def test_opening_errors_name_the_path_or_option():
    with pytest.raises(ndfusion.Error, match="nope.zarr"):
        ndfusion.ZarrTable(str(DATA / "nope.zarr"))
    with pytest.raises(ndfusion.Error, match="invalid option 'batch_size'"):
        ndfusion.ZarrTable(str(DATA / "zarr_v3" / "struct_1d.zarr"), {"batch_size": "x"})
    with pytest.raises(ndfusion.Error, match="without the lance-nd marker"):
        ndfusion.LanceNdTable(str(DATA / "lance_nd" / "bad_no_marker.lance"))
    with pytest.raises(ndfusion.Error, match="STORED AS PARQUET"):
        ndfusion.TableFactory("PARQUET")
    assert issubclass(ndfusion.Error, Exception)


def test_errors_during_a_query_carry_ndfusions_message(ctx):
    ctx.register_table("f", ndfusion.ZarrTable(str(DATA / "collections" / "floats" / "*.zarr")))
    # f4 holds a corrupt chunk.
    with pytest.raises(Exception, match="cannot read chunk 'c/1' of .*f4.zarr"):
        ctx.sql("SELECT sum(temp) FROM f").to_arrow_table()


def test_bad_options_of_stored_as_name_the_option(ctx):
    ndfusion.register_table_factories(ctx)
    location = DATA / "zarr_v3" / "struct_1d.zarr"
    with pytest.raises(Exception, match="invalid option 'nope'"):
        ctx.sql(f"CREATE EXTERNAL TABLE g STORED AS ZARR LOCATION '{location}' OPTIONS ('nope' '1')")


def test_scans_hand_over_batches_of_at_least_65536_rows(ctx):
    # daily_grid.zarr: 40 days x 32 x 40 cells in chunks of 10 days (12,800 cells). At
    # datafusion-python's default batch size (8,192) each chunk would cross the FFI as two
    # batches; the extension's scans make batches of up to 65,536 rows, so one per chunk.
    grid = str(DATA / "ordered" / "daily_grid.zarr")
    ctx.register_table("d", ndfusion.ZarrTable(grid))
    batches = ctx.sql("SELECT t FROM d").collect()
    sizes = sorted(b.num_rows for b in batches)
    assert sum(sizes) == 40 * 32 * 40
    assert sizes[-1] == 12_800, sizes
    # The table's own batch_size still decides.
    ctx.register_table("small", ndfusion.ZarrTable(grid, {"batch_size": "1000"}))
    sizes = [b.num_rows for b in ctx.sql("SELECT t FROM small").collect()]
    assert max(sizes) == 1000, sizes
