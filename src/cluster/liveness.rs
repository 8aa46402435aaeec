//! The scheduler's own check that executors are alive, and what it does when none is.
//!
//! In Ballista 54.1's pull mode an executor's poll is its only heartbeat, and it does not poll
//! while every task slot is busy (apache/datafusion-ballista#2144, fixed in 55, which needs a
//! DataFusion Lance 14 does not support): a task longer than `--executor-timeout` made the
//! scheduler drop a healthy executor and run its tasks again, forever. Push-staged mode has an
//! independent heartbeat, but there the scheduler calls an executor's own gRPC server, which
//! Ballista 54.1 starts without a way to add the token check or TLS: any host could launch
//! tasks on it. So the executors keep pulling, and the scheduler asks a busy one itself: an
//! executor that has not polled for a while is called on its Flight server (the one it serves
//! shuffle data on, behind the token and TLS) and, when that answers, its heartbeat is renewed.
//! A killed executor does not answer and is dropped after the timeout as before.
//!
//! With no executor left, Ballista would keep a running query waiting for one forever: the
//! check fails such queries after another timeout, with an error saying why.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::Criteria;
use ballista_core::serde::protobuf::executor_status::Status as ExecutorState;
use ballista_core::serde::protobuf::ExecutorHeartbeat;
use ballista_core::utils::{create_grpc_client_endpoint, GrpcClientConfig};
use ballista_scheduler::cluster::{BallistaCluster, ClusterState, JobState};
use ballista_scheduler::scheduler_server::SchedulerServer;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use super::security::ClusterSecurity;

