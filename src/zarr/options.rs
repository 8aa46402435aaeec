//! How a Zarr table is read: batch size, chunks in flight, read piece size, storage settings.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::storage::StorageOptions;
use crate::table_options::{positive, split_options};
use crate::zarr::decode::cf::CfOptions;

/// Chunks each partition fetches ahead of the one it decodes, from local folders: enough to
/// overlap reading with decoding on a local disk.
const LOCAL_CHUNKS_IN_FLIGHT: usize = 2;

/// The same from object stores: a request costs tens of milliseconds, so many are kept in
/// flight (object_store's own default for concurrent range requests is 10).
const REMOTE_CHUNKS_IN_FLIGHT: usize = 16;

/// Bytes of an uncompressed local chunk read and gathered at a time: small enough that the
/// kernel's copy is still in the core's cache when the fields are gathered (BENCHMARKS.md).
const PIECE_BYTES: usize = 1 << 20;

const KEYS: &[&str] = &[
    // rows per output batch (default: the session's datafusion.execution.batch_size)
    "batch_size",
    // chunks each partition reads ahead (default: 2 from local folders, 16 from object stores)
    "chunks_in_flight",
    // bytes of an uncompressed local chunk read at a time (default: 1048576)
    "piece_bytes",
    // groups: the data variables to show, comma-separated (default: all)
    "variables",
    // groups: decode CF times to timestamps (default: true)
    "decode_times",
    // groups: _FillValue / missing_value to NULL, scale_factor / add_offset (default: true)
    "mask_and_scale",
];

/// How a Zarr table is read.
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS ZARR`: `batch_size`,
/// `chunks_in_flight`, `piece_bytes`; for groups `variables` (comma-separated),
/// `decode_times` and `mask_and_scale` (`true`/`false`, xarray's names); and the storage
/// settings of [`StorageOptions`]. From Rust, with the builder methods:
///
/// ```no_run
/// # async fn demo() -> ndfusion::Result<()> {
/// use ndfusion::{StorageOptions, ZarrOptions, ZarrTable};
/// let options = ZarrOptions::new()
///     .with_chunks_in_flight(32)
///     .with_storage(StorageOptions::new().with("aws.skip_signature", "true")?);
/// let table = ZarrTable::open_with("s3://bucket/ocean.zarr", options).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ZarrOptions {
    batch_size: Option<usize>,
    chunks_in_flight: Option<usize>,
    piece_bytes: Option<usize>,
    variables: Option<Vec<String>>,
    decode_times: Option<bool>,
    mask_and_scale: Option<bool>,
    storage: StorageOptions,
}

impl ZarrOptions {
    /// The defaults: the session's batch size, 2 chunks in flight locally (16 remotely),
    /// 1 MiB pieces, storage credentials from the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows per output batch (at least 1), instead of the session's batch size.
    pub fn with_batch_size(mut self, rows: usize) -> Self {
        self.batch_size = Some(rows.max(1));
        self
    }

    /// Chunks each partition reads ahead of the one it decodes (at least 1).
    pub fn with_chunks_in_flight(mut self, chunks: usize) -> Self {
        self.chunks_in_flight = Some(chunks.max(1));
        self
    }

    /// Bytes of an uncompressed local chunk read and gathered at a time (at least 1).
    pub fn with_piece_bytes(mut self, bytes: usize) -> Self {
        self.piece_bytes = Some(bytes.max(1));
        self
    }

    /// For a group: only these data variables (and the coordinates they need).
    pub fn with_variables<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.variables = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// For a group: whether CF times (`units: "days since ..."`) become timestamps (default).
    pub fn with_decode_times(mut self, decode: bool) -> Self {
        self.decode_times = Some(decode);
        self
    }

