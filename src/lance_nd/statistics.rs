//! What a lance-nd table's scan knows before reading a value: per Lance fragment, the cells
//! its rows materialize, for every dimension the largest size and the cells on grids that
//! have it, and each array's bounds from its `__stats__:<array>` column. Worked out when the
//! table opens, in the pass that reads every row's `dim_names` and `dim_sizes` anyway.
//!
//! Row counts and index columns are exact (they come from the same dimensions the
//! materializer reads); `__stats__` bounds are only bounds (`Inexact`): anyone may have
//! written them, and an answer must never come from them.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray};
use arrow::datatypes::{DataType, UInt64Type};
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, ScalarValue, Statistics};
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;

use super::format::{ROW_ADDR, STATS_PREFIX};
use super::materialize::ColumnSource;
use crate::error::{Error, Result};
use crate::nd::arrow_encoding::decode_dims;
use crate::nd::batch::infer_grid;
use crate::nd::{cell_count, Dim};

/// One dimension over a fragment's rows.
#[derive(Debug, Clone, Default)]
struct DimSummary {
    /// The largest size on any row's grid.
    max_size: u64,
    /// Cells of the rows whose grid has the dimension.
    cells_with: u64,
}

/// An array's value bounds over a fragment's rows, from its `__stats__` column.
#[derive(Debug, Clone)]
struct Bounds {
    min: ScalarValue,
    max: ScalarValue,
}

/// What one fragment's rows materialize.
#[derive(Debug, Clone, Default)]
struct FragmentSummary {
    /// `None` when some row's grid cannot be made (its read fails, naming the row).
    cells: Option<u64>,
    dims: HashMap<String, DimSummary>,
    bounds: HashMap<String, Bounds>,
}

/// Per-fragment summaries of a table at one version.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableSummary {
    fragments: HashMap<u64, FragmentSummary>,
}

/// The summary of a table built from the open's scan: `_rowaddr`, every array's
/// `<array>.dim_names` and `<array>.dim_sizes`, and the `__stats__:<array>` columns of the
/// arrays in `stats`.
pub(crate) struct SummaryBuilder<'a> {
    uri: &'a str,
    arrays: &'a [(String, DataType)],
    /// Arrays whose `__stats__` column is a `{min, max}` struct of a number type.
    stats: &'a [String],
    /// Every dimension name, in order of first appearance.
    names: Vec<String>,
    /// Rows seen so far (the row number errors name).
    rows: u64,
    fragments: HashMap<u64, FragmentSummary>,
    /// Per fragment, per entry of `stats`, the running bounds; `None` once a row that has the
    /// array has no statistics.
    accumulators: HashMap<u64, Vec<Option<(MinAccumulator, MaxAccumulator)>>>,
}

impl<'a> SummaryBuilder<'a> {
    pub(crate) fn new(uri: &'a str, arrays: &'a [(String, DataType)], stats: &'a [String]) -> Self {
        SummaryBuilder {
            uri,
            arrays,
            stats,
            names: Vec::new(),
            rows: 0,
            fragments: HashMap::new(),
            accumulators: HashMap::new(),
        }
    }

    /// The columns the open's scan reads.
    pub(crate) fn projection(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .arrays
            .iter()
            .flat_map(|(a, _)| [format!("{a}.dim_names"), format!("{a}.dim_sizes")])
            .collect();
        out.extend(self.stats.iter().map(|a| format!("{STATS_PREFIX}{a}")));
        out
    }

    /// Adds one scanned batch; a row whose dimensions cannot be read is an error naming it.
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        let missing = |what: String| Error::InvalidTable {
            uri: self.uri.to_string(),
            reason: format!("the scan returned no {what}"),
        };
        let addresses = batch
            .column_by_name(ROW_ADDR)
            .and_then(|c| c.as_primitive_opt::<UInt64Type>())
            .ok_or_else(|| missing(ROW_ADDR.into()))?
            .clone();
        let mut dims_of: Vec<Vec<Vec<Dim>>> = Vec::with_capacity(self.arrays.len());
        let mut present: HashMap<&str, ArrayRef> = HashMap::new();
        for (a, _) in self.arrays {
            let (Some(n), Some(s)) = (
                batch.column_by_name(&format!("{a}.dim_names")),
                batch.column_by_name(&format!("{a}.dim_sizes")),
            ) else {
                return Err(Error::InvalidTable {
                    uri: self.uri.to_string(),
                    reason: format!("array '{a}' has no dim_names / dim_sizes"),
                });
            };
            let mut rows = Vec::with_capacity(batch.num_rows());
            for r in 0..batch.num_rows() {
                let dims = decode_dims(n, s, r).map_err(|e| Error::InvalidRow {
                    uri: self.uri.to_string(),
                    row: self.rows + r as u64,
                    source: e.in_array(a),
                })?;
                for d in &dims {
                    if !self.names.contains(&d.name) {
                        self.names.push(d.name.clone());
                    }
                }
                rows.push(dims);
            }
            dims_of.push(rows);
            let with_array = arrow::compute::is_not_null(n).map_err(arrow_error)?;
            present.insert(a, Arc::new(with_array) as ArrayRef);
        }
        let stats_columns: Vec<(Option<StructArray>, ArrayRef)> = self
            .stats
            .iter()
            .map(|a| {
                let column = batch
                    .column_by_name(&format!("{STATS_PREFIX}{a}"))
                    .and_then(|c| c.as_struct_opt().cloned());
                (column, Arc::clone(&present[a.as_str()]))
            })
            .collect();

