//! Which locations a cluster's tables may name: a scheduler (and its executors) open whatever
//! location a client's plan carries, so a shared cluster limits them to an allow-list.
//!
//! Locations are compared in one normal form, so that no spelling walks around a prefix:
//! percent-escapes decoded (`%2e%2e` is `..`), `.` and `..` segments resolved (one that climbs
//! above the root is refused), repeated slashes folded, `file://` URLs read as paths, and local
//! paths made absolute and canonical, symlinks resolved (a symlink inside an allowed folder
//! that points outside it is outside). A pattern is checked by the folder before its first
//! wildcard; the members it expands to are checked one by one when the table opens.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The locations tables on a cluster may read: everything (the default, as for the local
/// command line), or those under given prefixes (`s3://bucket/data`, `/srv/zarr`).
///
/// A prefix matches whole path segments: `s3://b/data` allows `s3://b/data/x.zarr`, not
/// `s3://b/database`.
///
/// ```
/// let allowed = ndfusion::AllowedLocations::prefixes(["s3://bucket/data"]);
/// assert!(allowed.allows("s3://bucket/data/ocean.zarr"));
/// assert!(!allowed.allows("s3://bucket/database"));
/// assert!(!allowed.allows("s3://bucket/data/../secret"));
/// assert!(!allowed.allows("s3://bucket/data/%2e%2e/secret"));
/// ```
///
/// It also says which storage options a table may carry that change where the cluster's
/// processes send requests (`aws.endpoint`, `azure.endpoint`, their `allow_http`) or which of
/// their files they read (`gcp.service_account_path`): a process signs requests with its own
/// environment's credentials when a table brings none, so a client must not choose the host.
/// [`everything`](Self::everything) allows every option (an in-process cluster: the client's
/// own credentials); [`prefixes`](Self::prefixes) none, until
/// [`with_endpoints`](Self::with_endpoints) names the endpoints the operator allows.
#[derive(Debug, Clone, Default)]
pub struct AllowedLocations {
    /// `None`: everything. Each prefix as given and in normal form.
    prefixes: Option<Vec<(String, Normal)>>,
    /// `None`: any endpoint option. Each allowed endpoint as given and as its origin.
    endpoints: Option<Vec<(String, String)>>,
}

/// Options that point requests at another host; each with the option that allows plain HTTP to
/// it.
const ENDPOINT_KEYS: &[(&str, &str)] = &[
    ("aws.endpoint", "aws.allow_http"),
    ("azure.endpoint", "azure.allow_http"),
];

/// Options that name a file of the process.
const LOCAL_FILE_KEYS: &[&str] = &["gcp.service_account_path"];

/// A location in normal form: `scheme://authority` (empty for local paths) and its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Normal {
    root: String,
    segments: Vec<String>,
}

impl Normal {
    fn starts_with(&self, prefix: &Normal) -> bool {
        self.root == prefix.root
            && self.segments.len() >= prefix.segments.len()
            && self.segments[..prefix.segments.len()] == prefix.segments[..]
    }
}

impl AllowedLocations {
    /// Every location.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Only locations under these prefixes. A prefix that cannot be read as a location allows
    /// nothing.
    pub fn prefixes<S: Into<String>>(prefixes: impl IntoIterator<Item = S>) -> Self {
        let prefixes = prefixes
            .into_iter()
            .map(Into::into)
            .filter_map(|p: String| normalize(&p).ok().map(|n| (p, n)))
            .collect();
        AllowedLocations {
            prefixes: Some(prefixes),
            endpoints: Some(Vec::new()),
        }
    }

    /// Tables may send requests to these endpoints (`http://127.0.0.1:8333`,
    /// `https://minio.internal`) with `aws.endpoint` / `azure.endpoint`, and to no other; a
    /// process's own files stay unnamed (`gcp.service_account_path` is refused).
    pub fn with_endpoints<S: Into<String>>(
        mut self,
        endpoints: impl IntoIterator<Item = S>,
    ) -> Self {
        let endpoints = endpoints
            .into_iter()
            .map(Into::into)
            .filter_map(|e: String| origin(&e).map(|o| (e, o)))
            .collect();
        self.endpoints = Some(endpoints);
        self
    }

