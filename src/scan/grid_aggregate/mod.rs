//! The grid aggregate: `GROUP BY` over a grid's dimensions folded chunk by chunk into dense
//! accumulators, with no row made per cell and no hash of its keys.
//!
//! ```text
//! rule.rs        GridAggregates: which aggregates become grid aggregates, and where
//! input.rs       Input: the aggregate's input down to the grid scan (projections,
//!                filters, tables looked up), every column an expression over the scan's
//! lookup.rs      Lookup: a table a cell finds its row of by its grid position (an anomaly's
//!                climatology, joined or a window's), laid out dense when the query runs
//! plan.rs        GridPlan: keys per axis, arguments over the columns the fold reads, the
//!                groups each scan partition reaches and which first-axis indices they
//!                share (or why the aggregate stays DataFusion's)
//! axis_groups.rs an axis's keys evaluated per index, and each index's group along the axis
//! dense.rs       dense accumulators of count, sum, avg, min, max, variance, bool_and/or:
//!                a run of cells along the last axis reduced or added as a slice
//! fold.rs        PartitionFold: a partition's cells, as its units decode them, into the
//!                dense accumulators (DataFusion's groups accumulators for the rest) at
//!                their groups' positions
//! emit.rs        the groups reached, their keys and states or final values (a partition's
//!                own groups finished on their own, slabs partitions share merged first), a
//!                batch at a time
//! exec.rs        GridAggregateExec: partial states per partition, or every partition
//!                folded at once into final values
//! ```
//!
//! The scan hands its cells over through the vocabulary of `scan/cells.rs`.

mod axis_groups;
mod dense;
mod emit;
mod exec;
mod fold;
mod input;
mod lookup;
mod plan;
mod rule;

pub(crate) use exec::GridAggregateExec;
pub(crate) use rule::{memory_left, GridAggregates};
