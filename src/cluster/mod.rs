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
mod client_writes;
mod codec;
mod liveness;
mod plan_guard;
mod security;
mod tls_check;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_core::utils::{create_grpc_server, default_config_producer};
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_executor::flight_service::BallistaFlightService;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::create_scheduler;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tonic::service::interceptor::InterceptedService;

pub use allowed::AllowedLocations;
use client_writes::with_client_writes;
use codec::codecs;
pub(crate) use plan_guard::check_served_plan;
pub(crate) use security::check_token;
pub use security::{ClusterSecurity, TOKEN_ENV};

use crate::error::{Error, Result};
use crate::scan::{GridAggregates, TargetTaskBytes};

/// A session configuration for a cluster client: Ballista's settings and ndfusion's codecs,
/// and the token and TLS of `security` on every link it opens.
fn client_config(base: SessionConfig, security: &ClusterSecurity) -> SessionConfig {
    let (logical, physical) = codecs(AllowedLocations::everything());
    let config = base
        .upgrade_for_ballista()
        .with_information_schema(true)
        .with_ballista_logical_extension_codec(logical)
        .with_ballista_physical_extension_codec(physical);
    secured(config, security)
}

/// `config` with the token and TLS of `security` on every gRPC client Ballista builds from it.
fn secured(config: SessionConfig, security: &ClusterSecurity) -> SessionConfig {
    let config = config.with_ballista_use_tls(security.has_tls());
    match security.endpoint_override() {
        Some(f) => config.with_ballista_override_create_grpc_client_endpoint(f),
        None => config,
    }
}

/// A process bound to an address other hosts reach refuses to start without a token and TLS
/// (a token in clear is anyone's who listens), unless `insecure` says so (with a warning).
fn check_exposure(
    bind: SocketAddr,
    security: &ClusterSecurity,
    insecure: bool,
    what: &str,
) -> Result<()> {
    let missing = [
        (!security.has_token()).then_some("a token (--token-file or NDFUSION_CLUSTER_TOKEN)"),
        (!security.has_tls()).then_some("TLS (--tls-ca, --tls-cert, --tls-key)"),
    ];
    refuse_exposure(bind, &missing, insecure, what)
}

/// The rule of [`check_exposure`] for any server (`ndfusion serve` too): `missing` names
/// what it lacks of a token and TLS (`None` for what it has).
pub(crate) fn refuse_exposure(
    bind: SocketAddr,
    missing: &[Option<&str>],
    insecure: bool,
    what: &str,
) -> Result<()> {
    let missing: Vec<&str> = missing.iter().flatten().copied().collect();
    if bind.ip().is_loopback() || missing.is_empty() {
        return Ok(());
    }
    let exposed = format!(
        "{what} on {bind} would accept calls from any host without {}",
        missing.join(" and ")
    );
    if insecure {
        log::warn!("{exposed} (--insecure)");
        eprintln!("warning: {exposed} (--insecure)");
        return Ok(());
    }
    Err(Error::InvalidOption {
        option: "bind".into(),
        reason: format!(
            "{exposed}: give it {}, or --insecure",
            missing.join(" and ")
        ),
    })
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
    new_cluster_context_with(url, &ClusterSecurity::none()).await
}

/// [`new_cluster_context`] for a secured cluster: `security`'s token on every call and its TLS
/// (the cluster's CA) on every link.
pub async fn new_cluster_context_with(
    url: &str,
    security: &ClusterSecurity,
) -> Result<SessionContext> {
    if let Some((host, port)) = (url.strip_prefix("df://")).and_then(|a| split_host_port(a).ok()) {
        security.check_scheduler(&host, port).await?;
    }
    let state = SessionStateBuilder::new()
        .with_config(client_config(SessionConfig::new(), security))
        .with_default_features()
        .build();
    let ctx = SessionContext::remote_with_state(url, state)
        .await
        .map_err(|e| cluster_error(format!("cluster at {url}"), e))?;
    let ctx = with_client_writes(ctx);
    crate::register_table_factories(&ctx);
    Ok(ctx)
}

