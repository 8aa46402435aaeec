//! The scan of one Zarr array: a [`GridScan`] over the array's chunks, each read by the
//! [`ChunkBatches`] (the array's `ChunkReader`, under its read strategy). EXPLAIN shows it as `ZarrScanExec`.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;

use crate::scan::UnitRead;

use crate::zarr::array::chunk_batches::ChunkBatches;
use crate::zarr::metadata::schema::ColumnSource;
use crate::zarr::plan::axis_expression::AxisExpression;
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::grid_statistics::{AxisColumn, AxisValues};
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::grid_scan::{GridReader, GridScan};
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

    fn remote(&self) -> bool {
        self.reader.array.store.is_remote()
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

    fn unit_bytes(&self) -> u64 {
        ChunkBatches::unit_bytes(self)
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
        let derived = (self.derived.iter().enumerate())
            .map(|(i, d)| d.as_axis_column(self.columns.len() + i));
        own.chain(derived).collect()
    }

    fn with_axis_expressions(&self, extra: Vec<AxisExpression>, keep: &[usize]) -> Self {
        self.with_derived(extra, keep)
    }

    fn describe_selection(&self, selection: &Selection) -> String {
        let meta = &self.reader.array.meta;
        selection.describe(&meta.dimension_names, &meta.shape)
    }

    fn metrics(metrics: &ExecutionPlanMetricsSet, partition: usize) -> ChunkMetrics {
        ChunkMetrics::new(metrics, partition)
    }

    fn read_unit(self: &Arc<Self>, unit: ChunkSelection, metrics: &ChunkMetrics) -> UnitRead {
        let batches = Arc::clone(self).read(unit, metrics.clone());
        futures::future::ready(Ok(batches)).boxed()
    }
}
