//! Which version of a repository a table reads: a branch's tip (resolved for every query), a
//! tag, a snapshot id, or a branch as it was at an instant.

use std::fmt;

use chrono::{DateTime, Utc};
use icechunk::format::SnapshotId;
use icechunk::repository::VersionInfo;
use icechunk::Repository;

use crate::error::{Error, Result};

/// A version of a repository, as the table's options chose it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Version {
    /// The tip of a branch when each query is planned.
    Branch(String),
    Tag(String),
    Snapshot(SnapshotId),
    /// The branch's last snapshot written at or before `at`.
    AsOf {
        branch: String,
        at: DateTime<Utc>,
    },
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Branch(b) => write!(f, "branch '{b}'"),
            Version::Tag(t) => write!(f, "tag '{t}'"),
            Version::Snapshot(id) => write!(f, "snapshot {id}"),
            Version::AsOf { branch, at } => write!(f, "branch '{branch}' as of {at:?}"),
        }
    }
}

/// What a table's options say of the version: each `None` when not set.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct VersionOptions<'a> {
    pub branch: Option<&'a str>,
    pub tag: Option<&'a str>,
    pub snapshot: Option<&'a str>,
    pub as_of: Option<&'a str>,
}

impl Version {
    /// The version `options` choose (the tip of `main` when they choose none). Two selectors
    /// at once are an error naming both; `as_of` goes with a branch (`main` by default).
    pub(crate) fn from_options(options: VersionOptions<'_>) -> Result<Self> {
        let set: Vec<&str> = [
            (
                "branch",
                options.branch.is_some() && options.as_of.is_none(),
            ),
            ("tag", options.tag.is_some()),
            ("snapshot", options.snapshot.is_some()),
            ("as_of", options.as_of.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| key)
        .collect();
        if let [first, second, ..] = set[..] {
            return Err(Error::InvalidOption {
                option: format!("{first}, {second}"),
                reason: format!(
                    "'{first}' and '{second}' both choose a version: give one ('as_of' may \
                     come with 'branch')"
                ),
            });
        }
        let branch = options.branch.unwrap_or("main").to_string();
        if let Some(tag) = options.tag {
            return Ok(Version::Tag(tag.to_string()));
        }
        if let Some(id) = options.snapshot {
            return Ok(Version::Snapshot(parse_snapshot_id(id)?));
        }
        if let Some(at) = options.as_of {
            let at = DateTime::parse_from_rfc3339(at)
                .map_err(|e| Error::InvalidOption {
                    option: "as_of".into(),
                    reason: format!(
                        "'{at}' is not an RFC 3339 instant such as 2026-05-01T00:00:00Z: {e}"
                    ),
                })?
                .with_timezone(&Utc);
            return Ok(Version::AsOf { branch, at });
        }
        Ok(Version::Branch(branch))
    }

    /// Whether the version moves (a branch's tip): then each query resolves it again.
    pub(crate) fn moves(&self) -> bool {
        matches!(self, Version::Branch(_))
    }

    /// The snapshot this version is now in `repo`, or an error naming what does not exist.
    pub(crate) async fn resolve(&self, repo: &Repository, location: &str) -> Result<SnapshotId> {
        let info = match self {
            Version::Branch(b) => VersionInfo::BranchTipRef(b.clone()),
            Version::Tag(t) => VersionInfo::TagRef(t.clone()),
            Version::Snapshot(id) => VersionInfo::SnapshotId(id.clone()),
            Version::AsOf { branch, at } => VersionInfo::AsOf {
                branch: branch.clone(),
                at: *at,
            },
        };
        let resolved = match repo.resolve_version(&info).await {
            Ok(id) => id,
            Err(e) => return Err(self.why_unresolved(repo, location, e.to_string()).await),
        };
        // A snapshot id resolves to itself: check the snapshot is there before reading it.
        if let Version::Snapshot(id) = self {
            if let Err(e) = repo.lookup_snapshot(id).await {
                return Err(self.why_unresolved(repo, location, e.to_string()).await);
            }
        }
        Ok(resolved)
    }

    /// Why the version did not resolve: the branch or tag it names is missing (with the ones
    /// there are: icechunk's own error does not say which kind of ref it looked for), the
    /// snapshot is missing, or icechunk's error.
    async fn why_unresolved(&self, repo: &Repository, location: &str, error: String) -> Error {
        let missing = |what: String, known: String| Error::NotFound {
            location: location.to_string(),
            reason: format!("the repository has no {what}; {known}"),
        };
        let failed = || Error::NotFound {
            location: location.to_string(),
            reason: format!("resolving {self}: {error}"),
        };
        let listing = |names: std::collections::BTreeSet<String>| {
            names.into_iter().collect::<Vec<_>>().join(", ")
        };
        match self {
            Version::Branch(branch) | Version::AsOf { branch, .. } => {
                let Ok(branches) = repo.list_branches().await else {
                    return failed();
                };
                if !branches.contains(branch) {
                    let known = format!("its branches: {}", listing(branches));
                    return missing(format!("branch '{branch}'"), known);
                }
                match self {
                    Version::AsOf { at, .. } => missing(
                        format!("snapshot on branch '{branch}' written at or before {at:?}"),
                        format!("({error})"),
                    ),
                    _ => failed(),
                }
            }
            Version::Tag(tag) => match repo.list_tags().await {
                Ok(tags) if !tags.contains(tag) => {
                    let known = match tags.is_empty() {
                        true => "it has no tags".to_string(),
                        false => format!("its tags: {}", listing(tags)),
                    };
                    missing(format!("tag '{tag}'"), known)
                }
                _ => failed(),
            },
            Version::Snapshot(id) => missing(
                format!("snapshot {id}"),
                "icechunk_log(...) lists a branch's snapshots".into(),
            ),
        }
    }
}

/// A snapshot id as Icechunk writes them: 20 characters of Crockford base32 (12 bytes).
pub(crate) fn parse_snapshot_id(id: &str) -> Result<SnapshotId> {
    let invalid = || Error::InvalidOption {
        option: "snapshot".into(),
        reason: format!(
            "'{id}' is not a snapshot id (20 characters of Crockford base32, such as \
             1CECHNKREP0F1RSTCMT0)"
        ),
    };
    if id.len() != 20 {
        return Err(invalid());
    }
    SnapshotId::try_from(id).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(
        branch: Option<&str>,
        tag: Option<&str>,
        snapshot: Option<&str>,
        as_of: Option<&str>,
    ) -> Result<Version> {
        Version::from_options(VersionOptions {
            branch,
            tag,
            snapshot,
            as_of,
        })
    }

    #[test]
    fn one_selector_at_a_time_and_main_by_default() {
        assert_eq!(
            version(None, None, None, None).unwrap(),
            Version::Branch("main".into())
        );
        assert_eq!(
            version(None, Some("v1"), None, None).unwrap(),
            Version::Tag("v1".into())
        );
        let err = version(Some("dev"), Some("v1"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'branch' and 'tag' both choose a version"),
            "{err}"
        );
        let err = version(None, Some("v1"), None, Some("2026-05-01T00:00:00Z"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'tag' and 'as_of'"), "{err}");
        match version(Some("dev"), None, None, Some("2026-05-01T02:00:00+02:00")).unwrap() {
            Version::AsOf { branch, at } => {
                assert_eq!(branch, "dev");
                assert_eq!(at.to_rfc3339(), "2026-05-01T00:00:00+00:00");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_instants_and_snapshot_ids_name_their_option() {
        let err = version(None, None, None, Some("yesterday"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid option 'as_of'") && err.contains("'yesterday'"),
            "{err}"
        );
        for id in ["abc", "1CECHNKREP0F1RSTCMT0X", "1CECHNKREP0F1RSTCMU!"] {
            let err = version(None, None, Some(id), None).unwrap_err().to_string();
            assert!(
                err.contains("invalid option 'snapshot'") && err.contains(id),
                "{err}"
            );
        }
        assert!(version(None, None, Some("1CECHNKREP0F1RSTCMT0"), None).is_ok());
    }
}
