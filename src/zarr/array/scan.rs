//! The scan of one Zarr array: a [`GridScan`] over the array's chunks, each read by the
//! [`ChunkReader`] under the array's read strategy. EXPLAIN shows it as `ZarrScanExec`.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::{FutureExt, StreamExt};

use crate::scan::UnitRead;

use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::selection::Selection;
use crate::zarr::read::chunk_reader::ChunkReader;
use crate::zarr::read::grid_scan::{GridReader, GridScan};
use crate::zarr::read::metrics::ChunkMetrics;

/// The scan of a Zarr array.
pub(crate) type ArrayScan = GridScan<ChunkReader>;

impl GridReader for ChunkReader {
    const NAME: &'static str = "ZarrScanExec";
    const UNITS: &'static str = "chunks";
    const LOCATION: &'static str = "array";
    type Metrics = ChunkMetrics;

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn location(&self) -> &str {
        &self.array.location
    }

    fn remote(&self) -> bool {
        self.array.store.is_remote()
    }

    fn grid(&self) -> (Vec<u64>, Vec<u64>) {
        (
            self.array.meta.shape.clone(),
            self.array.meta.chunk_shape.clone(),
        )
    }

    fn row_filter(&self) -> Option<&str> {
        self.filter.as_ref().map(|f| f.display.as_str())
    }

    /// A read holds the fetched chunk and the decoded one.
    fn unit_bytes(&self) -> u64 {
        2 * self.array.meta.chunk_bytes()
    }

    fn describe_selection(&self, selection: &Selection) -> String {
        let meta = &self.array.meta;
        selection.describe(&meta.dimension_names, &meta.shape)
    }

    fn metrics(metrics: &ExecutionPlanMetricsSet, partition: usize) -> ChunkMetrics {
        ChunkMetrics::new(metrics, partition)
    }

    fn read_unit(self: &Arc<Self>, unit: ChunkSelection, metrics: &ChunkMetrics) -> UnitRead {
        Arc::clone(self)
            .read(unit, metrics.clone())
            .map(|batches| Ok(futures::stream::iter(batches?.into_iter().map(Ok)).boxed()))
            .boxed()
    }
}
