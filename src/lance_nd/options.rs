//! How a lance-nd table is read: Lance batch size, fragments in flight, storage settings.

use std::collections::HashMap;

use crate::error::Result;
use crate::storage::StorageOptions;
use crate::table_options::{FormatOptions, OptionKind, OptionSpec, OptionValue};

/// The size Lance aims each scanned batch at: by rows alone (8,192), a batch of 1,000-value
/// arrays is 64 MiB, and materializing it onto the grid holds it twice.
const BATCH_BYTES: usize = 8 << 20;

const BATCH_BYTES_OPTION: OptionSpec = OptionSpec::new(
    "batch_bytes",
    OptionKind::Positive,
    "bytes Lance aims each scanned batch of table rows at (default: 8388608)",
);
const FRAGMENTS_IN_FLIGHT: OptionSpec = OptionSpec::new(
    "fragments_in_flight",
    OptionKind::Positive,
    "Lance fragments each scan partition reads ahead (default: the session's target \
          partitions divided among the scan's partitions)",
);

/// The options of `STORED AS LANCE_ND`, in the order EXPLAIN shows them.
pub(crate) const OPTIONS: &[OptionSpec] = &[BATCH_BYTES_OPTION, FRAGMENTS_IN_FLIGHT];

/// How a lance-nd table is read (and where it is written).
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND`: `batch_bytes`,
/// `fragments_in_flight`, and the storage settings of [`StorageOptions`]. From Rust, with the
/// builder methods.
#[derive(Debug, Clone)]
pub struct LanceNdOptions {
    set: FormatOptions,
    storage: StorageOptions,
}

impl Default for LanceNdOptions {
    fn default() -> Self {
        LanceNdOptions {
            set: FormatOptions::new(OPTIONS),
            storage: StorageOptions::default(),
        }
    }
}

impl LanceNdOptions {
    /// The defaults: 8 MiB Lance batches, one fragment per target partition in flight,
    /// credentials from the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes Lance aims each scanned batch of table rows at (at least 1).
    pub fn with_batch_bytes(mut self, bytes: usize) -> Self {
        (self.set).set(&BATCH_BYTES_OPTION, OptionValue::Positive(bytes.max(1)));
        self
    }

    /// Lance fragments each scan partition reads ahead (at least 1; default: the session's
    /// target partitions divided among the scan's partitions). Lance's own default reads many
    /// ahead, which holds much of a table in memory (BENCHMARKS.md).
    pub fn with_fragments_in_flight(mut self, fragments: usize) -> Self {
        (self.set).set(
            &FRAGMENTS_IN_FLIGHT,
            OptionValue::Positive(fragments.max(1)),
        );
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

    /// Every `OPTIONS (...)` key of the format (storage settings aside) and what it sets.
    pub fn documented() -> Vec<(&'static str, &'static str)> {
        LanceNdOptions::new().set.documented()
    }

    /// The options of `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND OPTIONS (...)` (also what
    /// the Python package passes).
    pub fn from_sql(options: &HashMap<String, String>) -> Result<Self> {
        let (set, storage) = FormatOptions::from_sql(OPTIONS, options, "STORED AS LANCE_ND")?;
        Ok(LanceNdOptions { set, storage })
    }

    /// The options as `OPTIONS (...)` keys, which [`from_sql`](Self::from_sql) reads back.
    pub(crate) fn to_sql(&self) -> Result<HashMap<String, String>> {
        let mut map = self.storage.to_sql()?;
        map.extend(self.set.to_sql());
        Ok(map)
    }

    pub(crate) fn batch_bytes(&self) -> usize {
        self.set
            .positive(&BATCH_BYTES_OPTION)
            .unwrap_or(BATCH_BYTES)
    }

    /// Fragments a partition reads ahead, given its default share.
    pub(crate) fn fragments_in_flight(&self, share: usize) -> usize {
        (self.set.positive(&FRAGMENTS_IN_FLIGHT))
            .unwrap_or(share)
            .max(1)
    }

    /// The options set by the user, as EXPLAIN shows them (secrets as `***`).
    pub(crate) fn describe_set(&self) -> String {
        let mut parts: Vec<String> = self.set.described().collect();
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }

    /// The options in force, as EXPLAIN VERBOSE shows them.
    pub(crate) fn describe(&self, share: usize) -> String {
        let in_force = [
            (&BATCH_BYTES_OPTION, self.batch_bytes()),
            (&FRAGMENTS_IN_FLIGHT, self.fragments_in_flight(share)),
        ];
        let mut parts: Vec<String> = (in_force.iter())
            .map(|(spec, n)| format!("{}={n}", spec.key))
            .collect();
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
