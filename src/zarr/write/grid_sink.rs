//! [`GridSink`]: a query's rows written as an xarray dataset on the grid of its `dimensions`
//! columns, what `xr.Dataset.from_dataframe(df.set_index(dimensions))` makes of them: one
//! coordinate per dimension (its sorted distinct values), every other column a data variable
//! on all the dimensions, NaN / NaT / `""` where no row names a cell (`variable.rs`),
//! consolidated metadata, in Zarr 3 or 2 (`zarr_version.rs`).
//!
//! Two passes, in bounded memory. The input arrives sorted by the dimensions (the sink asks
//! for that order; DataFusion's sort spills to disk within the memory pool). Pass one learns
//! each dimension's values (`grid.rs`) while the rows go to a spill file; pass two reads them
//! back and fills one slab of chunks along the first dimension at a time, so only that slab
//! (its strings' bytes too) and the chunks being compressed and written are held. Two rows on
//! one cell are an error naming the dimensions and the cell.

use std::fs::File;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use async_trait::async_trait;
use datafusion::common::Result as DfResult;
use datafusion::datasource::sink::DataSink;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::col;
use datafusion::physical_expr::{LexRequirement, PhysicalSortRequirement};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;
use serde_json::Value;
use tokio::task::JoinSet;

use super::options::ZarrWriteOptions;
use super::sink::{joined, write_chunk};
use super::target::{Commit, ObjectWriter, Target};
use super::variable::{copy_box, Stored, Strings};
use super::zarr_version::{ArraySpec, ZarrVersion};
use crate::error::{Error, Result};
use crate::nd::on_grid::{OnGrid, Placement};
use crate::nd::rows_grid::{CoordinateTypes, Grid, GridBuilder, ORDER};

/// Bytes of values a chunk holds by default (xarray and zarr-python advise a few MiB).
const TARGET_CHUNK_BYTES: usize = 2 << 20;

/// Chunks compressed and written at once while a slab is flushed.
const CHUNKS_IN_FLIGHT: usize = 4;

/// A dimension may be a number, a time or a string.
const TYPES: CoordinateTypes = CoordinateTypes::NumbersAndStrings;

/// Cells a grid may have for each row written, past a first million: a sparse result (a few
/// rows on far-apart values of several dimensions) would otherwise make a grid of mostly
/// missing cells of any size.
const CELLS_PER_ROW: u64 = 1024;

/// Writes a query's rows as a dataset on the grid of its dimension columns.
#[derive(Debug)]
pub(crate) struct GridSink {
    location: String,
    options: ZarrWriteOptions,
    schema: SchemaRef,
    dimensions: Vec<String>,
    version: ZarrVersion,
    /// Bytes the coordinates may hold (the session's `ndfusion.max_coordinate_bytes`).
    max_coordinate_bytes: u64,
    metrics: ExecutionPlanMetricsSet,
}

/// A data variable: its column and how it is stored.
struct Variable {
    name: String,
    column: usize,
    stored: Stored,
}

