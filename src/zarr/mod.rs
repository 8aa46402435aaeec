//! Zarr arrays, groups and collections as tables.
//!
//! The folders follow a query down (see ARCHITECTURE.md): `store/` is where bytes come from
//! (a `ZarrStore` over a local, remote or other backend);
//! `metadata/` parses what a node is (array metadata v3 and v2, data types, fill values, the
//! element layout, attributes, the table schema); `plan/` turns filters into the selection and
//! the chunks it touches (pruning, index sets, selections, the row filter, chunk plans and
//! their partitions); `read/` fetches and decodes chunks (the opened array and its read
//! strategy, the chunk reader, zstd fronts, the grid scan and its counters); `decode/` turns
//! element bytes into Arrow columns (fields, a chunk's columns, CF conventions). The table
//! kinds sit beside each other on top of those stages: `array/`, `dataset/`, `collection/`;
//! `node_table.rs` is an array or a dataset, `table.rs` the public [`ZarrTable`] over them.
//! `write/` goes the other way: query results written as Zarr (`COPY ... STORED AS ZARR`).

mod array;
mod collection;
mod dataset;
pub(crate) mod decode;
mod factory;
#[cfg(test)]
mod generated_hostile_inputs;
#[cfg(test)]
mod generated_inputs;
mod kind;
pub(crate) mod metadata;
pub(crate) mod node_table;
mod options;
mod plan;
pub(crate) mod read;
pub(crate) mod store;
pub(crate) mod table;
mod write;

pub use factory::ZarrTableFactory;
pub(crate) use kind::kind;
pub use options::{ZarrKeys, ZarrOptions};
pub use table::ZarrTable;
pub(crate) use write::GridWrites;
pub use write::{ZarrFormat, ZarrFormatFactory, ZarrWriteKeys, ZarrWriteOptions, ZarrWriter};
