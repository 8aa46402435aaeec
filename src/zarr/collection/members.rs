//! The members of a collection: the Zarr arrays and groups a `LOCATION` glob matches (`*`
//! within a path segment, `**` across segments, `?`), in a local folder tree or below an
//! object-store prefix (which is listed).

use std::path::Path;

use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use url::Url;

use crate::error::{Error, Result};
use crate::limits::{Limits, GLOB_ENTRIES};
use crate::storage::{Location, RemoteStore, StorageOptions};
use crate::zarr::node_table::NodeFormat;

/// The files that make a folder a Zarr node.
const NODE_FILES: &[&str] = &["zarr.json", ".zarray", ".zgroup"];

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// Whether a location is a pattern rather than one node.
pub(crate) fn is_pattern(location: &str) -> bool {
    location.contains(['*', '?', '['])
}

/// The locations of the nodes `pattern` matches, sorted, and the storage options to open them
/// with (for object stores, the one store the listing used, shared by every member).
pub(crate) async fn expand(
    pattern: &str,
    storage: &StorageOptions,
    format: &NodeFormat,
) -> Result<(Vec<String>, StorageOptions)> {
    let limits = storage.limits()?;
    let mut shared = storage.clone();
    let invalid = |reason: String| Error::InvalidLocation {
        location: pattern.to_string(),
        reason,
    };
    let members = match Location::parse(pattern)? {
        Location::Local(path) if storage.object_store().is_none() => {
            // Walking folders blocks: off the async workers.
            let text = path.to_string_lossy().to_string();
            let format = format.clone();
            tokio::task::spawn_blocking(move || walk_local(&text, &limits, &format))
                .await
                .map_err(|e| Error::Internal(format!("walking {pattern}: {e}")))?
                .map_err(|e| invalid(e.to_string()))?
        }
        Location::Local(path) => {
            let given = storage
                .object_store()
                .cloned()
                .unwrap_or_else(|| unreachable!());
            let text = path.to_string_lossy().trim_start_matches('/').to_string();
            let (prefix, _) = literal_prefix(&text);
            let remote = RemoteStore::given(given, Path::new(prefix))?;
            list_matches(&remote, &text, limits.glob_entries, format)
                .await?
                .into_iter()
                .map(|key| format!("/{key}"))
                .collect()
        }
        Location::Remote { url, service } => {
            let path = url.path().trim_start_matches('/').to_string();
            let decoded = percent_decode(&path);
            let (prefix, _) = literal_prefix(&decoded);
            let mut base = url.clone();
            base.set_path(&format!("/{prefix}"));
            let remote = RemoteStore::open(&base, service, storage)?;
            shared = storage.clone().with_object_store(remote.store.clone());
            list_matches(&remote, &decoded, limits.glob_entries, format)
                .await?
                .into_iter()
                .map(|key| member_url(&url, &key))
                .collect()
        }
    };
    if members.is_empty() {
        return Err(Error::NotFound {
            location: pattern.to_string(),
            reason: format!("the pattern matches no {}", format.members()),
        });
    }
    Ok((members, shared))
}

// Folder entries a local pattern may visit (objects an object-store pattern may list), and
// how deep below its literal folder a `**` may go, are the storage's `Limits::glob_entries`
// and `Limits::glob_depth`: a pattern over a large or looping tree is an error, not an endless
// walk.

/// Why a local pattern could not be walked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalkError {
    #[error("bad pattern: {0}")]
    Pattern(#[source] glob::PatternError),
    #[error(
        "the pattern visits more than {max} folder entries below '{root}': name a narrower \
         folder (or raise it: SET ndfusion.max_glob_entries, or NDFUSION_MAX_GLOB_ENTRIES)"
    )]
    TooManyEntries { root: String, max: usize },
    #[error(
        "the pattern reaches more than {max} folders deep below '{root}': name a narrower \
         folder (or raise it: SET ndfusion.max_glob_depth, or NDFUSION_MAX_GLOB_DEPTH)"
    )]
    TooDeep { root: String, max: usize },
}

