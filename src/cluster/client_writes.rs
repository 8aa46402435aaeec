//! `COPY ... STORED AS ZARR | LANCE_ND` and `INSERT INTO` a lance-nd table on a cluster are
//! written by the client: the query runs on the
//! cluster and its rows stream back to this process, whose sink writes them with the
//! client's own storage settings and credentials. The cluster writes nothing (issue 21: its
//! processes read only the locations they allow), and its plan codec has no way to carry a
//! custom sink: Ballista would decode the COPY's file type as Arrow.
//!
//! [`ClientWrites`] wraps Ballista's query planner: a COPY whose file format is one of
//! ndfusion's writers ([`TableKind::write_format`](crate::TableKind::write_format)), or an
//! INSERT into one of ndfusion's tables, has its input planned by Ballista (a distributed
//! query) and its writer planned here, as DataFusion's own planner would; every other plan
//! goes to Ballista's planner unchanged.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::TableProvider;
use datafusion::common::Result as DfResult;
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::datasource::physical_plan::{FileGroup, FileOutputMode, FileSinkConfig};
use datafusion::datasource::DefaultTableSource;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::dml::{CopyTo, InsertOp};
use datafusion::logical_expr::{DmlStatement, WriteOp};
use datafusion::logical_expr::{LogicalPlan, PlanType, StringifiedPlan};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::explain::ExplainExec;
use datafusion::physical_plan::{displayable, ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::SessionContext;

use crate::table_kind::{table_kind_of, table_kinds, TableKind};

/// Ballista's planner, with COPY to ndfusion's formats written by this process.
#[derive(Debug)]
pub(crate) struct ClientWrites {
    cluster: Arc<dyn QueryPlanner + Send + Sync>,
}

/// `ctx` (a cluster context) with [`ClientWrites`] around its planner.
pub(crate) fn with_client_writes(ctx: SessionContext) -> SessionContext {
    let state = ctx.state();
    let cluster = Arc::clone(state.query_planner());
    let state = SessionStateBuilder::new_from_existing(state)
        .with_query_planner(Arc::new(ClientWrites { cluster }))
        .build();
    SessionContext::new_with_state(state)
}

/// The writer of `copy` when it is one of ndfusion's formats.
fn ndfusion_writer(copy: &CopyTo) -> Option<Arc<dyn FileFormatFactory>> {
    let ext = copy.file_type.get_ext();
    table_kinds()
        .iter()
        .filter_map(TableKind::write_format)
        .find(|writer| writer.get_ext() == ext)
}

/// The table of `insert`, and how it inserts, when it is one of ndfusion's that writes.
fn ndfusion_table(insert: &DmlStatement) -> Option<(Arc<dyn TableProvider>, InsertOp)> {
    let WriteOp::Insert(op) = insert.op else {
        return None;
    };
    let table = &insert
        .target
        .downcast_ref::<DefaultTableSource>()?
        .table_provider;
    let kind = table_kind_of(table.as_ref())?;
    kind.write_format().map(|_| (Arc::clone(table), op))
}

/// Whether `plan` is a COPY or INSERT this process writes.
fn writes_here(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Copy(copy) => ndfusion_writer(copy).is_some(),
        LogicalPlan::Dml(insert) => ndfusion_table(insert).is_some(),
        _ => false,
    }
}

#[async_trait]
impl QueryPlanner for ClientWrites {
    async fn create_physical_plan(
        &self,
        plan: &LogicalPlan,
        state: &SessionState,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let copy = match plan {
            LogicalPlan::Copy(copy) => copy,
            LogicalPlan::Dml(insert) => {
                let Some((table, op)) = ndfusion_table(insert) else {
                    return self.cluster.create_physical_plan(plan, state).await;
                };
                let input = self.input(&insert.input, state).await?;
                let plan = table.insert_into(state, input, op).await?;
                return optimized(plan, state);
            }
            // EXPLAIN of such a statement is planned here too, as it will run.
            LogicalPlan::Explain(explain) if writes_here(&explain.plan) => {
                let physical = self.create_physical_plan(&explain.plan, state).await?;
                let mut plans = explain.stringified_plans.clone();
                plans.push(StringifiedPlan::new(
                    PlanType::FinalPhysicalPlan,
                    displayable(physical.as_ref())
                        .indent(explain.verbose)
                        .to_string(),
                ));
                return Ok(Arc::new(ExplainExec::new(
                    Arc::clone(explain.schema.inner()),
                    plans,
                    explain.verbose,
                )));
            }
            _ => return self.cluster.create_physical_plan(plan, state).await,
        };
        let Some(writer) = ndfusion_writer(copy) else {
            return self.cluster.create_physical_plan(plan, state).await;
        };
        let input = self.input(&copy.input, state).await?;
        let format = writer.create(state, &copy.options)?;
        let url = ListingTableUrl::parse(&copy.output_url)?;
        let config = FileSinkConfig {
            original_url: copy.output_url.clone(),
            object_store_url: url.object_store(),
            table_paths: vec![url],
            file_group: FileGroup::default(),
            output_schema: Arc::clone(copy.input.schema().inner()),
            table_partition_cols: (copy.partition_by.iter())
                .map(|c| (c.clone(), arrow::datatypes::DataType::Null))
                .collect(),
            insert_op: InsertOp::Append,
            keep_partition_by_columns: false,
            file_extension: format.get_ext(),
            file_output_mode: FileOutputMode::Automatic,
        };
        let plan = format
            .create_writer_physical_plan(input, state, config, None)
            .await?;
        optimized(plan, state)
    }
}

impl ClientWrites {
    /// The rows a write takes, as the cluster computes them: one partition, which a sink
    /// reads.
    async fn input(
        &self,
        input: &LogicalPlan,
        state: &SessionState,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let input = self.cluster.create_physical_plan(input, state).await?;
        if input.output_partitioning().partition_count() > 1 {
            return Ok(Arc::new(CoalescePartitionsExec::new(input)));
        }
        Ok(input)
    }
}

/// `plan` with the session's physical optimizer rules run: DataFusion's planner optimizes
/// what it plans, and a writer plan is made here, so the rules run here (they give a sink the
/// order it asks for: a gridded write's sort).
fn optimized(
    mut plan: Arc<dyn ExecutionPlan>,
    state: &SessionState,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    for rule in state.physical_optimizers() {
        plan = rule.optimize(plan, state.config_options())?;
    }
    Ok(plan)
}
