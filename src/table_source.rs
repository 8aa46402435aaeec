//! How a table was opened and how one of its scans was asked for: what a cluster's scheduler
//! and executors need to open the same table and plan the same scan (`cluster/codec.rs`).
//!
//! Tables and scans are not serialized field by field: a decoded table is the table opened
//! again from its [`TableSource`], a decoded scan is that table's `scan` run again with the
//! same [`ScanOrigin`]. Planning is deterministic given the table's metadata, so the scan is
//! the one the scheduler planned (same partitions, chunk ranges and row filter); the codec
//! checks that it is.

// Without the `cluster` feature nothing reads these back.
#![cfg_attr(not(feature = "cluster"), allow(dead_code))]

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use datafusion::catalog::{Session, TableProvider};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::error::Result;
use crate::scan::{PartitionTarget, ScanCall, ScanExec};

/// How to open a table again.
#[derive(Debug)]
pub(crate) struct TableSource {
    pub opened: Box<dyn Opened>,
    /// Tells this opening of the table from others (of the same location too): a cluster
    /// keeps what it opened per opening, so a table created again is read again, as locally.
    pub opening: String,
}

/// What a table kind opened, as a cluster is told it: each kind implements this beside its
/// table (`zarr/table.rs`, `icechunk/table.rs`, `lance_nd/table.rs`), and the kind's
/// `TableKind::reopen` (`table_kind.rs`) opens the same again from it.
pub(crate) trait Opened: std::fmt::Debug + Send + Sync {
    /// The codec's name for how to open it: one of its kind's `TableKind::reopens`.
    fn format(&self) -> &'static str;
    fn locations(&self) -> Vec<String>;
    /// The version read, for tables that have versions.
    fn version(&self) -> Option<u64> {
        None
    }
    /// The options it was opened with, as SQL `OPTIONS` (an error for options that cannot be
    /// written so, such as an application's object store).
    fn options_sql(&self) -> Result<HashMap<String, String>>;
}

impl TableSource {
    /// A new opening of what `opened` says: unique to this process and this opening.
    pub(crate) fn new(opened: impl Opened + 'static) -> Arc<Self> {
        static OPENINGS: AtomicU64 = AtomicU64::new(0);
        static PROCESS: OnceLock<String> = OnceLock::new();
        let process = PROCESS.get_or_init(|| {
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{}-{started}", std::process::id())
        });
        let opening = OPENINGS.fetch_add(1, Ordering::Relaxed);
        Arc::new(TableSource {
            opened: Box::new(opened),
            opening: format!("{process}-{opening}"),
        })
    }
}

/// A table's `scan` call, as the table received it.
#[derive(Debug, Clone)]
pub(crate) struct ScanOrigin {
    pub source: Arc<TableSource>,
    pub projection: Option<Vec<usize>>,
    pub filters: Vec<Expr>,
    pub limit: Option<usize>,
    /// Whether the scan reads backwards (a sort pushed into it).
    pub reversed: bool,
    /// The session's target partitions and batch size when the scan was planned.
    pub target_partitions: usize,
    pub batch_size: usize,
    /// The bytes a task aims to read, when planned on a cluster's scheduler.
    pub target_task_bytes: Option<u64>,
}

impl ScanOrigin {
    pub(crate) fn new(
        source: &Arc<TableSource>,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Self {
        ScanOrigin {
            source: Arc::clone(source),
            projection: projection.cloned(),
            filters: filters.to_vec(),
            limit,
            reversed: false,
            target_partitions: state.config().target_partitions(),
            batch_size: state.config().batch_size(),
            target_task_bytes: PartitionTarget::of(state.config()).task_bytes,
        }
    }

    /// The same scan with another limit (a scan's `with_fetch`).
    pub(crate) fn with_limit(&self, limit: Option<usize>) -> Self {
        ScanOrigin {
            limit,
            ..self.clone()
        }
    }
}

impl ScanCall for ScanOrigin {
    fn with_limit(&self, limit: Option<usize>) -> Arc<dyn ScanCall> {
        Arc::new(ScanOrigin::with_limit(self, limit))
    }

    fn reversed(&self) -> Arc<dyn ScanCall> {
        Arc::new(ScanOrigin {
            reversed: true,
            ..self.clone()
        })
    }

    fn with_projection(&self, keep: &[usize]) -> Arc<dyn ScanCall> {
        let columns = (keep.iter())
            .map(|&i| self.projection.as_ref().map_or(i, |p| p[i]))
            .collect();
        Arc::new(ScanOrigin {
            projection: Some(columns),
            ..self.clone()
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `provider`'s scan, which remembers that `source`'s table was scanned so (a cluster plans
/// the same scan again from it).
pub(crate) async fn scan_of(
    source: &Arc<TableSource>,
    provider: &dyn TableProvider,
    state: &dyn Session,
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
    limit: Option<usize>,
) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
    let plan = provider.scan(state, projection, filters, limit).await?;
    let origin = ScanOrigin::new(source, state, projection, filters, limit);
    if let Some(scan) = plan.downcast_ref::<ScanExec>() {
        scan.origin().set(Arc::new(origin));
    }
    Ok(plan)
}
