//! Zarr arrays as tables.
//!
//! The flow of a query (see ARCHITECTURE.md): [`ZarrTable`] opens an array (`array.rs`: store,
//! metadata, read strategy) and plans a `ZarrScanExec` (`scan.rs`) over the chunks a
//! `Selection` touches (`pruning.rs`, `selection.rs`, `chunk_plan.rs`); each partition reads
//! its chunks with `ChunkReader` (`chunk_reader.rs`), which decodes element bytes into Arrow
//! columns (`chunk_columns.rs`, `decode.rs`).

mod array;
mod array_table;
mod attributes;
mod cf;
mod chunk_columns;
mod chunk_partitions;
mod chunk_plan;
mod chunk_read;
mod chunk_reader;
mod collection;
mod data_type_v3;
mod dataset;
mod decode;
mod element;
mod factory;
mod fill_value;
mod filter_plan;
#[cfg(test)]
mod generated_inputs;
mod grid_scan;
mod index_set;
mod metadata;
mod metadata_v2;
mod metrics;
mod node;
mod node_table;
mod options;
mod pruning;
mod row_filter;
mod scan;
mod schema;
mod selection;
mod store;
mod table;
mod zstd_prefix;

pub use factory::ZarrTableFactory;
pub use options::ZarrOptions;
pub use table::ZarrTable;
