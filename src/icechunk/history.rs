//! `icechunk_log(location [, branch] [, options])` and `icechunk_refs(location [, options])`:
//! a repository's snapshots and its branches and tags, as tables.
//!
//! The functions are called while a query is planned, which cannot wait: each returns a table
//! whose scan opens the repository, so every query lists it as it is then.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, MapArray, RecordBatch, RecordBatchOptions, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{plan_err, DFSchema, Result as DfResult, ScalarValue};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;
use icechunk::repository::VersionInfo;

use crate::error::{Error, Result};
use crate::icechunk::repository::open_repository;
use crate::storage::StorageOptions;

/// Which listing a function gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// The snapshots of a branch, newest first.
    Log,
    /// The branches and tags, each with its snapshot.
    Refs,
}

/// `icechunk_log`: `id`, `parent_id` (NULL for the first), `written_at`, `message`.
#[derive(Debug, Default)]
pub struct IcechunkLogFunction;

/// `icechunk_refs`: `name`, `kind` (`branch` or `tag`), `snapshot_id`.
#[derive(Debug, Default)]
pub struct IcechunkRefsFunction;

impl TableFunctionImpl for IcechunkLogFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        history_table(Listing::Log, args)
    }
}

impl TableFunctionImpl for IcechunkRefsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        history_table(Listing::Refs, args)
    }
}

fn log_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("parent_id", DataType::Utf8, true),
        Field::new(
            "written_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("message", DataType::Utf8, false),
    ]))
}

fn refs_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("snapshot_id", DataType::Utf8, false),
    ]))
}

/// The arguments, checked: a location, then (log only) a branch, then an options map.
fn history_table(listing: Listing, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
    let name = match listing {
        Listing::Log => "icechunk_log",
        Listing::Refs => "icechunk_refs",
    };
    let usage = match listing {
        Listing::Log => {
            "icechunk_log('<location>' [, '<branch>'] [, MAP {'<storage key>': '<value>', ...}])"
        }
        Listing::Refs => "icechunk_refs('<location>' [, MAP {'<storage key>': '<value>', ...}])",
    };
    let values = args
        .exprs()
        .iter()
        .map(|e| constant(e, args.session()))
        .collect::<DfResult<Vec<_>>>()?;
    let mut location = None;
    let mut branch = None;
    let mut storage = StorageOptions::new();
    for (i, value) in values.into_iter().enumerate() {
        match (i, value, listing) {
            (0, ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => {
                location = Some(s)
            }
            (1, ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), Listing::Log) => {
                branch = Some(s)
            }
            (1 | 2, ScalarValue::Map(map), _) if i == 1 || listing == Listing::Log => {
                storage = storage_options(&map)?
            }
            (_, other, _) => {
                return plan_err!(
                    "{name}: argument {} ({other}) is not what the function takes: {usage}",
                    i + 1
                )
            }
        }
    }
    let Some(location) = location else {
        return plan_err!("{name} needs a repository location: {usage}");
    };
    let limits = crate::limits::Limits::of_session(args.session().config_options())?;
    Ok(Arc::new(HistoryTable {
        listing,
        location,
        branch: branch.unwrap_or_else(|| "main".into()),
        storage: storage.with_limits(limits),
    }))
}

/// An argument's value, computed now (a literal, a `MAP {...}`).
fn constant(expr: &Expr, session: &dyn Session) -> DfResult<ScalarValue> {
    let schema = DFSchema::empty();
    let physical = session.create_physical_expr(expr.clone(), &schema)?;
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let array = physical.evaluate(&batch)?.into_array(1)?;
    ScalarValue::try_from_array(&array, 0)
}