type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// How often executors are checked: a quarter of the timeout (a lost executor is noticed
/// between 1 and 1.25 timeouts after its last sign of life), at least every 5 s.
pub(crate) fn check_interval(executor_timeout: Duration) -> Duration {
    (executor_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// Starts the checks for the life of the scheduler process.
pub(crate) fn spawn(
    scheduler: Scheduler,
    cluster: &BallistaCluster,
    security: ClusterSecurity,
    executor_timeout: Duration,
) {
    let cluster_state = cluster.cluster_state();
    let mut orphaned = Orphans::new(cluster.job_state(), executor_timeout);
    let interval = check_interval(executor_timeout);
    tokio::spawn(async move {
        loop {
            renew_busy_executors(cluster_state.as_ref(), &security, interval).await;
            let alive = alive_executors(cluster_state.as_ref(), executor_timeout);
            orphaned.check(&scheduler, alive).await;
            tokio::time::sleep(interval).await;
        }
    });
}

/// An executor that counts as active: not dead or terminating (pull mode registers executors
/// without a status).
fn is_active(heartbeat: &ExecutorHeartbeat) -> bool {
    matches!(
        heartbeat.status.as_ref().and_then(|s| s.status.as_ref()),
        None | Some(ExecutorState::Active(_))
    )
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Executors seen within the timeout.
fn alive_executors(cluster_state: &dyn ClusterState, executor_timeout: Duration) -> usize {
    let since = now_seconds().saturating_sub(executor_timeout.as_secs());
    cluster_state
        .executor_heartbeats()
        .values()
        .filter(|h| is_active(h) && h.timestamp > since)
        .count()
}

/// Calls every active executor that has not polled for `interval` (its slots are busy) and
/// renews the heartbeat of each that answers. The calls run at once, each at most `interval`.
async fn renew_busy_executors(
    cluster_state: &dyn ClusterState,
    security: &ClusterSecurity,
    interval: Duration,
) {
    let quiet_since = now_seconds().saturating_sub(interval.as_secs());
    let quiet: Vec<String> = cluster_state
        .executor_heartbeats()
        .into_values()
        .filter(|h| is_active(h) && h.timestamp <= quiet_since)
        .map(|h| h.executor_id)
        .collect();
    let calls = quiet.into_iter().map(|id| async move {
        let metadata = cluster_state.get_executor_metadata(&id).await.ok()?;
        let address = format!("http://{}:{}", metadata.host, metadata.port);
        match answers(&address, security, interval).await {
            Ok(()) => Some(id),
            Err(reason) => {
                log::info!("executor {id} at {address} did not answer: {reason}");
                None
            }
        }
    });
    for id in futures::future::join_all(calls).await.into_iter().flatten() {
        // Read again: the executor may have been dropped while it was called, and a renewed
        // heartbeat must not bring it back.
        let Some(mut heartbeat) = cluster_state.get_executor_heartbeat(&id) else {
            continue;
        };
        if !is_active(&heartbeat) {
            continue;
        }
        heartbeat.timestamp = heartbeat.timestamp.max(now_seconds());
        if let Err(e) = cluster_state.save_executor_heartbeat(heartbeat).await {
            log::warn!("renewing the heartbeat of executor {id}: {e}");
        }
    }
}

/// Whether the executor's Flight server at `address` answers a call with the cluster's token
/// and TLS within `limit`. Ballista's Flight service does not list flights: "unimplemented" is
/// its answer, given after the token was accepted.
async fn answers(
    address: &str,
    security: &ClusterSecurity,
    limit: Duration,
) -> std::result::Result<(), String> {
    let call = async {
        let mut endpoint =
            create_grpc_client_endpoint(address.to_string(), Some(&GrpcClientConfig::default()))
                .map_err(|e| e.to_string())?;
        if let Some(secure) = security.endpoint_override() {
            endpoint = secure(endpoint).map_err(|e| e.to_string())?;
        }
        let channel = endpoint
            .connect_timeout(limit)
            .timeout(limit)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        match FlightServiceClient::new(channel)
            .list_flights(Criteria::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(()),
            Err(status) => Err(status.to_string()),
        }
    };
    tokio::time::timeout(limit, call)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

/// Running queries while no executor is alive: failed once that lasts a timeout.
struct Orphans {
    /// Where a job's status is published to its client.
    jobs: Arc<dyn JobState>,
    executor_timeout: Duration,
    /// Since when no executor has been alive.
    alone_since: Option<Instant>,
    /// Queries already failed (their cancellation, which cleans them up, comes later).
    failed: HashSet<String>,
}

impl Orphans {
    fn new(jobs: Arc<dyn JobState>, executor_timeout: Duration) -> Self {
        Orphans {
            jobs,
            executor_timeout,
            alone_since: None,
            failed: HashSet::new(),
        }
    }

    async fn check(&mut self, scheduler: &Scheduler, alive: usize) {
        if alive > 0 {
            self.alone_since = None;
            self.failed.clear();
            return;
        }
        let since = *self.alone_since.get_or_insert_with(Instant::now);
        if since.elapsed() < self.executor_timeout {
            return;
        }
        let message = format!(
            "no executor of the cluster has answered for {} s: the query cannot finish \
             (start executors and run it again)",
            (since.elapsed() + self.executor_timeout).as_secs()
        );
        // The jobs whose tasks executors are offered: those waiting for one.
        let running = scheduler.state.task_manager.get_running_job_cache();
        for (job_id, info) in running.iter() {
            let id = job_id.to_string();
            if !self.failed.insert(id.clone()) {
                continue;
            }
            log::warn!("failing job {id}: {message}");
            // Ballista 54.1 has no public call to fail a running job with a reason: the graph
            // is failed in place and saved, which tells the client (and records the job as
            // failed); the job is cancelled later to free it (the client has its answer by
            // then; cancelling records "Cancelled" as the reason).
            let mut graph = info.execution_graph.write().await;
            graph.abort_running(message.clone());
            if let Err(e) = self.jobs.save_job(job_id, &graph).await {
                log::warn!("recording job {id} as failed: {e}");
            }
            drop(graph);
            let scheduler = scheduler.clone();
            let job_id = job_id.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                if let Err(e) = scheduler.cancel_job(job_id).await {
                    log::warn!("cancelling job {id}: {e}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_come_four_times_a_timeout_and_at_least_every_five_seconds() {
        for (timeout_ms, interval_ms) in [
            (20_000, 5_000),
            (10_000, 2_500),
            (2_000, 1_000),
            (600_000, 5_000),
        ] {
            let interval = check_interval(Duration::from_millis(timeout_ms));
            assert_eq!(
                interval,
                Duration::from_millis(interval_ms),
                "timeout {timeout_ms} ms"
            );
        }
    }
}
