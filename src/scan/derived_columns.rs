//! [`ScanDerivedColumns`]: a physical optimizer rule that hands the scan the expressions an
//! aggregate computes from what the scan knows at planning:
//!
//! - group keys of one grid axis (`GROUP BY date_trunc('month', time)`, `floor(lat / 5)`),
//!   evaluated once per index of the axis and handed out by index like a coordinate's. The
//!   aggregate then groups by a column whose order the scan knows, so DataFusion aggregates in
//!   order (`ordering_mode=Sorted`) instead of hashing every row, and `date_trunc` runs 1000
//!   times instead of 10^8; where the keys come in long runs, the partial aggregate becomes a
//!   [`RunAggregateExec`](super::run_aggregate::RunAggregateExec) (`RunAggregates`).
//! - keys and aggregate arguments of `__global_attrs__` alone (`max(__global_attrs__.id)`,
//!   `GROUP BY __global_attrs__.station`), one value per array or collection member: the
//!   scan's statistics hold it, so DataFusion's aggregate-statistics rule, which runs next,
//!   answers `min`, `max` and `count` of it without a scan.
//!
//! The rule runs in the sessions ndfusion makes (`new_session_context`), just before
//! DataFusion's `AggregateStatistics`. It leaves a cluster's plans alone: the scheduler does
//! not run it, and a scan with derived columns has no origin to replay (the codec refuses it).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::ScanExec;
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;

/// Expressions of what a scan knows at planning, evaluated by the scan.
#[derive(Debug, Default)]
pub(crate) struct ScanDerivedColumns;

impl PhysicalOptimizerRule for ScanDerivedColumns {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let rewritten: Option<Arc<dyn ExecutionPlan>> =
                if let Some(aggregate) = node.downcast_ref::<AggregateExec>() {
                    into_scan(aggregate)?.map(|a| a as _)
                } else if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
                    projection_into_scan(projection)?.map(|p| p as _)
                } else {
                    None
                };
            Ok(match rewritten {
                Some(plan) => Transformed::yes(plan),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "ScanDerivedColumns"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What moves into the scan: `computed` expressions become its columns after the ones
/// `read` keeps.
struct Moved {
    computed: Vec<(Arc<dyn PhysicalExpr>, String)>,
    read: Vec<usize>,
}

impl Moved {
    /// The scan keeps only the columns that `exprs` still read (a `time` read only by
    /// `date_trunc('month', time)` is not made per row), then one column per computed
    /// expression.
    fn new(
        computed: Vec<(Arc<dyn PhysicalExpr>, String)>,
        exprs: impl IntoIterator<Item = Arc<dyn PhysicalExpr>>,
    ) -> Self {
        let mut moved = Moved {
            computed,
            read: Vec::new(),
        };
        let mut read: Vec<usize> = Vec::new();
        for expr in exprs {
            if moved.computed_at(&expr).is_none() {
                read.extend(collect_columns(&expr).iter().map(Column::index));
            }
        }
        read.sort_unstable();
        read.dedup();
        moved.read = read;
        moved
    }

    fn computed_at(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
        self.computed.iter().position(|(e, _)| e.eq(expr))
    }

    fn scan(&self, scan: &ScanExec) -> Option<ScanExec> {
        scan.with_derived_columns(&self.computed, &self.read)
    }

    /// `expr` over the new scan's columns.
    fn expr(&self, expr: &Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        if let Some(j) = self.computed_at(expr) {
            let name = &self.computed[j].1;
            return Ok(Arc::new(Column::new(name, self.read.len() + j)));
        }
        Arc::clone(expr)
            .transform_up(|e| match e.downcast_ref::<Column>() {
                Some(c) => match self.read.iter().position(|&i| i == c.index()) {
                    Some(at) => Ok(Transformed::yes(Arc::new(Column::new(c.name(), at)) as _)),
                    None => internal_err!("ScanDerivedColumns: column {c} was not kept"),
                },
                None => Ok(Transformed::no(e)),
            })
            .data()
    }
}

/// Whether `expr` computes something from `__global_attrs__` of `scan` alone.
fn of_attributes(scan: &ScanExec, expr: &Arc<dyn PhysicalExpr>) -> bool {
    let schema = scan.schema();
    let read = collect_columns(expr);
    expr.downcast_ref::<Column>().is_none()
        && !read.is_empty()
        && (read.iter()).all(|c| schema.field(c.index()).name() == GLOBAL_ATTRS_COLUMN)
}

/// `projection` over a scan that computes its expressions of `__global_attrs__` (DataFusion
/// puts `get_field(__global_attrs__, 'id')` in a projection of its own under the aggregate).
fn projection_into_scan(projection: &ProjectionExec) -> Result<Option<Arc<ProjectionExec>>> {
    let Some(scan) = projection.input().downcast_ref::<ScanExec>() else {
        return Ok(None);
    };
    let computed: Vec<(Arc<dyn PhysicalExpr>, String)> = (projection.expr().iter())
        .filter(|p| of_attributes(scan, &p.expr))
        .map(|p| (Arc::clone(&p.expr), p.alias.clone()))
        .collect();
    if computed.is_empty() {
        return Ok(None);
    }
    let moved = Moved::new(
        computed,
        projection.expr().iter().map(|p| Arc::clone(&p.expr)),
    );
    let Some(scan) = moved.scan(scan) else {
        return Ok(None);
    };
    let exprs = (projection.expr().iter())
        .map(|p| Ok(ProjectionExpr::new(moved.expr(&p.expr)?, p.alias.clone())))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Arc::new(ProjectionExec::try_new(
        exprs,
        Arc::new(scan),
    )?)))
}

