//! Query results written as Zarr: `COPY (query) TO 'out.zarr' STORED AS ZARR`.
//!
//! The stages, in the order rows pass them: `format.rs` (what DataFusion's planner calls:
//! the options, checks before the query runs, the sink), `options.rs` (the `OPTIONS` keys),
//! `layout.rs` (the query's columns as the fields of a `struct` element, and rows packed into
//! element bytes), `sink.rs` (rows into chunks, compressed and written as they fill, in
//! bounded memory), `target.rs` (where the store is written, so that it appears at its
//! location only when complete and a failed or cancelled write leaves nothing).

mod format;
mod layout;
mod options;
mod sink;
mod target;

pub use format::{ZarrFormat, ZarrFormatFactory};
pub use options::{ZarrWriteKeys, ZarrWriteOptions};
