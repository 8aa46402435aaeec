//! [`Limits`]: how much work a file may make ndfusion do before it is refused with an error
//! naming the limit. Metadata is read whole, coordinates are read when a dataset opens,
//! collection patterns walk folders and string chunks have no promised size: each is capped,
//! so a few kilobytes cannot make gigabytes of work.
//!
//! The limits are a session's: `SET ndfusion.max_metadata_bytes = '256M'` ([`SessionLimits`],
//! a DataFusion config extension every ndfusion session has), over defaults the process reads
//! once from the environment (`NDFUSION_MAX_*`, for the command line, executors and
//! applications alike). A table opened from Rust without a session takes
//! [`StorageOptions::with_limits`](crate::StorageOptions::with_limits), else the defaults.
//! What reaches the files is the [`Limits`] of the table's storage options: the factories put
//! the session's there, and a cluster's executors read with their own (the options sent with
//! a plan carry none: a client cannot raise an executor's limits).

use std::sync::OnceLock;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ConfigOptions, ExtensionOptions};

use crate::error::{Error, Result};

/// The limits a table is read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Bytes of one metadata document (`zarr.json`, `.zarray`, `.zattrs`, `.zmetadata`; an
    /// Icechunk `repo` file, snapshot or manifest).
    pub metadata_bytes: u64,
    /// Attribute keys of one node.
    pub attributes: usize,
    /// Bytes of one dataset's coordinate values (coordinates are read whole when it opens).
    pub coordinate_bytes: u64,
    /// Folder levels a collection pattern with `**` walks.
    pub glob_depth: usize,
    /// Folder entries (local) or objects (remote) a collection pattern visits.
    pub glob_entries: usize,
    /// Bytes a chunk of variable-length elements (strings) decompresses to: their metadata
    /// promises no size.
    pub string_chunk_bytes: usize,
}

/// One limit: its `SET ndfusion.*` key, its environment variable, its default and what it
/// bounds. Every limit is declared here once, for `SET`, `SHOW`, the environment and the
/// errors that name it.
#[derive(Debug)]
pub(crate) struct Limit {
    /// The key after `ndfusion.`.
    pub key: &'static str,
    /// The environment variable of the default.
    pub variable: &'static str,
    default: u64,
    description: &'static str,
}

/// The limits, in the order of [`Limits`]' fields.
const LIMITS: [Limit; 6] = [
    Limit {
        key: "max_metadata_bytes",
        variable: "NDFUSION_MAX_METADATA_BYTES",
        default: 64 << 20,
        description: "bytes of one metadata document (zarr.json, .zarray, .zattrs, .zmetadata; \
                      an Icechunk repo file, snapshot or manifest), read whole",
    },
    Limit {
        key: "max_attributes",
        variable: "NDFUSION_MAX_ATTRIBUTES",
        default: 10_000,
        description: "attribute keys of one node",
    },
    Limit {
        key: "max_coordinate_bytes",
        variable: "NDFUSION_MAX_COORDINATE_BYTES",
        default: 1 << 30,
        description: "bytes of one dataset coordinate's values, read whole when the table opens",
    },
    Limit {
        key: "max_glob_depth",
        variable: "NDFUSION_MAX_GLOB_DEPTH",
        default: 32,
        description: "folder levels a collection pattern's ** walks",
    },
    Limit {
        key: "max_glob_entries",
        variable: "NDFUSION_MAX_GLOB_ENTRIES",
        default: 1_000_000,
        description: "folder entries (objects, remotely) a collection pattern visits",
    },
    Limit {
        key: "max_string_chunk_bytes",
        variable: "NDFUSION_MAX_STRING_CHUNK_BYTES",
        default: 64 << 20,
        description: "bytes one chunk of strings decompresses to (its metadata promises no size)",
    },
];

/// The limits errors name.
pub(crate) const METADATA_BYTES: &Limit = &LIMITS[0];
pub(crate) const ATTRIBUTES: &Limit = &LIMITS[1];
pub(crate) const COORDINATE_BYTES: &Limit = &LIMITS[2];
pub(crate) const GLOB_ENTRIES: &Limit = &LIMITS[4];

impl std::fmt::Display for Limit {
    /// How a user raises it, as errors say: `SET ndfusion.max_attributes, or
    /// NDFUSION_MAX_ATTRIBUTES`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SET ndfusion.{}, or {}", self.key, self.variable)
    }
}

