//! lance-nd tables: Lance tables whose rows are nd record batches (see
//! ../shared/seeds/001_*.txt and ../shared/notes/formats.md §3).
//!
//! [`writer`] appends batches with schema evolution; [`reader`] scans them back as
//! [`NdRecordBatch`](crate::nd::NdRecordBatch)es; [`provider`] is the SQL table, whose scan
//! ([`scan`]) materializes every row onto its grid, with filters turned into Lance filters by
//! [`filter`].

pub mod filter;
pub mod provider;
pub mod reader;
pub mod scan;
pub mod table;
pub mod writer;

pub use provider::{LanceNdTable, LanceNdTableFactory};
pub use reader::{read_nd_batches, NdScan};
pub use table::{open_lance_nd, LanceNdError};
pub use writer::{write_nd_batches, Casting, WriteOptions};
