//! netCDF files as tables (`STORED AS NETCDF`): a file is a dataset, read as a Zarr group is
//! (`zarr/dataset/`), and a glob of files is a collection.
//!
//! Nothing here decodes values: `classic.rs` lays a netCDF-3 header out as the Zarr v2 group
//! xarray would see (metadata documents, chunks that are rows of the file), `nc4.rs` a
//! netCDF-4 file's HDF5 metadata as a Zarr v3 group (its chunks the HDF5 chunks, its codecs
//! the HDF5 filters; `blocking.rs` is the file as the HDF5 parser reads it, `block_cache.rs`
//! the blocks of it kept; `lazy_index.rs`
//! a variable's chunk index, read when a query first needs it, `chunk_btree.rs` a version 1
//! B-tree searched chunk by chunk), both into a
//! `layout.rs` (`hdf5_codecs.rs`: HDF5's lz4 and szip filters as Zarr codecs); `store.rs` serves that group to the Zarr reader from ranged reads of the file. So pushdown, statistics, CF
//! decoding, collections and clusters are the Zarr tables' own. `table.rs` is the public
//! [`NetCDFTable`] and its factory, `options.rs` its `OPTIONS`, `kind.rs` its entry in the list
//! of table kinds.

mod block_cache;
mod blocking;
mod chunk_btree;
pub(crate) mod classic;
pub(crate) mod hdf5_codecs;
mod kind;
pub(crate) mod layout;
mod lazy_index;
pub(crate) mod nc4;
pub(crate) mod numpy_type;
pub(crate) mod options;
mod skipped;
pub(crate) mod store;
mod table;
pub(crate) mod value_bits;

pub(crate) use kind::kind;
pub use options::{NetCDFKeys, NetCDFOptions};
pub(crate) use store::open_netcdf;
pub use table::{NetCDFTable, NetCDFTableFactory};

/// What a file starting with `head` is, when it is a netCDF or HDF5 file opened as something
/// else (`STORED AS ZARR`): the error says how to read it.
pub(crate) fn file_format_hint(head: &[u8]) -> Option<&'static str> {
    if head.get(..4).and_then(classic::classic_format).is_some() {
        Some("a netCDF file: read it with STORED AS NETCDF")
    } else if head.starts_with(store::HDF5_MAGIC) {
        Some("a netCDF-4 / HDF5 file: read it with STORED AS NETCDF")
    } else {
        None
    }
}
