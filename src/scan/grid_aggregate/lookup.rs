//! [`Lookup`]: a table a grid aggregate reads a cell's row of by the cell's grid position,
//! in place of a join of every cell with it. An anomaly joins each cell with its group's
//! climatology (`d JOIN c ON extract(month FROM d.time) = c.mo AND d.lat = c.lat ...`, or
//! `avg(temp) OVER (PARTITION BY extract(month FROM time), lat, lon)`): the cell's side of
//! each key is a function of one axis, so each axis's keys give its indices a group along
//! it, the table's rows (one per key tuple: an aggregate's groups) are laid in a dense array
//! of those groups once, and a cell's row is found by adding its indices' offsets (no hash,
//! no row made per cell).
//!
//! At planning ([`Lookup::new`]) the cell side's keys are evaluated per index; when the
//! query runs ([`LookupTable::build`]) the table's rows are placed, each by its keys.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, BooleanBufferBuilder, RecordBatch, UInt32Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{concat, take};
use arrow::datatypes::{FieldRef, Schema};
use arrow::row::{RowConverter, SortField};
use datafusion::common::{internal_err, DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{collect_partitioned, ExecutionPlan};

use super::axis_groups::AxisGroups;
use crate::scan::GridSource;

/// Positions of a lookup's dense array, at most (offsets are `u32`).
const MAX_POSITIONS: u64 = u32::MAX as u64;

/// A table looked up by grid position (see the module).
#[derive(Debug)]
pub(crate) struct Lookup {
    /// The rows looked up: at most one per key tuple (an aggregate's groups).
    pub table: Arc<dyn ExecutionPlan>,
    /// Per axis of the grid: the groups of the cell side's keys along it (an axis without
    /// keys: one).
    axes: Vec<AxisGroups>,
    /// Per axis: the table's columns equal to that axis's keys, in `axes`' order of them.
    key_columns: Vec<Vec<usize>>,
    /// The table's other columns: the values a cell finds, and their fields.
    pub value_columns: Vec<usize>,
    pub fields: Vec<FieldRef>,
    /// Whether a NULL key finds a NULL key (a window's partitions do) or nothing (`=`).
    nulls_match: bool,
    /// What the EXPLAIN line calls it.
    pub label: String,
}

impl Lookup {
    /// The lookup of `table`'s rows by `keys` (each a column of `table` and the expression
    /// over the scan's columns it equals), when each such expression reads one axis of
    /// `grid` and has the column's type.
    pub(crate) fn new(
        grid: &dyn GridSource,
        table: Arc<dyn ExecutionPlan>,
        keys: &[(usize, Arc<dyn PhysicalExpr>)],
        nulls_match: bool,
        label: String,
    ) -> Result<Option<Lookup>> {
        let shape = grid.shape();
        let schema = table.schema();
        let mut per_axis: Vec<Vec<ArrayRef>> = vec![Vec::new(); shape.len()];
        let mut key_columns: Vec<Vec<usize>> = vec![Vec::new(); shape.len()];
        for (column, expr) in keys {
            let Some((axis, values)) = grid.per_index(expr) else {
                return Ok(None);
            };
            if schema.fields().get(*column).map(|f| f.data_type()) != Some(values.data_type()) {
                return Ok(None);
            }
            per_axis[axis].push(values);
            key_columns[axis].push(*column);
        }
        // Groups of the indices the scan reads (a filtered scan looks up no more).
        let read = grid.indices(None)?;
        let axes = (per_axis.iter().zip(&read).enumerate())
            .map(|(a, (values, read))| AxisGroups::new(shape[a] as usize, values, read))
            .collect::<Result<Vec<_>>>()?;
        let positions = (axes.iter()).try_fold(1u64, |n, a| n.checked_mul(u64::from(a.len())));
        if positions.is_none_or(|p| p > MAX_POSITIONS) {
            return Ok(None);
        }
        let value_columns: Vec<usize> = (0..schema.fields().len())
            .filter(|c| !keys.iter().any(|(k, _)| k == c))
            .collect();
        let fields = value_columns
            .iter()
            .map(|&c| Arc::clone(&schema.fields()[c]))
            .collect();
        Ok(Some(Lookup {
            table,
            axes,
            key_columns,
            value_columns,
            fields,
            nulls_match,
            label,
        }))
    }

    /// Groups along each axis: the dense array's shape.
    pub(crate) fn shape(&self) -> Vec<u32> {
        self.axes.iter().map(AxisGroups::len).collect()
    }

    /// Positions of the dense array.
    pub(crate) fn positions(&self) -> u64 {
        self.shape().iter().map(|&n| u64::from(n)).product()
    }

    /// Bytes of the dense array: its values (variable-width ones counted as 16 bytes) and
    /// a mark per position, and per axis an offset per index.
    pub(crate) fn bytes(&self) -> u64 {
        let width: u64 = (self.fields.iter())
            .map(|f| f.data_type().primitive_width().unwrap_or(16) as u64 + 1)
            .sum();
        let offsets: u64 = (self.axes.iter())
            .filter_map(|a| a.ids().map(|ids| ids.len() as u64 * 4))
            .sum();
        self.positions()
            .saturating_mul(width.saturating_add(1))
            .saturating_add(offsets)
    }
}

/// A lookup's table laid out when the query runs: its rows' values in a dense array of the
/// lookup's groups, and per axis each index's offset in it.
#[derive(Debug)]
pub(crate) struct LookupTable {
    /// Per axis: each index's group times the axis's stride (`None`: an axis without keys).
    offsets: Vec<Option<Vec<u32>>>,
    /// The positions a row of the table lies at.
    matched: BooleanBuffer,
    /// Whether every position has a row (a window's partitions: every cell finds one).
    all_matched: bool,
    /// Per value column: its value at each position.
    values: Vec<ArrayRef>,
    /// The memory all this holds, given back when the table is dropped.
    _reservation: MemoryReservation,
}

impl LookupTable {
    /// `lookup`'s table (`table`: the plan it was planned as, or what DataFusion's later
    /// rules made of it) run to the end and laid out; its memory reserved from
    /// `reservation` first (an error when the pool is short).
    pub(crate) async fn build(
        lookup: &Lookup,
        table: Arc<dyn ExecutionPlan>,
        context: Arc<TaskContext>,
        reservation: MemoryReservation,
    ) -> Result<LookupTable> {
        reservation.try_grow(usize::try_from(lookup.bytes()).unwrap_or(usize::MAX))?;
        let positions = lookup.positions() as usize;
        let batches: Vec<RecordBatch> = collect_partitioned(table, context)
            .await?
            .into_iter()
            .flatten()
            .collect();
        let shape = lookup.shape();
        let mut strides = vec![1u32; shape.len()];
        for a in (0..shape.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * shape[a + 1];
        }
        // Per axis with keys: its groups' key tuples, as rows, to their groups.
        let mut converters = Vec::with_capacity(shape.len());
        let mut groups: Vec<HashMap<Box<[u8]>, u32>> = Vec::with_capacity(shape.len());
        for (axis, columns) in lookup.axes.iter().zip(&lookup.key_columns) {
            if columns.is_empty() {
                converters.push(None);
                groups.push(HashMap::new());
                continue;
            }
            let keys: Vec<ArrayRef> = (0..columns.len())
                .map(|k| axis.key(k).cloned())
                .collect::<Option<_>>()
                .ok_or_else(|| DataFusionError::Internal("a lookup axis lost a key".into()))?;
            let fields = keys.iter().map(|k| SortField::new(k.data_type().clone()));
            let converter = RowConverter::new(fields.collect())?;
            let rows = converter.convert_columns(&keys)?;
            groups.push(
                (0..rows.num_rows())
                    .map(|g| (Box::from(rows.row(g).data()), g as u32))
                    .collect(),
            );
            converters.push(Some(converter));
        }
        // Per position: the row of the table there (counted over all its batches).
        let mut row_at: Vec<Option<u32>> = vec![None; positions];
        let mut first_row = 0usize;
        for batch in &batches {
            let mut at = vec![0u32; batch.num_rows()];
            let mut found = vec![true; batch.num_rows()];
            for (a, columns) in lookup.key_columns.iter().enumerate() {
                let Some(converter) = &converters[a] else {
                    continue;
                };
                let keys: Vec<ArrayRef> = columns
                    .iter()
                    .map(|&c| Arc::clone(batch.column(c)))
                    .collect();
                let rows = converter.convert_columns(&keys)?;
                for r in 0..batch.num_rows() {
                    let null = !lookup.nulls_match && keys.iter().any(|k| k.is_null(r));
                    match groups[a].get(rows.row(r).data()) {
                        Some(&g) if !null => at[r] += g * strides[a],
                        _ => found[r] = false,
                    }
                }
            }
            for (r, (&position, found)) in at.iter().zip(&found).enumerate() {
                if !found {
                    continue;
                }
                let row = u32::try_from(first_row + r)
                    .or_else(|_| internal_err!("a lookup table of more than 2^32 rows"))?;
                match &mut row_at[position as usize] {
                    Some(_) => {
                        return internal_err!("{}: two rows for one key", lookup.label);
                    }
                    slot => *slot = Some(row),
                }
            }
            first_row += batch.num_rows();
        }
        let mut matched = BooleanBufferBuilder::new(positions);
        row_at.iter().for_each(|r| matched.append(r.is_some()));
        let matched = matched.finish();
        let rows = UInt32Array::from(row_at);
        let schema: Arc<Schema> = lookup.table.schema();
        if batches
            .iter()
            .any(|b| b.schema().fields() != schema.fields())
        {
            return internal_err!("{}: the table's rows changed their columns", lookup.label);
        }
        let mut values = Vec::with_capacity(lookup.value_columns.len());
        for &c in &lookup.value_columns {
            let column = match batches.is_empty() {
                true => arrow::array::new_empty_array(schema.field(c).data_type()),
                false => {
                    let parts: Vec<&dyn Array> =
                        batches.iter().map(|b| b.column(c).as_ref()).collect();
                    concat(&parts)?
                }
            };
            values.push(take(column.as_ref(), &rows, None)?);
        }
        let offsets = (lookup.axes.iter().zip(&strides))
            .map(|(axis, &stride)| {
                (axis.ids()).map(|ids| ids.iter().map(|&id| id * stride).collect())
            })
            .collect();
        Ok(LookupTable {
            offsets,
            all_matched: matched.count_set_bits() == positions,
            matched,
            values,
            _reservation: reservation,
        })
    }

    /// The positions of `len` cells from `at` (grid coordinates) along the last axis,
    /// appended to `out`; `false` when a cell lies outside the grid.
    pub(crate) fn extend_run(&self, at: &[u64], len: usize, out: &mut Vec<u32>) -> bool {
        let Some((last, leading)) = self.offsets.split_last() else {
            out.extend(std::iter::repeat_n(0, len));
            return true;
        };
        let mut base = 0u32;
        for (o, &i) in leading.iter().zip(at) {
            if let Some(o) = o {
                match o.get(i as usize) {
                    Some(&o) => base += o,
                    None => return false,
                }
            }
        }
        match (last, at.get(leading.len())) {
            (Some(last), Some(&start)) => {
                let start = start as usize;
                match last.get(start..start.saturating_add(len)) {
                    Some(run) => out.extend(run.iter().map(|&o| base + o)),
                    None => return false,
                }
            }
            (None, Some(_)) => out.extend(std::iter::repeat_n(base, len)),
            (_, None) => return false,
        }
        true
    }

    /// At `positions`: which have a row (`None`: all), and value column `k`'s values.
    pub(crate) fn matched(&self, positions: &[u32]) -> Option<BooleanArray> {
        if self.all_matched {
            return None;
        }
        let matched = BooleanBuffer::collect_bool(positions.len(), |i| {
            self.matched.value(positions[i] as usize)
        });
        Some(BooleanArray::new(matched, None))
    }

    /// Value column `k` at `positions`.
    pub(crate) fn values(&self, k: usize, positions: &UInt32Array) -> Result<ArrayRef> {
        match self.values.get(k) {
            Some(values) => Ok(take(values.as_ref(), positions, None)?),
            None => internal_err!("a lookup has no value column {k}"),
        }
    }
}
