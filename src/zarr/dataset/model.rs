//! A Zarr group as the table `xarray.open_zarr(group).to_dataframe().reset_index()` shows: one
//! row per cell of the grid of every dimension its variables and coordinates span (those only
//! a coordinate spans included), a column per dimension (its coordinate values, or an Int64
//! index where it has none), then the data variables and the non-dimension coordinates (struct
//! variables by field), broadcast over the dimensions they lack.
//!
//! Which arrays are coordinates follows xarray: a 1-D array named like its dimension, and every
//! name in a `coordinates` attribute. Column order follows xarray too: dimensions in the order
//! the variables first name them (data variables first), then data variables, then other
//! coordinates. The grid is read in blocks shaped like the chunks of the data variable with the
//! most dimensions, so a block is one chunk of each variable chunked like it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::Value;

use super::bounds::give_bounds_their_time_units;
use super::coordinate::Coordinate;
use super::variable::{is_char, Variable};
use crate::error::{Error, Result};
use crate::limits::COORDINATE_BYTES;
use crate::zarr::decode::cf::CfOptions;
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::element::{ElementType, ScalarKind};
use crate::zarr::metadata::node::{Group, Member, MemberArray};
use crate::zarr::store::ZarrStore;

use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::{StreamExt, TryStreamExt};

use crate::zarr::read::metrics::ChunkMetrics;

/// Coordinates read at once when a dataset opens.
const COORDINATES_IN_FLIGHT: usize = 8;

/// What a dataset table shows: all variables, or some, CF-decoded or not.
#[derive(Debug, Clone, Default)]
pub(crate) struct DatasetOptions {
    pub variables: Option<Vec<String>>,
    pub cf: CfOptions,
    /// How much of a plain local chunk a variable reads at a time.
    pub piece_bytes: usize,
}

/// One axis of the grid.
#[derive(Debug)]
pub(crate) struct Axis {
    pub name: String,
    pub size: u64,
    /// The dimension coordinate's values, when the dimension has one.
    pub coordinate: Option<Coordinate>,
}

/// Where a table column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatasetColumn {
    /// A grid axis: its coordinate values, or the Int64 index.
    Axis(usize),
    /// Column `column` of variable `var`.
    Variable { var: usize, column: usize },
    /// The group's attributes.
    GlobalAttrs,
}

#[derive(Debug)]
pub(crate) struct Dataset {
    pub location: String,
    /// Grid axes in reading order (the primary variable's dimensions first).
    pub axes: Vec<Axis>,
    pub variables: Vec<Arc<Variable>>,
    /// The shape of a block of the grid, per axis.
    pub block_shape: Vec<u64>,
    pub columns: Vec<DatasetColumn>,
    pub schema: SchemaRef,
    pub global_attrs: Option<GlobalAttrs>,
    /// The group's attributes.
    pub attributes: serde_json::Map<String, Value>,
    /// Whether the group's consolidated metadata opened it (else a listing).
    pub consolidated: bool,
    pub remote: bool,
    /// Whether its chunks come over a network (the default of `chunks_in_flight`).
    pub over_network: bool,
}

impl Dataset {
    /// The dataset of `group`, whose store is `store`.
    pub(crate) async fn open(
        store: ZarrStore,
        location: &str,
        mut group: Group,
        options: &DatasetOptions,
    ) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidMetadata {
            path: location.to_string(),
            reason,
        };
        if group.members.is_empty() {
            return Err(invalid("the group holds no arrays".into()));
        }
        if options.cf.decode_times {
            give_bounds_their_time_units(&mut group.members);
        }
        let roles = Roles::of(&group);
        let joined = joined_char_arrays(&group);
        let (data, coords) = roles.choose(&group, options.variables.as_deref(), location)?;
        // A member's dimensions and shape as the grid sees them: a character array without
        // the character dimension it joins.
        let dims_of = |m: &Member| -> Vec<String> {
            let dims = m.array.dimension_names();
            let keep = dims.len() - usize::from(joined.contains(&m.name));
            dims[..keep].to_vec()
        };
        let shape_of = |m: &Member| m.array.shape()[..dims_of(m).len()].to_vec();

