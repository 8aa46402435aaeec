//! The scan of a dataset: a [`GridScan`] over blocks of the dataset's grid. EXPLAIN shows it
//! as `ZarrDatasetScanExec`. Each block reads, for every variable the query needs, the box of
//! it under the block's selected cells (one chunk for variables chunked like the primary one),
//! on a blocking thread, then applies the row filter.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use futures::FutureExt;

use super::model::{Dataset, DatasetColumn};
use super::variable::BoxValues;
use crate::error::{Error, Result};
use crate::scan::{held_bytes, rows_made, spawn_batches, FoldTarget, UnitRead};
use crate::zarr::plan::chunk_plan::{chunk_count, ChunkPlan};
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::derived_column::{ConstantColumn, DerivedColumn};
use crate::zarr::plan::grid_statistics::{AxisColumn, AxisValues};
use crate::zarr::plan::row_filter::RowFilter;
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::grid_scan::{constants, GridReader, GridScan, ReadRuns};
use crate::zarr::read::metrics::ChunkMetrics;

/// The scan of a dataset.
pub(crate) type DatasetScan = GridScan<BlockReader>;

impl GridReader for BlockReader {
    const NAME: &'static str = "ZarrDatasetScanExec";
    const UNITS: &'static str = "blocks";
    const LOCATION: &'static str = "group";
    type Metrics = BlockMetrics;

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn location(&self) -> &str {
        &self.dataset.location
    }

    fn over_network(&self) -> bool {
        self.dataset.over_network
    }

    fn grid(&self) -> (Vec<u64>, Vec<u64>) {
        (self.dataset.shape(), self.dataset.block_shape.clone())
    }

    fn row_filter(&self) -> Option<&str> {
        self.filter.as_ref().map(|f| f.display.as_str())
    }

    fn unit_bytes(&self, selection: &Selection) -> u64 {
        self.block_bytes(selection)
    }

    fn unit_read_bytes(&self) -> u64 {
        (self.variables.iter())
            .map(|&v| self.stored_block_bytes(v))
            .fold(0, u64::saturating_add)
    }

    fn with_derived_columns(&self, extra: Vec<DerivedColumn>, keep: &[usize]) -> Option<Self> {
        self.derived
            .is_empty()
            .then(|| self.with_derived(extra, keep))
    }

    /// The schema marks every variable nullable (collections join them); a variable that
    /// masks no missing value and decodes no time never holds a NULL.
    fn null_free_columns(&self) -> Vec<usize> {
        let dataset = &self.dataset;
        (self.projection.iter().enumerate())
            .filter(|(i, &c)| match dataset.columns[c] {
                DatasetColumn::Variable { var, column } => {
                    !dataset.variables[var].may_be_null(column)
                }
                _ => !self.schema.field(*i).is_nullable(),
            })
            .map(|(i, _)| i)
            .collect()
    }

    fn constant_columns(&self) -> Vec<(usize, &ConstantColumn)> {
        constants(&self.derived, self.projection.len())
    }

    fn global_attrs(&self) -> Option<(usize, ArrayRef)> {
        let dataset = &self.dataset;
        let column = (self.projection.iter())
            .position(|&c| matches!(dataset.columns[c], DatasetColumn::GlobalAttrs))?;
        Some((column, dataset.global_attrs.as_ref()?.value()))
    }