impl Default for Limits {
    fn default() -> Self {
        let mut limits = Limits {
            metadata_bytes: 0,
            attributes: 0,
            coordinate_bytes: 0,
            glob_depth: 0,
            glob_entries: 0,
            string_chunk_bytes: 0,
        };
        for (i, limit) in LIMITS.iter().enumerate() {
            limits.put(i, limit.default);
        }
        limits
    }
}

/// The process's defaults, or the environment variable that could not be read and why.
static DEFAULTS: OnceLock<std::result::Result<Limits, (String, String)>> = OnceLock::new();

impl Limits {
    /// The process's defaults: those an application set with [`Limits::set`], else the
    /// environment's (`NDFUSION_MAX_*`, read once), else the built-in ones. An environment
    /// variable that is not a number (or a size such as `256M`) is an error naming it, for
    /// every table opened.
    pub fn from_env() -> Result<Limits> {
        DEFAULTS
            .get_or_init(|| Limits::from_vars(|name| std::env::var(name).ok()))
            .clone()
            .map_err(|(option, reason)| Error::InvalidOption { option, reason })
    }

    /// The limits a session reads under: what `SET ndfusion.*` changed there, over the
    /// process's defaults.
    pub fn of_session(config: &ConfigOptions) -> Result<Limits> {
        match config.extensions.get::<SessionLimits>() {
            Some(session) => session.limits(),
            None => Limits::from_env(),
        }
    }

    /// Makes `self` the process's defaults, in place of the environment's. Only before any
    /// table is opened (the defaults are read once): afterwards it returns the defaults in
    /// force as the error. A session changes its own with `SET ndfusion.*`.
    pub fn set(self) -> std::result::Result<(), Limits> {
        DEFAULTS.set(Ok(self)).map_err(|_| {
            DEFAULTS
                .get()
                .and_then(|l| l.clone().ok())
                .unwrap_or_default()
        })
    }

    /// The value of limit `i` of [`LIMITS`].
    fn value(&self, i: usize) -> u64 {
        match i {
            0 => self.metadata_bytes,
            1 => self.attributes as u64,
            2 => self.coordinate_bytes,
            3 => self.glob_depth as u64,
            4 => self.glob_entries as u64,
            _ => self.string_chunk_bytes as u64,
        }
    }

    /// Sets limit `i` of [`LIMITS`]; counts past `usize` (32-bit targets) saturate.
    fn put(&mut self, i: usize, value: u64) {
        let count = usize::try_from(value).unwrap_or(usize::MAX);
        match i {
            0 => self.metadata_bytes = value,
            1 => self.attributes = count,
            2 => self.coordinate_bytes = value,
            3 => self.glob_depth = count,
            4 => self.glob_entries = count,
            _ => self.string_chunk_bytes = count,
        }
    }

    /// The defaults, with each `NDFUSION_MAX_*` variable `var` gives in place of its default.
    fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Limits, (String, String)> {
        let mut limits = Limits::default();
        for (i, limit) in LIMITS.iter().enumerate() {
            let Some(text) = var(limit.variable) else {
                continue;
            };
            let value =
                parse_size(&text).map_err(|e| (limit.variable.to_string(), e.to_string()))?;
            limits.put(i, value);
        }
        Ok(limits)
    }
}

/// The limits of one session, under `SET ndfusion.*`: the values set there, over the
/// process's defaults ([`Limits::from_env`]). Every session ndfusion makes has it; an
/// application's own `SessionConfig` gets it with
/// `config.with_option_extension(SessionLimits::default())`, or with chosen limits from
/// [`SessionLimits::new`].
///
/// ```
/// # async fn demo() -> datafusion::error::Result<()> {
/// let ctx = ndfusion::new_session_context();
/// ctx.sql("SET ndfusion.max_metadata_bytes = '256M'").await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionLimits {
    /// What `SET` gave, by [`LIMITS`]' order; `None`: the process's default.
    set: [Option<u64>; LIMITS.len()],
    /// `SET ndfusion.grid_aggregate = false`: aggregates over a grid's dimensions are left to
    /// DataFusion's hash aggregate (not a limit: a switch, for comparing the two).
    grid_aggregate: Option<bool>,
}

/// The key of the grid aggregate's switch, after `ndfusion.`.
const GRID_AGGREGATE: &str = "grid_aggregate";

impl SessionLimits {
    /// A session reading under `limits`, whatever the environment says.
    pub fn new(limits: Limits) -> Self {
        let mut set = [None; LIMITS.len()];
        for (i, value) in set.iter_mut().enumerate() {
            *value = Some(limits.value(i));
        }
        SessionLimits {
            set,
            grid_aggregate: None,
        }
    }

