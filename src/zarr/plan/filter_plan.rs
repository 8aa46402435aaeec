//! The filters of a Zarr scan, sorted by what decides them: filters on the attributes alone
//! when the plan is made, filters on dimensions as the selection of elements (chunks outside it
//! are never read), everything else as the row filter that runs in the scan. All exact.

use datafusion::catalog::Session;
use datafusion::logical_expr::Expr;

use crate::error::Result;
use crate::zarr::metadata::attributes::{reads_only_global_attrs, GlobalAttrs};
use crate::zarr::plan::pruning::{filter_region, intersect_all, Dimensions};
use crate::zarr::plan::selection::Selection;

pub(crate) struct FilterPlan {
    pub selection: Selection,
    /// Filters the scan evaluates row by row (ANDed).
    pub row_filters: Vec<Expr>,
}

pub(crate) fn plan_filters(
    filters: &[Expr],
    dims: &Dimensions,
    attrs: Option<&GlobalAttrs>,
    state: &dyn Session,
) -> Result<FilterPlan> {
    let mut regions = Vec::new();
    let mut dimension_filters = Vec::new();
    let mut row_filters = Vec::new();
    let mut attributes_reject = false;
    for filter in filters {
        if let (Some(attrs), true) = (attrs, reads_only_global_attrs(filter)) {
            attributes_reject |= !attrs.holds(filter, state)?;
            continue;
        }
        match filter_region(filter, dims) {
            Some(region) => {
                regions.push(region);
                dimension_filters.push(filter.clone());
            }
            None => row_filters.push(filter.clone()),
        }
    }
    let selection = match intersect_all(regions, dims).and_then(Selection::from_boxes) {
        _ if attributes_reject => Selection::none(),
        Some(selection) => selection,
        None => {
            // Too many boxes to plan: still exact, evaluated row by row.
            row_filters.extend(dimension_filters);
            Selection::all(dims.shape)
        }
    };
    Ok(FilterPlan {
        selection,
        row_filters,
    })
}
