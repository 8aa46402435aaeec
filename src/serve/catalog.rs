//! The catalog calls: the server's catalogs, schemas and tables (with their Arrow schemas),
//! the table types, and what the server says of itself (`GetSqlInfo`). arrow-flight's
//! builders make the batches: they apply the client's filters and give each column the
//! nullability the Flight SQL specification states, which ADBC checks.

use std::sync::OnceLock;

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, SqlInfo,
};
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::TableType;
use datafusion::prelude::SessionContext;
use tonic::Status;

/// The table types `GetTables` reports.
const TABLE_TYPES: [&str; 3] = ["TABLE", "VIEW", "LOCAL TEMPORARY"];

fn table_type(t: TableType) -> &'static str {
    match t {
        TableType::Base => TABLE_TYPES[0],
        TableType::View => TABLE_TYPES[1],
        TableType::Temporary => TABLE_TYPES[2],
    }
}

fn arrow_status(e: impl std::fmt::Display) -> Status {
    Status::internal(format!("building a catalog answer: {e}"))
}

pub(super) fn catalogs(
    ctx: &SessionContext,
    query: CommandGetCatalogs,
) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    for catalog in ctx.catalog_names() {
        builder.append(catalog);
    }
    builder.build().map_err(arrow_status)
}

pub(super) fn schemas(
    ctx: &SessionContext,
    query: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    for catalog_name in ctx.catalog_names() {
        let Some(catalog) = ctx.catalog(&catalog_name) else {
            continue;
        };
        for schema in catalog.schema_names() {
            builder.append(&catalog_name, schema);
        }
    }
    builder.build().map_err(arrow_status)
}

pub(super) async fn tables(
    ctx: &SessionContext,
    query: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    let empty = Schema::empty();
    for catalog_name in ctx.catalog_names() {
        let Some(catalog) = ctx.catalog(&catalog_name) else {
            continue;
        };
        for schema_name in catalog.schema_names() {
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            for table_name in schema.table_names() {
                let table = schema.table(&table_name).await.map_err(|e| {
                    Status::internal(format!(
                        "the table {catalog_name}.{schema_name}.{table_name}: {e}"
                    ))
                })?;
                let Some(table) = table else {
                    continue;
                };
                let arrow_schema = match builder.include_schema() {
                    true => table.schema(),
                    false => std::sync::Arc::new(empty.clone()),
                };
                builder
                    .append(
                        &catalog_name,
                        &schema_name,
                        &table_name,
                        table_type(table.table_type()),
                        &arrow_schema,
                    )
                    .map_err(arrow_status)?;
            }
        }
    }
    builder.build().map_err(arrow_status)
}

pub(super) fn table_types(query: CommandGetTableTypes) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    for t in TABLE_TYPES {
        builder.append(t);
    }
    builder.build().map_err(arrow_status)
}

/// What `GetSqlInfo` answers; `read_only` without `--allow-ddl`.
pub(super) fn sql_info(read_only: bool) -> &'static SqlInfoData {
    static INFO: [OnceLock<SqlInfoData>; 2] = [OnceLock::new(), OnceLock::new()];
    INFO[usize::from(read_only)].get_or_init(|| {
        let mut builder = SqlInfoDataBuilder::new();
        builder.append(SqlInfo::FlightSqlServerName, "ndfusion");
        builder.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        // The Arrow IPC format version (Schema.fbs MetadataVersion V5 is "1.5").
        builder.append(SqlInfo::FlightSqlServerArrowVersion, "1.5");
        builder.append(SqlInfo::FlightSqlServerReadOnly, read_only);
        builder.append(SqlInfo::FlightSqlServerSql, true);
        builder.append(SqlInfo::FlightSqlServerSubstrait, false);
        builder.append(SqlInfo::FlightSqlServerTransaction, 0i32);
        builder.append(SqlInfo::FlightSqlServerCancel, false);
        builder.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
        builder
            .build()
            .expect("the server's SqlInfo values have their specified types")
    })
}
