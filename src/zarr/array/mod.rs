//! One Zarr array as a table: `table.rs` is the provider (filters to a selection and a row
//! filter), `scan.rs` the scan of its chunks.

pub(crate) mod chunk_batches;
pub(crate) mod scan;
pub(crate) mod table;
