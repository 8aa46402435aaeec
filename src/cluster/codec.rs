//! Ballista's extension codecs for ndfusion's tables and scans.
//!
//! A table travels as its [`TableSource`] (format, location, version, options); a scan as the
//! table's `scan` call ([`ScanOrigin`]). The receiving process opens the table again and, for
//! a scan, runs the same `scan`: planning is deterministic given the table, so it is the scan
//! the scheduler planned. What the scheduler planned (partitions, EXPLAIN line) travels too and
//! is checked, so a table that changed between planning and execution is an error, not rows
//! of another plan. Everything else goes to Ballista's own codecs.
//!
//! Options travel with the plan, credentials included (they are never shown: EXPLAIN and
//! errors print `***`); without them each process uses its own environment's credentials.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{DataFusionError, Result, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Expr, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::{displayable, ExecutionPlan};
use datafusion_proto::bytes::Serializeable;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::protobuf::PhysicalPlanNode;
use serde::{Deserialize, Serialize};

use super::allowed::AllowedLocations;
use super::plan_guard::check_plan;
use crate::scan::{GridAggregateExec, OriginSlot, ScanExec, TargetTaskBytes};
use crate::table_kind::{reopening, source_of, Opening};
use crate::table_source::{ScanOrigin, TableSource};

/// Marks ndfusion's messages; Ballista's are protobuf, which never starts with this byte
/// (field 9 of wire type 6 does not exist).
const MAGIC: &[u8] = b"NDFUSION1";

/// Marks a grid aggregate: the partial aggregate it folds follows, as DataFusion's protobuf,
/// with an empty plan where its scan (the node's one input) goes.
const GRID_AGGREGATE: &[u8] = b"NDFUSION-GRID1";

/// A table as it travels.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct EncodedTable {
    /// How the table's kind opens it again (`TableKind::reopens`: `zarr`, `lance_nd`, ...).
    format: String,
    locations: Vec<String>,
    /// The Lance version of a lance-nd table.
    version: Option<u64>,
    /// `OPTIONS (...)` keys and values.
    options: BTreeMap<String, String>,
    /// Which opening of the table on the client (`TableSource::opening`).
    opening: String,
}

/// A scan as it travels.
#[derive(Debug, Serialize, Deserialize)]
struct EncodedScan {
    table: EncodedTable,
    projection: Option<Vec<usize>>,
    /// Each filter as DataFusion's protobuf bytes.
    filters: Vec<Vec<u8>>,
    limit: Option<usize>,
    /// The scan reads backwards (a sort pushed into it).
    #[serde(default)]
    reversed: bool,
    target_partitions: usize,
    batch_size: usize,
    /// The scheduler's `--target-task-bytes`: the executors cut the scan as it did.
    #[serde(default)]
    target_task_bytes: Option<u64>,
    /// What the scheduler planned, checked when the scan is planned again.
    partitions: usize,
    explain: String,
}

/// Ballista's logical codec, knowing ndfusion's table providers.
#[derive(Debug)]
pub(crate) struct NdfusionLogicalCodec {
    inner: BallistaLogicalExtensionCodec,
    allowed: AllowedLocations,
    opened: Arc<OpenedTables>,
}

/// The logical and physical codecs of one process, sharing the tables it opened.
pub(crate) fn codecs(
    allowed: AllowedLocations,
) -> (Arc<NdfusionLogicalCodec>, Arc<NdfusionPhysicalCodec>) {
    let opened = Arc::new(OpenedTables::default());
    let logical = NdfusionLogicalCodec {
        inner: BallistaLogicalExtensionCodec::default(),
        allowed: allowed.clone(),
        opened: Arc::clone(&opened),
    };
    let physical = NdfusionPhysicalCodec {
        inner: BallistaPhysicalExtensionCodec::default(),
        allowed,
        opened,
    };
    (Arc::new(logical), Arc::new(physical))
}