    fn axis_columns(&self) -> Vec<AxisColumn<'_>> {
        let dataset = &self.dataset;
        let derived = (self.derived.iter().enumerate()).filter_map(|(i, d)| match d {
            DerivedColumn::Axis(a) => Some(a.as_axis_column(self.projection.len() + i)),
            DerivedColumn::Constant(_) => None,
        });
        (self.projection.iter().enumerate())
            .filter_map(|(column, &c)| match dataset.columns[c] {
                DatasetColumn::Axis(axis) => Some(AxisColumn {
                    column,
                    axis,
                    values: match &dataset.axes[axis].coordinate {
                        Some(coordinate) => AxisValues::Values {
                            values: &coordinate.values,
                            order: coordinate.value_order,
                        },
                        None => AxisValues::Index,
                    },
                }),
                _ => None,
            })
            .chain(derived)
            .collect()
    }

    /// The selection per constrained axis, in index ranges and coordinate values.
    fn describe_selection(&self, selection: &Selection) -> String {
        let dataset = &self.dataset;
        if selection.boxes().is_empty() {
            return "none".into();
        }
        let boxes: Vec<String> = selection
            .boxes()
            .iter()
            .map(|b| {
                let parts: Vec<String> = b
                    .iter()
                    .zip(&dataset.axes)
                    .filter(|(set, axis)| set.len() != axis.size)
                    .map(|(set, axis)| match &axis.coordinate {
                        Some(c) => format!("{}={} {set}", axis.name, c.describe(set.ranges())),
                        None => format!("{}={set}", axis.name),
                    })
                    .collect();
                if parts.is_empty() {
                    "all".into()
                } else {
                    parts.join(" x ")
                }
            })
            .collect();
        boxes.join(" | ")
    }

    /// Per variable read: chunks touched of chunks in all.
    fn fmt_reads(&self, selection: &Selection, f: &mut fmt::Formatter) -> fmt::Result {
        let dataset = &self.dataset;
        let chunks: Vec<String> = variables_read(dataset, &self.needed)
            .into_iter()
            .map(|v| {
                let var = &dataset.variables[v];
                let boxes: Vec<_> = selection
                    .boxes()
                    .iter()
                    .map(|b| var.axes.iter().map(|&a| b[a].clone()).collect())
                    .collect();
                let touched = Selection::from_boxes(boxes)
                    .map(|s| ChunkPlan::new(&var.shape, &var.chunk_shape, &s).len())
                    .unwrap_or(0);
                let total = chunk_count(&var.shape, &var.chunk_shape);
                format!("{} {touched}/{total}", var.name)
            })
            .collect();
        if chunks.is_empty() {
            return Ok(());
        }
        write!(f, ", chunks=[{}]", chunks.join(", "))
    }

    fn verbose_details(&self) -> Option<String> {
        let metadata = if self.dataset.consolidated {
            "consolidated"
        } else {
            "listed"
        };
        Some(format!("metadata={metadata}"))
    }

    fn metrics(metrics: &ExecutionPlanMetricsSet, partition: usize) -> BlockMetrics {
        BlockMetrics::new(metrics, partition)
    }

    /// The block's variables are read by their arrays' chunk readers and assembled into the
    /// block's batch. From a local store all of it runs in one blocking task, so the cells are
    /// gathered while the decoded chunks are in this core's cache (the scan reads other blocks
    /// beside it); from an object store the variables' requests are made concurrently, then the
    /// batch is assembled on a blocking thread.
    fn read_unit(
        self: &Arc<Self>,
        block: ChunkSelection,
        metrics: &BlockMetrics,
        fold: Option<&FoldTarget>,
    ) -> UnitRead {
        let reader = Arc::clone(self);
        let metrics = metrics.clone();
        let fold = fold.cloned();
        let batches = spawn_batches(|tx| async move {
            metrics.blocks_read.add(1);
            // The box of the block holding its selected cells, in grid coordinates.
            let read = match block.bounding_box() {
                Some((start, shape)) => block.within(&start, &shape),
                None => block,
            };
            let boxes = if reader.dataset.remote {
                let variables = &reader.dataset.variables;
                let boxes = futures::future::try_join_all(
                    (reader.variables.iter())
                        .map(|&v| variables[v].read_under(&read, &metrics.chunks)),
                )
                .await?;
                Some(boxes)
            } else {
                None
            };
            tokio::task::spawn_blocking(move || {
                let boxes = match boxes {
                    Some(boxes) => boxes,
                    None => (reader.variables.iter())
                        .map(|&v| {
                            reader.dataset.variables[v].read_under_local(&read, &metrics.chunks)
                        })
                        .collect::<Result<Vec<_>>>()?,
                };
                let _timer = metrics.assemble_time.timer();
                reader.assemble(&read, &boxes, fold.as_ref(), |batch| tx.send(batch))
            })
            .await
            .map_err(|e| Error::Internal(format!("block reading task failed: {e}")))?
        });
        futures::future::ready(Ok(batches)).boxed()
    }
}