    /// An error naming the first of a table's storage `options` that would send requests to a
    /// host the operator did not allow, or read a file of this process.
    pub(crate) fn check_options<'a>(
        &self,
        options: impl IntoIterator<Item = (&'a String, &'a String)> + Clone,
    ) -> Result<()> {
        let Some(endpoints) = &self.endpoints else {
            return Ok(());
        };
        let value = |key: &str| {
            options
                .clone()
                .into_iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, v)| v.clone())
        };
        let refused = |option: &str, reason: String| Error::InvalidOption {
            option: option.to_string(),
            reason,
        };
        let allowed: Vec<&str> = endpoints.iter().map(|(e, _)| e.as_str()).collect();
        let allowed = match allowed.is_empty() {
            true => "none are (ndfusion scheduler / executor --allow-endpoint URL)".to_string(),
            false => allowed.join(", "),
        };
        for (endpoint_key, http_key) in ENDPOINT_KEYS {
            let endpoint = value(endpoint_key);
            if let Some(endpoint) = &endpoint {
                let ok = origin(endpoint).is_some_and(|o| endpoints.iter().any(|(_, e)| *e == o));
                if !ok {
                    return Err(refused(
                        endpoint_key,
                        format!(
                            "this cluster does not send requests to '{endpoint}': its processes \
                             would sign them with their own credentials; allowed endpoints: \
                             {allowed}"
                        ),
                    ));
                }
            }
            let http = value(http_key).is_some_and(|v| v.eq_ignore_ascii_case("true"));
            if http && endpoint.is_none() {
                return Err(refused(
                    http_key,
                    format!("plain HTTP is allowed only to an allowed {endpoint_key}"),
                ));
            }
        }
        for key in LOCAL_FILE_KEYS {
            if value(key).is_some() {
                return Err(refused(
                    key,
                    "names a file of the cluster's processes, which a client may not read \
                     (give the processes their credentials through their environment)"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether this guards a cluster's processes (anything but [`everything`](Self::everything)):
    /// then only ndfusion's scans and compute run (`plan_guard.rs`).
    pub(crate) fn is_restricted(&self) -> bool {
        self.prefixes.is_some() || self.endpoints.is_some()
    }

    /// Whether only some locations may be read (`--allow`).
    pub(crate) fn restricts_locations(&self) -> bool {
        self.prefixes.is_some()
    }

    /// The allowed prefixes, for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.prefixes {
            None => "any location".into(),
            Some(p) if p.is_empty() => "none".into(),
            Some(p) => p
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Whether `location` may be read.
    pub fn allows(&self, location: &str) -> bool {
        self.check(location).is_ok()
    }

    /// An error naming `location` when it may not be read.
    pub(crate) fn check(&self, location: &str) -> Result<()> {
        let Some(prefixes) = &self.prefixes else {
            return Ok(());
        };
        let refused = |why: String| Error::InvalidLocation {
            location: location.to_string(),
            reason: why,
        };
        let normal = normalize(location).map_err(|e| refused(e.to_string()))?;
        if prefixes.iter().any(|(_, p)| normal.starts_with(p)) {
            return Ok(());
        }
        Err(refused(format!(
            "this cluster only reads locations under: {}",
            self.describe()
        )))
    }
}

/// `scheme://host:port` of an endpoint URL, lower-cased, with the scheme's default port.
fn origin(endpoint: &str) -> Option<String> {
    let url = url::Url::parse(endpoint.trim()).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let port = url.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", url.scheme()))
}

/// Wildcards of collection patterns: a pattern is checked up to its first wildcard segment.
fn is_wildcard(segment: &str) -> bool {
    segment.contains(['*', '?', '[', '{'])
}

/// Why a location has no normal form to check against the allowed prefixes.
#[derive(Debug, thiserror::Error)]
enum NotNormal {
    #[error("no bucket, container or host")]
    NoAuthority,
    #[error("no working folder to resolve a relative path: {0}")]
    NoWorkingFolder(#[source] std::io::Error),
    #[error("cannot resolve the path: {0}")]
    Unresolvable(#[source] std::io::Error),
    #[error("a pattern with a '..' segment is not allowed here")]
    PatternClimbs,
    #[error("the path climbs above its root with '..'")]
    AboveRoot,
    #[error("a bad percent-escape in '{0}'")]
    BadEscape(String),
    #[error("'{0}' is not UTF-8")]
    NotUtf8(String),
    #[error("an escaped separator in '{0}'")]
    EscapedSeparator(String),
}

fn normalize(location: &str) -> std::result::Result<Normal, NotNormal> {
    match location.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => {
            let path = rest.strip_prefix("localhost").unwrap_or(rest);
            local(&decode(path)?)
        }
        Some((scheme, rest)) => {
            // What is fetched is the URL's path: a query or fragment is not part of it.
            let rest = rest.split(['?', '#']).next().unwrap_or_default();
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            if authority.is_empty() {
                return Err(NotNormal::NoAuthority);
            }
            let decoded: Vec<String> = path
                .split('/')
                .map(decode)
                .collect::<std::result::Result<_, _>>()?;
            Ok(Normal {
                root: format!(
                    "{}://{}",
                    scheme.to_ascii_lowercase(),
                    authority.to_ascii_lowercase()
                ),
                segments: resolve(decoded.iter().map(String::as_str))?,
            })
        }
        None => local(location),
    }
}

/// A local path: absolute, `.`/`..` resolved, canonical up to its first wildcard segment
/// (symlinks resolved; a part that does not exist yet is kept as written).
fn local(path: &str) -> std::result::Result<Normal, NotNormal> {
    let path = Path::new(path);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(NotNormal::NoWorkingFolder)?
            .join(path)
    };
    let mut parts: Vec<String> = Vec::new();
    for component in absolute.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().to_string()),
            Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => parts.push("..".into()),
        }
    }
    let literal = parts.iter().take_while(|p| !is_wildcard(p)).count();
    let resolved = resolve(parts[..literal].iter().map(String::as_str))?;
    // Canonicalize the longest part that exists.
    let mut existing = resolved.len();
    let mut canonical = None;
    while canonical.is_none() {
        let candidate: PathBuf = std::iter::once("/".to_string())
            .chain(resolved[..existing].iter().cloned())
            .collect();
        match std::fs::canonicalize(&candidate) {
            Ok(c) => canonical = Some(c),
            Err(_) if existing > 0 => existing -= 1,
            Err(e) => return Err(NotNormal::Unresolvable(e)),
        }
    }
    let mut segments: Vec<String> = canonical
        .unwrap_or_default()
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().to_string()),
            _ => None,
        })
        .collect();
    segments.extend(resolved[existing..].iter().cloned());
    // After the literal part, a pattern's own segments may not climb.
    let rest = &parts[literal..];
    if rest.iter().any(|p| p == "..") {
        return Err(NotNormal::PatternClimbs);
    }
    segments.extend(rest.iter().cloned());
    Ok(Normal {
        root: String::new(),
        segments,
    })
}

