//! ndfusion on an [Apache DataFusion Ballista](https://datafusion.apache.org/ballista/)
//! cluster: the same SQL over the same tables, planned by a Ballista scheduler and run by its
//! executors.
//!
//! - [`new_cluster_context`]: a `SessionContext` whose queries run on a remote cluster
//!   (`df://host:port`, the scheduler), with ndfusion's table factories;
//!   [`new_standalone_context`]: the same on a cluster inside this process.
//! - [`run_scheduler`] and [`run_executor`]: Ballista's scheduler and executor with ndfusion's
//!   codecs built in (`ndfusion scheduler`, `ndfusion executor`).
//!
//! Tables travel as their location and options and are opened again where the plan runs (see
//! `codec.rs`), so every process must reach the data: object-store URLs, or local paths that
//! mean the same on every machine. Options, credentials included, travel with the plan; a
//! table given no credentials is read with each process's own environment.

mod allowed;
mod codec;
mod plan_guard;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::config::TaskSchedulingPolicy;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

pub use allowed::AllowedLocations;
use codec::{NdfusionLogicalCodec, NdfusionPhysicalCodec};

use crate::error::{Error, Result};

/// A session configuration for a cluster client: Ballista's settings and ndfusion's codecs.
fn client_config(base: SessionConfig) -> SessionConfig {
    base.upgrade_for_ballista()
        .with_information_schema(true)
        .with_ballista_logical_extension_codec(Arc::new(NdfusionLogicalCodec::new(
            AllowedLocations::everything(),
        )))
        .with_ballista_physical_extension_codec(Arc::new(NdfusionPhysicalCodec::new(
            AllowedLocations::everything(),
        )))
}

/// A context whose queries run on the Ballista cluster whose scheduler is at `url`
/// (`df://host:port`), with `CREATE EXTERNAL TABLE ... STORED AS ZARR | LANCE_ND`. The
/// scheduler is first contacted by the first query.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_cluster_context("df://127.0.0.1:50050").await?;
/// ctx.sql("CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION 's3://bucket/ocean.zarr'")
///     .await?;
/// ctx.sql("SELECT count(*) FROM t").await?.show().await?;
/// # Ok(()) }
/// ```
pub async fn new_cluster_context(url: &str) -> Result<SessionContext> {
    let state = SessionStateBuilder::new()
        .with_config(client_config(SessionConfig::new()))
        .with_default_features()
        .build();
    let ctx = SessionContext::remote_with_state(url, state)
        .await
        .map_err(|e| cluster_error(format!("cluster at {url}"), e))?;
    crate::register_table_factories(&ctx);
    Ok(ctx)
}

/// A context whose queries run on a Ballista cluster started inside this process (a
/// scheduler and an executor of `parallelism` tasks on 127.0.0.1), with ndfusion's table
/// factories: what [`new_cluster_context`] does, without processes to start. Needs a
/// multi-threaded tokio runtime.
pub async fn new_standalone_context(parallelism: usize) -> Result<SessionContext> {
    let config = client_config(SessionConfig::new())
        .with_ballista_standalone_parallelism(parallelism.max(1));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    let ctx = SessionContext::standalone_with_state(state)
        .await
        .map_err(|e| cluster_error("starting a standalone cluster".into(), e))?;
    crate::register_table_factories(&ctx);
    Ok(ctx)
}

/// How `ndfusion scheduler` runs.
#[derive(Debug, Clone)]
pub struct SchedulerSettings {
    /// Where the scheduler listens for clients and executors (default 127.0.0.1:50050).
    pub bind: SocketAddr,
    /// The locations tables may name.
    pub allowed: AllowedLocations,
    /// Seconds without a heartbeat after which an executor counts as lost and its tasks run
    /// elsewhere (default 20).
    pub executor_timeout_seconds: u64,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            bind: SocketAddr::from(([127, 0, 0, 1], 50050)),
            allowed: AllowedLocations::everything(),
            executor_timeout_seconds: 20,
        }
    }
}