/// The Zarr nodes below the literal folder of `pattern` whose path matches it, sorted: a
/// node's own folders are not entered (its chunks are no members), and a folder reached twice
/// (through symlinks) is walked once, so every member is listed once.
pub(crate) fn walk_local(
    pattern: &str,
    limits: &Limits,
    format: &NodeFormat,
) -> std::result::Result<Vec<String>, WalkError> {
    let matcher = Pattern::new(pattern).map_err(WalkError::Pattern)?;
    let (prefix, rest) = literal_prefix(pattern);
    let depth = match rest.contains("**") {
        true => limits.glob_depth,
        false => rest.split('/').filter(|s| !s.is_empty()).count(),
    };
    let root = if prefix.is_empty() && !pattern.starts_with('/') {
        ".".to_string()
    } else if prefix.is_empty() {
        "/".to_string()
    } else {
        prefix.to_string()
    };
    let mut members = Vec::new();
    let mut visited = std::collections::HashSet::new();
    let mut entries = 0usize;
    // (folder as the pattern spells it, its depth below the prefix)
    let mut folders = vec![(prefix.to_string(), 0usize)];
    while let Some((folder, level)) = folders.pop() {
        let on_disk = if folder.is_empty() {
            root.clone()
        } else {
            folder.clone()
        };
        if let Ok(canonical) = std::fs::canonicalize(&on_disk) {
            if !visited.insert(canonical) {
                continue;
            }
        }
        let Ok(listing) = std::fs::read_dir(&on_disk) else {
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > limits.glob_entries {
                return Err(WalkError::TooManyEntries {
                    root,
                    max: limits.glob_entries,
                });
            }
            let name = entry.file_name().to_string_lossy().to_string();
            let path = match folder.as_str() {
                "" => name,
                "/" => format!("/{name}"),
                f => format!("{f}/{name}"),
            };
            let as_path = Path::new(&path);
            let folder = as_path.is_dir();
            if !folder {
                // A file is a member of a collection of files (netCDF).
                if format.is_file() && matcher.matches_with(&path, OPTIONS) {
                    members.push(path);
                }
                continue;
            }
            if !format.is_file() && is_node(as_path) {
                if matcher.matches_with(&path, OPTIONS) {
                    members.push(path);
                }
            } else if level + 1 < depth {
                folders.push((path, level + 1));
            } else if rest.contains("**") && level + 1 >= limits.glob_depth {
                return Err(WalkError::TooDeep {
                    root,
                    max: limits.glob_depth,
                });
            }
        }
    }
    // A node reached through two paths (a symlinked folder) is one member.
    members.sort();
    let mut seen = std::collections::HashSet::new();
    members.retain(|m| std::fs::canonicalize(m).map_or(true, |c| seen.insert(c)));
    Ok(members)
}

fn is_node(path: &Path) -> bool {
    path.is_dir() && NODE_FILES.iter().any(|f| path.join(f).is_file())
}

/// The path segments before the first one holding a wildcard, and the rest.
fn literal_prefix(pattern: &str) -> (&str, &str) {
    let mut end = 0;
    for segment in pattern.split('/') {
        if is_pattern(segment) {
            break;
        }
        end += segment.len() + 1;
    }
    let end = end.min(pattern.len());
    let prefix = pattern[..end].trim_end_matches('/');
    (prefix, &pattern[end..])
}

/// The keys (relative to the store's bucket or container) of the nodes below `remote`'s root
/// whose path matches `pattern`.
/// The nodes below the literal prefix of `pattern` in `remote` whose key matches it, sorted;
/// the listing is read as it streams (only node documents are kept) and is an error past
/// `max_objects` objects.
async fn list_matches(
    remote: &RemoteStore,
    pattern: &str,
    max_objects: usize,
    format: &NodeFormat,
) -> Result<Vec<String>> {
    let glob = Pattern::new(pattern).map_err(|e| Error::InvalidLocation {
        location: pattern.to_string(),
        reason: format!("bad pattern: {e}"),
    })?;
    let mut listing = remote.store.list(Some(&remote.root));
    let mut members = Vec::new();
    let mut listed = 0usize;
    while let Some(meta) = listing
        .try_next()
        .await
        .map_err(|source| Error::ObjectStore {
            location: remote.display(""),
            source,
        })?
    {
        listed += 1;
        if listed > max_objects {
            return Err(Error::InvalidLocation {
                location: pattern.to_string(),
                reason: format!(
                    "the pattern lists more than {max_objects} objects below {}: name a \
                     narrower prefix (or raise it: {GLOB_ENTRIES})",
                    remote.display("")
                ),
            });
        }
        let key = meta.location.as_ref();
        if format.is_file() {
            if glob.matches_with(key, OPTIONS) {
                members.push(key.to_string());
            }
            continue;
        }
        let Some((parent, file)) = key.rsplit_once('/') else {
            continue;
        };
        if NODE_FILES.contains(&file) && glob.matches_with(parent, OPTIONS) {
            members.push(parent.to_string());
        }
    }
    members.sort();
    members.dedup();
    Ok(members)
}