/// A context whose queries run on a Ballista cluster started inside this process (a
/// scheduler and an executor of `parallelism` tasks on 127.0.0.1), with ndfusion's table
/// factories: what [`new_cluster_context`] does, without processes to start. Needs a
/// multi-threaded tokio runtime.
pub async fn new_standalone_context(parallelism: usize) -> Result<SessionContext> {
    let config = client_config(SessionConfig::new(), &ClusterSecurity::none())
        .with_ballista_standalone_parallelism(parallelism.max(1));
    // The in-process scheduler plans with this state: its rules are a scheduler's.
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rule(Arc::new(GridAggregates::partial()))
        .build();
    let ctx = SessionContext::standalone_with_state(state)
        .await
        .map_err(|e| cluster_error("starting a standalone cluster".into(), e))?;
    let ctx = with_client_writes(ctx);
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
    /// The decoded bytes a task of a scan aims to read: a scan has the session's target
    /// partitions, or more tasks when each would read more (default 1 GiB).
    pub target_task_bytes: u64,
    /// The token calls must carry and the TLS the scheduler serves.
    pub security: ClusterSecurity,
    /// Start on a non-loopback address without a token.
    pub insecure: bool,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            bind: SocketAddr::from(([127, 0, 0, 1], 50050)),
            allowed: AllowedLocations::everything(),
            executor_timeout_seconds: 20,
            target_task_bytes: TargetTaskBytes::DEFAULT.0,
            security: ClusterSecurity::none(),
            insecure: false,
        }
    }
}

/// Runs a Ballista scheduler with ndfusion's codecs until the process ends (or SIGTERM).
pub async fn run_scheduler(settings: SchedulerSettings) -> Result<()> {
    let bind = settings.bind;
    let security = settings.security.clone();
    check_exposure(bind, &security, settings.insecure, "the scheduler")?;
    // Clients reach the scheduler by names of their own: they check the name.
    security.check_own_certificate("scheduler", None)?;
    let (logical, physical) = codecs(settings.allowed.clone());
    let config = SchedulerConfig {
        // Executors ask for work when they have free slots: tasks of an executor that was
        // lost are picked up again. (Pushed tasks reset after a loss wait for an offer that
        // may not come: a query hung in our fault test; and the executors' own gRPC servers,
        // which push mode calls, take no token or TLS.) A busy executor does not poll, so
        // the scheduler checks on it itself (`liveness.rs`).
        scheduling_policy: TaskSchedulingPolicy::PullStaged,
        bind_host: bind.ip().to_string(),
        bind_port: bind.port(),
        external_host: bind.ip().to_string(),
        executor_timeout_seconds: settings.executor_timeout_seconds,
        expire_dead_executor_interval_seconds: (settings.executor_timeout_seconds / 4).max(1),
        override_logical_codec: Some(logical),
        override_physical_codec: Some(physical),
        override_session_builder: Some(scheduler_session_builder(
            settings.allowed,
            TargetTaskBytes(settings.target_task_bytes.max(1)),
        )),
        override_create_grpc_client_endpoint: security.endpoint_override(),
        use_tls: security.has_tls(),
        ..Default::default()
    };
    let what = || format!("scheduler on {bind}");
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| cluster_error(what(), e))?;
    // The liveness checks need the cluster's state, which the scheduler takes.
    let checked = cluster.clone();
    // Ballista's `start_server`, assembled here for the token and TLS (no REST API, no Flight
    // proxy: neither is used).
    let (encoding, decoding) = (
        config.grpc_server_max_encoding_message_size as usize,
        config.grpc_server_max_decoding_message_size as usize,
    );
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
            .await
            .map_err(|e| cluster_error(what(), e))?;
    liveness::spawn(
        scheduler.clone(),
        &checked,
        security.clone(),
        Duration::from_secs(settings.executor_timeout_seconds),
    );
    let service = SchedulerGrpcServer::new(scheduler)
        .max_encoding_message_size(encoding)
        .max_decoding_message_size(decoding);
    let service = InterceptedService::new(service, security.interceptor());
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = security.server_tls("scheduler")? {
        server = server
            .tls_config(tls)
            .map_err(|e| cluster_error(what(), e))?;
    }
    server
        .add_service(service)
        .serve_with_shutdown(bind, stop_signal())
        .await
        .map_err(|e| cluster_error(what(), e))
}

