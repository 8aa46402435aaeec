//! Where a scan keeps the call that planned it, for a cluster's codec (which replays the call
//! on the scheduler and the executors). The call itself is the table's business
//! (`table_source.rs`); the scan only holds it.

use std::any::Any;
use std::fmt::Debug;
use std::sync::{Arc, OnceLock};

/// The table's `scan` call that planned a scan.
pub(crate) trait ScanCall: Any + Debug + Send + Sync {
    /// The same call with another limit (a scan's `with_fetch`).
    fn with_limit(&self, limit: Option<usize>) -> Arc<dyn ScanCall>;

    /// The same call, its scan read backwards (a sort pushed into the scan).
    fn reversed(&self) -> Arc<dyn ScanCall>;

    /// The same call making only its output columns `keep`, in that order (a projection
    /// the scan took over).
    fn with_projection(&self, keep: &[usize]) -> Arc<dyn ScanCall>;

    /// The call as its type, for the codec to read.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    fn as_any(&self) -> &dyn Any;
}

/// Where a scan keeps its origin: set once, by the table that planned it.
#[derive(Debug, Default)]
pub(crate) struct OriginSlot(OnceLock<Arc<dyn ScanCall>>);

impl OriginSlot {
    pub(crate) fn set(&self, origin: Arc<dyn ScanCall>) {
        // A scan is planned once; a second origin would be the same call again.
        let _ = self.0.set(origin);
    }

    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn get(&self) -> Option<&Arc<dyn ScanCall>> {
        self.0.get()
    }

    /// The origin of a changed copy of the scan (`with_fetch`, a sort pushed down).
    pub(crate) fn derived(
        &self,
        change: impl FnOnce(&dyn ScanCall) -> Arc<dyn ScanCall>,
    ) -> OriginSlot {
        let slot = OriginSlot::default();
        if let Some(origin) = self.0.get() {
            slot.set(change(origin.as_ref()));
        }
        slot
    }
}