/// The variables (indices) the columns `needed` read.
fn variables_read(dataset: &Dataset, needed: &[usize]) -> Vec<usize> {
    let mut vars = Vec::new();
    for &c in needed {
        if let DatasetColumn::Variable { var, .. } = dataset.columns[c] {
            if !vars.contains(&var) {
                vars.push(var);
            }
        }
    }
    vars
}

/// Per-partition counters shown by EXPLAIN ANALYZE: the blocks, and the variables' chunk
/// reads (the counters of an array scan).
#[derive(Debug, Clone)]
pub(crate) struct BlockMetrics {
    blocks_read: Count,
    /// Gathering, decoding and filtering the block's columns.
    assemble_time: Time,
    chunks: ChunkMetrics,
}

impl BlockMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        BlockMetrics {
            blocks_read: MetricBuilder::new(metrics).counter("blocks_read", partition),
            assemble_time: MetricBuilder::new(metrics).subset_time("assemble_time", partition),
            chunks: ChunkMetrics::new(metrics, partition),
        }
    }
}

/// Reads blocks into batches of the projected columns.
#[derive(Debug)]
pub(crate) struct BlockReader {
    dataset: Arc<Dataset>,
    /// The output columns (indices into the dataset's columns).
    projection: Vec<usize>,
    /// The projection, then the filter's other columns.
    needed: Vec<usize>,
    /// The variables `needed` reads (indices into the dataset's variables).
    variables: Vec<usize>,
    schema: SchemaRef,
    filter: Option<Arc<RowFilter<usize>>>,
    /// Rows per batch (before the row filter).
    batch_rows: usize,
    /// Columns after the projection's: expressions of an axis evaluated per index, or of the
    /// global attributes (constants).
    derived: Vec<DerivedColumn>,
}

impl BlockReader {
    /// Reads the columns `projection` (indices into the dataset's columns, their schema
    /// `schema`), after `filter`, in batches of `batch_rows` rows.
    pub(crate) fn new(
        dataset: Arc<Dataset>,
        projection: Vec<usize>,
        schema: SchemaRef,
        filter: Option<Arc<RowFilter<usize>>>,
        batch_rows: usize,
    ) -> Self {
        let mut needed = projection.clone();
        for c in filter.iter().flat_map(|f| f.columns.iter()) {
            if !needed.contains(c) {
                needed.push(*c);
            }
        }
        BlockReader {
            variables: variables_read(&dataset, &needed),
            dataset,
            projection,
            needed,
            schema,
            filter,
            batch_rows,
            derived: Vec::new(),
        }
    }

    /// The same reads of the columns `keep` (positions in this output), then `derived`.
    fn with_derived(&self, derived: Vec<DerivedColumn>, keep: &[usize]) -> Self {
        let fields = (keep.iter().map(|&i| Arc::clone(&self.schema.fields()[i])))
            .chain(derived.iter().map(|d| Arc::clone(d.field())));
        let projection = keep.iter().map(|&i| self.projection[i]).collect();
        let schema = Arc::new(Schema::new(fields.collect::<Vec<_>>()));
        let mut reader = BlockReader::new(
            Arc::clone(&self.dataset),
            projection,
            schema,
            self.filter.clone(),
            self.batch_rows,
        );
        reader.derived = derived;
        reader
    }

    /// The decoded bytes of variable `v`'s values under one block.
    fn stored_block_bytes(&self, v: usize) -> u64 {
        let dataset = &self.dataset;
        let var = &dataset.variables[v];
        let cells = (var.axes.iter()).fold(1u64, |n, &a| n.saturating_mul(dataset.block_shape[a]));
        cells.saturating_mul(var.cell_bytes())
    }

