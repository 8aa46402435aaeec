//! Collections: many Zarr stores (arrays or dataset groups) as one table. `members.rs` expands
//! a `LOCATION` glob into members, `table.rs` joins their schemas and attributes and chooses
//! members by `__global_attrs__` filters, `scan.rs` reads the chosen members one after another
//! in each partition.

mod member_ranges;
pub(crate) mod members;
mod scan;
mod table;

pub(crate) use members::{expand, is_pattern};
pub(crate) use table::CollectionTable;
