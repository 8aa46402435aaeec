//! Sessions that know ndfusion's formats.

use std::sync::Arc;

use std::num::NonZeroUsize;

use datafusion::common::config::ExecutionOptions;
use datafusion::execution::memory_pool::{
    FairSpillPool, MemoryLimit, MemoryPool, TrackConsumersPool,
};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::limits::SessionLimits;
use crate::scan::{GridAggregates, RunAggregates, ScanDerivedColumns};
use crate::table_kind::{table_kinds, TableKind};
use crate::yielding::YieldPoints;
use crate::zarr::GridWrites;

/// The `STORED AS` name of Zarr tables.
pub const ZARR_FORMAT: &str = "ZARR";
/// The `STORED AS` name of netCDF files.
pub const NETCDF_FORMAT: &str = "NETCDF";
/// The `STORED AS` name of plain HDF5 files.
pub const HDF5_FORMAT: &str = "HDF5";
/// The `STORED AS` name of lance-nd tables.
pub const LANCE_ND_FORMAT: &str = "LANCE_ND";
/// The `STORED AS` name of Icechunk repositories.
#[cfg(feature = "icechunk")]
pub const ICECHUNK_FORMAT: &str = "ICECHUNK";

/// Registers the factory of every kind of table ndfusion opens ([`table_kinds`]:
/// `STORED AS ZARR`, `STORED AS LANCE_ND`, `STORED AS ICECHUNK`) and the table functions that
/// come with them (`icechunk_log`, `icechunk_refs`) on an existing context, and gives it the
/// limits ndfusion reads under ([`SessionLimits`]: `SET ndfusion.max_metadata_bytes = ...`)
/// unless its configuration has them already.
///
/// ```
/// let ctx = datafusion::prelude::SessionContext::new();
/// ndfusion::register_table_factories(&ctx);
/// ```
pub fn register_table_factories(ctx: &SessionContext) {
    {
        let state = ctx.state_ref();
        let mut state = state.write();
        let extensions = &mut state.config_mut().options_mut().extensions;
        if extensions.get::<SessionLimits>().is_none() {
            extensions.insert(SessionLimits::default());
        }
        let factories = state.table_factories_mut();
        for kind in table_kinds() {
            factories.insert(kind.stored_as().to_string(), kind.factory());
        }
        // `COPY ... STORED AS ZARR` finds its writer among the file formats, by the
        // lower-cased name (a map apart from the table factories).
        for format in table_kinds().iter().filter_map(TableKind::write_format) {
            // Replacing is allowed, so this never fails.
            let _ = state.register_file_format(format, true);
        }
    }
    for kind in table_kinds() {
        for (name, function) in kind.table_functions() {
            ctx.register_udtf(name, function);
        }
    }
}

/// A context with DataFusion's default features (struct field access included), the
/// information schema, ndfusion's table factories, and its optimizer rule that computes
/// group keys of one dimension (`GROUP BY date_trunc('month', time)`) once per coordinate
/// value in the scan.
///
/// ```
/// # async fn demo() -> datafusion::error::Result<()> {
/// let ctx = ndfusion::new_session_context();
/// ctx.sql("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 'tests/data/zarr_v3/grid_2d.zarr'")
///     .await?;
/// # Ok(()) }
/// ```
pub fn new_session_context() -> SessionContext {
    new_session_context_with_config(SessionConfig::new().with_information_schema(true))
}

/// Like [`new_session_context`], with a given configuration.
pub fn new_session_context_with_config(config: SessionConfig) -> SessionContext {
    new_session_context_with_runtime(config, Arc::new(RuntimeEnv::default()))
}

/// Like [`new_session_context`], with a given configuration and runtime. The runtime's memory
/// pool bounds what scans hold: each scan partition reserves its reads in flight (fetched
/// and decoded chunks) from it and keeps fewer in flight when the pool is short.
///
/// ```
/// use std::sync::Arc;
/// use datafusion::execution::runtime_env::RuntimeEnvBuilder;
/// use datafusion::prelude::SessionConfig;
///
/// let runtime = RuntimeEnvBuilder::new()
///     .with_memory_limit(512 << 20, 1.0)
///     .build_arc()?;
/// let ctx = ndfusion::new_session_context_with_runtime(SessionConfig::new(), runtime);
/// # Ok::<_, datafusion::error::DataFusionError>(())
/// ```
pub fn new_session_context_with_runtime(
    config: SessionConfig,
    runtime: Arc<RuntimeEnv>,
) -> SessionContext {
    let config = sorts_within(config, runtime.memory_pool.as_ref());
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(Arc::clone(&runtime))
        .with_default_features()
        .with_physical_optimizer_rules(physical_optimizer_rules(Arc::clone(&runtime.memory_pool)))
        .build();
    let ctx = SessionContext::new_with_state(state);
    register_table_factories(&ctx);
    ctx
}

