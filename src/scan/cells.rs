//! A scan over a grid of cells (a Zarr array's chunks, a dataset's blocks) seen from a grid
//! aggregate: [`GridSource`] says what the grid is (its shape, which output columns follow
//! one axis, which indices each partition reads), and a scan opened with a [`FoldTarget`]
//! hands each batch of cells it decodes to the target's [`CellFold`], with [`CellRuns`]
//! saying where they lie, instead of making rows: no axis column is made for them and no
//! row is filtered out (the row filter's verdict comes along as a mask).
//!
//! The vocabulary is the scan's; the grid kinds implement it (`zarr/read/grid_scan.rs`) and
//! the grid aggregate (`grid_aggregate/`) uses it.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use datafusion::common::Result;
use datafusion::physical_expr::PhysicalExpr;

/// What a grid scan knows of its grid at planning.
pub(crate) trait GridSource: fmt::Debug + Send + Sync {
    /// Cells along each axis.
    fn shape(&self) -> Vec<u64>;

    /// `expr` (over the scan's output columns) at every index of the one axis whose columns
    /// it reads, as `(axis, values)` with one value per index; `None` when it reads no column,
    /// columns of several axes or of no axis, or cannot be evaluated there.
    fn per_index(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, ArrayRef)>;

    /// Per axis, sorted disjoint index ranges that hold every cell `partition` reads (all
    /// partitions: `None`); every index the scan reads lies in them.
    fn indices(&self, partition: Option<usize>) -> Result<Vec<Vec<Range<u64>>>>;

    /// The cells the whole scan reads, as its metadata tells.
    fn cells(&self) -> u64;
}

/// Where a batch of cells lies in the grid.
pub(crate) trait CellRuns {
    /// Calls `f(row, index, len)` for each run of the batch's rows, in row order: rows
    /// `row..row + len` are the cells at `index` (grid coordinates of the first, one per
    /// axis) and the `len - 1` after it along the last axis.
    fn for_each_run(&self, f: &mut dyn FnMut(usize, &[u64], usize));
}

/// Takes the cells of a grid scan's units as they are decoded (on the units' blocking
/// threads, several at once).
pub(crate) trait CellFold: fmt::Debug + Send + Sync {
    /// Folds one batch: `columns` holds the target's columns on the batch's rows, `keep` the
    /// rows the scan's row filter keeps (`None`: all), `runs` where the rows lie.
    fn fold(
        &self,
        runs: &dyn CellRuns,
        columns: &RecordBatch,
        keep: Option<&BooleanArray>,
    ) -> crate::error::Result<()>;
}

/// A scan partition opened to fold its cells: which of the scan's output columns the fold
/// reads (the scan makes those only) and where the cells go.
#[derive(Debug, Clone)]
pub(crate) struct FoldTarget {
    /// Output columns of the scan, in `schema`'s order.
    pub columns: Vec<usize>,
    /// The schema of the batches handed to the fold: the scan's output projected to
    /// `columns`.
    pub schema: SchemaRef,
    pub fold: Arc<dyn CellFold>,
}

impl FoldTarget {
    /// Whether the fold reads output column `column`.
    pub(crate) fn reads(&self, column: usize) -> bool {
        self.columns.contains(&column)
    }
}