/// Ballista's physical codec, knowing ndfusion's scans.
#[derive(Debug)]
pub(crate) struct NdfusionPhysicalCodec {
    inner: BallistaPhysicalExtensionCodec,
    allowed: AllowedLocations,
    opened: Arc<OpenedTables>,
}

impl LogicalExtensionCodec for NdfusionLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> Result<Extension> {
        self.inner.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        let Some(message) = buf.strip_prefix(MAGIC) else {
            return self
                .inner
                .try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let table: EncodedTable = from_json(message, "table")?;
        let provider = block_on(&table, open_table(&table, &self.allowed, &self.opened))??;
        if provider.schema().fields() != schema.fields() {
            return Err(changed(
                &table,
                "its columns are not those the query was planned on",
            ));
        }
        Ok(provider)
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let Some(source) = source_of(node.as_ref()) else {
            return self.inner.try_encode_table_provider(table_ref, node, buf);
        };
        buf.extend_from_slice(MAGIC);
        buf.extend(to_json(&encode_table(&source)?)?);
        Ok(())
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn FileFormatFactory>> {
        self.inner.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> Result<()> {
        self.inner.try_encode_file_format(buf, node)
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.inner.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

impl PhysicalExtensionCodec for NdfusionPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(message) = buf.strip_prefix(GRID_AGGREGATE) {
            for input in inputs {
                check_plan(input.as_ref(), &self.allowed)?;
            }
            return self.decode_grid_aggregate(message, inputs, ctx);
        }
        let Some(message) = buf.strip_prefix(MAGIC) else {
            // Ballista's nodes (the shuffle writer at the root of every task): what runs below.
            for input in inputs {
                check_plan(input.as_ref(), &self.allowed)?;
            }
            return self.inner.try_decode(buf, inputs, ctx);
        };
        let scan: EncodedScan = from_json(message, "scan")?;
        let table = &scan.table;
        let plan = block_on(table, replay_scan(&scan, ctx, &self.allowed, &self.opened))??;
        let explain = explain_line(plan.as_ref());
        if plan.properties().partitioning.partition_count() != scan.partitions
            || explain != scan.explain
        {
            return Err(changed(
                table,
                &format!(
                    "the scan planned on the scheduler was `{}`, here it is `{explain}`",
                    scan.explain
                ),
            ));
        }
        Ok(plan)
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> Result<()> {
        if let Some(grid) = node.downcast_ref::<GridAggregateExec>() {
            return self.encode_grid_aggregate(grid, buf);
        }
        let Some(slot) = origin_slot(node.as_ref()) else {
            return self.inner.try_encode(node, buf);
        };
        let Some(origin) = slot
            .get()
            .and_then(|o| o.as_any().downcast_ref::<ScanOrigin>())
        else {
            return Err(DataFusionError::Internal(format!(
                "{} was not planned by its table, so it cannot be sent to a cluster",
                node.name()
            )));
        };
        let scan = encode_scan(origin, node.as_ref())?;
        buf.extend_from_slice(MAGIC);
        buf.extend(to_json(&scan)?);
        Ok(())
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        self.inner.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> Result<Arc<AggregateUDF>> {
        self.inner.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> Result<Arc<WindowUDF>> {
        self.inner.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> Result<()> {
        self.inner.try_encode_udwf(node, buf)
    }
}

impl NdfusionPhysicalCodec {
    /// A partial grid aggregate as the partial aggregate it folds, its scan left out (it
    /// travels as the node's input).
    fn encode_grid_aggregate(&self, grid: &GridAggregateExec, buf: &mut Vec<u8>) -> Result<()> {
        let Some(partial) = grid.partial_aggregate() else {
            return Err(DataFusionError::Internal(
                "a grid aggregate of one partition does not run on a cluster".into(),
            ));
        };
        let placeholder = |node: Arc<dyn ExecutionPlan>| match node.downcast_ref::<ScanExec>() {
            Some(scan) => Ok(Transformed::yes(
                Arc::new(EmptyExec::new(scan.schema())) as Arc<dyn ExecutionPlan>
            )),
            None => Ok(Transformed::no(node)),
        };
        let aggregate = (Arc::clone(partial) as Arc<dyn ExecutionPlan>)
            .transform_up(placeholder)
            .data()?;
        let node = PhysicalPlanNode::try_from_physical_plan(aggregate, self)?;
        buf.extend_from_slice(GRID_AGGREGATE);
        node.try_encode(buf)
    }

    /// The grid aggregate of `message` over `inputs` (its scan): the partial aggregate with
    /// the scan in its place, folded again (planning is deterministic given the scan); the
    /// partial aggregate as DataFusion runs it if it no longer folds.
    fn decode_grid_aggregate(
        &self,
        message: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [scan] = inputs else {
            return Err(DataFusionError::Internal(
                "a grid aggregate has one input".into(),
            ));
        };
        let node = PhysicalPlanNode::try_decode(message)?;
        let aggregate = node.try_into_physical_plan(ctx, self)?;
        let with_scan = |node: Arc<dyn ExecutionPlan>| match node.downcast_ref::<EmptyExec>() {
            Some(_) => Ok(Transformed::yes(Arc::clone(scan))),
            None => Ok(Transformed::no(node)),
        };
        let aggregate = aggregate.transform_up(with_scan).data()?;
        let Some(partial) = aggregate.downcast_ref::<AggregateExec>() else {
            return Err(DataFusionError::Internal(
                "a grid aggregate did not hold an aggregate".into(),
            ));
        };
        let partial = Arc::new(partial.clone());
        Ok(match GridAggregateExec::partial(&partial)? {
            Some(grid) => Arc::new(grid),
            None => partial,
        })
    }
}

/// The origin of one of ndfusion's scans; `None` for every other plan.
fn origin_slot(plan: &dyn ExecutionPlan) -> Option<&OriginSlot> {
    plan.downcast_ref::<ScanExec>().map(ScanExec::origin)
}

fn encode_table(source: &TableSource) -> Result<EncodedTable> {
    let opened = &source.opened;
    Ok(EncodedTable {
        format: opened.format().to_string(),
        locations: opened.locations(),
        version: opened.version(),
        options: opened
            .options_sql()
            .map_err(external)?
            .into_iter()
            .collect(),
        opening: source.opening.clone(),
    })
}

fn encode_scan(origin: &ScanOrigin, plan: &dyn ExecutionPlan) -> Result<EncodedScan> {
    let filters = origin
        .filters
        .iter()
        .map(|f| f.to_bytes().map(|b| b.to_vec()))
        .collect::<Result<_>>()?;
    Ok(EncodedScan {
        table: encode_table(&origin.source)?,
        projection: origin.projection.clone(),
        filters,
        limit: origin.limit,
        reversed: origin.reversed,
        target_partitions: origin.target_partitions,
        batch_size: origin.batch_size,
        target_task_bytes: origin.target_task_bytes,
        partitions: plan.properties().partitioning.partition_count(),
        explain: explain_line(plan),
    })
}

/// Tables this process opened, most recent last, by their client-side opening: every task
/// of a query, and every query of the table, reuses it, as a local session reuses the table
/// `CREATE EXTERNAL TABLE` opened, instead of reading its metadata again (for a collection,
/// every member's).
#[derive(Default)]
pub(crate) struct OpenedTables {
    entries: std::sync::Mutex<Vec<(String, Arc<dyn TableProvider>)>>,
}

/// Tables kept per process (the least recently used goes first).
const OPENED_TABLES: usize = 32;

impl std::fmt::Debug for OpenedTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().map_or(0, |e| e.len());
        f.debug_struct("OpenedTables")
            .field("entries", &entries)
            .finish()
    }
}

impl OpenedTables {
    fn get(&self, key: &str) -> Option<Arc<dyn TableProvider>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let at = entries.iter().position(|(k, _)| k == key)?;
        let entry = entries.remove(at);
        let table = Arc::clone(&entry.1);
        entries.push(entry);
        Some(table)
    }

    fn put(&self, key: String, table: Arc<dyn TableProvider>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|(k, _)| *k != key);
        if entries.len() >= OPENED_TABLES {
            entries.remove(0);
        }
        entries.push((key, table));
    }
}

/// The table `table` describes, if its locations are allowed here: the one this process
/// opened for that opening already, or opened now.
async fn open_table(
    table: &EncodedTable,
    allowed: &AllowedLocations,
    opened: &OpenedTables,
) -> Result<Arc<dyn TableProvider>> {
    for location in &table.locations {
        allowed.check(location).map_err(external)?;
    }
    allowed.check_options(&table.options).map_err(external)?;
    let kind = reopening(&table.format).ok_or_else(|| {
        DataFusionError::Internal(format!(
            "an ndfusion table of unknown format '{}' in a cluster plan",
            table.format
        ))
    })?;
    let options: HashMap<String, String> = table.options.clone().into_iter().collect();
    // Locations the options name (an Icechunk table's virtual chunk containers) are read too.
    for location in (kind.option_locations)(&options).map_err(external)? {
        allowed.check(&location).map_err(external)?;
    }
    // The opening in the key tells a table created again from the one before.
    let key = String::from_utf8_lossy(&to_json(table)?).to_string();
    if let Some(provider) = opened.get(&key) {
        return Ok(provider);
    }
    let provider = (kind.reopen)(Opening {
        format: table.format.clone(),
        locations: table.locations.clone(),
        version: table.version,
        options,
    })
    .await
    .map_err(external)?;
    // What a pattern expanded to: each member, symlinks resolved, must be allowed too.
    for member in (kind.read_locations)(provider.as_ref()) {
        allowed.check(&member).map_err(external)?;
    }
    opened.put(key, Arc::clone(&provider));
    Ok(provider)
}

/// Opens the scan's table and plans the same scan, in a session like the scheduler's.
async fn replay_scan(
    scan: &EncodedScan,
    ctx: &TaskContext,
    allowed: &AllowedLocations,
    opened: &OpenedTables,
) -> Result<Arc<dyn ExecutionPlan>> {
    let provider = open_table(&scan.table, allowed, opened).await?;
    let filters = scan
        .filters
        .iter()
        .map(|bytes| Expr::from_bytes_with_ctx(bytes, ctx))
        .collect::<Result<Vec<_>>>()?;
    let mut config = ctx
        .session_config()
        .clone()
        .with_target_partitions(scan.target_partitions)
        .with_batch_size(scan.batch_size);
    if let Some(bytes) = scan.target_task_bytes {
        config = TargetTaskBytes(bytes).on(config);
    }
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(ctx.runtime_env())
        .with_default_features()
        .build();
    let plan = provider
        .scan(&state, scan.projection.as_ref(), &filters, scan.limit)
        .await?;
    if !scan.reversed {
        return Ok(plan);
    }
    match plan.downcast_ref::<ScanExec>().and_then(ScanExec::reversed) {
        Some(backwards) => Ok(backwards),
        None => Err(DataFusionError::Internal(format!(
            "the scan of {} is read backwards on the scheduler but cannot be here",
            scan.table.locations.join(", ")
        ))),
    }
}

/// Runs `future` (opening a table) from the codec's synchronous methods, on the tokio
/// runtime the codec was called on; Ballista's scheduler and executors run on multi-threaded
/// runtimes.
fn block_on<F: Future>(table: &EncodedTable, future: F) -> Result<F::Output> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| handle.block_on(future)))
        }
        _ => Err(DataFusionError::Execution(format!(
            "opening {} for a cluster plan needs a multi-threaded tokio runtime",
            table.locations.join(", ")
        ))),
    }
}