        let mut start = 0;
        while start < batch.num_rows() {
            let fragment = addresses.value(start) >> 32;
            let mut end = start + 1;
            while end < batch.num_rows() && addresses.value(end) >> 32 == fragment {
                end += 1;
            }
            self.add_rows(fragment, start..end, &dims_of);
            self.add_bounds(fragment, start..end, &stats_columns)?;
            start = end;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Cells and dimensions of rows `rows` of a batch, all of `fragment`.
    fn add_rows(&mut self, fragment: u64, rows: Range<usize>, dims_of: &[Vec<Vec<Dim>>]) {
        let summary = self
            .fragments
            .entry(fragment)
            .or_insert_with(|| FragmentSummary {
                cells: Some(0),
                ..Default::default()
            });
        for row in rows {
            let Some(total) = summary.cells.as_mut() else {
                return;
            };
            // The materializer's grid: a row whose grid cannot be made fails when read.
            let grid = infer_grid(dims_of.iter().map(|a| a[row].as_slice()));
            let Some((grid, cells)) = grid
                .ok()
                .and_then(|g| cell_count(&g).ok().map(|c| (g, c as u64)))
            else {
                summary.cells = None;
                return;
            };
            *total += cells;
            for d in grid {
                let dim = summary.dims.entry(d.name).or_default();
                dim.max_size = dim.max_size.max(d.size as u64);
                dim.cells_with += cells;
            }
        }
    }

    /// The `__stats__` bounds of rows `rows`, all of `fragment`, as whole columns at a time.
    fn add_bounds(
        &mut self,
        fragment: u64,
        rows: Range<usize>,
        columns: &[(Option<StructArray>, ArrayRef)],
    ) -> Result<()> {
        if self.stats.is_empty() {
            return Ok(());
        }
        let accumulators = match self.accumulators.entry(fragment) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(new_accumulators(columns)?),
        };
        let (start, len) = (rows.start, rows.len());
        for ((column, present), slot) in columns.iter().zip(accumulators.iter_mut()) {
            let (Some(column), Some((min, max))) = (column, slot.as_mut()) else {
                continue;
            };
            let stats = column.slice(start, len);
            let with_array = present.slice(start, len);
            // A row that has the array but no statistics (written before the column was, or
            // by someone else) leaves the fragment without bounds.
            if with_array.as_boolean().true_count() > len - stats.null_count() {
                *slot = None;
                continue;
            }
            // A NULL row has no bounds, whatever its children hold.
            let valid = arrow::compute::is_not_null(&stats).map_err(arrow_error)?;
            let lows = arrow::compute::filter(stats.column(0), &valid).map_err(arrow_error)?;
            let highs = arrow::compute::filter(stats.column(1), &valid).map_err(arrow_error)?;
            min.update_batch(&[lows]).map_err(df_error)?;
            max.update_batch(&[highs]).map_err(df_error)?;
        }
        Ok(())
    }

    /// Every dimension name, in order of first appearance, and the summary.
    pub(crate) fn finish(mut self) -> (Vec<String>, TableSummary) {
        for (fragment, accumulators) in self.accumulators.iter_mut() {
            let Some(summary) = self.fragments.get_mut(fragment) else {
                continue;
            };
            for (array, slot) in self.stats.iter().zip(accumulators) {
                let Some((min, max)) = slot else { continue };
                if let (Ok(min), Ok(max)) = (min.evaluate(), max.evaluate()) {
                    if !min.is_null() && !max.is_null() {
                        summary.bounds.insert(array.clone(), Bounds { min, max });
                    }
                }
            }
        }
        (
            self.names,
            TableSummary {
                fragments: self.fragments,
            },
        )
    }
}

