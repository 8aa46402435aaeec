//! `CREATE EXTERNAL TABLE ... STORED AS ZARR LOCATION '...'`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::{plan_err, Result};
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::CreateExternalTable;

use super::table::ZarrTable;

/// Creates a [`ZarrTable`] from `CREATE EXTERNAL TABLE`; register it under the name `ZARR`.
#[derive(Debug, Default)]
pub struct ZarrTableFactory;

#[async_trait]
impl TableProviderFactory for ZarrTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        if let Some((key, _)) = cmd.options.iter().next() {
            let key = key.strip_prefix("format.").unwrap_or(key);
            return plan_err!("STORED AS ZARR takes no OPTIONS, found '{key}'");
        }
        if !cmd.schema.fields().is_empty() {
            return plan_err!(
                "STORED AS ZARR reads its columns from the array: leave out the column list"
            );
        }
        if !cmd.table_partition_cols.is_empty() {
            return plan_err!("STORED AS ZARR does not support PARTITIONED BY");
        }
        Ok(Arc::new(ZarrTable::open(&cmd.location).await?))
    }
}
