//! The one integration test binary (each binary links all of DataFusion and Lance).

mod xarray_cells;
mod zarr_archives;
mod zarr_collections;
mod zarr_datasets;
mod zarr_fixtures;
mod zarr_write;

mod cli;
mod cluster;
mod cluster_faults;
mod grid_aggregates;
mod hdf5;
mod icechunk;
mod kerchunk;
mod lance_nd;
mod lance_nd_write;
mod limits;
mod listener;
mod netcdf;
mod object_stores;
mod serve;
mod servers;
mod slt;
mod terminal;
