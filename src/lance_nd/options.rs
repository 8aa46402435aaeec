//! How a lance-nd table is read: Lance batch size, fragments in flight, storage settings.

use crate::table_options::{
    Declared, KindOptions, OptionKeys, OptionKind, OptionSpec, OptionValue,
};

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

/// The keys of `STORED AS LANCE_ND` (what makes a [`KindOptions`] a [`LanceNdOptions`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LanceNdKeys;

impl Declared for LanceNdKeys {
    const SPECS: &'static [OptionSpec] = OPTIONS;
    const TAKER: &'static str = "STORED AS LANCE_ND";
}

impl OptionKeys for LanceNdKeys {}

/// How a lance-nd table is read (and where it is written).
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS LANCE_ND`: `batch_bytes`,
/// `fragments_in_flight`, and the storage settings of [`StorageOptions`]. From Rust, with the
/// builder methods. The defaults: 8 MiB Lance batches, one fragment per target partition in
/// flight, credentials from the environment.
///
/// [`StorageOptions`]: crate::StorageOptions
pub type LanceNdOptions = KindOptions<LanceNdKeys>;

impl KindOptions<LanceNdKeys> {
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

    /// The options in force, as EXPLAIN VERBOSE shows them.
    pub(crate) fn describe(&self, share: usize) -> String {
        self.describe_in_force(&[
            (&BATCH_BYTES_OPTION, self.batch_bytes()),
            (&FRAGMENTS_IN_FLIGHT, self.fragments_in_flight(share)),
        ])
    }
}
