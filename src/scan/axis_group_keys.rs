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
use datafusion::common::Result;
use datafusion::physical_expr::expressions::Column;
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
    let Some(scan) = scan.with_axis_expressions(&computed) else {
        return Ok(None);
    };
    // The scan's columns, then one per computed key, in order.
    let schema = scan.schema();
    let mut next = schema.fields().len() - computed.len();
    let keys = (group.expr().iter())
        .map(|(expr, name)| {
            if expr.downcast_ref::<Column>().is_some() {
                return (Arc::clone(expr), name.clone());
            }
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(name, next));
            next += 1;
            (column, name.clone())
        })
        .collect();
    let input: Arc<dyn ExecutionPlan> = Arc::new(scan);
    let rewritten = AggregateExec::try_new(
        *aggregate.mode(),
        PhysicalGroupBy::new_single(keys),
        aggregate.aggr_expr().to_vec(),
        aggregate.filter_expr().to_vec(),
        Arc::clone(&input),
        input.schema(),
    )?
    .with_limit_options(aggregate.limit_options());
    Ok(Some(Arc::new(rewritten)))
}
