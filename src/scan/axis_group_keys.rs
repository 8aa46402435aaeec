//! [`AxisGroupKeys`]: a physical optimizer rule that hands group keys computed from one grid
//! axis (`GROUP BY date_trunc('month', time)`, `floor(lat / 5)`) to the scan, which evaluates
//! them once per index of the axis and hands their values out by index like a coordinate's.
//! The aggregate then groups by a column whose order the scan knows, so DataFusion aggregates
//! in order (`ordering_mode=Sorted`) instead of hashing every row, and `date_trunc` runs 1000
//! times instead of 10^8.
//!
//! Where the keys' values then come in long runs, the partial aggregate is a
//! [`RunAggregateExec`] (`run_aggregate.rs`): no hashing per row at all.
//!
//! The rule runs in the sessions ndfusion makes (`new_session_context`), after DataFusion's
//! own. It leaves a cluster's plans alone: the scheduler does not run it, and a scan with
//! such keys has no origin to replay (the codec refuses it).

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, Result};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::ScanExec;
use super::run_aggregate::RunAggregateExec;

/// Group keys of one grid axis evaluated by the scan, per index of the axis.
#[derive(Debug, Default)]
pub(crate) struct AxisGroupKeys;

impl PhysicalOptimizerRule for AxisGroupKeys {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let rewritten = keys_into_scan(aggregate)?;
            let changed = rewritten.is_some();
            let aggregate = rewritten.unwrap_or_else(|| Arc::new(aggregate.clone()));
            if let Some(runs) = RunAggregateExec::replacing(&aggregate) {
                return Ok(Transformed::yes(Arc::new(runs)));
            }
            match changed {
                true => Ok(Transformed::yes(aggregate)),
                false => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "AxisGroupKeys"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `aggregate` over a scan whose keys the scan computes, when it reads rows straight from
/// an ndfusion scan and every key that is not a plain column is an expression of one axis.
fn keys_into_scan(aggregate: &AggregateExec) -> Result<Option<Arc<AggregateExec>>> {
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
    let computed: Vec<(Arc<dyn PhysicalExpr>, String)> = (group.expr().iter())
        .filter(|(expr, _)| expr.downcast_ref::<Column>().is_none())
        .cloned()
        .collect();
    if computed.is_empty() {
        return Ok(None);
    }
    // The scan keeps only the columns the aggregate still reads (a `time` read only by
    // `date_trunc('month', time)` is not made per row), then one column per computed key.
    let mut read: Vec<usize> = Vec::new();
    let plain_keys = (group.expr().iter()).filter(|(e, _)| e.downcast_ref::<Column>().is_some());
    let arguments = (aggregate.aggr_expr().iter()).flat_map(|a| a.expressions());
    let filters = aggregate.filter_expr().iter().flatten().cloned();
    for expr in plain_keys
        .map(|(e, _)| Arc::clone(e))
        .chain(arguments)
        .chain(filters)
    {
        read.extend(collect_columns(&expr).iter().map(Column::index));
    }
    read.sort_unstable();
    read.dedup();
    let Some(scan) = scan.with_axis_expressions(&computed, &read) else {
        return Ok(None);
    };
    let moved = |expr: &Arc<dyn PhysicalExpr>| -> Result<Arc<dyn PhysicalExpr>> {
        Arc::clone(expr)
            .transform_up(|e| match e.downcast_ref::<Column>() {
                Some(c) => match read.iter().position(|&i| i == c.index()) {
                    Some(at) => Ok(Transformed::yes(Arc::new(Column::new(c.name(), at)) as _)),
                    None => internal_err!("AxisGroupKeys: column {c} was not kept"),
                },
                None => Ok(Transformed::no(e)),
            })
            .data()
    };
    let mut next = read.len();
    let keys = (group.expr().iter())
        .map(|(expr, name)| {
            if expr.downcast_ref::<Column>().is_some() {
                return Ok((moved(expr)?, name.clone()));
            }
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(name, next));
            next += 1;
            Ok((column, name.clone()))
        })
        .collect::<Result<Vec<_>>>()?;
    let aggregates = (aggregate.aggr_expr().iter())
        .map(|a| {
            let args = a
                .expressions()
                .iter()
                .map(moved)
                .collect::<Result<Vec<_>>>()?;
            let order = a
                .order_bys()
                .iter()
                .map(|o| moved(&o.expr))
                .collect::<Result<_>>()?;
            match a.with_new_expressions(args, order) {
                Some(moved) => Ok(Arc::new(moved)),
                None => internal_err!("AxisGroupKeys: {} kept its arguments", a.name()),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let filters = (aggregate.filter_expr().iter())
        .map(|f| f.as_ref().map(moved).transpose())
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
