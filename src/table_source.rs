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

use std::sync::{Arc, OnceLock};

use datafusion::catalog::Session;
use datafusion::logical_expr::Expr;

use crate::lance_nd::LanceNdOptions;
use crate::zarr::ZarrOptions;

/// How to open a table again.
#[derive(Debug, Clone)]
pub(crate) enum TableSource {
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

/// Where a scan keeps its origin: set once, by the table that planned it.
#[derive(Debug, Default)]
pub(crate) struct OriginSlot(OnceLock<Arc<ScanOrigin>>);

impl OriginSlot {
    pub(crate) fn set(&self, origin: ScanOrigin) {
        // A scan is planned once; a second origin would be the same call again.
        let _ = self.0.set(Arc::new(origin));
    }

    pub(crate) fn get(&self) -> Option<&Arc<ScanOrigin>> {
        self.0.get()
    }

    /// The origin of a copy of the scan with `limit` (`with_fetch`).
    pub(crate) fn with_limit(&self, limit: Option<usize>) -> OriginSlot {
        let slot = OriginSlot::default();
        if let Some(origin) = self.get() {
            slot.set(origin.with_limit(limit));
        }
        slot
    }
}
