//! Which locations a cluster's tables may name: a scheduler (and its executors) open whatever
//! location a client's plan carries, so a shared cluster limits them to an allow-list.

use crate::error::{Error, Result};

/// The locations tables on a cluster may read: everything (the default, as for the local
/// command line), or those under given prefixes (`s3://bucket/data`, `/srv/zarr`).
///
/// A prefix matches whole path segments: `s3://b/data` allows `s3://b/data/x.zarr`, not
/// `s3://b/database`. With prefixes set, a location with a `..` segment is refused.
///
/// ```
/// let allowed = ndfusion::AllowedLocations::prefixes(["s3://bucket/data"]);
/// assert!(allowed.allows("s3://bucket/data/ocean.zarr"));
/// assert!(!allowed.allows("s3://bucket/database"));
/// assert!(!allowed.allows("s3://bucket/data/../secret"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct AllowedLocations {
    /// `None`: everything.
    prefixes: Option<Vec<String>>,
}

impl AllowedLocations {
    /// Every location.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Only locations under these prefixes.
    pub fn prefixes<S: Into<String>>(prefixes: impl IntoIterator<Item = S>) -> Self {
        AllowedLocations {
            prefixes: Some(prefixes.into_iter().map(Into::into).collect()),
        }
    }

    /// Whether `location` may be read.
    pub fn allows(&self, location: &str) -> bool {
        let Some(prefixes) = &self.prefixes else {
            return true;
        };
        if location.split(['/', '\\']).any(|segment| segment == "..") {
            return false;
        }
        prefixes.iter().any(|prefix| {
            let prefix = prefix.trim_end_matches('/');
            match location.strip_prefix(prefix) {
                Some(rest) => rest.is_empty() || rest.starts_with('/'),
                None => false,
            }
        })
    }

    /// An error naming `location` when it may not be read.
    pub(crate) fn check(&self, location: &str) -> Result<()> {
        if self.allows(location) {
            return Ok(());
        }
        let prefixes = self.prefixes.as_deref().unwrap_or_default().join(", ");
        Err(Error::InvalidLocation {
            location: location.to_string(),
            reason: format!("this cluster only reads locations under: {prefixes}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_segments() {
        let allowed = AllowedLocations::prefixes(["s3://b/data/", "/srv/zarr"]);
        assert!(allowed.allows("s3://b/data"));
        assert!(allowed.allows("s3://b/data/x.zarr"));
        assert!(allowed.allows("s3://b/data/**/p.zarr"));
        assert!(allowed.allows("/srv/zarr/a.zarr"));
        assert!(!allowed.allows("s3://b/database"));
        assert!(!allowed.allows("s3://b/dat*"));
        assert!(!allowed.allows("/srv/zarr/../etc"));
        assert!(!allowed.allows("gs://b/data"));
        assert!(AllowedLocations::everything().allows("/anything/../at/all"));
        let err = allowed.check("/etc/passwd").unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid location '/etc/passwd': this cluster only reads locations under: \
             s3://b/data/, /srv/zarr"
        );
    }
}