/// SIGTERM or Ctrl-C.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Ballista's scheduler session, with the check that refuses what a cluster does not run and
/// the task size its scans are cut by.
fn scheduler_session_builder(
    allowed: AllowedLocations,
    task_bytes: TargetTaskBytes,
) -> ballista_scheduler::scheduler_server::SessionBuilder {
    Arc::new(move |config: SessionConfig| {
        let config = task_bytes.on(config);
        let state = ballista_core::utils::default_session_builder(config)?;
        // Partial aggregates over grid scans fold their cells (the final aggregates stay:
        // a shuffle brings their groups together).
        Ok(SessionStateBuilder::new_from_existing(state)
            .with_physical_optimizer_rule(Arc::new(GridAggregates::partial()))
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
    /// The token calls carry and demand, and the TLS of every link.
    pub security: ClusterSecurity,
    /// Start on a non-loopback address without a token.
    pub insecure: bool,
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
            security: ClusterSecurity::none(),
            insecure: false,
        }
    }
}

/// Runs a Ballista executor with ndfusion's codecs until the process ends.
pub async fn run_executor(settings: ExecutorSettings) -> Result<()> {
    let security = settings.security.clone();
    check_exposure(settings.bind, &security, settings.insecure, "the executor")?;
    // Its Flight server (shuffle data, results) fails at start without a certificate.
    let flight_tls = security.server_tls("executor")?;
    // The scheduler and other executors reach it at its bind address.
    security.check_own_certificate("executor", Some(settings.bind.ip()))?;
    let (scheduler_host, scheduler_port) = split_host_port(&settings.scheduler)?;
    security
        .check_scheduler(&scheduler_host, scheduler_port)
        .await?;
    let work_dir = match settings.work_dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("ndfusion-executor-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work_dir).map_err(|e| Error::InvalidLocation {
        location: work_dir.display().to_string(),
        reason: format!("cannot create the executor's work folder: {e}"),
    })?;
    let bind = settings.bind;
    let (logical, physical) = codecs(settings.allowed.clone());
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
        override_logical_codec: Some(logical),
        override_physical_codec: Some(physical),
        override_create_grpc_client_endpoint: security.endpoint_override(),
        override_config_producer: Some({
            let security = security.clone();
            Arc::new(move || secured(default_config_producer(), &security))
        }),
        override_arrow_flight_service: Some(flight_service(security.clone(), flight_tls)),
        // Ballista 54.1's default registry has DataFusion's core functions only, not the
        // nested ones (`array_element`: `pos[2]`, `make_array`, ...) that a client's plans
        // use: the executor knows every function a client session does.
        override_function_registry: Some(Arc::new(BallistaFunctionRegistry::from(
            &SessionStateBuilder::new().with_default_features().build(),
        ))),
        ..Default::default()
    };
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| cluster_error(format!("executor on {bind}"), e))
}

/// The executor's Flight server (Ballista's service) behind the token check and TLS.
fn flight_service(
    security: ClusterSecurity,
    tls: Option<tonic::transport::ServerTlsConfig>,
) -> Arc<ballista_executor::ArrowFlightServerProvider> {
    Arc::new(move |work_dir, address, mut shutdown, grpc| {
        let interceptor = security.interceptor();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = FlightServiceServer::new(BallistaFlightService::new(work_dir))
                .max_decoding_message_size(16 * 1024 * 1024)
                .max_encoding_message_size(16 * 1024 * 1024);
            let service = InterceptedService::new(service, interceptor);
            let mut server = create_grpc_server(&grpc);
            if let Some(tls) = tls {
                server = server
                    .tls_config(tls)
                    .map_err(ballista_core::error::BallistaError::TonicError)?;
            }
            server
                .add_service(service)
                .serve_with_shutdown(address, shutdown.recv())
                .await
                .map_err(ballista_core::error::BallistaError::TonicError)
        })
    })
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
