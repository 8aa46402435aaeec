//! `CREATE EXTERNAL TABLE ... OPTIONS (...)` as both formats read them: the format's own keys
//! and the storage settings, every other key an error that lists the known ones.

use std::collections::HashMap;

use datafusion::common::plan_err;
use datafusion::logical_expr::CreateExternalTable;

use crate::error::{Error, Result};
use crate::storage::StorageOptions;

/// The format keys given (DataFusion prefixes keys without a dot with `format.`; both
/// spellings are accepted) and the storage settings. `format` is the `STORED AS` name.
pub(crate) fn split_options(
    options: &HashMap<String, String>,
    format: &str,
    format_keys: &[&'static str],
) -> Result<(Vec<(&'static str, String)>, StorageOptions)> {
    let mut own = Vec::new();
    let mut storage = StorageOptions::new();
    let mut keys: Vec<&String> = options.keys().collect();
    keys.sort();
    for key in keys {
        let value = &options[key];
        let bare = key.strip_prefix("format.").unwrap_or(key);
        if let Some(known) = format_keys.iter().find(|k| **k == bare) {
            own.push((*known, value.clone()));
        } else if StorageOptions::is_storage_key(bare) {
            storage = storage.with(bare, value.clone())?;
        } else {
            let known: Vec<&str> = format_keys
                .iter()
                .copied()
                .chain(StorageOptions::keys())
                .collect();
            return Err(Error::InvalidOption {
                option: bare.to_string(),
                reason: format!(
                    "STORED AS {format} does not know this option; known: {}",
                    known.join(", ")
                ),
            });
        }
    }
    Ok((own, storage))
}

/// A count that must be at least 1.
pub(crate) fn positive(key: &str, value: &str) -> Result<usize> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::InvalidOption {
            option: key.to_string(),
            reason: format!("expected a positive integer, found '{value}'"),
        }),
    }
}

/// ndfusion's tables take no column list or partitioning: their columns come from the data.
/// `format` is the `STORED AS` name, for messages.
pub(crate) fn check_external_table(
    cmd: &CreateExternalTable,
    format: &str,
) -> datafusion::common::Result<()> {
    if !cmd.schema.fields().is_empty() {
        return plan_err!(
            "STORED AS {format} reads its columns from the data: leave out the column list"
        );
    }
    if !cmd.table_partition_cols.is_empty() {
        return plan_err!("STORED AS {format} does not support PARTITIONED BY");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &["batch_size"];

    #[test]
    fn format_and_storage_keys_are_split_and_unknown_keys_listed() {
        let options = HashMap::from([
            ("format.batch_size".to_string(), "10".to_string()),
            ("aws.region".to_string(), "eu-west-1".to_string()),
        ]);
        let (own, storage) = split_options(&options, "ZARR", KEYS).unwrap();
        assert_eq!(own, vec![("batch_size", "10".to_string())]);
        assert_eq!(storage.get("aws.region"), Some("eu-west-1"));

        let options = HashMap::from([("format.chunk_cache".to_string(), "1".to_string())]);
        let err = split_options(&options, "ZARR", KEYS)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid option 'chunk_cache': STORED AS ZARR does not know this option; known: batch_size, aws.access_key_id"),
            "{err}"
        );
        assert!(positive("batch_size", "0").is_err());
        assert_eq!(positive("batch_size", "7").unwrap(), 7);
    }
}
