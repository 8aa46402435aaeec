//! Zarr groups as datasets: `model.rs` decides the grid, the columns and which arrays are
//! coordinates (`bounds.rs`: bounds variables take their coordinate's time units); `variable.rs` reads a variable's box; `coordinate.rs` turns filters on
//! coordinate values into index ranges; `table.rs` is the provider, `scan.rs` the plan.

mod bounds;
mod coordinate;
mod model;
mod scan;
mod table;
mod variable;

pub(crate) use table::DatasetTable;
