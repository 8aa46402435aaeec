//! The scan of one Zarr array: a [`GridScan`] over the array's chunks, each read by the
//! [`ChunkBatches`] (the array's `ChunkReader`, under its read strategy). EXPLAIN shows it as `ZarrScanExec`.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;

use crate::scan::{FoldTarget, UnitRead};

use crate::zarr::array::chunk_batches::ChunkBatches;
use crate::zarr::metadata::schema::ColumnSource;
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::derived_column::{ConstantColumn, DerivedColumn};
use crate::zarr::plan::grid_statistics::{AxisColumn, AxisValues};
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::grid_scan::{constants, GridReader, GridScan};
use crate::zarr::read::metrics::ChunkMetrics;

/// The scan of a Zarr array.
pub(crate) type ArrayScan = GridScan<ChunkBatches>;

impl GridReader for ChunkBatches {
    const NAME: &'static str = "ZarrScanExec";
    const UNITS: &'static str = "chunks";
    const LOCATION: &'static str = "array";
    type Metrics = ChunkMetrics;

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn location(&self) -> &str {
        &self.reader.array.location
    }

    fn over_network(&self) -> bool {
        self.reader.array.store.over_network()
    }

    fn grid(&self) -> (Vec<u64>, Vec<u64>) {
        (
            self.reader.array.meta.shape.clone(),
            self.reader.array.meta.chunk_shape.clone(),
        )
    }

    fn row_filter(&self) -> Option<&str> {
        self.filter.as_ref().map(|f| f.display.as_str())
    }

    fn unit_bytes(&self, selection: &Selection) -> u64 {
        ChunkBatches::unit_bytes(self, selection)
    }

    fn unit_read_bytes(&self) -> u64 {
        self.chunk_read_bytes()
    }

    fn axis_columns(&self) -> Vec<AxisColumn<'_>> {
        let own = (self.columns.iter().enumerate()).filter_map(|(column, source)| match source {
            ColumnSource::Dimension(axis) => Some(AxisColumn {
                column,
                axis: *axis,
                values: AxisValues::Index,
            }),
            _ => None,
        });
        let derived = (self.derived.iter().enumerate()).filter_map(|(i, d)| match d {
            DerivedColumn::Axis(a) => Some(a.as_axis_column(self.columns.len() + i)),
            DerivedColumn::Constant(_) => None,
        });
        own.chain(derived).collect()
    }

    fn constant_columns(&self) -> Vec<(usize, &ConstantColumn)> {
        constants(&self.derived, self.columns.len())
    }

    fn global_attrs(&self) -> Option<(usize, ArrayRef)> {
        let column = (self.columns.iter()).position(|c| matches!(c, ColumnSource::GlobalAttrs))?;
        Some((column, self.global_attrs.as_ref()?.value()))
    }

    fn with_derived_columns(&self, extra: Vec<DerivedColumn>, keep: &[usize]) -> Option<Self> {
        self.derived
            .is_empty()
            .then(|| self.with_derived(extra, keep))
    }

    fn describe_selection(&self, selection: &Selection) -> String {
        let meta = &self.reader.array.meta;
        selection.describe(&meta.dimension_names, &meta.shape)
    }

    fn metrics(metrics: &ExecutionPlanMetricsSet, partition: usize) -> ChunkMetrics {
        ChunkMetrics::new(metrics, partition)
    }

    fn read_unit(
        self: &Arc<Self>,
        unit: ChunkSelection,
        metrics: &ChunkMetrics,
        fold: Option<&FoldTarget>,
    ) -> UnitRead {
        let batches = Arc::clone(self).read(unit, metrics.clone(), fold.cloned());
        futures::future::ready(Ok(batches)).boxed()
    }
}
