//! [`GridAggregates`]: the physical optimizer rule that puts [`GridAggregateExec`] in place
//! of DataFusion's aggregates over a grid scan.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::Result;
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::ExecutionPlan;

use super::exec::GridAggregateExec;
use crate::limits::SessionLimits;

/// Where the rule runs, and so what it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before DataFusion distributes the plan: a final aggregate straight over a partial one
    /// becomes one grid aggregate in one partition (its parents are then distributed as
    /// they need).
    Single,
    /// After: each partial aggregate becomes a partial grid aggregate, the final aggregate
    /// stays (a cluster's plans, cut into stages at the shuffles).
    Partial,
}

/// Grid aggregates in place of DataFusion's aggregates over a grid scan, unless the session
/// says `SET ndfusion.grid_aggregate = false`.
#[derive(Debug)]
pub(crate) struct GridAggregates {
    place: Place,
    /// The session's memory pool: a grid aggregate whose accumulators exceed its limit is
    /// left to DataFusion.
    pool: Option<Arc<dyn MemoryPool>>,
}

impl GridAggregates {
    /// The rule of a local session, before DataFusion's distribution rules.
    pub(crate) fn single(pool: Arc<dyn MemoryPool>) -> Self {
        GridAggregates {
            place: Place::Single,
            pool: Some(pool),
        }
    }

    /// The rule of a cluster's scheduler, after DataFusion's rules.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn partial() -> Self {
        GridAggregates {
            place: Place::Partial,
            pool: None,
        }
    }

    /// The bytes the pool can still give, when it has a limit.
    fn memory_left(&self) -> Option<usize> {
        memory_left(self.pool.as_deref()?)
    }
}

/// The bytes `pool` can still give, when it has a limit.
pub(crate) fn memory_left(pool: &dyn MemoryPool) -> Option<usize> {
    match pool.memory_limit() {
        MemoryLimit::Finite(limit) => Some(limit.saturating_sub(pool.reserved())),
        MemoryLimit::Infinite | MemoryLimit::Unknown => None,
    }
}

impl PhysicalOptimizerRule for GridAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !SessionLimits::grid_aggregate(config) {
            return Ok(plan);
        }
        let memory_left = self.memory_left();
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let aggregate = Arc::new(aggregate.clone());
            let folded = match (self.place, aggregate.mode()) {
                (Place::Single, AggregateMode::Final | AggregateMode::FinalPartitioned) => {
                    GridAggregateExec::single(&aggregate, memory_left)?
                }
                (Place::Partial, AggregateMode::Partial) => GridAggregateExec::partial(&aggregate)?,
                _ => None,
            };
            Ok(match folded {
                Some(folded) => Transformed::yes(Arc::new(folded) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        match self.place {
            Place::Single => "GridAggregates",
            Place::Partial => "GridAggregates(partial)",
        }
    }

    fn schema_check(&self) -> bool {
        true
    }
}
