//! # ndfusion
//!
//! Query N-dimensional scientific data with SQL on Apache DataFusion.
//!
//! - [`ZarrTable`]: a Zarr array (v3 `struct`, or any fixed-size data type) as a table, one row
//!   per element: an Int64 index column per dimension, then one column per struct field.
//! - [`register_table_factories`] makes `CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '...'`
//!   work on a [`SessionContext`]; [`new_session_context`] builds a context with it done.

use std::sync::Arc;

use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

pub mod cli;
pub mod error;
pub mod lance_nd;
pub mod nd;
pub mod zarr;

pub use error::{Error, Result};
pub use zarr::{ZarrTable, ZarrTableFactory};

/// The `STORED AS` name of Zarr tables.
pub const ZARR_FORMAT: &str = "ZARR";

/// Registers ndfusion's table factories (`STORED AS ZARR`) on an existing context.
pub fn register_table_factories(ctx: &SessionContext) {
    let state = ctx.state_ref();
    let mut state = state.write();
    state
        .table_factories_mut()
        .insert(ZARR_FORMAT.to_string(), Arc::new(ZarrTableFactory));
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
