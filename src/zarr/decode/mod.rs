//! Element bytes to Arrow: `fields.rs` decodes a field of gathered elements, one monomorphic
//! pass per leaf; `columns.rs` is a chunk's columns, decoded on demand after the row filter;
//! `cf/` decodes CF conventions (masks, scale and offset, times, calendars) for datasets.

pub(crate) mod cf;
pub(crate) mod columns;
pub(crate) mod error;
pub(crate) mod fields;
