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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use datafusion::catalog::Session;
use datafusion::logical_expr::Expr;

use crate::lance_nd::LanceNdOptions;
use crate::scan::ScanCall;
use crate::zarr::ZarrOptions;

/// How to open a table again.
#[derive(Debug, Clone)]
pub(crate) struct TableSource {
    pub kind: SourceKind,
    /// Tells this opening of the table from others (of the same location too): a cluster
    /// keeps what it opened per opening, so a table created again is read again, as locally.
    pub opening: String,
}

/// What was opened.
#[derive(Debug, Clone)]
pub(crate) enum SourceKind {
    /// `ZarrTable::open_with(location)`: an array, a group, or a glob of members.
    Zarr {
        location: String,
        options: ZarrOptions,
    },
    /// `ZarrTable::open_many(locations)`: a collection of listed members.
    ZarrMany {
        locations: Vec<String>,
        options: ZarrOptions,
    },
    /// A lance-nd table at the Lance version it was opened at, so every process reads the same
    /// rows however many writes land meanwhile.
    LanceNd {
        location: String,
        version: u64,
        options: LanceNdOptions,
    },
}

impl TableSource {
    /// A new opening of `kind`: unique to this process and this opening.
    pub(crate) fn new(kind: SourceKind) -> Arc<Self> {
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
            kind,
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
    /// The session's target partitions and batch size when the scan was planned.
    pub target_partitions: usize,
    pub batch_size: usize,
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
            target_partitions: state.config().target_partitions(),
            batch_size: state.config().batch_size(),
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

    fn as_any(&self) -> &dyn Any {
        self
    }
}
