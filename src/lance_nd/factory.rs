//! `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND LOCATION '...' [OPTIONS (...)]`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::Result;
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::CreateExternalTable;

use super::options::LanceNdOptions;
use super::table::LanceNdTable;
use crate::table_options::check_external_table;

/// Creates a [`LanceNdTable`] from `CREATE EXTERNAL TABLE` (see [`LanceNdOptions`] for the
/// options). [`register_table_factories`] registers it under the name `LANCE_ND`.
///
/// [`register_table_factories`]: crate::register_table_factories
#[derive(Debug, Default)]
pub struct LanceNdTableFactory;

#[async_trait]
impl TableProviderFactory for LanceNdTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        check_external_table(cmd, "LANCE_ND")?;
        let options = LanceNdOptions::from_sql(&cmd.options)?;
        Ok(Arc::new(
            LanceNdTable::open_with(&cmd.location, options).await?,
        ))
    }
}
