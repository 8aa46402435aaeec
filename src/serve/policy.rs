//! What a client may run. Queries, `EXPLAIN`, `DESCRIBE`, `SET` (which changes only the
//! client's own statement) and `SHOW` always; statements that change the server's tables or
//! write files (DDL, `COPY`, `INSERT`) only when the server was started with `--allow-ddl`,
//! and then only for locations `--allow` allows and with storage options that do not send
//! the server's credentials elsewhere (`--allow-endpoint`): the cluster's rules, applied
//! where the client's statement is planned. `EXPLAIN ANALYZE` runs what it explains, so every
//! node of a plan is checked, subqueries included.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::TableReference;
use datafusion::logical_expr::{DdlStatement, LogicalPlan, WriteOp};
use datafusion::prelude::SessionContext;
use tonic::Status;

use super::ServeSettings;

/// `PERMISSION_DENIED` naming the first statement `plan` holds that a client may not run.
pub(super) fn check(plan: &LogicalPlan, settings: &ServeSettings) -> Result<(), Status> {
    let mut refused = None;
    plan.apply_with_subqueries(|node| {
        if let Err(status) = check_node(node, settings) {
            refused = Some(status);
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(|e| Status::internal(format!("checking the statement: {e}")))?;
    refused.map_or(Ok(()), Err)
}

fn check_node(node: &LogicalPlan, settings: &ServeSettings) -> Result<(), Status> {
    let Some(statement) = changing_statement(node) else {
        return Ok(());
    };
    if !settings.allow_ddl {
        return Err(Status::permission_denied(format!(
            "{statement} is not allowed from a client: this server runs queries (its operator \
             may start it with --allow-ddl)"
        )));
    }
    let denied = |e: crate::error::Error| Status::permission_denied(format!("{statement}: {e}"));
    match node {
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(create)) => {
            settings.allowed.check(&create.location).map_err(denied)?;
            settings
                .allowed
                .check_options(&create.options)
                .map_err(denied)?;
            if let Some(kind) = crate::table_kind::table_kind(&create.file_type) {
                let options = create.options.clone();
                for location in (kind.option_locations)(&options).map_err(denied)? {
                    settings.allowed.check(&location).map_err(denied)?;
                }
            }
        }
        LogicalPlan::Copy(copy) => {
            settings.allowed.check(&copy.output_url).map_err(denied)?;
            settings
                .allowed
                .check_options(&copy.options)
                .map_err(denied)?;
        }
        _ => {}
    }
    Ok(())
}

/// The table `plan` creates from a location, if it does.
pub(super) fn created_table(plan: &LogicalPlan) -> Option<TableReference> {
    match plan {
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(create)) => Some(create.name.clone()),
        _ => None,
    }
}

/// A table a client just created reads only allowed locations: what its pattern expanded
/// to (symbolic links resolved) is known only once it is open. Otherwise it is dropped
/// again and the statement refused.
pub(super) async fn check_created(
    ctx: &SessionContext,
    name: TableReference,
    settings: &ServeSettings,
) -> Result<(), Status> {
    let Ok(table) = ctx.table_provider(name.clone()).await else {
        return Ok(());
    };
    let Some(kind) = crate::table_kind::table_kind_of(table.as_ref()) else {
        return Ok(());
    };
    for location in (kind.read_locations)(table.as_ref()) {
        if let Err(e) = settings.allowed.check(&location) {
            let _ = ctx.deregister_table(name);
            return Err(Status::permission_denied(format!(
                "CREATE EXTERNAL TABLE: {e}"
            )));
        }
    }
    Ok(())
}

/// The statement `node` is, when it changes tables or writes files.
fn changing_statement(node: &LogicalPlan) -> Option<String> {
    let name = match node {
        LogicalPlan::Ddl(ddl) => match ddl {
            DdlStatement::CreateExternalTable(_) => "CREATE EXTERNAL TABLE",
            DdlStatement::CreateMemoryTable(_) => "CREATE TABLE",
            DdlStatement::CreateView(_) => "CREATE VIEW",
            DdlStatement::CreateCatalogSchema(_) => "CREATE SCHEMA",
            DdlStatement::CreateCatalog(_) => "CREATE DATABASE",
            DdlStatement::CreateIndex(_) => "CREATE INDEX",
            DdlStatement::DropTable(_) => "DROP TABLE",
            DdlStatement::DropView(_) => "DROP VIEW",
            DdlStatement::DropCatalogSchema(_) => "DROP SCHEMA",
            DdlStatement::CreateFunction(_) => "CREATE FUNCTION",
            DdlStatement::DropFunction(_) => "DROP FUNCTION",
        },
        LogicalPlan::Copy(_) => "COPY",
        LogicalPlan::Dml(dml) => match &dml.op {
            WriteOp::Insert(_) => "INSERT",
            WriteOp::Delete => "DELETE",
            WriteOp::Update => "UPDATE",
            WriteOp::Ctas => "CREATE TABLE AS",
            WriteOp::Truncate => "TRUNCATE",
        },
        _ => return None,
    };
    Some(name.to_string())
}
