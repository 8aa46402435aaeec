//! [`Limits`]: how much work a file may make ndfusion do before it is refused with an error
//! naming the limit. Metadata is read whole, coordinates are read when a dataset opens,
//! collection patterns walk folders and string chunks have no promised size: each is capped,
//! so a few kilobytes cannot make gigabytes of work. The limits are the process's, like its
//! memory: read once from the environment (`NDFUSION_MAX_*`, for the command line, executors
//! and applications alike), or set by an application before it opens a table.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// The limits a process reads Zarr under.
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

/// The environment variable of each limit, its default, and how it is written.
const VARIABLES: [(&str, &str); 6] = [
    ("NDFUSION_MAX_METADATA_BYTES", "64M"),
    ("NDFUSION_MAX_ATTRIBUTES", "10000"),
    ("NDFUSION_MAX_COORDINATE_BYTES", "1G"),
    ("NDFUSION_MAX_GLOB_DEPTH", "32"),
    ("NDFUSION_MAX_GLOB_ENTRIES", "1000000"),
    ("NDFUSION_MAX_STRING_CHUNK_BYTES", "64M"),
];

impl Default for Limits {
    fn default() -> Self {
        Limits {
            metadata_bytes: 64 << 20,
            attributes: 10_000,
            coordinate_bytes: 1 << 30,
            glob_depth: 32,
            glob_entries: 1_000_000,
            string_chunk_bytes: 64 << 20,
        }
    }
}

/// The limits in force, or the environment variable that could not be read and why.
static LIMITS: OnceLock<std::result::Result<Limits, (String, String)>> = OnceLock::new();

impl Limits {
    /// The limits in force: those an application set, else the environment's, else the
    /// defaults. An environment variable that is not a number (or a size such as `256M`) is
    /// an error naming it, for every table opened.
    pub fn current() -> Result<Limits> {
        LIMITS
            .get_or_init(|| Limits::from_vars(|name| std::env::var(name).ok()))
            .clone()
            .map_err(|(option, reason)| Error::InvalidOption { option, reason })
    }

    /// The limits in force, where a bad environment cannot arise any more: every table opens
    /// through [`Limits::current`] first, so its error has been reported there.
    pub(crate) fn get() -> Limits {
        Limits::current().unwrap_or_default()
    }

    /// Makes `self` the process's limits. Only before any table is opened (the limits are
    /// read once): afterwards it returns the limits in force as the error.
    pub fn set(self) -> std::result::Result<(), Limits> {
        LIMITS.set(Ok(self)).map_err(|_| {
            LIMITS
                .get()
                .and_then(|l| l.clone().ok())
                .unwrap_or_default()
        })
    }

    /// The defaults, with each `NDFUSION_MAX_*` variable `var` gives in place of its default.
    fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Limits, (String, String)> {
        let mut limits = Limits::default();
        for (name, _) in VARIABLES {
            let Some(text) = var(name) else { continue };
            let refused = |reason: String| (name.to_string(), reason);
            let value = parse_size(&text).map_err(|e| refused(e.to_string()))?;
            let count =
                || usize::try_from(value).map_err(|_| refused(format!("{text:?} is too large")));
            match name {
                "NDFUSION_MAX_METADATA_BYTES" => limits.metadata_bytes = value,
                "NDFUSION_MAX_ATTRIBUTES" => limits.attributes = count()?,
                "NDFUSION_MAX_COORDINATE_BYTES" => limits.coordinate_bytes = value,
                "NDFUSION_MAX_GLOB_DEPTH" => limits.glob_depth = count()?,
                "NDFUSION_MAX_GLOB_ENTRIES" => limits.glob_entries = count()?,
                _ => limits.string_chunk_bytes = count()?,
            }
        }
        Ok(limits)
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
        // The table of variables and the defaults agree.
        let defaults: Vec<u64> = VARIABLES
            .iter()
            .map(|(_, d)| parse_size(d).unwrap())
            .collect();
        let d = Limits::default();
        assert_eq!(
            defaults,
            [
                d.metadata_bytes,
                d.attributes as u64,
                d.coordinate_bytes,
                d.glob_depth as u64,
                d.glob_entries as u64,
                d.string_chunk_bytes as u64
            ]
        );
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