fn member_url(pattern: &Url, key: &str) -> String {
    let mut url = pattern.clone();
    url.set_path(&format!("/{key}"));
    url.set_query(None);
    url.to_string()
}

fn percent_decode(path: &str) -> String {
    url::form_urlencoded::parse(format!("p={}", path.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn object_store_listings_stop_at_their_limit() {
        use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
        let memory: std::sync::Arc<dyn ObjectStore> =
            std::sync::Arc::new(object_store::memory::InMemory::new());
        for m in 0..4 {
            for key in ["zarr.json", "c/0", "c/1"] {
                let path = object_store::path::Path::from(format!("data/m{m}.zarr/{key}"));
                memory
                    .put(&path, PutPayload::from_static(b"{}"))
                    .await
                    .unwrap();
            }
        }
        let remote = RemoteStore::given(memory, Path::new("data")).unwrap();
        let members = list_matches(&remote, "data/*.zarr", 12, &NodeFormat::Zarr)
            .await
            .unwrap();
        assert_eq!(
            members,
            [
                "data/m0.zarr",
                "data/m1.zarr",
                "data/m2.zarr",
                "data/m3.zarr"
            ]
        );
        let err = list_matches(&remote, "data/*.zarr", 11, &NodeFormat::Zarr)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("lists more than 11 objects below"), "{err}");
    }

    #[test]
    fn the_literal_prefix_ends_before_the_first_wildcard() {
        assert_eq!(
            literal_prefix("argo/**/profile.zarr"),
            ("argo", "**/profile.zarr")
        );
        assert_eq!(
            literal_prefix("data/floats/*.zarr"),
            ("data/floats", "*.zarr")
        );
        assert_eq!(literal_prefix("*.zarr"), ("", "*.zarr"));
        assert!(is_pattern("a/*.zarr") && !is_pattern("a/b.zarr"));
    }

    #[tokio::test]
    async fn local_patterns_match_nodes() {
        let base = format!("{}/tests/data/collections", env!("CARGO_MANIFEST_DIR"));
        let (floats, _) = expand(
            &format!("{base}/floats/*.zarr"),
            &StorageOptions::new(),
            &NodeFormat::Zarr,
        )
        .await
        .unwrap();
        assert_eq!(floats.len(), 4);
        assert!(floats[0].ends_with("floats/f1.zarr"));
        let (nested, _) = expand(
            &format!("{base}/regions/**/profile.zarr"),
            &StorageOptions::new(),
            &NodeFormat::Zarr,
        )
        .await
        .unwrap();
        assert_eq!(nested.len(), 3);
        let none = expand(
            &format!("{base}/nothing/*.zarr"),
            &StorageOptions::new(),
            &NodeFormat::Zarr,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(none.to_string().contains("matches no Zarr array or group"));
    }

    #[tokio::test]
    async fn symlink_loops_count_each_member_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir_all(d.join("a.zarr")).unwrap();
        std::fs::write(d.join("a.zarr/zarr.json"), "{}").unwrap();
        std::os::unix::fs::symlink("..", d.join("up")).unwrap();
        std::os::unix::fs::symlink(d.join("a.zarr"), d.join("again.zarr")).unwrap();
        let pattern = format!("{}/**/*.zarr", dir.path().display());
        let (members, _) = expand(&pattern, &StorageOptions::new(), &NodeFormat::Zarr)
            .await
            .unwrap();
        assert_eq!(members.len(), 1, "{members:?}");
    }

    #[test]
    fn a_pattern_over_too_deep_a_tree_is_an_error_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut deep = dir.path().to_path_buf();
        let max = Limits::default().glob_depth;
        for i in 0..max + 2 {
            deep = deep.join(format!("l{i}"));
        }
        std::fs::create_dir_all(&deep).unwrap();
        let err = walk_local(
            &format!("{}/**/*.zarr", dir.path().display()),
            &Limits::default(),
            &NodeFormat::Zarr,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!("more than {max} folders deep"))
                && err.contains("NDFUSION_MAX_GLOB_DEPTH"),
            "{err}"
        );
    }
}
