//! How a lance-nd table is read: Lance batch size, fragments in flight, storage settings.

use std::collections::HashMap;

use crate::error::Result;
use crate::storage::StorageOptions;
use crate::table_options::{positive, split_options};

/// The size Lance aims each scanned batch at: by rows alone (8,192), a batch of 1,000-value
/// arrays is 64 MiB, and materializing it onto the grid holds it twice.
const BATCH_BYTES: usize = 8 << 20;

const KEYS: &[&str] = &[
    // bytes Lance aims each scanned batch of table rows at (default: 8388608)
    "batch_bytes",
    // Lance fragments each scan partition reads ahead (default: the session's target
    // partitions divided among the scan's partitions)
    "fragments_in_flight",
];

/// How a lance-nd table is read (and where it is written).
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND`: `batch_bytes`,
/// `fragments_in_flight`, and the storage settings of [`StorageOptions`]. From Rust, with the
/// builder methods.
#[derive(Debug, Clone, Default)]
pub struct LanceNdOptions {
    batch_bytes: Option<usize>,
    fragments_in_flight: Option<usize>,
    storage: StorageOptions,
}

impl LanceNdOptions {
    /// The defaults: 8 MiB Lance batches, one fragment per target partition in flight,
    /// credentials from the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes Lance aims each scanned batch of table rows at (at least 1).
    pub fn with_batch_bytes(mut self, bytes: usize) -> Self {
        self.batch_bytes = Some(bytes.max(1));
        self
    }

    /// Lance fragments each scan partition reads ahead (at least 1; default: the session's
    /// target partitions divided among the scan's partitions). Lance's own default reads many
    /// ahead, which holds much of a table in memory (BENCHMARKS.md).
    pub fn with_fragments_in_flight(mut self, fragments: usize) -> Self {
        self.fragments_in_flight = Some(fragments.max(1));
        self
    }

    /// How remote locations are reached.
    pub fn with_storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The storage settings.
    pub fn storage(&self) -> &StorageOptions {
        &self.storage
    }

    pub(crate) fn from_sql(options: &HashMap<String, String>) -> Result<Self> {
        let (own, storage) = split_options(options, "LANCE_ND", KEYS)?;
        let mut out = LanceNdOptions::new().with_storage(storage);
        for (key, value) in own {
            let n = positive(key, &value)?;
            out = match key {
                "batch_bytes" => out.with_batch_bytes(n),
                _ => out.with_fragments_in_flight(n),
            };
        }
        Ok(out)
    }

    #[cfg(feature = "cluster")]
    /// The options as `OPTIONS (...)` keys, which [`from_sql`](Self::from_sql) reads back (a
    /// cluster sends them with the plan); an object store the application built has no keys.
    pub(crate) fn to_sql(&self) -> Result<HashMap<String, String>> {
        let mut map = self.storage.to_sql()?;
        if let Some(n) = self.batch_bytes {
            map.insert("batch_bytes".into(), n.to_string());
        }
        if let Some(n) = self.fragments_in_flight {
            map.insert("fragments_in_flight".into(), n.to_string());
        }
        Ok(map)
    }

    pub(crate) fn batch_bytes(&self) -> usize {
        self.batch_bytes.unwrap_or(BATCH_BYTES)
    }

    /// Fragments a partition reads ahead, given its default share.
    pub(crate) fn fragments_in_flight(&self, share: usize) -> usize {
        self.fragments_in_flight.unwrap_or(share).max(1)
    }

    /// The options set by the user, as EXPLAIN shows them (secrets as `***`).
    pub(crate) fn describe_set(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.batch_bytes {
            parts.push(format!("batch_bytes={n}"));
        }
        if let Some(n) = self.fragments_in_flight {
            parts.push(format!("fragments_in_flight={n}"));
        }
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }

    /// The options in force, as EXPLAIN VERBOSE shows them.
    pub(crate) fn describe(&self, share: usize) -> String {
        let mut parts = vec![
            format!("batch_bytes={}", self.batch_bytes()),
            format!("fragments_in_flight={}", self.fragments_in_flight(share)),
        ];
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }
}
impl std::fmt::Display for LanceNdOptions {
    /// The options set (secrets as `***`), or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.describe_set() {
            set if set.is_empty() => f.write_str("defaults"),
            set => f.write_str(&set),
        }
    }
}
