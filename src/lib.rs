//! # ndfusion
//!
//! Query N-dimensional scientific data with SQL on [Apache DataFusion](https://datafusion.apache.org),
//! without converting it first.
//!
//! - [`ZarrTable`]: a Zarr array (v3 `struct` or legacy `structured`, v2 NumPy structured
//!   dtypes, or any fixed-size data type) as a table: one row per element, an Int64 index column
//!   per dimension, one column per struct field. Dimension filters select chunks.
//! - [`LanceNdTable`]: a lance-nd table (Lance rows holding nd record batches) as a table, each
//!   row materialized onto its grid; `__global_attrs__` filters run inside Lance.
//! - [`IcechunkTable`] (the `icechunk` feature): an array or group of an Icechunk repository
//!   at a branch, tag or snapshot, read as a [`ZarrTable`] is; [`IcechunkLogFunction`] and
//!   [`IcechunkRefsFunction`] are its history as tables.
//! - [`write_nd_batches`] and [`read_nd_batches`] write and read lance-nd tables as
//!   [`NdRecordBatch`]es of [`NdArrowArray`]s.
//! - Tables live in local folders or object stores (`s3://`, `gs://`, `az://`, `abfs://`,
//!   `http(s)://`), reached with [`StorageOptions`].
//! - [`register_table_factories`] makes `CREATE EXTERNAL TABLE t STORED AS ZARR | ICECHUNK |
//!   LANCE_ND LOCATION '...' [OPTIONS (...)]` work on a `SessionContext`; [`new_session_context`]
//!   builds a context with it done. [`table_kinds`] lists those kinds ([`TableKind`]: name,
//!   factory, documented options).
//! - [`Limits`] caps what a file may make ndfusion do (metadata bytes, attributes, coordinate
//!   bytes, glob depth and entries, string chunk bytes): a session's (`SET ndfusion.*`,
//!   [`SessionLimits`]) over the process's defaults from `NDFUSION_MAX_*`.
//! - Every kind's options are a [`KindOptions`] ([`ZarrOptions`], [`LanceNdOptions`]): its
//!   keys, the storage settings and the limits, from SQL or builder methods.
//!
//! - With the `cluster` feature, [`new_cluster_context`] runs the same SQL on an Apache
//!   DataFusion Ballista cluster ([`run_scheduler`], [`run_executor`]), and
//!   [`new_standalone_context`] on one inside the process.
//!
//! Every fallible function returns [`Error`]; inside DataFusion errors it travels as
//! `DataFusionError::External`, and [`Error::find`] gets it back.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! let ctx = ndfusion::new_session_context();
//! let ocean = ndfusion::ZarrTable::open("tests/data/demo/ocean.zarr").await?;
//! ctx.register_table("ocean", Arc::new(ocean))?;
//! ctx.sql("SELECT depth, avg(temperature) FROM ocean WHERE day < 10 GROUP BY depth")
//!     .await?
//!     .show()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Cargo features: `cli` (the `ndfusion` binary), `cluster` (Ballista), `icechunk` (Icechunk
//! repositories), `s3`, `gcs`, `azure`, `http` (remote locations); all on by default. An
//! application that needs none of the command line builds with `default-features = false` and
//! the features it wants.
#![warn(missing_docs)]
#![warn(unreachable_pub)]

#[cfg(feature = "cluster")]
mod cluster;
mod error;
mod hdf5;
#[cfg(feature = "icechunk")]
mod icechunk;
mod lance_nd;
mod limits;
mod nd;
mod netcdf;
#[cfg(test)]
mod proptest_config;
mod scan;
#[cfg(feature = "cluster")]
mod serve;
mod session;
mod storage;
mod table_kind;
mod table_options;
mod table_source;
mod write_format;
mod yielding;
mod zarr;

#[cfg(feature = "cluster")]
pub use cluster::{
    new_cluster_context, new_cluster_context_with, new_standalone_context, run_executor,
    run_scheduler, AllowedLocations, ClusterSecurity, ExecutorSettings, SchedulerSettings,
    TOKEN_ENV,
};
pub use error::{Error, Result};
pub use hdf5::{HDF5Keys, HDF5Options, HDF5Table, HDF5TableFactory};
#[cfg(feature = "icechunk")]
pub use icechunk::{
    IcechunkLogFunction, IcechunkOptions, IcechunkRefsFunction, IcechunkTable, IcechunkTableFactory,
};
pub use lance_nd::{
    read_nd_batches, write_nd_batches, Casting, LanceNdCopyKeys, LanceNdCopyOptions, LanceNdFormat,
    LanceNdFormatFactory, LanceNdKeys, LanceNdOptions, LanceNdTable, LanceNdTableFactory,
    LanceNdWriter, ReadOptions, WriteOptions,
};
pub use limits::{format_size, parse_size, Limits, SessionLimits};
pub use nd::rows_batch::rows_on_grid;
pub use nd::{Dim, NdArrowArray, NdError, NdRecordBatch};
pub use netcdf::{NetCDFKeys, NetCDFOptions, NetCDFTable, NetCDFTableFactory};
#[cfg(feature = "cluster")]
pub use serve::{FlightSqlServer, ServeSettings, SERVE_TOKEN_ENV};
#[cfg(feature = "icechunk")]
pub use session::ICECHUNK_FORMAT;
pub use session::{
    memory_limited_runtime, new_session_context, new_session_context_with_config,
    new_session_context_with_runtime, register_table_factories, HDF5_FORMAT, LANCE_ND_FORMAT,
    NETCDF_FORMAT, ZARR_FORMAT,
};
pub use storage::StorageOptions;
pub use table_kind::{table_kind, table_kind_of, table_kinds, NamedTableFunction, TableKind};
pub use table_options::{KindOptions, OptionKeys};
pub use write_format::{WriteOnly, WriteOnlyFactory, Writes};
pub use zarr::{
    ZarrFormat, ZarrFormatFactory, ZarrKeys, ZarrOptions, ZarrTable, ZarrTableFactory,
    ZarrWriteKeys, ZarrWriteOptions, ZarrWriter,
};