impl GridSink {
    /// A sink for rows of `schema`: an error naming a dimension that is not a column, a
    /// column the grid cannot store, or an option at fault, before the query runs.
    pub(crate) fn new(
        location: &str,
        options: ZarrWriteOptions,
        schema: SchemaRef,
        max_coordinate_bytes: u64,
    ) -> Result<Self> {
        let refused = |reason: String| Error::Write {
            location: location.to_string(),
            reason,
        };
        let dimensions = options.dimensions().unwrap_or_default().to_vec();
        GridBuilder::new(&schema, &dimensions, TYPES, max_coordinate_bytes)
            .map_err(|e| refused(e.to_string()))?;
        for field in schema.fields() {
            check_name(field.name()).map_err(&refused)?;
            if !dimensions.contains(field.name()) {
                Stored::of(field.name(), field.data_type(), true)
                    .map_err(|e| refused(e.to_string()))?;
            }
        }
        let names: Vec<&str> = dimensions.iter().map(String::as_str).collect();
        for name in &names {
            options.chunk_length(&names, name)?;
        }
        options.attributes()?;
        let version = options.zarr_version()?;
        Ok(GridSink {
            location: location.to_string(),
            options,
            schema,
            dimensions,
            version,
            max_coordinate_bytes,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The dimensions' columns, in the dataset's order.
    pub(crate) fn dimensions(&self) -> &[String] {
        &self.dimensions
    }

    /// The order the sink takes its rows in: by the dimensions, ascending.
    pub(crate) fn required_order(&self) -> Result<Option<LexRequirement>> {
        let mut requirements = Vec::with_capacity(self.dimensions.len());
        for name in &self.dimensions {
            let expr = col(name, &self.schema).map_err(|e| Error::Internal(e.to_string()))?;
            requirements.push(PhysicalSortRequirement::new(expr, Some(ORDER)));
        }
        Ok(LexRequirement::new(requirements))
    }

    fn refused(&self, reason: impl std::fmt::Display) -> Error {
        Error::Write {
            location: self.location.clone(),
            reason: reason.to_string(),
        }
    }

    /// Both passes, then the metadata (or, on an error, removes what was written:
    /// `Target::finish`).
    async fn write(
        &self,
        data: SendableRecordBatchStream,
        ctx: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let (target, mut reservation, mut writes) = self.begin(ctx).await?;
        let outcome = (self.write_into(data, ctx, &target, &mut reservation, &mut writes)).await;
        target.finish(outcome, &mut writes).await
    }

    /// Where the dataset is staged, the memory it holds, and its chunk writes in flight.
    async fn begin(
        &self,
        ctx: &Arc<TaskContext>,
    ) -> Result<(Target, MemoryReservation, JoinSet<Result<usize>>)> {
        let target = Target::create(
            &self.location,
            self.options.storage(),
            self.options.overwrite(),
        )
        .await?;
        let reservation = MemoryConsumer::new(format!("ZarrGridSink {}", self.location))
            .register(ctx.memory_pool());
        Ok((target, reservation, JoinSet::new()))
    }

    /// A result already on its grid (`grid`, whose rows make `placement`) written as the
    /// rows it stands for would be, without the spill and the pass that learns the grid:
    /// the slabs are filled from the values at their cells' positions.
    pub(crate) async fn write_on_grid(
        &self,
        grid: &OnGrid,
        placement: Placement,
        ctx: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        let (target, mut reservation, mut writes) = self.begin(ctx).await?;
        let outcome = async {
            let rows = placement.rows;
            let variables = (self.schema.fields().iter().enumerate())
                .filter(|(_, f)| !self.dimensions.contains(f.name()))
                .map(|(i, _)| i);
            // A variable has a NULL where a row's value is NULL.
            let mut nulls = vec![false; self.schema.fields().len()];
            for (column, values) in variables.zip(&grid.values) {
                nulls[column] = match values.logical_nulls() {
                    Some(valid) => {
                        let missing = &grid.present & &!valid.inner();
                        missing.count_set_bits() > 0
                    }
                    None => false,
                };
            }
            let layout = self.layout(
                placement.coordinates.clone(),
                rows,
                |column| nulls[column],
                &mut reservation,
            )?;
            let mut fill = self.fill(&layout, &target, &mut reservation, &mut writes);
            let first = layout.chunks[0];
            for slab in 0..layout.shape[0].div_ceil(first) {
                let indices = slab * first..((slab + 1) * first).min(layout.shape[0]);
                let positions = grid.positions(&placement, indices);
                let columns = (grid.values.iter())
                    .map(|values| take(values.as_ref(), &positions, None))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                fill.slab = Some(slab);
                fill.put_slab(&columns)?;
                fill.flush().await?;
            }
            let commit = self.finish_dataset(&mut fill, &target.writer()).await?;
            Ok((rows, commit))
        }
        .await;
        target.finish(outcome, &mut writes).await
    }

    async fn write_into(
        &self,
        mut data: SendableRecordBatchStream,
        ctx: &Arc<TaskContext>,
        target: &Target,
        reservation: &mut MemoryReservation,
        writes: &mut JoinSet<Result<usize>>,
    ) -> DfResult<(u64, Commit)> {
        // Pass one: learn the grid, spill the rows.
        let spill = ctx
            .runtime_env()
            .disk_manager
            .create_tmp_file("COPY ... STORED AS ZARR OPTIONS ('dimensions' ...)")?;
        let path = spill.path().to_path_buf();
        let file =
            File::create(&path).map_err(|e| self.refused(format!("spilling the rows: {e}")))?;
        let mut spilled = Some(StreamWriter::try_new(file, &self.schema)?);
        let mut builder = GridBuilder::new(
            &self.schema,
            &self.dimensions,
            TYPES,
            self.max_coordinate_bytes,
        )
        .map_err(|e| self.refused(e))?;
        let mut nulls = vec![0usize; self.schema.fields().len()];
        let mut rows: u64 = 0;
        while let Some(batch) = data.next().await {
            let batch = batch?;
            builder.add(&batch).map_err(|e| self.refused(e))?;
            for (n, column) in nulls.iter_mut().zip(batch.columns()) {
                *n += column.null_count();
            }
            rows += batch.num_rows() as u64;
            let mut writer = spilled.take().expect("the spill writer is put back");
            writer = tokio::task::spawn_blocking(move || writer.write(&batch).map(|_| writer))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            spilled = Some(writer);
        }
        let writer = spilled.take().expect("the spill writer is put back");
        tokio::task::spawn_blocking(move || {
            let mut writer = writer;
            writer.finish()
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        let grid = builder.finish().map_err(|e| self.refused(e))?;
        let coordinates = grid.dims.iter().map(|d| Arc::clone(&d.values)).collect();
        let layout = self.layout(coordinates, rows, |column| nulls[column] > 0, reservation)?;

        // Pass two: the rows back, slab by slab.
        let mut fill = self.fill(&layout, target, reservation, writes);
        let mut reader = Some(StreamReader::try_new(
            File::open(&path)
                .map_err(|e| self.refused(format!("reading the spilled rows: {e}")))?,
            None,
        )?);
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); grid.dims.len()];
        loop {
            let mut r = reader.take().expect("the spill reader is put back");
            let (next, r) = tokio::task::spawn_blocking(move || (r.next(), r))
                .await
                .map_err(|e| Error::Internal(e.to_string()))?;
            reader = Some(r);
            let Some(batch) = next else { break };
            fill.add(&batch?, &grid, &mut positions).await?;
        }
        fill.flush().await?;
        drop(spill);
        let commit = self.finish_dataset(&mut fill, &target.writer()).await?;
        Ok((rows, commit))
    }

    /// The dataset on the grid of `coordinates` (each dimension's values, ascending) made
    /// of `rows` rows: its shape, chunks and how each variable is stored (`has_nulls`:
    /// whether a column has a NULL), one slab's memory reserved.
    fn layout(
        &self,
        coordinates: Vec<ArrayRef>,
        rows: u64,
        has_nulls: impl Fn(usize) -> bool,
        reservation: &mut MemoryReservation,
    ) -> Result<Layout> {
        let shape: Vec<usize> = coordinates.iter().map(|c| c.len()).collect();
        let cells = (shape.iter()).try_fold(1u64, |n, &len| n.checked_mul(len as u64));
        let sizes = || {
            (self.dimensions.iter().zip(&shape))
                .map(|(name, len)| format!("{name}={len}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let cells = match cells {
            Some(c) if c <= rows.saturating_mul(CELLS_PER_ROW).saturating_add(1 << 20) => c,
            _ => {
                return Err(self.refused(format!(
                    "the grid ({}) would have {} cells for {rows} rows: a result this \
                     sparse is no grid; choose other dimensions",
                    sizes(),
                    cells.map_or("too many".into(), |c| c.to_string())
                )))
            }
        };
        let missing = cells != rows;
        let variables: Vec<Variable> = (self.schema.fields().iter().enumerate())
            .filter(|(_, f)| !self.dimensions.contains(f.name()))
            .map(|(i, f)| {
                Stored::of(f.name(), f.data_type(), missing || has_nulls(i))
                    .map(|stored| Variable {
                        name: f.name().clone(),
                        column: i,
                        stored,
                    })
                    .map_err(|e| self.refused(e))
            })
            .collect::<Result<_>>()?;
        let widest = variables
            .iter()
            .map(|v| v.stored.width())
            .max()
            .unwrap_or(8);
        let chunks = self.chunk_shape(&shape, widest)?;
        let slab_cells: usize = chunks[0] * shape[1..].iter().product::<usize>();
        let chunk_cells: usize = chunks.iter().product();
        let slab_bytes: usize =
            variables.iter().map(|v| v.stored.width()).sum::<usize>() * slab_cells;
        let held = slab_bytes + 2 * CHUNKS_IN_FLIGHT * chunk_cells * widest;
        reservation.try_grow(held).map_err(|_| {
            let first = &self.dimensions[0];
            self.refused(format!(
                "the memory pool cannot hold one slab of chunks along '{first}' ({held} \
                 bytes); write smaller chunks (OPTIONS ('chunks' '{first}=1')) or raise the \
                 memory limit"
            ))
        })?;
        Ok(Layout {
            coordinates,
            shape,
            chunks,
            variables,
            slab_cells,
        })
    }

    /// What fills `layout`'s slabs and writes their chunks into `target`.
    fn fill<'a>(
        &'a self,
        layout: &'a Layout,
        target: &Target,
        reservation: &'a mut MemoryReservation,
        writes: &'a mut JoinSet<Result<usize>>,
    ) -> Fill<'a> {
        Fill {
            sink: self,
            layout,
            slabs: (layout.variables.iter())
                .map(|v| v.stored.missing().repeat(layout.slab_cells))
                .collect(),
            strings: vec![Strings::new(); layout.variables.len()],
            reservation,
            slab: None,
            previous: Vec::new(),
            writer: target.writer(),
            writes,
            version: self.version,
            compression: self.options.compression(),
            chunks_written: MetricBuilder::new(&self.metrics).global_counter("chunks_written"),
        }
    }

    /// The coordinates' chunks, then every array's documents, then the group's: the last
    /// is the commit.
    async fn finish_dataset(&self, fill: &mut Fill<'_>, writer: &ObjectWriter) -> Result<Commit> {
        let layout = fill.layout;
        let compression = fill.compression;
        let names: Vec<&str> = self.dimensions.iter().map(String::as_str).collect();
        let chunks = &layout.chunks;
        let mut documents = Vec::new();
        for (d, (name, values)) in names.iter().zip(&layout.coordinates).enumerate() {
            let stored =
                Stored::of(name, values.data_type(), false).map_err(|e| self.refused(e))?;
            let values = stored.prepare(values).map_err(|e| self.refused(e))?;
            let len = values.len();
            let w = stored.width();
            let mut all = vec![0u8; len * w];
            let mut strings = Strings::new();
            let cells: Vec<usize> = (0..len).collect();
            stored.put_column(values.as_ref(), &cells, &mut all, &mut strings);
            for (k, start) in (0..len).step_by(chunks[d]).enumerate() {
                let mut chunk = stored.missing().repeat(chunks[d]);
                copy_box(&all, &[len], &[start], &mut chunk, &[chunks[d]], w);
                let chunk = fill.encode(&stored, chunk, &strings)?;
                finish_some(fill.writes, CHUNKS_IN_FLIGHT).await?;
                let key = self.version.chunk_key(name, &[k]);
                fill.writes
                    .spawn(write_chunk(writer.clone(), key, chunk, compression));
            }
            let array = ArraySpec {
                name,
                stored: &stored,
                shape: &[len],
                chunks: &[chunks[d]],
                dimensions: &[name],
            };
            documents.extend(self.version.array_documents(&array, compression));
        }
        for v in &layout.variables {
            let array = ArraySpec {
                name: &v.name,
                stored: &v.stored,
                shape: &layout.shape,
                chunks,
                dimensions: &names,
            };
            documents.extend(self.version.array_documents(&array, compression));
        }
        finish_some(fill.writes, 0).await?;
        for (key, doc) in &documents {
            put_document(writer, key, doc).await?;
        }
        let (group, commit) =
            (self.version).group_documents(self.options.attributes()?, &documents);
        for (key, doc) in &group {
            put_document(writer, key, doc).await?;
        }
        Ok(commit)
    }

    /// Elements per chunk along each dimension: `chunks` where given (at most the
    /// dimension's length); otherwise whole
    /// dimensions after the first and as many of the first as make about 2 MiB, the last
    /// dimensions split in halves while one of the first makes more.
    fn chunk_shape(&self, shape: &[usize], width: usize) -> Result<Vec<usize>> {
        let names: Vec<&str> = self.dimensions.iter().map(String::as_str).collect();
        let mut chunks: Vec<usize> = shape.iter().map(|&n| n.max(1)).collect();
        let budget = (TARGET_CHUNK_BYTES / width).max(1);
        let mut d = shape.len() - 1;
        while d > 0 && chunks[1..].iter().product::<usize>() > budget {
            if chunks[d] == 1 {
                d -= 1;
                continue;
            }
            chunks[d] = chunks[d].div_ceil(2);
        }
        chunks[0] = (budget / chunks[1..].iter().product::<usize>()).clamp(1, shape[0].max(1));
        for (i, name) in names.iter().enumerate() {
            // A chunk longer than its dimension holds no more: clamped, so what a write
            // holds follows from the grid (bounded by the rows), not from the option's number.
            if let Some(n) = self.options.chunk_length(&names, name)? {
                chunks[i] = n.min(shape[i].max(1));
            }
        }
        Ok(chunks)
    }
}

/// A dimension or variable name must be a Zarr node name.
fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty()
        || name.contains('/')
        || name.starts_with("__")
        || name == "."
        || name == ".."
    {
        return Err(format!(
            "column '{name}' cannot name an array of the dataset (Zarr node names are not \
             empty, hold no '/', are not '.' or '..' and do not start with '__'); rename it"
        ));
    }
    Ok(())
}

/// Waits until at most `left` chunk writes are running.
async fn finish_some(writes: &mut JoinSet<Result<usize>>, left: usize) -> Result<()> {
    while writes.len() > left {
        joined(writes.join_next().await)?;
    }
    Ok(())
}

/// Writes one metadata document (uncompressed).
async fn put_document(writer: &ObjectWriter, key: &str, doc: &Value) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(doc).unwrap_or_default();
    if writer.is_local() {
        let (writer, key) = (writer.clone(), key.to_string());
        tokio::task::spawn_blocking(move || writer.put_local(&key, &bytes))
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
    } else {
        writer.put_remote(key, bytes).await
    }
}

/// The dataset's grid and how its arrays are stored, known before any chunk is filled.
struct Layout {
    /// Per dimension, its values ascending.
    coordinates: Vec<ArrayRef>,
    shape: Vec<usize>,
    chunks: Vec<usize>,
    variables: Vec<Variable>,
    /// Cells of a slab: `chunks[0]` indices of the first dimension by the others.
    slab_cells: usize,
}

/// Pass two: rows (or a result's values at their cells) placed into the slab of chunks
/// they fall in.
struct Fill<'a> {
    sink: &'a GridSink,
    layout: &'a Layout,
    /// Each variable's slab: `chunks[0]` cells of the first dimension by the others, C order.
    slabs: Vec<Vec<u8>>,
    /// Each variable's strings in its slab (empty for other types).
    strings: Vec<Strings>,
    /// Holds the slabs; grows and shrinks with the strings' bytes.
    reservation: &'a mut MemoryReservation,
    /// The slab being filled (its index along the first dimension).
    slab: Option<usize>,
    /// The last row's cell, to find two rows on one cell (rows arrive sorted).
    previous: Vec<usize>,
    writer: ObjectWriter,
    writes: &'a mut JoinSet<Result<usize>>,
    version: ZarrVersion,
    compression: super::options::Compression,
    chunks_written: datafusion::physical_plan::metrics::Count,
}