fn new_accumulators(
    columns: &[(Option<StructArray>, ArrayRef)],
) -> Result<Vec<Option<(MinAccumulator, MaxAccumulator)>>> {
    columns
        .iter()
        .map(|(c, _)| {
            let Some(c) = c else { return Ok(None) };
            let t = c.column(0).data_type();
            Ok(Some((
                MinAccumulator::try_new(t).map_err(df_error)?,
                MaxAccumulator::try_new(t).map_err(df_error)?,
            )))
        })
        .collect()
}

fn arrow_error(e: arrow::error::ArrowError) -> Error {
    Error::arrow("summarizing the table's statistics", e)
}

fn df_error(e: datafusion::error::DataFusionError) -> Error {
    Error::Internal(format!("summarizing the table's statistics: {e}"))
}

impl TableSummary {
    /// The statistics of a scan of `fragments` producing `columns` (of types `types`);
    /// `filtered`: a filter may remove rows; `limit`: the scan stops there. `None` when some
    /// row's grid cannot be made.
    pub(crate) fn statistics(
        &self,
        fragments: &[u64],
        columns: &[ColumnSource],
        types: &[DataType],
        filtered: bool,
        limit: Option<usize>,
    ) -> Option<Statistics> {
        // A fragment with no live rows never appears in the summary pass.
        let empty = FragmentSummary {
            cells: Some(0),
            ..Default::default()
        };
        let parts: Vec<&FragmentSummary> = (fragments.iter())
            .map(|f| self.fragments.get(f).unwrap_or(&empty))
            .collect();
        let cells = parts.iter().map(|p| p.cells).sum::<Option<u64>>()?;
        let mut column_statistics = Vec::with_capacity(columns.len());
        for (column, t) in columns.iter().zip(types) {
            let stats = match column {
                ColumnSource::Index(d) => index_statistics(&parts, d, cells),
                ColumnSource::Array(a) => array_bounds(&parts, a, t),
                ColumnSource::GlobalAttrs => ColumnStatistics::new_unknown(),
            };
            column_statistics.push(stats);
        }
        let rows = usize::try_from(cells).ok()?;
        let mut statistics = Statistics {
            num_rows: Precision::Exact(rows),
            total_byte_size: Precision::Absent,
            column_statistics,
        };
        // Bounds only, as in the Zarr scans: a filter may remove rows, and each partition
        // stops at a limit on its own.
        if filtered || limit.is_some() {
            statistics = statistics.to_inexact();
        }
        if let Some(limit) = limit.filter(|&l| l < rows) {
            statistics.num_rows = Precision::Inexact(limit);
        }
        Some(statistics)
    }
}

/// An index column: 0 to the largest size - 1 where any grid has the dimension (every index
/// below a grid's size occurs on it), NULL on the cells of the others.
fn index_statistics(parts: &[&FragmentSummary], dim: &str, cells: u64) -> ColumnStatistics {
    let (max_size, with) = parts
        .iter()
        .filter_map(|p| p.dims.get(dim))
        .fold((0, 0), |(m, w), d| (m.max(d.max_size), w + d.cells_with));
    let mut stats = ColumnStatistics::new_unknown();
    stats.null_count = Precision::Exact((cells - with) as usize);
    if max_size > 0 {
        stats.min_value = Precision::Exact(ScalarValue::Int64(Some(0)));
        stats.max_value = Precision::Exact(ScalarValue::Int64(Some(max_size as i64 - 1)));
        stats.distinct_count = Precision::Exact(max_size as usize);
    } else {
        stats.distinct_count = Precision::Exact(0);
    }
    stats
}

/// An array's bounds when every fragment has them (`Inexact`: written by anyone).
fn array_bounds(parts: &[&FragmentSummary], array: &str, t: &DataType) -> ColumnStatistics {
    let mut stats = ColumnStatistics::new_unknown();
    let mut bounds: Option<(ScalarValue, ScalarValue)> = None;
    for p in parts {
        let Some(b) = p.bounds.get(array) else {
            if p.cells != Some(0) {
                return stats;
            }
            continue;
        };
        let (Ok(min), Ok(max)) = (b.min.cast_to(t), b.max.cast_to(t)) else {
            return stats;
        };
        bounds = Some(match bounds {
            None => (min, max),
            Some((lo, hi)) => (
                if min < lo { min } else { lo },
                if max > hi { max } else { hi },
            ),
        });
    }
    if let Some((min, max)) = bounds {
        stats.min_value = Precision::Inexact(min);
        stats.max_value = Precision::Inexact(max);
    }
    stats
}
