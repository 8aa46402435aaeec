//! What a cluster's processes run: ndfusion's scans (whose locations the codec checks),
//! DataFusion's compute operators (projections, filters, joins, aggregates, sorts, in-memory
//! values) and Ballista's shuffles. DataFusion's own file scans (CSV, JSON, Parquet, Arrow,
//! Avro listing tables) run only when every file they read is inside the allow list; file
//! sinks (`COPY TO`, `INSERT INTO` a listing table) and any other data source never run: a
//! client would otherwise read and write the files of the cluster's machines.
//!
//! The scheduler checks each plan it makes (a physical optimizer rule, [`PlanGuard`]); each
//! process checks the task plans it decodes (`codec.rs`), which also covers plans a client
//! submits already built.

use std::sync::Arc;

use ballista_core::execution_plans::{ShuffleReaderExec, UnresolvedShuffleExec};
use datafusion::common::config::ConfigOptions;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::memory::LazyMemoryExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::streaming::StreamingTableExec;
use datafusion::physical_plan::ExecutionPlan;

use super::allowed::AllowedLocations;
use crate::scan::ScanExec;

/// Refuses a plan with a node a cluster does not run (see the module documentation).
pub(crate) fn check_plan(plan: &dyn ExecutionPlan, allowed: &AllowedLocations) -> Result<()> {
    check(plan, allowed, Served::No)
}

/// The check of `ndfusion serve`, which plans its clients' statements itself: a write's
/// target was checked where the statement was planned (`serve/policy.rs`, with
/// `--allow-ddl`), and the information schema's tables (streaming tables, whose other uses
/// need DDL, checked there too) are read as catalogs are.
pub(crate) fn check_served_plan(
    plan: &dyn ExecutionPlan,
    allowed: &AllowedLocations,
) -> Result<()> {
    check(plan, allowed, Served::Yes)
}

#[derive(Clone, Copy, PartialEq)]
enum Served {
    No,
    Yes,
}

fn check(plan: &dyn ExecutionPlan, allowed: &AllowedLocations, served: Served) -> Result<()> {
    if !allowed.is_restricted() || plan.downcast_ref::<ScanExec>().is_some() {
        return Ok(());
    }
    let refused = |what: String| {
        DataFusionError::External(Box::new(crate::error::Error::ClusterRefused { what }))
    };
    if plan.downcast_ref::<DataSinkExec>().is_some() && served == Served::No {
        return Err(refused(
            "writing files (COPY TO, INSERT INTO a file table)".into(),
        ));
    }
    if let Some(source) = plan.downcast_ref::<DataSourceExec>() {
        let source = source.data_source();
        if source.downcast_ref::<MemorySourceConfig>().is_some() {
            return Ok(());
        }
        let Some(files) = source.downcast_ref::<FileScanConfig>() else {
            return Err(refused(format!("the data source of {}", plan.name())));
        };
        let kind = files.file_source().file_type().to_uppercase();
        // `file:///`, `s3://bucket/`: the store's URL ends with a slash.
        let base = files.object_store_url.as_str();
        for file in files.file_groups.iter().flat_map(|g| g.iter()) {
            let location = format!("{base}{}", file.object_meta.location);
            let location = location.strip_prefix("file://").unwrap_or(&location);
            if allowed.check(location).is_err() {
                // Not the file's name: the client named the table, not what it lists.
                return Err(refused(format!(
                    "a {kind} scan of files outside the allowed locations ({})",
                    allowed.describe()
                )));
            }
        }
        return Ok(());
    }
    let children = plan.children();
    if children.is_empty() {
        let known = plan.downcast_ref::<EmptyExec>().is_some()
            || plan.downcast_ref::<PlaceholderRowExec>().is_some()
            || plan.downcast_ref::<LazyMemoryExec>().is_some()
            || plan.downcast_ref::<ShuffleReaderExec>().is_some()
            || plan.downcast_ref::<UnresolvedShuffleExec>().is_some()
            || (served == Served::Yes && plan.downcast_ref::<StreamingTableExec>().is_some());
        if !known {
            return Err(refused(format!("the data source {}", plan.name())));
        }
    }
    children
        .into_iter()
        .try_for_each(|child| check(child.as_ref(), allowed, served))
}

/// The scheduler's check of every plan it makes, as a physical optimizer rule.
#[derive(Debug)]
pub(crate) struct PlanGuard {
    pub allowed: AllowedLocations,
}

impl PhysicalOptimizerRule for PlanGuard {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        check_plan(plan.as_ref(), &self.allowed)?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "ndfusion_cluster_plan_guard"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
