//! CF cell bounds (`time:bounds = "time_bnds"`) decoded as their coordinate is.
//!
//! CMIP and most model output store a bounds variable without units of its own: its values
//! are in its coordinate's units. xarray (`conventions._update_bounds_attributes`, applied when
//! it decodes times) gives such a variable the `units` of a coordinate whose units are times
//! (they contain "since"), and its `calendar`, where the bounds variable has none of its own.
//! Without this, `time_bnds` would read as the bare numbers of days.

use serde_json::Value;

use crate::zarr::metadata::node::Member;

/// Gives every bounds variable named by a time coordinate's `bounds` attribute that
/// coordinate's `units` and `calendar`, where it lacks them (xarray's `setdefault`).
pub(crate) fn give_bounds_their_time_units(members: &mut [Member]) {
    let inherited: Vec<(String, Value, Option<Value>)> = members
        .iter()
        .filter_map(|m| {
            let attributes = m.array.attributes();
            let units = attributes.get("units")?;
            let bounds = attributes.get("bounds")?.as_str()?;
            units.as_str()?.contains("since").then(|| {
                let calendar = attributes.get("calendar").cloned();
                (bounds.to_string(), units.clone(), calendar)
            })
        })
        .collect();
    for (bounds, units, calendar) in inherited {
        let Some(member) = members.iter_mut().find(|m| m.name == bounds) else {
            continue;
        };
        let attributes = member.array.attributes_mut();
        attributes.entry("units").or_insert(units);
        if let Some(calendar) = calendar {
            attributes.entry("calendar").or_insert(calendar);
        }
    }
}
