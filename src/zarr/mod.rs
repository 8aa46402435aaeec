//! Zarr arrays as tables.
//!
//! The flow of a query (see ARCHITECTURE.md): [`table::ZarrTable`] opens an array
//! ([`array`], [`metadata`], [`data_type_v3`], [`fill_value`]) and plans a
//! [`scan::ZarrScanExec`] over the chunks a [`selection::Selection`] touches; each partition
//! reads its chunks with [`chunk_reader::ChunkReader`], which decodes element bytes into Arrow
//! columns with [`decode`] (zstd chunks whose selection ends early through
//! [`zstd_prefix`]).

pub mod array;
pub mod chunk_reader;
pub mod data_type_v3;
pub mod decode;
pub mod element;
pub mod factory;
pub mod fill_value;
pub mod index_set;
pub mod metadata;
pub mod metadata_v2;
pub mod pruning;
pub mod row_filter;
pub mod scan;
pub mod schema;
pub mod selection;
pub mod table;
pub mod zstd_prefix;

pub use factory::ZarrTableFactory;
pub use table::ZarrTable;