    /// Whether the session folds aggregates over a grid's dimensions into dense
    /// accumulators (`SET ndfusion.grid_aggregate`, on unless set off).
    pub(crate) fn grid_aggregate(config: &ConfigOptions) -> bool {
        (config.extensions.get::<SessionLimits>())
            .and_then(|s| s.grid_aggregate)
            .unwrap_or(true)
    }

    /// The limits in force: the session's, over the process's defaults.
    pub fn limits(&self) -> Result<Limits> {
        let mut limits = match self.set.iter().all(Option::is_some) {
            // Set whole: a bad environment does not matter.
            true => Limits::default(),
            false => Limits::from_env()?,
        };
        for (i, value) in self.set.iter().enumerate() {
            if let Some(value) = value {
                limits.put(i, *value);
            }
        }
        Ok(limits)
    }
}

impl ConfigExtension for SessionLimits {
    const PREFIX: &'static str = "ndfusion";
}

impl ExtensionOptions for SessionLimits {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    /// `key` without the `ndfusion.` prefix; the value is a size (`256M`) or a count.
    fn set(&mut self, key: &str, value: &str) -> datafusion::common::Result<()> {
        let refused = |reason: String| {
            datafusion::error::DataFusionError::Configuration(
                Error::InvalidOption {
                    option: format!("ndfusion.{key}"),
                    reason,
                }
                .to_string(),
            )
        };
        if key == GRID_AGGREGATE {
            let on = match value.trim().to_ascii_lowercase().as_str() {
                "true" | "on" => true,
                "false" | "off" => false,
                _ => return Err(refused(format!("{value:?} is not true or false"))),
            };
            self.grid_aggregate = Some(on);
            return Ok(());
        }
        let Some(i) = LIMITS.iter().position(|l| l.key == key) else {
            let known: Vec<String> = (LIMITS.iter().map(|l| l.key))
                .chain([GRID_AGGREGATE])
                .map(|key| format!("ndfusion.{key}"))
                .collect();
            return Err(refused(format!(
                "no such setting; known: {}",
                known.join(", ")
            )));
        };
        let size = parse_size(value).map_err(|e| refused(e.to_string()))?;
        self.set[i] = Some(size);
        Ok(())
    }

    /// Every limit with the value in force (none when the environment's cannot be read),
    /// then the grid aggregate's switch.
    fn entries(&self) -> Vec<ConfigEntry> {
        let limits = self.limits().ok();
        let switch = ConfigEntry {
            key: format!("{}.{GRID_AGGREGATE}", Self::PREFIX),
            value: Some(self.grid_aggregate.unwrap_or(true).to_string()),
            description: "whether GROUP BY over a grid's dimensions folds chunks into dense \
                          accumulators (true) or runs DataFusion's hash aggregate (false)",
        };
        (LIMITS.iter().enumerate())
            .map(|(i, limit)| ConfigEntry {
                key: format!("{}.{}", Self::PREFIX, limit.key),
                value: limits.map(|l| l.value(i).to_string()),
                description: limit.description,
            })
            .chain([switch])
            .collect()
    }
}

/// `bytes` as a person reads it: `1023 B`, `1.5 GiB` (units of 1024, up to TiB); what
/// [`parse_size`] reads back, to a tenth.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

