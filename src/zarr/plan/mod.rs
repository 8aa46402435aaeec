//! From filters to the chunks a scan reads: `filter_plan.rs` sorts a scan's filters by what
//! decides them; `pruning.rs` turns dimension filters into index boxes (`index_set.rs`),
//! `selection.rs` merges them; `row_filter.rs` is what runs per chunk; `chunk_plan.rs` lists
//! the chunks a selection touches, `chunk_partitions.rs` splits them over partitions, and
//! `chunk_selection.rs` is one chunk's selected cells, found in its bytes by a `gather.rs`;
//! `grid_statistics.rs` and `output_order.rs` are what a plan tells the optimizer (axis
//! columns' bounds and counts, the order rows come in).

pub(crate) mod axis_expression;
pub(crate) mod chunk_partitions;
pub(crate) mod chunk_plan;
pub(crate) mod chunk_selection;
pub(crate) mod derived_column;
pub(crate) mod filter_plan;
pub(crate) mod gather;
pub(crate) mod grid_statistics;
pub(crate) mod index_set;
pub(crate) mod output_order;
pub(crate) mod pruning;
pub(crate) mod row_filter;
pub(crate) mod selection;