/// The first line of the plan's EXPLAIN (its own line, without children).
fn explain_line(plan: &dyn ExecutionPlan) -> String {
    displayable(plan).one_line().to_string().trim().to_string()
}

fn changed(table: &EncodedTable, what: &str) -> DataFusionError {
    DataFusionError::Execution(format!(
        "{} changed since the query was planned: {what}",
        table.locations.join(", ")
    ))
}

fn external(e: crate::error::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| DataFusionError::Internal(e.to_string()))
}

fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| {
        DataFusionError::Internal(format!(
            "an ndfusion {what} in a cluster plan is damaged: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::physical_plan::collect;
    use datafusion::prelude::SessionContext;
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };

    use super::*;
    use crate::zarr::table::ZarrOpened;
    use crate::zarr::ZarrOptions;

    /// The rows of `plan`, sorted (partitions may interleave).
    async fn rows(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Vec<String> {
        let batches = collect(plan, ctx.task_ctx()).await.unwrap();
        let text = pretty_format_batches(&batches).unwrap().to_string();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    }

    fn explain(plan: &Arc<dyn ExecutionPlan>) -> String {
        displayable(plan.as_ref()).indent(true).to_string()
    }

    /// Plans `query` on a table created by `create`, sends the logical and the physical plan
    /// through the codecs, and checks that both come back as the same plan with the same rows.
    async fn round_trip(create: &str, query: &str) -> String {
        let ctx = crate::new_session_context();
        ctx.sql(create).await.unwrap();
        let df = ctx.sql(query).await.unwrap();
        let logical = df.logical_plan().clone();

        let (logical_codec, physical_codec) = codecs(AllowedLocations::everything());
        let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &*logical_codec).unwrap();
        let decoded =
            logical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &*logical_codec)
                .unwrap();
        assert_eq!(
            format!("{}", decoded.display_indent()),
            format!("{}", logical.display_indent())
        );

        let physical = ctx.state().create_physical_plan(&logical).await.unwrap();
        let bytes =
            physical_plan_to_bytes_with_extension_codec(Arc::clone(&physical), &*physical_codec)
                .unwrap();
        let decoded = physical_plan_from_bytes_with_extension_codec(
            &bytes,
            &ctx.task_ctx(),
            &*physical_codec,
        )
        .unwrap();
        assert_eq!(explain(&decoded), explain(&physical));
        let shown = explain(&physical);
        let expected = rows(physical, &ctx).await;
        assert!(expected.len() > 4, "{query}: no rows to compare");
        assert_eq!(rows(decoded, &ctx).await, expected);
        shown
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zarr_array_scans_travel_with_their_chunk_ranges_and_row_filter() {
        let plan = round_trip(
            "CREATE EXTERNAL TABLE w STORED AS ZARR LOCATION 'tests/data/zarr_v3/grid_2d.zarr' \
             OPTIONS ('batch_size' '7')",
            "SELECT * FROM w WHERE time >= 1 AND station < 5 AND temp > 0 LIMIT 50",
        )
        .await;
        assert!(plan.contains("selection="), "{plan}");
        assert!(plan.contains("row_filter="), "{plan}");
    }

    /// A sort pushed into a scan read backwards travels as `reversed` and is replayed so
    /// (cluster sessions declare no orders, so only a session that does can send one).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scans_read_backwards_travel_as_such() {
        for (create, query) in [
            (
                "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION 'tests/data/zarr_v3/struct_1d.zarr'",
                "SELECT dim_0, id FROM s ORDER BY dim_0 DESC LIMIT 6",
            ),
            (
                "CREATE EXTERNAL TABLE w STORED AS ZARR LOCATION 'tests/data/ordered/weather.zarr'",
                "SELECT time, lat, lon, temp FROM w ORDER BY time DESC, lat, lon DESC LIMIT 20",
            ),
            (
                "CREATE EXTERNAL TABLE m STORED AS ZARR \
                 LOCATION 'tests/data/ordered/weather_months/*.zarr'",
                "SELECT time, lat, lon, temp FROM m ORDER BY time DESC, lat, lon DESC LIMIT 20",
            ),
        ] {
            let plan = round_trip(create, query).await;
            assert!(plan.contains("reversed"), "{plan}");
        }
    }

    /// A scan that took over a projection reordering its columns travels with the new
    /// projection, and is replayed with the columns in that order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scans_that_took_over_a_projection_travel_with_it() {
        for (create, query, shown) in [
            (
                "CREATE EXTERNAL TABLE w STORED AS ZARR LOCATION 'tests/data/ordered/weather.zarr'",
                "SELECT temp, lon, time FROM w WHERE lat > 10",
                "projection=[temp, lon, time]",
            ),
            (
                "CREATE EXTERNAL TABLE f STORED AS ZARR \
                 LOCATION 'tests/data/collections/floats/*.zarr'",
                "SELECT temp, level FROM f WHERE __global_attrs__.id <> 'f4'",
                "projection=[temp, level]",
            ),
        ] {
            let plan = round_trip(create, query).await;
            assert!(plan.contains(shown), "{plan}");
            assert!(!plan.contains("ProjectionExec"), "{plan}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dataset_collection_and_lance_nd_scans_travel() {
        round_trip(
            "CREATE EXTERNAL TABLE o STORED AS ZARR LOCATION 'tests/data/datasets/ocean_v3.zarr'",
            "SELECT * FROM o WHERE lat > 10",
        )
        .await;
        round_trip(
            "CREATE EXTERNAL TABLE f STORED AS ZARR \
             LOCATION 'tests/data/collections/floats/*.zarr'",
            "SELECT * FROM f WHERE __global_attrs__.id <> 'f4'",
        )
        .await;
        round_trip(
            "CREATE EXTERNAL TABLE m STORED AS LANCE_ND \
             LOCATION 'tests/data/lance_nd/many.lance' OPTIONS ('batch_bytes' '4096')",
            "SELECT * FROM m",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn locations_outside_the_allow_list_are_refused() {
        let ctx = crate::new_session_context();
        ctx.sql(
            "CREATE EXTERNAL TABLE p STORED AS ZARR LOCATION 'tests/data/zarr_v3/struct_1d.zarr'",
        )
        .await
        .unwrap();
        let plan = ctx
            .sql("SELECT * FROM p")
            .await
            .unwrap()
            .logical_plan()
            .clone();
        let open = codecs(AllowedLocations::everything()).0;
        let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &*open).unwrap();
        let strict = codecs(AllowedLocations::prefixes(["s3://bucket"])).0;
        let err = logical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &*strict)
            .unwrap_err();
        assert!(
            crate::error::Error::user_message(&err).contains(
                "invalid location 'tests/data/zarr_v3/struct_1d.zarr': this cluster only reads \
                 locations under: s3://bucket"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_scan_outside_a_multi_threaded_runtime_is_an_error() {
        let table = EncodedTable {
            format: "zarr".into(),
            locations: vec!["a.zarr".into()],
            version: None,
            options: BTreeMap::new(),
            opening: "1".into(),
        };
        let err = block_on(&table, async {}).unwrap_err();
        assert!(err
            .to_string()
            .contains("opening a.zarr for a cluster plan needs a multi-threaded tokio runtime"));
    }

    #[test]
    fn secrets_travel_but_an_application_store_does_not() {
        let options = ZarrOptions::new().with_storage(
            crate::StorageOptions::new()
                .with("aws.secret_access_key", "s3cr3t")
                .unwrap(),
        );
        let encoded = encode_table(&TableSource::new(ZarrOpened::One {
            location: "s3://b/a.zarr".into(),
            options,
            format: Default::default(),
        }))
        .unwrap();
        assert_eq!(encoded.options["aws.secret_access_key"], "s3cr3t");
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        let options =
            ZarrOptions::new().with_storage(crate::StorageOptions::new().with_object_store(store));
        let err = encode_table(&TableSource::new(ZarrOpened::One {
            location: "a.zarr".into(),
            options,
            format: Default::default(),
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains("cannot be sent to a cluster"),
            "{err}"
        );
    }
}
