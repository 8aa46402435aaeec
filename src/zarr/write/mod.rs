//! Query results written as Zarr: `COPY (query) TO 'out.zarr' STORED AS ZARR`.
//!
//! The stages, in the order rows pass them: `format.rs` (what DataFusion's planner calls:
//! the options, checks before the query runs, the sink), `options.rs` (the `OPTIONS` keys),
//! `layout.rs` (the query's columns as the fields of a `struct` element, and rows packed into
//! element bytes), `sink.rs` (rows into chunks, compressed and written as they fill, in
//! bounded memory); with `dimensions`, a dataset: `nd/rows_grid.rs` (each dimension's values
//! learnt from the rows, a row's place on the grid), `variable.rs` (how each column is stored, as
//! xarray stores it), `zarr_version.rs` (the documents and chunk keys of Zarr 3 or 2),
//! `grid_sink.rs` (two passes over rows sorted by the dimensions, slab by
//! slab; or, for a grid aggregate's result, `grid_write.rs`: its values at their cells,
//! with no row made); `target.rs` (where the store is written, so that it appears at its
//! location only when complete and a failed or cancelled write leaves nothing).

mod format;
mod grid_sink;
mod grid_write;
mod layout;
mod options;
mod sink;
mod target;
mod variable;
mod zarr_version;

pub use format::{ZarrFormat, ZarrFormatFactory, ZarrWriter};
pub(crate) use grid_write::GridWrites;
pub use options::{ZarrWriteKeys, ZarrWriteOptions};