impl Fill<'_> {
    async fn add(
        &mut self,
        batch: &RecordBatch,
        grid: &Grid,
        positions: &mut [Vec<usize>],
    ) -> Result<()> {
        for (dim, out) in grid.dims.iter().zip(positions.iter_mut()) {
            let found = dim
                .positions(batch.column(dim.column), out)
                .map_err(|e| self.sink.refused(e))?;
            if found.is_none() {
                return Err(self.sink.refused(
                    "the query gave other rows than it gave a moment before (it is not \
                     deterministic): the grid no longer fits them",
                ));
            }
        }
        let (shape, first) = (&self.layout.shape, self.layout.chunks[0]);
        let rest: usize = shape[1..].iter().product();
        let mut cells: Vec<usize> = Vec::with_capacity(batch.num_rows());
        let mut start = 0;
        let mut key = vec![0usize; positions.len()];
        for row in 0..batch.num_rows() {
            for (k, p) in key.iter_mut().zip(positions.iter()) {
                *k = p[row];
            }
            // An empty `previous` (the first row) is less than any key.
            match key.as_slice().cmp(self.previous.as_slice()) {
                std::cmp::Ordering::Greater => {}
                std::cmp::Ordering::Equal => return Err(self.duplicate(grid, &key)),
                std::cmp::Ordering::Less => {
                    return Err(Error::Internal(
                        "a gridded write's rows did not arrive sorted by its dimensions".into(),
                    ))
                }
            }
            let slab = key[0] / first;
            if self.slab != Some(slab) {
                self.put(batch, start, &cells)?;
                cells.clear();
                start = row;
                self.flush().await?;
                self.slab = Some(slab);
            }
            let mut cell = key[0] - slab * first;
            for (d, &p) in key.iter().enumerate().skip(1) {
                cell = cell * shape[d] + p;
            }
            debug_assert!(cell < first * rest);
            cells.push(cell);
            self.previous.clone_from(&key);
        }
        self.put(batch, start, &cells)
    }

    /// Rows `start..` of `batch` into their `cells` of the current slab; an error when the
    /// pool cannot hold the slab's strings.
    fn put(&mut self, batch: &RecordBatch, start: usize, cells: &[usize]) -> Result<()> {
        if cells.is_empty() {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = (self.layout.variables.iter())
            .map(|v| batch.column(v.column).slice(start, cells.len()))
            .collect();
        self.put_columns(&columns, cells)
    }

    /// A value of each variable (`columns`, in order) for every cell of the current slab,
    /// in C order; a NULL is a missing value.
    fn put_slab(&mut self, columns: &[ArrayRef]) -> Result<()> {
        let cells: Vec<usize> = (0..columns.first().map_or(0, |c| c.len())).collect();
        self.put_columns(columns, &cells)
    }

    /// Row `i` of each variable's column (`columns`, in order) into cell `cells[i]` of the
    /// current slab; an error when the pool cannot hold the slab's strings.
    fn put_columns(&mut self, columns: &[ArrayRef], cells: &[usize]) -> Result<()> {
        let vars = self.layout.variables.iter().zip(&mut self.slabs);
        for (((v, slab), strings), column) in vars.zip(&mut self.strings).zip(columns) {
            let column = v.stored.prepare(column).map_err(|e| self.sink.refused(e))?;
            let held = strings.len();
            v.stored.put_column(column.as_ref(), cells, slab, strings);
            self.reservation
                .try_grow(strings.len() - held)
                .map_err(|_| {
                    self.sink.refused(format!(
                        "the memory pool cannot hold the strings of one slab of chunks of \
                         '{}' ({} bytes); write smaller chunks along '{}' or raise the memory \
                         limit",
                        v.name,
                        strings.len(),
                        self.sink.dimensions[0]
                    ))
                })?;
        }
        Ok(())
    }

    /// A chunk's bytes as they are compressed: strings encoded as `vlen-utf8`, other values
    /// as they are.
    fn encode(&self, stored: &Stored, chunk: Vec<u8>, strings: &[u8]) -> Result<Vec<u8>> {
        match stored.is_string() {
            true => Stored::vlen_utf8(&chunk, strings).map_err(|e| self.sink.refused(e)),
            false => Ok(chunk),
        }
    }

    /// Writes the slab being filled, chunk by chunk, and empties it.
    async fn flush(&mut self) -> Result<()> {
        let Some(slab) = self.slab.take() else {
            return Ok(());
        };
        let (shape, chunks) = (&self.layout.shape, &self.layout.chunks);
        let first = chunks[0];
        let mut slab_shape = shape.to_vec();
        slab_shape[0] = first.min(shape[0] - slab * first);
        // Chunk positions along the dimensions after the first.
        let grid: Vec<usize> = (1..shape.len())
            .map(|d| shape[d].div_ceil(chunks[d]))
            .collect();
        let count: usize = grid.iter().product();
        for (i, v) in self.layout.variables.iter().enumerate() {
            let buffer = &self.slabs[i];
            let w = v.stored.width();
            let missing = v.stored.missing();
            for n in 0..count {
                let mut index = vec![0usize; grid.len()];
                let mut rest = n;
                for d in (0..grid.len()).rev() {
                    index[d] = rest % grid[d];
                    rest /= grid[d];
                }
                let mut origin = vec![0usize];
                origin.extend(index.iter().enumerate().map(|(d, i)| i * chunks[d + 1]));
                let mut chunk = missing.repeat(chunks.iter().product());
                copy_box(buffer, &slab_shape, &origin, &mut chunk, chunks, w);
                let chunk = self.encode(&v.stored, chunk, &self.strings[i])?;
                let mut at = vec![slab];
                at.extend(&index);
                let key = self.version.chunk_key(&v.name, &at);
                finish_some(self.writes, CHUNKS_IN_FLIGHT - 1).await?;
                self.writes.spawn(write_chunk(
                    self.writer.clone(),
                    key,
                    chunk,
                    self.compression,
                ));
                self.chunks_written.add(1);
            }
            // Empty again: a cell no row names is missing.
            for cell in self.slabs[i].chunks_exact_mut(w) {
                cell.copy_from_slice(&missing);
            }
            let strings = std::mem::take(&mut self.strings[i]);
            self.reservation.shrink(strings.len());
        }
        Ok(())
    }

    /// Two rows on the cell `key`: an error naming the dimensions and the cell.
    fn duplicate(&self, grid: &Grid, key: &[usize]) -> Error {
        let options = FormatOptions::default();
        let values: Vec<String> = (grid.dims.iter().zip(key))
            .map(|(dim, &i)| {
                ArrayFormatter::try_new(dim.values.as_ref(), &options)
                    .map(|f| f.value(i).to_string())
                    .unwrap_or_default()
            })
            .collect();
        let names: Vec<&str> = grid.dims.iter().map(|d| d.name.as_str()).collect();
        self.sink.refused(format!(
            "two rows have the same dimensions ({}) = ({}): a gridded write takes one row per \
             cell (aggregate them first, e.g. GROUP BY {})",
            names.join(", "),
            values.join(", "),
            names.join(", ")
        ))
    }
}

impl DisplayAs for GridSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ZarrGridSink: location={}, dimensions=[{}], options: {}",
            self.location,
            self.dimensions.join(", "),
            self.options
        )
    }
}

#[async_trait]
impl DataSink for GridSink {
    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Writes every row, then puts the dataset at its location: called once per statement.
    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        self.write(data, context).await
    }
}