/// `aggregate` over a scan that computes some of its expressions, when it reads rows straight
/// from an ndfusion scan and the scan can compute every group key that is not a plain column
/// and every argument of `__global_attrs__` alone.
fn into_scan(aggregate: &AggregateExec) -> Result<Option<Arc<AggregateExec>>> {
    let reads_rows = matches!(
        aggregate.mode(),
        AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
    );
    let group = aggregate.group_expr();
    let Some(scan) = aggregate.input().downcast_ref::<ScanExec>() else {
        return Ok(None);
    };
    if !reads_rows || !group.is_single() {
        return Ok(None);
    }
    let mut computed: Vec<(Arc<dyn PhysicalExpr>, String)> = (group.expr().iter())
        .filter(|(expr, _)| expr.downcast_ref::<Column>().is_none())
        .cloned()
        .collect();
    for argument in (aggregate.aggr_expr().iter()).flat_map(|a| a.expressions()) {
        if of_attributes(scan, &argument) && !computed.iter().any(|(e, _)| e.eq(&argument)) {
            let name = argument.to_string();
            computed.push((argument, name));
        }
    }
    if computed.is_empty() {
        return Ok(None);
    }
    let keys = group.expr().iter().map(|(e, _)| Arc::clone(e));
    let arguments = (aggregate.aggr_expr().iter()).flat_map(|a| a.expressions());
    let orders = (aggregate.aggr_expr().iter()).flat_map(|a| {
        a.order_bys()
            .iter()
            .map(|o| Arc::clone(&o.expr))
            .collect::<Vec<_>>()
    });
    let filters = aggregate.filter_expr().iter().flatten().cloned();
    let moved = Moved::new(computed, keys.chain(arguments).chain(orders).chain(filters));
    let Some(scan) = moved.scan(scan) else {
        return Ok(None);
    };
    let keys = (group.expr().iter())
        .map(|(expr, name)| Ok((moved.expr(expr)?, name.clone())))
        .collect::<Result<Vec<_>>>()?;
    let aggregates = (aggregate.aggr_expr().iter())
        .map(|a| {
            let args = (a.expressions().iter())
                .map(|e| moved.expr(e))
                .collect::<Result<Vec<_>>>()?;
            let order = (a.order_bys().iter())
                .map(|o| moved.expr(&o.expr))
                .collect::<Result<_>>()?;
            match a.with_new_expressions(args, order) {
                Some(moved) => Ok(Arc::new(moved)),
                None => internal_err!("ScanDerivedColumns: {} kept its arguments", a.name()),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let filters = (aggregate.filter_expr().iter())
        .map(|f| f.as_ref().map(|e| moved.expr(e)).transpose())
        .collect::<Result<Vec<_>>>()?;
    let input: Arc<dyn ExecutionPlan> = Arc::new(scan);
    let rewritten = AggregateExec::try_new(
        *aggregate.mode(),
        PhysicalGroupBy::new_single(keys),
        aggregates,
        filters,
        Arc::clone(&input),
        input.schema(),
    )?
    .with_limit_options(aggregate.limit_options());
    Ok(Some(Arc::new(rewritten)))
}
