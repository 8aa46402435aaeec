//! The one scan plan of every table kind: [`ScanExec`] over a [`ScanSource`] (after
//! DataFusion's `DataSourceExec` over a `DataSource`). Each table kind implements the source:
//! `zarr/array/scan.rs`, `zarr/dataset/scan.rs`, `zarr/collection/scan.rs`,
//! `lance_nd/scan.rs`.

mod batch_channel;
mod batches;
mod cells;
mod derived_columns;
mod dynamic_filter;
mod exec;
mod grid_aggregate;
mod order_policy;
mod origin;
mod projection;
mod read_buffers;
mod run_aggregate;
mod source;
mod task_size;

pub(crate) use batch_channel::{held_bytes, rows_made, spawn_batches, BatchSender};
pub(crate) use batches::{reversed_unit, row_count};
pub(crate) use cells::{CellFold, CellRuns, FoldTarget, GridSource};
pub(crate) use derived_columns::ScanDerivedColumns;
pub(crate) use dynamic_filter::{pruned_unit, LeadGate, UnitPruner};
pub(crate) use exec::ScanExec;
#[cfg_attr(not(feature = "cluster"), allow(unused_imports))]
pub(crate) use grid_aggregate::GridAggregateExec;
pub(crate) use grid_aggregate::{memory_left, GridAggregates};
pub(crate) use order_policy::declares_order;
#[cfg(feature = "cluster")]
pub(crate) use origin::OriginSlot;
pub(crate) use origin::ScanCall;
pub(crate) use projection::project_columns;
pub(crate) use run_aggregate::RunAggregates;
pub(crate) use source::{
    column_names, fmt_options, nth_partition, OpenPartition, PartitionUnits, ScanShape, ScanSource,
    SortKey, UnitBatches, UnitRead,
};
pub(crate) use task_size::PartitionTarget;
#[cfg(feature = "cluster")]
pub(crate) use task_size::TargetTaskBytes;
