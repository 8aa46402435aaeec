//! Icechunk repositories (versioned Zarr): a node of one snapshot read as a Zarr array or
//! group, version selection, and the repository's history as tables.
//!
//! ```text
//! STORED AS ICECHUNK LOCATION 'repo' OPTIONS ('branch' 'main', 'path' 'ocean')
//!   └─ options.rs     IcechunkOptions: Zarr's options + version, path, containers
//!   └─ repository.rs  Icechunk's storage from the storage keys; virtual chunk containers
//!                     authorized (storage/containers.rs parses the option)
//!   └─ table.rs       IcechunkTable: per query, version.rs resolves the version to a
//!                     snapshot, store.rs reads it as a ZarrStore, and the Zarr reader does
//!                     the rest (NodeTable: arrays, datasets)
//! icechunk_log(...), icechunk_refs(...): history.rs
//! ```

mod bounds;
mod history;
mod kind;
mod options;
mod repository;
pub(crate) mod store;
mod table;
mod version;

pub use history::{IcechunkLogFunction, IcechunkRefsFunction};
pub use options::IcechunkOptions;
pub use table::{IcechunkTable, IcechunkTableFactory};

pub(crate) use kind::kind;