/// The storage keys of a `MAP {'aws.region': '...', ...}` argument.
fn storage_options(map: &MapArray) -> Result<StorageOptions> {
    let text = |a: &ArrayRef| -> Option<Vec<String>> {
        let cast = datafusion::arrow::compute::cast(a, &DataType::Utf8).ok()?;
        let strings = cast.as_any().downcast_ref::<StringArray>()?;
        Some(
            strings
                .iter()
                .map(|s| s.unwrap_or("").to_string())
                .collect(),
        )
    };
    let (Some(keys), Some(values)) = (text(map.keys()), text(map.values())) else {
        return Err(Error::InvalidOption {
            option: "options".into(),
            reason: "the options map must map text keys to text values".into(),
        });
    };
    let pairs: HashMap<String, String> = keys.into_iter().zip(values).collect();
    StorageOptions::from_map(pairs)
}

#[derive(Debug)]
struct HistoryTable {
    listing: Listing,
    location: String,
    branch: String,
    storage: StorageOptions,
}

#[async_trait]
impl TableProvider for HistoryTable {
    fn schema(&self) -> SchemaRef {
        match self.listing {
            Listing::Log => log_schema(),
            Listing::Refs => refs_schema(),
        }
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batch = match self.listing {
            Listing::Log => self.log().await?,
            Listing::Refs => self.refs().await?,
        };
        let schema = batch.schema();
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            schema,
            projection.cloned(),
        )?)
    }
}

impl HistoryTable {
    async fn log(&self) -> Result<RecordBatch> {
        let repo = open_repository(&self.location, &self.storage, &[])
            .await?
            .repo;
        let failed = |e: &dyn std::fmt::Display| Error::NotFound {
            location: self.location.clone(),
            reason: format!("listing the snapshots of branch '{}': {e}", self.branch),
        };
        let branches = repo.list_branches().await.map_err(|e| failed(&e))?;
        if !branches.contains(&self.branch) {
            let known: Vec<&str> = branches.iter().map(String::as_str).collect();
            return Err(Error::NotFound {
                location: self.location.clone(),
                reason: format!(
                    "the repository has no branch '{}'; its branches: {}",
                    self.branch,
                    known.join(", ")
                ),
            });
        }
        let snapshots: Vec<_> = repo
            .ancestry(&VersionInfo::BranchTipRef(self.branch.clone()))
            .await
            .map_err(|e| failed(&e))?
            .try_collect()
            .await
            .map_err(|e| failed(&e))?;
        let ids: StringArray = snapshots.iter().map(|s| Some(s.id.to_string())).collect();
        let parents: StringArray = (snapshots.iter())
            .map(|s| s.parent_id.as_ref().map(ToString::to_string))
            .collect();
        let written: TimestampMicrosecondArray = (snapshots.iter())
            .map(|s| Some(s.flushed_at.timestamp_micros()))
            .collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC");
        let messages: StringArray = snapshots.iter().map(|s| Some(s.message.clone())).collect();
        batch(
            log_schema(),
            vec![
                Arc::new(ids),
                Arc::new(parents),
                Arc::new(written),
                Arc::new(messages),
            ],
        )
    }

    async fn refs(&self) -> Result<RecordBatch> {
        let repo = open_repository(&self.location, &self.storage, &[])
            .await?
            .repo;
        let failed = |e: &dyn std::fmt::Display| Error::NotFound {
            location: self.location.clone(),
            reason: format!("listing branches and tags: {e}"),
        };
        let mut rows: Vec<(String, &str, String)> = Vec::new();
        for branch in repo.list_branches().await.map_err(|e| failed(&e))? {
            let id = repo.lookup_branch(&branch).await.map_err(|e| failed(&e))?;
            rows.push((branch, "branch", id.to_string()));
        }
        for tag in repo.list_tags().await.map_err(|e| failed(&e))? {
            let id = repo.lookup_tag(&tag).await.map_err(|e| failed(&e))?;
            rows.push((tag, "tag", id.to_string()));
        }
        let column = |f: &dyn Fn(&(String, &str, String)) -> String| -> ArrayRef {
            Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
        };
        batch(
            refs_schema(),
            vec![
                column(&|r| r.0.clone()),
                column(&|r| r.1.to_string()),
                column(&|r| r.2.clone()),
            ],
        )
    }
}

fn batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    RecordBatch::try_new(schema, columns).map_err(|source| Error::Arrow {
        context: "listing an Icechunk repository".into(),
        source,
    })
}