        // Dimension sizes: the first variable naming a dimension sets it.
        let mut sizes: Vec<(String, u64, String)> = Vec::new();
        for m in data.iter().chain(&coords) {
            let dims = m.array.dimension_names();
            if let Some(d) = dims
                .iter()
                .enumerate()
                .find_map(|(i, d)| dims[..i].contains(d).then_some(d))
            {
                return Err(invalid(format!(
                    "'{}' names dimension '{d}' twice; a dataset's variables span each \
                     dimension once",
                    m.name
                )));
            }
            for (d, n) in dims_of(m).into_iter().zip(shape_of(m)) {
                match sizes.iter().find(|(name, _, _)| *name == d) {
                    None => sizes.push((d, n, m.name.clone())),
                    Some((_, size, by)) if *size != n => {
                        let what = if roles.dimension_coordinates.contains(&m.name) {
                            format!("coordinate '{}' has {n} values", m.name)
                        } else {
                            format!("dimension '{d}' is {n} long in '{}'", m.name)
                        };
                        return Err(invalid(format!(
                            "{what}, but dimension '{d}' is {size} long in '{by}'"
                        )));
                    }
                    Some(_) => {}
                }
            }
        }

        // Reading order: the (first) data variable with the most dimensions first (a dataset of
        // coordinates alone: its first coordinate with the most).
        let readers = if data.is_empty() { &coords } else { &data };
        let max_rank = readers.iter().map(|m| dims_of(m).len()).max();
        let primary_member = readers.iter().find(|m| Some(dims_of(m).len()) == max_rank);
        let mut axis_names: Vec<String> = primary_member.map(dims_of).unwrap_or_default();
        for (name, _, _) in &sizes {
            if !axis_names.contains(name) {
                axis_names.push(name.clone());
            }
        }
        // The grid's cells must be countable (u64), as every plan over it counts them.
        let cells = sizes
            .iter()
            .try_fold(1u64, |n, (_, size, _)| n.checked_mul(*size));
        if cells.is_none() {
            let shape: Vec<String> = sizes.iter().map(|(d, n, _)| format!("{d}={n}")).collect();
            return Err(invalid(format!(
                "the grid {} has more than 2^64 cells",
                shape.join(" x ")
            )));
        }
        let size_of = |name: &str| {
            sizes
                .iter()
                .find(|(n, _, _)| n == name)
                .map_or(0, |(_, s, _)| *s)
        };
        let block_shape: Vec<u64> = axis_names
            .iter()
            .map(|a| {
                primary_member
                    .and_then(|m| {
                        dims_of(m)
                            .iter()
                            .position(|d| d == a)
                            .map(|i| m.array.chunk_shape()[i])
                    })
                    .unwrap_or_else(|| size_of(a))
                    .max(1)
            })
            .collect();
        // Column order of the dimensions: as xarray first meets them.
        let mut column_axes: Vec<String> = Vec::new();
        for m in data.iter().chain(&coords) {
            for d in dims_of(m) {
                if !column_axes.contains(&d) {
                    column_axes.push(d);
                }
            }
        }

