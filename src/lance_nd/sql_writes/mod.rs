//! Query results appended to lance-nd tables: `COPY (query) TO 't.lance' STORED AS LANCE_ND`
//! and `INSERT INTO` a lance-nd table (`table.rs` plans it with the same sink).
//!
//! The stages, in the order rows pass them: `format.rs` (what DataFusion's COPY planner
//! calls), `options.rs` (the `OPTIONS` keys), `sink.rs` (rows sorted by their batch, each
//! batch written as it completes and all committed once through `writer/`); `nd/rows_groups.rs`
//! finds where one batch's rows end, `nd/rows_batch.rs` lays them on the grid of the batch's
//! own dimension values.

mod format;
mod options;
mod sink;

pub(crate) use crate::nd::rows_batch::RowsLayout;
pub use format::{LanceNdFormat, LanceNdFormatFactory, LanceNdWriter};
pub use options::{LanceNdCopyKeys, LanceNdCopyOptions};
pub(crate) use sink::LanceNdSink;