/// Segments with `.` and empty ones dropped and `..` applied; climbing above the root fails.
fn resolve<'a>(
    segments: impl Iterator<Item = &'a str>,
) -> std::result::Result<Vec<String>, NotNormal> {
    let mut out: Vec<String> = Vec::new();
    for segment in segments {
        match segment {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(NotNormal::AboveRoot);
                }
            }
            other => out.push(other.to_string()),
        }
    }
    Ok(out)
}

/// Percent-decodes one segment; an escape for `/` or `\` (a separator hidden in a segment) or
/// bytes that are not UTF-8 are refused.
fn decode(segment: &str) -> std::result::Result<String, NotNormal> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| NotNormal::BadEscape(segment.to_string()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).map_err(|_| NotNormal::NotUtf8(segment.to_string()))?;
    if segment.contains('%') && text.contains(['/', '\\']) && !segment.contains(['/', '\\']) {
        return Err(NotNormal::EscapedSeparator(segment.to_string()));
    }
    Ok(text)
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
        assert!(allowed.allows("S3://B/data//x.zarr/./"));
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

    #[test]
    fn the_review_bypasses_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let allowed_dir = root.join("allowed");
        let other = root.join("other");
        std::fs::create_dir_all(allowed_dir.join("t.zarr")).unwrap();
        std::fs::create_dir_all(other.join("t.zarr")).unwrap();
        std::os::unix::fs::symlink(&other, allowed_dir.join("link")).unwrap();
        let a = allowed_dir.display().to_string();
        let allowed = AllowedLocations::prefixes([a.clone(), "s3://bucket/data".into()]);
        assert!(allowed.allows(&format!("{a}/t.zarr")));
        assert!(allowed.allows(&format!("file://{a}/t.zarr")));
        assert!(allowed.allows(&format!("{a}/*.zarr")));
        // Percent-escaped `..`, in file:// and s3:// URLs.
        assert!(!allowed.allows(&format!("file://{a}/%2e%2e/other/t.zarr")));
        assert!(!allowed.allows(&format!("file://{a}/%2E%2E/other/t.zarr")));
        assert!(!allowed.allows("s3://bucket/data/%2e%2e/private/x.zarr"));
        assert!(!allowed.allows("s3://bucket/data/..%2fprivate/x.zarr"));
        assert!(allowed.allows("s3://bucket/data/x.zarr?versionId=1"));
        assert!(!allowed.allows("s3://bucket/private?/../data/x.zarr"));
        // A symlink inside the allowed folder that points outside it.
        assert!(!allowed.allows(&format!("{a}/link/t.zarr")));
        assert!(!allowed.allows(&format!("{a}/link/*.zarr")));
        // Relative paths are resolved against the working folder.
        assert!(!allowed.allows("t.zarr"));
        assert!(!allowed.allows(&format!("{a}/**/../../other/t.zarr")));
        let err = allowed
            .check("s3://bucket/data/%2e%2e/%2e%2e/%2e%2e/x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("climbs above its root"), "{err}");
    }

    #[test]
    fn endpoints_and_local_files_only_as_the_operator_allows() {
        let options = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let check = |allowed: &AllowedLocations, pairs: &[(&str, &str)]| {
            let o = options(pairs);
            allowed.check_options(o.iter().map(|(k, v)| (k, v)))
        };
        let open = AllowedLocations::everything();
        assert!(check(&open, &[("aws.endpoint", "http://anywhere:1")]).is_ok());
        let closed = AllowedLocations::prefixes(["s3://b"]);
        let err = check(
            &closed,
            &[
                ("aws.endpoint", "http://127.0.0.1:9"),
                ("aws.allow_http", "true"),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("'aws.endpoint'"), "{err}");
        assert!(err.contains("--allow-endpoint"), "{err}");
        let some = closed.clone().with_endpoints(["http://127.0.0.1:8333/"]);
        assert!(check(
            &some,
            &[
                ("aws.endpoint", "http://127.0.0.1:8333"),
                ("aws.allow_http", "true")
            ]
        )
        .is_ok());
        assert!(check(&some, &[("aws.endpoint", "http://127.0.0.1:8334")]).is_err());
        assert!(check(&some, &[("azure.endpoint", "https://127.0.0.1:8333")]).is_err());
        assert!(check(&some, &[("azure.allow_http", "true")]).is_err());
        let err = check(&some, &[("gcp.service_account_path", "/etc/shadow")]).unwrap_err();
        assert!(
            err.to_string().contains("'gcp.service_account_path'"),
            "{err}"
        );
        assert!(check(
            &some,
            &[("aws.region", "eu-west-1"), ("aws.access_key_id", "k")]
        )
        .is_ok());
    }
}
