//! A table's `LOCATION`: a local path, or a URL naming a path in an object store.

use std::path::PathBuf;

use url::Url;

use crate::error::{Error, Result};

/// The object-store services a remote location can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    /// `s3://bucket/path` (AWS S3 and S3-compatible servers).
    S3,
    /// `gs://bucket/path`.
    Gcs,
    /// `az://container/path`, `abfs://container@account.dfs.core.windows.net/path`.
    Azure,
    /// `http://host/path`, `https://host/path` (read only).
    Http,
}

impl Service {
    /// The cargo feature that compiles the service in.
    pub(crate) fn feature(self) -> &'static str {
        match self {
            Service::S3 => "s3",
            Service::Gcs => "gcs",
            Service::Azure => "azure",
            Service::Http => "http",
        }
    }
}

/// A parsed `LOCATION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Location {
    /// A local path (given as a path or a `file://` URL).
    Local(PathBuf),
    /// A URL of an object store.
    Remote { url: Url, service: Service },
}

const SCHEMES: &str =
    "local paths, file://, s3://, gs://, az://, abfs://, abfss://, http://, https://";

impl Location {
    /// Parses a location as a user wrote it.
    pub(crate) fn parse(location: &str) -> Result<Location> {
        let invalid = |reason: String| Error::InvalidLocation {
            location: location.to_string(),
            reason,
        };
        if location.trim().is_empty() {
            return Err(invalid("empty".into()));
        }
        if !location.contains("://") {
            return Ok(Location::Local(PathBuf::from(location)));
        }
        let url = Url::parse(location).map_err(|e| invalid(format!("not a valid URL: {e}")))?;
        let service = match url.scheme() {
            "file" => {
                let path = url
                    .to_file_path()
                    .map_err(|_| invalid("does not name a local path".into()))?;
                return Ok(Location::Local(path));
            }
            "s3" | "s3a" => Service::S3,
            "gs" => Service::Gcs,
            "az" | "azure" | "abfs" | "abfss" => Service::Azure,
            "http" | "https" => Service::Http,
            other => {
                return Err(invalid(format!(
                    "unsupported scheme '{other}://'; supported: {SCHEMES}"
                )))
            }
        };
        if url.host_str().is_none_or(str::is_empty) {
            let what = match service {
                Service::Azure => "container",
                Service::Http => "host",
                _ => "bucket",
            };
            return Err(invalid(format!("no {what} in the URL")));
        }
        Ok(Location::Remote { url, service })
    }
}

/// A URL as it may be shown: without user name or password.
pub(crate) fn redact_url(url: &Url) -> String {
    let mut shown = url.clone();
    if !shown.username().is_empty() || shown.password().is_some() {
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
    }
    shown.to_string()
}

/// The folder a local `LOCATION` names, or an error naming the location: missing, or not a
/// folder (`what` says which folder it must be, "a Zarr array folder").
pub(crate) fn local_folder(location: &str, path: &std::path::Path, what: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::NotFound {
            location: location.to_string(),
            reason: format!("not a folder: LOCATION must name {what}"),
        }),
        Err(e) => Err(Error::NotFound {
            location: location.to_string(),
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_parsed_by_scheme() {
        assert_eq!(
            Location::parse("data/a.zarr").unwrap(),
            Location::Local("data/a.zarr".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/a.zarr").unwrap(),
            Location::Local("/tmp/a.zarr".into())
        );
        for (location, service) in [
            ("s3://bucket/a.zarr", Service::S3),
            ("gs://bucket/a.zarr", Service::Gcs),
            ("az://container/a.zarr", Service::Azure),
            ("abfss://c@acct.dfs.core.windows.net/a.zarr", Service::Azure),
            ("https://example.org/data/a.zarr", Service::Http),
        ] {
            match Location::parse(location).unwrap() {
                Location::Remote { service: s, .. } => assert_eq!(s, service, "{location}"),
                other => panic!("{location}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_locations_are_named() {
        let e = Location::parse("ftp://host/a.zarr").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("invalid location 'ftp://host/a.zarr': unsupported scheme 'ftp://'"));
        let e = Location::parse("s3:///a.zarr").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid location 's3:///a.zarr': no bucket in the URL"
        );
        let e = Location::parse("http://[::1").unwrap_err();
        assert!(e.to_string().contains("not a valid URL"), "{e}");
    }

    #[test]
    fn passwords_in_urls_are_not_shown() {
        let url = Url::parse("https://user:secret@example.org/a.zarr").unwrap();
        assert_eq!(redact_url(&url), "https://example.org/a.zarr");
    }
}
