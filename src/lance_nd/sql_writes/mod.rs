//! Query results appended to lance-nd tables: `COPY (query) TO 't.lance' STORED AS LANCE_ND`
//! and `INSERT INTO` a lance-nd table (`table.rs` plans it with the same sink).
//!
//! The stages, in the order rows pass them: `format.rs` (what DataFusion's COPY planner
//! calls), `options.rs` (the `OPTIONS` keys), `sink.rs` (the rows taken within the memory
//! pool, then one commit through `writer/`), `rows.rs` (rows grouped into batches, each on
//! the grid of its own dimension values).

mod format;
mod options;
mod rows;
mod sink;

pub use format::{LanceNdFormat, LanceNdFormatFactory, LanceNdWriter};
pub use options::{LanceNdCopyKeys, LanceNdCopyOptions};
pub(crate) use rows::RowsLayout;
pub(crate) use sink::LanceNdSink;
