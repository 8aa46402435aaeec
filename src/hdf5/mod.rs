//! Plain HDF5 files as tables (`STORED AS HDF5`): one dataset as an array table, or a group
//! as a dataset table, read by the Zarr readers from a Zarr layout of the file's metadata,
//! as netCDF-4 files are (`netcdf/`).
//!
//! `open.rs` resolves the `path` option (a dataset, a group, or the file's one dataset),
//! `dataset.rs` lays a dataset out as a Zarr array whose data type is h5py's NumPy dtype (a
//! group is laid out by `netcdf/nc4.rs`), and the file is served by the netCDF store
//! (`netcdf/store.rs`). `table.rs` is the public [`HDF5Table`] and its factory,
//! `options.rs` its `OPTIONS`, `kind.rs` its entry in the list of table kinds.

mod dataset;
mod kind;
mod open;
mod options;
mod table;

pub(crate) use kind::kind;
pub(crate) use open::open_hdf5;
pub use options::{HDF5Keys, HDF5Options};
pub use table::{HDF5Table, HDF5TableFactory};
