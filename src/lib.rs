//! # ndfusion
//!
//! Query N-dimensional scientific data with SQL on Apache DataFusion.
//!
//! - [`ZarrTable`]: a Zarr array (v3 `struct`, or any fixed-size data type) as a table, one row
//!   per element: an Int64 index column per dimension, then one column per struct field.
//! - [`LanceNdTable`]: a lance-nd table (rows are nd record batches) as a table, each row
//!   materialized onto its grid; [`lance_nd`] also writes such tables, [`nd`] is the model.
//! - [`register_table_factories`] makes `CREATE EXTERNAL TABLE t STORED AS ZARR | LANCE_ND
//!   LOCATION '...'` work on a [`SessionContext`]; [`new_session_context`] builds a context with
//!   it done.

use std::sync::Arc;

use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

pub mod cli;
pub mod error;
pub mod lance_nd;
pub mod nd;
pub mod scan_util;
pub mod zarr;

pub use error::{Error, Result};
pub use lance_nd::{LanceNdTable, LanceNdTableFactory};
pub use zarr::{ZarrTable, ZarrTableFactory};

/// The `STORED AS` name of Zarr tables.
pub const ZARR_FORMAT: &str = "ZARR";
/// The `STORED AS` name of lance-nd tables.
pub const LANCE_ND_FORMAT: &str = "LANCE_ND";

/// Registers ndfusion's table factories (`STORED AS ZARR`, `STORED AS LANCE_ND`) on an
/// existing context.
pub fn register_table_factories(ctx: &SessionContext) {
    let state = ctx.state_ref();
    let mut state = state.write();
    let factories = state.table_factories_mut();
    factories.insert(ZARR_FORMAT.to_string(), Arc::new(ZarrTableFactory));
    factories.insert(LANCE_ND_FORMAT.to_string(), Arc::new(LanceNdTableFactory));
}

/// A context with DataFusion's default features (struct field access included) and ndfusion's
/// table factories.
pub fn new_session_context() -> SessionContext {
    new_session_context_with_config(SessionConfig::new().with_information_schema(true))
}

/// Like [`new_session_context`], with a given configuration.
pub fn new_session_context_with_config(config: SessionConfig) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    let ctx = SessionContext::new_with_state(state);
    register_table_factories(&ctx);
    ctx
}
