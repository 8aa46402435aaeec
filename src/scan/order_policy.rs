//! Whether a session's scans declare the order their rows come in.
//!
//! Not on a Ballista cluster: Ballista 54.1 cuts a plan into stages at its repartitions and
//! reads each stage's input back from shuffle files in no particular order, but keeps the
//! operators DataFusion planned over that input for sorted input (an aggregate in
//! `ordering_mode=Sorted`, a `SortPreservingMergeExec`). A declared order that reaches across
//! a shuffle then gives wrong answers (`GROUP BY date_trunc('month', time) ORDER BY 1` came
//! back unsorted). The scheduler's and the executors' sessions carry Ballista's configuration,
//! so both plan the same scans without orders.

use datafusion::prelude::SessionConfig;

/// Whether scans planned in a session of `config` declare their order (and can be read
/// backwards): everywhere but in a Ballista cluster's sessions.
pub(crate) fn declares_order(config: &SessionConfig) -> bool {
    #[cfg(feature = "cluster")]
    {
        let ballista = config
            .options()
            .extensions
            .get::<ballista_core::config::BallistaConfig>();
        ballista.is_none()
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = config;
        true
    }
}