    /// What reading one block holds at most: each needed variable's box under the block,
    /// fetched and decoded (strings counted at 16 bytes a cell; a box that is a missing chunk
    /// holds one element, but that is known only once it is fetched), the positions of its
    /// cells in it (8 bytes a cell, unless the block's selected cells are one run of the
    /// variable's elements), the numbers of the block's selected cells (8 bytes each, when
    /// they are not one run), and its batches not yet taken by the scan (`held_bytes`, of 8
    /// bytes a cell of each needed column).
    fn block_bytes(&self, selection: &Selection) -> u64 {
        let dataset = &self.dataset;
        let cells = (dataset.block_shape.iter()).fold(1u64, |n, &d| n.saturating_mul(d));
        let runs = selection.runs_in_chunks(&dataset.shape(), &dataset.block_shape);
        let numbers = if runs { 0 } else { cells.saturating_mul(8) };
        let boxes = (self.variables.iter())
            .map(|&v| {
                let var = &dataset.variables[v];
                let stored = self.stored_block_bytes(v).saturating_mul(2);
                // A variable over every axis in order gathers a run; others, by position.
                let on_grid = var.axes.iter().copied().eq(0..dataset.block_shape.len());
                let positions = if runs && on_grid {
                    0
                } else {
                    cells.saturating_mul(8)
                };
                stored.saturating_add(positions)
            })
            .fold(0u64, u64::saturating_add);
        let row_bytes = ((self.needed.len() + self.derived.len()) as u64).saturating_mul(8);
        boxes
            .saturating_add(numbers)
            .saturating_add(held_bytes(cells.saturating_mul(row_bytes)))
    }