        // Open the variables: data variables and non-dimension coordinates are columns,
        // dimension coordinates become the axes' values.
        let cf = options.cf;
        let mut columns_vars = Vec::new();
        let mut dimension_coords: HashMap<String, Variable> = HashMap::new();
        let axis_of = |name: &String| axis_names.iter().position(|a| a == name);
        for member in data.into_iter().chain(coords) {
            let is_dim_coord = roles.dimension_coordinates.contains(&member.name)
                && member.array.dimension_names() == [member.name.clone()];
            let join = joined.contains(&member.name);
            let mut var = Variable::open(&store, location, member, cf, join, options.piece_bytes)?;
            var.axes = var
                .dimension_names
                .iter()
                .map(|d| axis_of(d).ok_or_else(|| Error::Internal(format!("no axis {d}"))))
                .collect::<Result<_>>()?;
            if is_dim_coord {
                dimension_coords.insert(var.name.clone(), var);
            } else {
                columns_vars.push(Arc::new(var));
            }
        }
        // Coordinates are read whole when the table opens, all at once (over a network one
        // after another they cost a round trip or more each): bounded first, since a few
        // bytes of metadata may claim any length.
        let max = store.limits().coordinate_bytes;
        let mut to_read = Vec::with_capacity(axis_names.len());
        for name in &axis_names {
            let var = dimension_coords.remove(name);
            if let Some(var) = &var {
                let cells = var.shape.iter().product::<u64>();
                let bytes = cells.saturating_mul(var.cell_bytes());
                if bytes > max {
                    return Err(invalid(format!(
                        "coordinate '{name}' holds {bytes} bytes of values, more than the \
                         {max} a dataset reads when it opens ({COORDINATE_BYTES})"
                    )));
                }
            }
            to_read.push(var);
        }
        // Read before any scan: their counters go nowhere.
        let metrics = ChunkMetrics::new(&ExecutionPlanMetricsSet::new(), 0);
        let coordinates: Vec<Option<Coordinate>> = futures::stream::iter(to_read)
            .map(|var| {
                let metrics = metrics.clone();
                async move {
                    match var {
                        Some(var) => Ok(Some(Coordinate::new(
                            Arc::new(var).read_all(&metrics).await?,
                        ))),
                        None => Ok::<_, Error>(None),
                    }
                }
            })
            .buffered(COORDINATES_IN_FLIGHT)
            .try_collect()
            .await?;
        let axes: Vec<Axis> = (axis_names.iter().zip(coordinates))
            .map(|(name, coordinate)| Axis {
                name: name.clone(),
                size: size_of(name),
                coordinate,
            })
            .collect();

        // The schema, with every name used once.
        let global_attrs = GlobalAttrs::from_json(&group.attributes);
        let mut fields: Vec<Field> = Vec::new();
        let mut columns = Vec::new();
        let mut owners: Vec<String> = Vec::new();
        for name in &column_axes {
            let a = axis_names.iter().position(|n| n == name).unwrap_or(0);
            let data_type = axes[a]
                .coordinate
                .as_ref()
                .map_or(DataType::Int64, |c| c.values.data_type().clone());
            fields.push(Field::new(name, data_type, true));
            columns.push(DatasetColumn::Axis(a));
            owners.push(format!("dimension '{name}'"));
        }
        for (v, var) in columns_vars.iter().enumerate() {
            for (c, column) in var.columns.iter().enumerate() {
                let owner = if column.field.is_some() {
                    format!("field '{}' of variable '{}'", column.name, var.name)
                } else {
                    format!("variable '{}'", var.name)
                };
                if let Some(i) = fields.iter().position(|f| f.name() == &column.name) {
                    return Err(invalid(format!(
                        "column name '{}' is used by {} and by {owner}",
                        column.name, owners[i]
                    )));
                }
                fields.push(Field::new(&column.name, column.data_type.clone(), true));
                columns.push(DatasetColumn::Variable { var: v, column: c });
                owners.push(owner);
            }
        }
        if let Some(attrs) = &global_attrs {
            if let Some(i) = fields.iter().position(|f| f.name() == "__global_attrs__") {
                return Err(invalid(format!(
                    "{} is named __global_attrs__, the column of the group's attributes",
                    owners[i]
                )));
            }
            fields.push(attrs.field());
            columns.push(DatasetColumn::GlobalAttrs);
        }
        Ok(Dataset {
            location: location.to_string(),
            axes,
            variables: columns_vars,
            block_shape,
            columns,
            schema: Arc::new(Schema::new(fields)),
            global_attrs,
            attributes: group.attributes,
            consolidated: group.consolidated,
            remote: store.is_remote(),
            over_network: store.over_network(),
        })
    }

    pub(crate) fn shape(&self) -> Vec<u64> {
        self.axes.iter().map(|a| a.size).collect()
    }

    pub(crate) fn axis_names(&self) -> Vec<String> {
        self.axes.iter().map(|a| a.name.clone()).collect()
    }

    pub(crate) fn rows(&self) -> u64 {
        self.axes.iter().map(|a| a.size).product()
    }
}