/// A runtime whose memory pool holds `limit` bytes (the CLI's and `serve`'s
/// `--memory-limit`): a fair pool, in which each operator that can spill (a sort, a hash
/// aggregate) may hold an equal part of what the others cannot give back, rather than
/// whoever asks first taking it all. With [`new_session_context_with_runtime`]'s sort
/// reservation, a sort of more rows than the pool holds then completes (`sorts_within`).
pub fn memory_limited_runtime(limit: usize) -> datafusion::error::Result<Arc<RuntimeEnv>> {
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(limit),
        NonZeroUsize::new(5).unwrap_or(NonZeroUsize::MIN),
    );
    RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .build_arc()
}

/// `config` with each sort's merge reservation sized to the memory pool. DataFusion's
/// external sort holds rows until its part of the pool is full, then sorts them before it
/// spills them, which takes about as much memory again (`ExternalSorterMerge`); it sets
/// that aside up front only as `sort_spill_reservation_bytes`, 10 MiB by default, so under a
/// limit a sort of more rows than the pool holds (a gridded `COPY` of 2·10^7 rows with
/// `--memory-limit 256M`) failed at its first spill. With a finite pool and the default
/// reservation, each sorting partition sets aside a half of its part: pool / (2 × target
/// partitions). A reservation the application chose is kept.
fn sorts_within(mut config: SessionConfig, pool: &dyn MemoryPool) -> SessionConfig {
    let MemoryLimit::Finite(limit) = pool.memory_limit() else {
        return config;
    };
    let execution = &mut config.options_mut().execution;
    let default = ExecutionOptions::default().sort_spill_reservation_bytes;
    if execution.sort_spill_reservation_bytes == default {
        let partitions = execution.target_partitions.max(1);
        execution.sort_spill_reservation_bytes = limit / (2 * partitions);
    }
    config
}

/// DataFusion's physical optimizer rules with ndfusion's: `ScanDerivedColumns` just before
/// `AggregateStatistics` (which then answers aggregates of what the scan computed from its
/// metadata), `GridAggregates` just after it (before DataFusion distributes the plan: a grid
/// aggregate gives one partition, its parents are distributed as they need), `RunAggregates`
/// after all of them (for the aggregates left to DataFusion), then `GridWrites` (a gridded
/// `COPY` of a grid aggregate written from its grid, once the plan is final), and last
/// `YieldPoints` (every operator yields to the runtime, so that a dropped query stops). `pool` is the
/// session's memory pool: a grid aggregate that would not fit in it is left to DataFusion.
fn physical_optimizer_rules(
    pool: Arc<dyn MemoryPool>,
) -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = PhysicalOptimizer::new().rules;
    let at = (rules.iter())
        .position(|r| r.name() == "aggregate_statistics")
        .unwrap_or(0);
    rules.insert(at, Arc::new(ScanDerivedColumns));
    rules.insert(at + 2, Arc::new(GridAggregates::single(Arc::clone(&pool))));
    rules.push(Arc::new(RunAggregates));
    rules.push(Arc::new(GridWrites::new(pool)));
    rules.push(Arc::new(YieldPoints));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_set_aside_half_their_part_of_a_finite_pool() {
        use datafusion::execution::memory_pool::GreedyMemoryPool;
        let reservation =
            |config: SessionConfig| config.options().execution.sort_spill_reservation_bytes;
        let two = || SessionConfig::new().with_target_partitions(2);
        let pool = GreedyMemoryPool::new(256 << 20);
        assert_eq!(reservation(sorts_within(two(), &pool)), 64 << 20);
        // A reservation the application chose is kept; an unlimited pool changes nothing.
        let chosen = two().with_sort_spill_reservation_bytes(1 << 20);
        assert_eq!(reservation(sorts_within(chosen, &pool)), 1 << 20);
        let unlimited = datafusion::execution::memory_pool::UnboundedMemoryPool::default();
        let default = reservation(two());
        assert_eq!(reservation(sorts_within(two(), &unlimited)), default);
        let runtime = memory_limited_runtime(64 << 20).unwrap();
        assert!(matches!(
            runtime.memory_pool.memory_limit(),
            MemoryLimit::Finite(n) if n == 64 << 20
        ));
    }

    #[test]
    fn derived_columns_come_just_before_aggregate_statistics() {
        let pool = Arc::new(datafusion::execution::memory_pool::UnboundedMemoryPool::default());
        let names: Vec<String> = (physical_optimizer_rules(pool).iter())
            .map(|r| r.name().to_string())
            .collect();
        let at = names
            .iter()
            .position(|n| n == "ScanDerivedColumns")
            .unwrap();
        assert_eq!(names[at + 1], "aggregate_statistics", "{names:?}");
        assert_eq!(names[at + 2], "GridAggregates", "{names:?}");
        assert_eq!(names[names.len() - 3], "RunAggregates", "{names:?}");
        assert_eq!(names[names.len() - 2], "GridWrites", "{names:?}");
        assert_eq!(names.last().unwrap(), "YieldPoints");
    }
}