    /// The rows `read` selects, from the values of `self.variables` under it, as batches of
    /// `batch_rows` rows (before the filter) handed to `emit` one at a time (blocking: it
    /// decodes); or, with `fold`, each batch of the fold's columns (unfiltered, the row
    /// filter's verdict beside it) handed to the fold where its cells lie.
    fn assemble(
        &self,
        read: &ChunkSelection,
        boxes: &[BoxValues],
        fold: Option<&FoldTarget>,
        mut emit: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let dataset = &self.dataset;
        let projected = self.projection.len();
        // The output columns made: all of them, or those the fold reads.
        let made = |column: usize| fold.is_none_or(|f| f.reads(column));
        let filter_reads = |c: usize| (self.filter.iter()).any(|f| f.columns.contains(&c));
        // The dataset columns to make: an axis column only when made or filtered on.
        let needed: Vec<usize> = (self.needed.iter().copied())
            .filter(|&c| match dataset.columns[c] {
                DatasetColumn::Axis(_) => {
                    let output = self.projection.iter().position(|&p| p == c);
                    output.is_some_and(made) || filter_reads(c)
                }
                _ => true,
            })
            .collect();
        // Where the rows lie, when an axis column is wanted or a fold places them (several
        // boxes: 8 bytes a row).
        let derived_axes = (self.derived.iter().enumerate())
            .any(|(i, d)| d.axis().is_some() && made(projected + i));
        let wants_axes = fold.is_some()
            || derived_axes
            || (needed.iter()).any(|&c| matches!(dataset.columns[c], DatasetColumn::Axis(_)));
        let index = wants_axes.then(|| read.row_index());
        // Each variable is read once for all of its needed columns, its cells located once.
        let mut by_var: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
        for &c in &needed {
            if let DatasetColumn::Variable { var, column } = dataset.columns[c] {
                match by_var.iter_mut().find(|(v, _)| *v == var) {
                    Some((_, cols)) => cols.push((c, column)),
                    None => by_var.push((var, vec![(c, column)])),
                }
            }
        }
        let located = (by_var.iter())
            .map(|(var, _)| {
                let at = self.variables.iter().position(|v| v == var);
                let var_box = at
                    .map(|i| &boxes[i])
                    .ok_or_else(|| Error::Internal(format!("variable {var} was not read")))?;
                Ok((var_box, dataset.variables[*var].gather_under(read)))
            })
            .collect::<Result<Vec<_>>>()?;
        let batch_rows = rows_made(self.batch_rows);
        for start in (read.skip..read.rows).step_by(batch_rows) {
            let rows = start..(start + batch_rows).min(read.rows);
            let mut values: HashMap<usize, ArrayRef> = HashMap::new();
            // An axis's values on the batch's rows (the filter comes after): repeated where
            // the rows lie in one index of the axis.
            let axis_values = |a: usize, values: Option<&ArrayRef>| {
                let index =
                    (index.as_ref()).ok_or_else(|| Error::Internal("no row index".into()))?;
                read.axis_values_in(index, a, rows.clone(), values)
            };
            for &c in &needed {
                match dataset.columns[c] {
                    DatasetColumn::Axis(a) => {
                        let coordinate = dataset.axes[a].coordinate.as_ref();
                        let column = axis_values(a, coordinate.map(|c| &c.values))?;
                        values.insert(c, column);
                    }
                    DatasetColumn::GlobalAttrs => {
                        let attrs = (dataset.global_attrs.as_ref())
                            .ok_or_else(|| Error::Internal("no global attributes".into()))?;
                        values.insert(c, attrs.repeated(rows.len())?);
                    }
                    DatasetColumn::Variable { .. } => {}
                }
            }
            for ((var, cols), (var_box, gather)) in by_var.iter().zip(&located) {
                let wanted: Vec<usize> = cols.iter().map(|&(_, column)| column).collect();
                let gather = gather.slice(rows.clone());
                let arrays = dataset.variables[*var].columns_at(var_box, &gather, &wanted)?;
                for ((c, _), array) in cols.iter().zip(arrays) {
                    values.insert(*c, array);
                }
            }
            // Output column `i`, when made.
            let output = |i: usize| -> Result<ArrayRef> {
                match self.projection.get(i) {
                    Some(c) => (values.get(c).cloned())
                        .ok_or_else(|| Error::Internal(format!("column {c} was not made"))),
                    None => (self.derived.get(i - projected))
                        .ok_or_else(|| Error::Internal(format!("no output column {i}")))?
                        .values(rows.len(), |a, values| axis_values(a, Some(values))),
                }
            };
            let keep = match &self.filter {
                Some(filter) => {
                    let inputs = (filter.columns.iter())
                        .map(|c| Arc::clone(&values[c]))
                        .collect();
                    Some(filter.keep(inputs, rows.len())?)
                }
                None => None,
            };
            let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
            if let Some(target) = fold {
                let columns = target.columns.iter().map(|&i| output(i));
                let batch = RecordBatch::try_new_with_options(
                    Arc::clone(&target.schema),
                    columns.collect::<Result<Vec<_>>>()?,
                    &options,
                )
                .map_err(|e| Error::arrow("assembling a block's cells", e))?;
                let index =
                    (index.as_ref()).ok_or_else(|| Error::Internal("no row index".into()))?;
                let runs = ReadRuns {
                    read,
                    index,
                    rows: rows.clone(),
                };
                target.fold.fold(&runs, &batch, keep.as_ref())?;
                continue;
            }
            let columns = (0..self.schema.fields().len()).map(output);
            let batch = RecordBatch::try_new_with_options(
                Arc::clone(&self.schema),
                columns.collect::<Result<Vec<_>>>()?,
                &options,
            )
            .map_err(|e| Error::arrow("assembling a block's batch", e))?;
            let batch = match &keep {
                Some(mask) => filter_record_batch(&batch, mask)
                    .map_err(|e| Error::arrow("filtering a block", e))?,
                None => batch,
            };
            if batch.num_rows() > 0 || self.filter.is_none() {
                emit(batch)?;
            }
        }
        Ok(())
    }
}