/// The `|S1` members that xarray reads as strings (`concat_characters`): their last
/// dimension is no member's name and only such character arrays use it, as their last.
fn joined_char_arrays(group: &Group) -> HashSet<String> {
    let is_bytes = |m: &Member| match &m.array {
        MemberArray::Fixed(meta) => matches!(
            meta.element,
            ElementType::Scalar {
                kind: ScalarKind::NullTerminatedBytes(_),
                ..
            }
        ),
        MemberArray::Strings(_) => false,
    };
    let names: HashSet<&str> = group.members.iter().map(|m| m.name.as_str()).collect();
    let joinable = |dim: &String| {
        !names.contains(dim.as_str())
            && group
                .members
                .iter()
                .filter(|m| m.array.dimension_names().contains(dim))
                .all(|m| is_bytes(m) && m.array.dimension_names().last() == Some(dim))
    };
    group
        .members
        .iter()
        .filter(|m| match &m.array {
            MemberArray::Fixed(meta) => is_char(&meta.element),
            MemberArray::Strings(_) => false,
        })
        .filter(|m| m.array.dimension_names().last().is_some_and(joinable))
        .map(|m| m.name.clone())
        .collect()
}

/// Which members are coordinates, after xarray.
struct Roles {
    /// Names in `coordinates` attributes, and 1-D arrays named like their dimension.
    coordinates: HashSet<String>,
    dimension_coordinates: HashSet<String>,
}

impl Roles {
    fn of(group: &Group) -> Self {
        let mut coordinates = HashSet::new();
        let mut dimension_coordinates = HashSet::new();
        let listed = |attrs: &serde_json::Map<String, Value>| -> Vec<String> {
            attrs
                .get("coordinates")
                .and_then(Value::as_str)
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        };
        coordinates.extend(listed(&group.attributes));
        for m in &group.members {
            coordinates.extend(listed(m.array.attributes()));
            if m.array.dimension_names() == [m.name.clone()] {
                coordinates.insert(m.name.clone());
                dimension_coordinates.insert(m.name.clone());
            }
        }
        Roles {
            coordinates,
            dimension_coordinates,
        }
    }

    /// The data variables (all, or those named by the `variables` option) and the
    /// coordinates they need, in store order.
    fn choose(
        &self,
        group: &Group,
        wanted: Option<&[String]>,
        location: &str,
    ) -> Result<(Vec<Member>, Vec<Member>)> {
        let is_data = |m: &&Member| !self.coordinates.contains(&m.name);
        let data_names: Vec<&str> = group
            .members
            .iter()
            .filter(is_data)
            .map(|m| m.name.as_str())
            .collect();
        let chosen: Vec<&Member> = match wanted {
            Some(names) => names
                .iter()
                .map(|n| {
                    group
                        .members
                        .iter()
                        .find(|m| &m.name == n && is_data(m))
                        .ok_or_else(|| Error::InvalidOption {
                            option: "variables".into(),
                            reason: format!(
                                "{location} has no data variable '{n}'; it has: {}",
                                data_names.join(", ")
                            ),
                        })
                })
                .collect::<Result<_>>()?,
            None => group.members.iter().filter(is_data).collect(),
        };
        // Every coordinate, as xarray's `to_dataframe` shows them (their dimensions are part of
        // the grid even where no data variable spans them); with a `variables` option, the
        // coordinates on the chosen variables' dimensions, as `ds[variables]` keeps them.
        let dims: HashSet<&String> = chosen
            .iter()
            .flat_map(|m| m.array.dimension_names())
            .collect();
        let coords: Vec<&Member> = group
            .members
            .iter()
            .filter(|m| !is_data(m))
            .filter(|m| {
                wanted.is_none() || m.array.dimension_names().iter().all(|d| dims.contains(d))
            })
            .collect();
        if chosen.is_empty() && coords.is_empty() {
            return Err(Error::InvalidMetadata {
                path: location.to_string(),
                reason: "the group holds no arrays with dimensions".into(),
            });
        }
        Ok((
            chosen.into_iter().cloned().collect(),
            coords.into_iter().cloned().collect(),
        ))
    }
}