/// Why a size could not be read (the reason of [`Error::InvalidSize`]).
#[derive(Debug, thiserror::Error)]
enum SizeError {
    /// A unit other than K, M, G, T.
    #[error("unknown unit {unit:?} in {text:?}: use K, M, G or T")]
    Unit {
        /// The unit written.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// Not a number.
    #[error("{0:?} is not a size such as 512M or 2G")]
    NotASize(String),
    /// Zero, negative, or too large.
    #[error("{0:?} is not a usable size")]
    OutOfRange(String),
}

/// `512M`, `2G`, `1.5G`, `100000`: a positive number, of bytes or of units K, M, G, T of
/// 1024 (`MB`, `MiB` and lowercase also read); otherwise [`Error::InvalidSize`].
pub fn parse_size(text: &str) -> Result<u64> {
    size(text).map_err(|e| Error::InvalidSize {
        text: text.to_string(),
        reason: e.to_string(),
    })
}

fn size(text: &str) -> std::result::Result<u64, SizeError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let scale: f64 = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024f64.powi(2),
        "G" => 1024f64.powi(3),
        "T" => 1024f64.powi(4),
        _ => {
            return Err(SizeError::Unit {
                unit: unit.to_string(),
                text: text.to_string(),
            })
        }
    };
    let value: f64 = (number.trim().parse()).map_err(|_| SizeError::NotASize(text.to_string()))?;
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(SizeError::OutOfRange(text.to_string()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_replace_defaults_and_bad_ones_are_named() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                (pairs.iter())
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(Limits::from_vars(vars(&[])).unwrap(), Limits::default());
        let limits = Limits::from_vars(vars(&[
            ("NDFUSION_MAX_METADATA_BYTES", "256M"),
            ("NDFUSION_MAX_GLOB_DEPTH", "64"),
        ]))
        .unwrap();
        assert_eq!(limits.metadata_bytes, 256 << 20);
        assert_eq!(limits.glob_depth, 64);
        assert_eq!(limits.attributes, 10_000);
        let (name, reason) =
            Limits::from_vars(vars(&[("NDFUSION_MAX_ATTRIBUTES", "lots")])).unwrap_err();
        assert_eq!(name, "NDFUSION_MAX_ATTRIBUTES");
        assert!(reason.contains("unknown unit \"lots\""), "{reason}");
        // Each limit's default is its field's.
        let d = Limits::default();
        assert_eq!(
            [d.metadata_bytes, d.attributes as u64, d.glob_entries as u64],
            [64 << 20, 10_000, 1_000_000]
        );
        for (i, limit) in LIMITS.iter().enumerate() {
            assert_eq!(d.value(i), limit.default, "{}", limit.key);
        }
    }

    /// `SET ndfusion.*` changes one session's limits, reads sizes, refuses what is not one
    /// (naming the key) and unknown keys (listing the known); `SHOW` lists them with values.
    #[test]
    fn sessions_set_their_own_limits() {
        let mut config = ConfigOptions::new();
        config.extensions.insert(SessionLimits::default());
        let other = config.clone();
        config.set("ndfusion.max_metadata_bytes", "256M").unwrap();
        config.set("ndfusion.max_attributes", "20000").unwrap();
        let limits = Limits::of_session(&config).unwrap();
        assert_eq!(limits.metadata_bytes, 256 << 20);
        assert_eq!(limits.attributes, 20_000);
        assert_eq!(limits.glob_depth, Limits::from_env().unwrap().glob_depth);
        // The session cloned before is unchanged.
        assert_eq!(
            Limits::of_session(&other).unwrap(),
            Limits::from_env().unwrap()
        );
        let err = config
            .set("ndfusion.max_glob_depth", "deep")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid option 'ndfusion.max_glob_depth'")
                && err.contains("unknown unit \"deep\""),
            "{err}"
        );
        let err = config
            .set("ndfusion.max_rows", "1")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'ndfusion.max_rows'") && err.contains("ndfusion.max_string_chunk_bytes"),
            "{err}"
        );
        let entries = config.entries();
        let entry = entries
            .iter()
            .find(|e| e.key == "ndfusion.max_metadata_bytes")
            .unwrap();
        assert_eq!(entry.value.as_deref(), Some("268435456"));
        assert_eq!(
            entries
                .iter()
                .filter(|e| e.key.starts_with("ndfusion."))
                .count(),
            LIMITS.len() + 1,
            "the limits and the grid aggregate switch"
        );
        config.set("ndfusion.grid_aggregate", "false").unwrap();
        assert!(!SessionLimits::grid_aggregate(&config));
        assert!(SessionLimits::grid_aggregate(&other));
        // Limits chosen whole in Rust.
        let chosen = Limits {
            glob_entries: 5,
            ..Limits::default()
        };
        assert_eq!(SessionLimits::new(chosen).limits().unwrap(), chosen);
    }

    #[test]
    fn sizes_read_with_units() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("100000").unwrap(), 100_000);
        assert_eq!(parse_size("2gib").unwrap(), 2 << 30);
        for bad in ["12X", "lots", "0", "-5M", "1e30T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        // And written back as parse_size reads them.
        for (bytes, text) in [(1023, "1023 B"), (3 << 29, "1.5 GiB"), (5 << 40, "5.0 TiB")] {
            assert_eq!(format_size(bytes), text);
            assert_eq!(parse_size(text).unwrap(), bytes);
        }
    }

    /// A size that cannot be read is the crate's one `Error`, naming the text.
    #[test]
    fn a_bad_size_is_the_crates_error() {
        let err: Error = parse_size("12X").unwrap_err();
        match &err {
            Error::InvalidSize { text, reason } => {
                assert_eq!(text, "12X");
                assert_eq!(reason, "unknown unit \"X\" in \"12X\": use K, M, G or T");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err.to_string(),
            "unknown unit \"X\" in \"12X\": use K, M, G or T"
        );
    }
}
