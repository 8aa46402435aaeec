//! `CollectionTable`: many Zarr stores of one shape as one table. Members join by column name
//! (a column a member lacks is NULL in its rows; a type that differs is an error); their
//! attributes are `__global_attrs__`, and filters on those alone choose the members when the
//! plan is made, so the others are never opened past their metadata.

use std::sync::Arc;

use tokio::sync::OnceCell;

use arrow::datatypes::{Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{Result as DfResult, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use futures::{StreamExt, TryStreamExt};

use super::member_ranges::{as_collection_statistics, ColumnOrigin, MemberRanges};
use super::scan::{CollectionScan, MemberColumn, MemberScan};
use crate::error::{Error, Result};
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;
use crate::scan::{PartitionTarget, ScanExec};
use crate::zarr::metadata::attributes::{reads_only_global_attrs, GlobalAttrs};
use crate::zarr::node_table::{NodeFormat, NodeTable};
use crate::zarr::options::ZarrOptions;

/// How many members' metadata are read at a time.
const OPENING_IN_FLIGHT: usize = 64;

#[derive(Debug)]
pub(crate) struct CollectionTable {
    /// The pattern (or the list of locations), for messages and EXPLAIN.
    pattern: String,
    members: Vec<Member>,
    schema: SchemaRef,
    /// One value per member.
    global_attrs: Option<GlobalAttrs>,
    /// The members' bounds, worked out at the first scan with a filter they may decide.
    ranges: OnceCell<Arc<MemberRanges>>,
}

#[derive(Debug)]
struct Member {
    location: String,
    table: NodeTable,
    /// For each collection column but `__global_attrs__`, the member's column index.
    columns: Vec<Option<usize>>,
    rows: Option<usize>,
}

impl CollectionTable {
    /// Opens every location (concurrently, in order) as a member.
    pub(crate) async fn open(
        pattern: &str,
        locations: Vec<String>,
        options: ZarrOptions,
        format: &NodeFormat,
    ) -> Result<Self> {
        let tables: Vec<NodeTable> = futures::stream::iter(locations.clone())
            .map(|location| {
                let options = options.clone();
                async move { NodeTable::open(&location, options, format).await }
            })
            .buffered(OPENING_IN_FLIGHT)
            .try_collect()
            .await?;

        // One schema: the first member's columns, then new ones in member order.
        let mut fields: Vec<(Field, String)> = Vec::new();
        for (table, location) in tables.iter().zip(&locations) {
            // A member's `__global_attrs__` is its attributes, which the collection's column
            // of that name holds; a member without attributes that has such a column has a
            // field of that name, which the collection's column would hide: refused, whether
            // or not another member has attributes (the name is the collection's).
            let own_attrs = GlobalAttrs::from_json(table.attributes()).is_some();
            for field in table.provider().schema().fields() {
                if field.name() == GLOBAL_ATTRS_COLUMN {
                    if own_attrs {
                        continue;
                    }
                    return Err(Error::InvalidMetadata {
                        path: location.clone(),
                        reason: format!(
                            "it has a column named {GLOBAL_ATTRS_COLUMN}, which the collection \
                             {pattern} keeps for its members' attributes"
                        ),
                    });
                }
                match fields.iter().find(|(f, _)| f.name() == field.name()) {
                    None => {
                        fields.push((field.as_ref().clone().with_nullable(true), location.clone()))
                    }
                    Some((f, first)) if f.data_type() != field.data_type() => {
                        return Err(Error::InvalidMetadata {
                            path: pattern.to_string(),
                            reason: format!(
                                "column '{}' is {} in {first} and {} in {location}",
                                field.name(),
                                f.data_type(),
                                field.data_type()
                            ),
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        let attrs: Vec<(String, &serde_json::Map<String, serde_json::Value>)> = tables
            .iter()
            .zip(&locations)
            .map(|(t, l)| (l.clone(), t.attributes()))
            .collect();
        let global_attrs = GlobalAttrs::union(&attrs).map_err(|p| p.at(pattern))?;
        let members = tables
            .into_iter()
            .zip(locations)
            .map(|(table, location)| {
                let schema = table.provider().schema();
                let columns = fields
                    .iter()
                    .map(|(f, _)| schema.index_of(f.name()).ok())
                    .collect();
                let rows = table
                    .provider()
                    .statistics()
                    .and_then(|s| match s.num_rows {
                        Precision::Exact(n) => Some(n),
                        _ => None,
                    });
                Member {
                    location,
                    table,
                    columns,
                    rows,
                }
            })
            .collect();
        let mut schema_fields: Vec<Field> = fields.into_iter().map(|(f, _)| f).collect();
        if let Some(attrs) = &global_attrs {
            schema_fields.push(attrs.field());
        }
        Ok(CollectionTable {
            pattern: pattern.to_string(),
            members,
            schema: Arc::new(Schema::new(schema_fields)),
            global_attrs,
            ranges: OnceCell::new(),
        })
    }

    /// Every member's bounds of the collection's columns: its whole scan's statistics.
    async fn member_ranges(&self, state: &dyn Session) -> DfResult<Arc<MemberRanges>> {
        let attrs_index = self.schema.index_of(GLOBAL_ATTRS_COLUMN).ok();
        let mut per_member = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let plan = member.table.provider().scan(state, None, &[], None).await?;
            let own = plan.partition_statistics(None)?;
            let origins = (member.columns.iter().enumerate()).map(|(c, own)| match own {
                _ if Some(c) == attrs_index => ColumnOrigin::Attributes,
                Some(i) => ColumnOrigin::Member(*i),
                None => ColumnOrigin::Missing,
            });
            per_member.push(as_collection_statistics(&own, &self.schema, origins));
        }
        Ok(Arc::new(MemberRanges::new(
            Arc::clone(&self.schema),
            &per_member,
        )))
    }

    /// Whether every member has every column `filter` reads.
    fn every_member_has(&self, filter: &Expr) -> bool {
        filter.column_refs().iter().all(|c| {
            self.schema.index_of(&c.name).is_ok_and(|i| {
                self.members
                    .iter()
                    .all(|m| m.columns.get(i).is_some_and(Option::is_some))
            })
        })
    }

    fn member_has_all(&self, member: &Member, filter: &Expr) -> bool {
        filter.column_refs().iter().all(|c| {
            self.schema
                .index_of(&c.name)
                .is_ok_and(|i| member.columns.get(i).is_some_and(Option::is_some))
        })
    }

    pub(crate) fn member_count(&self) -> usize {
        self.members.len()
    }

    pub(crate) fn member_locations(&self) -> Vec<&str> {
        (self.members.iter())
            .flat_map(|m| std::iter::once(m.location.as_str()).chain(m.table.reads_beyond()))
            .collect()
    }
}

#[async_trait]
impl TableProvider for CollectionTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        // Filters on the attributes choose members now.
        let mut chosen = vec![true; self.members.len()];
        let mut member_filters = Vec::new();
        for filter in filters {
            if reads_only_global_attrs(filter) {
                match &self.global_attrs {
                    Some(attrs) => {
                        for (keep, holds) in chosen.iter_mut().zip(attrs.evaluate(filter, state)?) {
                            *keep &= holds;
                        }
                    }
                    None => chosen.iter_mut().for_each(|k| *k = false),
                }
            } else if !filter
                .column_refs()
                .iter()
                .any(|c| c.name == GLOBAL_ATTRS_COLUMN)
            {
                member_filters.push(filter.clone());
            }
        }
        // Filters on dimensions and coordinates decide members from their bounds, all at
        // once, before any member's scan is planned.
        if !member_filters.is_empty() {
            let ranges = self
                .ranges
                .get_or_try_init(|| self.member_ranges(state))
                .await?;
            if let Some(may_match) = ranges.may_match(&member_filters, state) {
                for (keep, may) in chosen.iter_mut().zip(may_match) {
                    *keep &= may;
                }
            }
        }
        let projection: Vec<usize> = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let schema = Arc::new(self.schema.project(&projection)?);
        let attrs_index = self.schema.index_of(GLOBAL_ATTRS_COLUMN).ok();
        let mut scans = Vec::new();
        for (i, member) in self.members.iter().enumerate() {
            if !chosen[i] {
                continue;
            }
            let mut member_projection = Vec::new();
            let mut columns = Vec::new();
            for &c in &projection {
                if Some(c) == attrs_index {
                    columns.push(MemberColumn::GlobalAttrs);
                    continue;
                }
                match member.columns[c] {
                    Some(m) => {
                        columns.push(MemberColumn::Member(member_projection.len()));
                        member_projection.push(m);
                    }
                    None => {
                        columns.push(MemberColumn::Null(self.schema.field(c).data_type().clone()))
                    }
                }
            }
            let pushed: Vec<Expr> = member_filters
                .iter()
                .filter(|f| self.member_has_all(member, f))
                .cloned()
                .collect();
            let plan = member
                .table
                .provider()
                .scan(state, Some(&member_projection), &pushed, limit)
                .await?;
            // A member whose dimensions and coordinates lie outside the filters selects no
            // cell: it is not scanned (its metadata said so).
            if plan.partition_statistics(None)?.num_rows == Precision::Exact(0) {
                continue;
            }
            scans.push(MemberScan {
                location: member.location.clone(),
                plan,
                columns,
                attrs: self.global_attrs.as_ref().map(|a| a.row(i)),
            });
        }
        Ok(Arc::new(ScanExec::new(Arc::new(CollectionScan::new(
            self.pattern.clone(),
            schema,
            scans,
            self.members.len(),
            limit,
            PartitionTarget::of(state.config()),
        )))))
    }

    /// Attribute filters choose members (exact); filters on columns every member has run in
    /// each member (exact); the others run in the members that have their columns and again
    /// above the scan (a member without the column sees NULL).
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                let mixed = !reads_only_global_attrs(f)
                    && f.column_refs()
                        .iter()
                        .any(|c| c.name == GLOBAL_ATTRS_COLUMN);
                if reads_only_global_attrs(f) || (!mixed && self.every_member_has(f)) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let rows: Option<usize> = self.members.iter().map(|m| m.rows).sum();
        Some(
            Statistics::new_unknown(&self.schema).with_num_rows(match rows {
                Some(n) => Precision::Exact(n),
                None => Precision::Absent,
            }),
        )
    }
}