/// Runs a Ballista scheduler with ndfusion's codecs until the process ends.
pub async fn run_scheduler(settings: SchedulerSettings) -> Result<()> {
    let bind = settings.bind;
    let config = SchedulerConfig {
        // Executors ask for work when they have free slots: tasks of an executor that was
        // lost are picked up again. (Pushed tasks reset after a loss wait for an offer that
        // may not come: a query hung in our fault test.)
        scheduling_policy: TaskSchedulingPolicy::PullStaged,
        bind_host: bind.ip().to_string(),
        bind_port: bind.port(),
        external_host: bind.ip().to_string(),
        executor_timeout_seconds: settings.executor_timeout_seconds,
        expire_dead_executor_interval_seconds: (settings.executor_timeout_seconds / 4).max(1),
        override_logical_codec: Some(Arc::new(NdfusionLogicalCodec::new(
            settings.allowed.clone(),
        ))),
        override_physical_codec: Some(Arc::new(NdfusionPhysicalCodec::new(
            settings.allowed.clone(),
        ))),
        override_session_builder: Some(guarded_session_builder(settings.allowed)),
        ..Default::default()
    };
    let what = || format!("scheduler on {bind}");
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| cluster_error(what(), e))?;
    start_server(cluster, bind, Arc::new(config))
        .await
        .map_err(|e| cluster_error(what(), e))
}

/// Ballista's scheduler session, with the check that refuses what a cluster does not run.
fn guarded_session_builder(
    allowed: AllowedLocations,
) -> ballista_scheduler::scheduler_server::SessionBuilder {
    Arc::new(move |config: SessionConfig| {
        let state = ballista_core::utils::default_session_builder(config)?;
        Ok(SessionStateBuilder::new_from_existing(state)
            .with_physical_optimizer_rule(Arc::new(plan_guard::PlanGuard {
                allowed: allowed.clone(),
            }))
            .build())
    })
}

/// How `ndfusion executor` runs.
#[derive(Debug, Clone)]
pub struct ExecutorSettings {
    /// The scheduler's address (`host:port`).
    pub scheduler: String,
    /// Where the executor serves shuffle data (Arrow Flight; default 127.0.0.1:50051).
    pub bind: SocketAddr,
    /// Tasks run at once (default: the machine's cores).
    pub concurrency: usize,
    /// Where shuffle files go (default: a new folder under the system's temporary folder).
    pub work_dir: Option<PathBuf>,
    /// Bytes of the executor's memory pool, which its tasks' scans and operators share
    /// (default: unlimited).
    pub memory_limit: Option<u64>,
    /// The locations tables may name.
    pub allowed: AllowedLocations,
}

impl Default for ExecutorSettings {
    fn default() -> Self {
        ExecutorSettings {
            scheduler: "127.0.0.1:50050".into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 50051)),
            concurrency: std::thread::available_parallelism().map_or(1, |n| n.get()),
            work_dir: None,
            memory_limit: None,
            allowed: AllowedLocations::everything(),
        }
    }
}

/// Runs a Ballista executor with ndfusion's codecs until the process ends.
pub async fn run_executor(settings: ExecutorSettings) -> Result<()> {
    let (scheduler_host, scheduler_port) = split_host_port(&settings.scheduler)?;
    let work_dir = match settings.work_dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("ndfusion-executor-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir).map_err(|e| Error::InvalidLocation {
        location: work_dir.display().to_string(),
        reason: format!("cannot create the executor's work folder: {e}"),
    })?;
    let bind = settings.bind;
    let config = ExecutorProcessConfig {
        bind_host: bind.ip().to_string(),
        external_host: Some(bind.ip().to_string()),
        port: bind.port(),
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        scheduler_host,
        scheduler_port,
        concurrent_tasks: settings.concurrency.max(1),
        work_dir: Some(work_dir.display().to_string()),
        executor_heartbeat_interval_seconds: 5,
        memory_pool_size: settings.memory_limit,
        override_logical_codec: Some(Arc::new(NdfusionLogicalCodec::new(
            settings.allowed.clone(),
        ))),
        override_physical_codec: Some(Arc::new(NdfusionPhysicalCodec::new(settings.allowed))),
        ..Default::default()
    };
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| cluster_error(format!("executor on {bind}"), e))
}

/// `host:port` into its parts.
fn split_host_port(address: &str) -> Result<(String, u16)> {
    let invalid = || Error::InvalidOption {
        option: "scheduler".into(),
        reason: format!("expected HOST:PORT, found '{address}'"),
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
    let port = port.parse().map_err(|_| invalid())?;
    if host.is_empty() {
        return Err(invalid());
    }
    Ok((host.to_string(), port))
}

fn cluster_error(what: String, e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Cluster {
        what,
        source: Box::new(e),
    }
}