    /// For a group: whether `_FillValue` / `missing_value` become NULL and `scale_factor` /
    /// `add_offset` apply (default).
    pub fn with_mask_and_scale(mut self, decode: bool) -> Self {
        self.mask_and_scale = Some(decode);
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

    /// The options of `CREATE EXTERNAL TABLE ... OPTIONS (...)`.
    pub(crate) fn from_sql(options: &HashMap<String, String>) -> Result<Self> {
        let (own, storage) = split_options(options, "ZARR", KEYS)?;
        let mut out = ZarrOptions::new().with_storage(storage);
        for (key, value) in own {
            out = match key {
                "variables" => {
                    let names: Vec<String> = value
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect();
                    if names.is_empty() {
                        return Err(Error::InvalidOption {
                            option: key.into(),
                            reason: "expected comma-separated variable names".into(),
                        });
                    }
                    out.with_variables(names)
                }
                "decode_times" => out.with_decode_times(flag(key, &value)?),
                "mask_and_scale" => out.with_mask_and_scale(flag(key, &value)?),
                "batch_size" => out.with_batch_size(positive(key, &value)?),
                "chunks_in_flight" => out.with_chunks_in_flight(positive(key, &value)?),
                _ => out.with_piece_bytes(positive(key, &value)?),
            };
        }
        Ok(out)
    }

    #[cfg(feature = "cluster")]
    /// The options as `OPTIONS (...)` keys, which [`from_sql`](Self::from_sql) reads back (a
    /// cluster sends them with the plan); an object store the application built has no keys.
    pub(crate) fn to_sql(&self) -> Result<HashMap<String, String>> {
        let mut map = self.storage.to_sql()?;
        let mut set = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                map.insert(key.to_string(), value);
            }
        };
        set("batch_size", self.batch_size.map(|n| n.to_string()));
        set(
            "chunks_in_flight",
            self.chunks_in_flight.map(|n| n.to_string()),
        );
        set("piece_bytes", self.piece_bytes.map(|n| n.to_string()));
        set("variables", self.variables.as_ref().map(|v| v.join(",")));
        set("decode_times", self.decode_times.map(|b| b.to_string()));
        set("mask_and_scale", self.mask_and_scale.map(|b| b.to_string()));
        Ok(map)
    }

    pub(crate) fn variables(&self) -> Option<&[String]> {
        self.variables.as_deref()
    }

    pub(crate) fn cf(&self) -> CfOptions {
        CfOptions {
            decode_times: self.decode_times.unwrap_or(true),
            mask_and_scale: self.mask_and_scale.unwrap_or(true),
        }
    }

    /// The group-only options are errors for an array.
    pub(crate) fn check_array_options(&self, location: &str) -> Result<()> {
        let set = [
            ("variables", self.variables.is_some()),
            ("decode_times", self.decode_times.is_some()),
            ("mask_and_scale", self.mask_and_scale.is_some()),
        ];
        match set.iter().find(|(_, is_set)| *is_set) {
            Some((key, _)) => Err(Error::InvalidOption {
                option: key.to_string(),
                reason: format!(
                    "{location} is an array, not a group: the option applies to groups"
                ),
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn batch_size(&self, session_batch_size: usize) -> usize {
        self.batch_size.unwrap_or(session_batch_size).max(1)
    }

    pub(crate) fn chunks_in_flight(&self, remote: bool) -> usize {
        self.chunks_in_flight.unwrap_or(if remote {
            REMOTE_CHUNKS_IN_FLIGHT
        } else {
            LOCAL_CHUNKS_IN_FLIGHT
        })
    }

    pub(crate) fn piece_bytes(&self) -> usize {
        self.piece_bytes.unwrap_or(PIECE_BYTES)
    }

    /// The options in force, as EXPLAIN VERBOSE shows them (secrets as `***`).
    pub(crate) fn describe(&self, session_batch_size: usize, remote: bool) -> String {
        let mut parts = vec![
            format!("batch_size={}", self.batch_size(session_batch_size)),
            format!("chunks_in_flight={}", self.chunks_in_flight(remote)),
            format!("piece_bytes={}", self.piece_bytes()),
        ];
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }

    /// The options set by the user, as EXPLAIN shows them; empty when all are defaults.
    pub(crate) fn describe_set(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.batch_size {
            parts.push(format!("batch_size={n}"));
        }
        if let Some(n) = self.chunks_in_flight {
            parts.push(format!("chunks_in_flight={n}"));
        }
        if let Some(n) = self.piece_bytes {
            parts.push(format!("piece_bytes={n}"));
        }
        if let Some(v) = &self.variables {
            parts.push(format!("variables={}", v.join(",")));
        }
        if let Some(b) = self.decode_times {
            parts.push(format!("decode_times={b}"));
        }
        if let Some(b) = self.mask_and_scale {
            parts.push(format!("mask_and_scale={b}"));
        }
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }
}

fn flag(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidOption {
            option: key.to_string(),
            reason: format!("expected true or false, found '{value}'"),
        }),
    }
}

impl std::fmt::Display for ZarrOptions {
    /// The options set (secrets as `***`), or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.describe_set() {
            set if set.is_empty() => f.write_str("defaults"),
            set => f.write_str(&set),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_options_set_what_they_name() {
        let map = HashMap::from([
            ("format.chunks_in_flight".to_string(), "32".to_string()),
            ("aws.secret_access_key".to_string(), "s3cr3t".to_string()),
        ]);
        let options = ZarrOptions::from_sql(&map).unwrap();
        assert_eq!(options.chunks_in_flight(false), 32);
        assert_eq!(options.batch_size(8192), 8192);
        assert_eq!(
            options.describe_set(),
            "chunks_in_flight=32, aws.secret_access_key=***"
        );
        let bad = HashMap::from([("format.piece_bytes".to_string(), "-1".to_string())]);
        assert_eq!(
            ZarrOptions::from_sql(&bad).unwrap_err().to_string(),
            "invalid option 'piece_bytes': expected a positive integer, found '-1'"
        );
    }
}
