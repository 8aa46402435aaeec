//! Query results appended to lance-nd tables: `COPY (query) TO 't.lance' STORED AS LANCE_ND`
//! and `INSERT INTO` a lance-nd table (`table.rs` plans it with the same sink).
//!
//! The stages, in the order rows pass them: `format.rs` (what DataFusion's COPY planner
//! calls), `options.rs` (the `OPTIONS` keys), `sink.rs` (rows sorted by their batch, each
//! batch written as it completes and all committed once through `writer/`), `groups.rs`
//! (where one batch's rows end), `rows.rs` (a batch's rows on the grid of its own dimension
//! values).

mod format;
mod groups;
mod options;
mod rows;
mod sink;

pub use format::{LanceNdFormat, LanceNdFormatFactory, LanceNdWriter};
pub use options::{LanceNdCopyKeys, LanceNdCopyOptions};
pub(crate) use rows::RowsLayout;
pub(crate) use sink::LanceNdSink;
