//! lance-nd tables: Lance tables whose rows are nd record batches (ARCHITECTURE.md, "The
//! lance-nd table layout").
//!
//! `writer/` appends batches with schema evolution; `reader.rs` reads them back as
//! [`NdRecordBatch`](crate::NdRecordBatch)es; `table.rs` is the SQL table, whose scan
//! (`scan.rs`) has Lance filter rows (`filter.rs`) and materializes each onto its grid
//! (`materialize.rs`); `sql_writes/` appends a query's rows (`COPY ... STORED AS LANCE_ND`,
//! `INSERT INTO`) as batches; `statistics.rs` is what the scan states before reading (row counts,
//! index ranges, `__stats__` bounds per fragment). `location.rs` resolves where a table is and how Lance reaches it.

mod damage;
mod factory;
mod filter;
mod format;
mod kind;
mod location;
mod materialize;
mod options;
mod reader;
mod scan;
mod sql_writes;
mod statistics;
mod table;
mod writer;

pub use factory::LanceNdTableFactory;
pub(crate) use kind::kind;
pub use options::{LanceNdKeys, LanceNdOptions};
pub use reader::{read_nd_batches, ReadOptions};
pub use sql_writes::{
    LanceNdCopyKeys, LanceNdCopyOptions, LanceNdFormat, LanceNdFormatFactory, LanceNdWriter,
};
pub use table::LanceNdTable;
pub use writer::{write_nd_batches, Casting, WriteOptions};
