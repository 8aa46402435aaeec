//! The members of a collection: the Zarr arrays and groups a `LOCATION` glob matches (`*`
//! within a path segment, `**` across segments, `?`), in a local folder tree or below an
//! object-store prefix (which is listed).

use std::path::Path;

use futures::TryStreamExt;
use glob::{MatchOptions, Pattern};
use url::Url;

use crate::error::{Error, Result};
use crate::storage::{Location, RemoteStore, StorageOptions};

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
) -> Result<(Vec<String>, StorageOptions)> {
    let mut shared = storage.clone();
    let invalid = |reason: String| Error::InvalidLocation {
        location: pattern.to_string(),
        reason,
    };
    let members = match Location::parse(pattern)? {
        Location::Local(path) if storage.object_store().is_none() => {
            let text = path.to_string_lossy().to_string();
            let paths = glob::glob_with(&text, OPTIONS)
                .map_err(|e| invalid(format!("bad pattern: {e}")))?;
            let mut members = Vec::new();
            for entry in paths {
                let path = entry.map_err(|e| invalid(e.to_string()))?;
                if is_node(&path) {
                    members.push(path.to_string_lossy().to_string());
                }
            }
            members
        }
        Location::Local(path) => {
            let given = storage
                .object_store()
                .cloned()
                .unwrap_or_else(|| unreachable!());
            let text = path.to_string_lossy().trim_start_matches('/').to_string();
            let (prefix, _) = literal_prefix(&text);
            let remote = RemoteStore::given(given, Path::new(prefix))?;
            list_matches(&remote, &text)
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
            list_matches(&remote, &decoded)
                .await?
                .into_iter()
                .map(|key| member_url(&url, &key))
                .collect()
        }
    };
    if members.is_empty() {
        return Err(Error::NotFound {
            location: pattern.to_string(),
            reason: "the pattern matches no Zarr array or group".into(),
        });
    }
    Ok((members, shared))
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
async fn list_matches(remote: &RemoteStore, pattern: &str) -> Result<Vec<String>> {
    let glob = Pattern::new(pattern).map_err(|e| Error::InvalidLocation {
        location: pattern.to_string(),
        reason: format!("bad pattern: {e}"),
    })?;
    let objects: Vec<object_store::ObjectMeta> = remote
        .store
        .list(Some(&remote.root))
        .try_collect()
        .await
        .map_err(|source| Error::ObjectStore {
            location: remote.display(""),
            source,
        })?;
    let mut members: Vec<String> = objects
        .iter()
        .filter_map(|meta| {
            let key = meta.location.as_ref();
            let (parent, file) = key.rsplit_once('/')?;
            NODE_FILES
                .contains(&file)
                .then(|| parent.to_string())
                .filter(|p| glob.matches_with(p, OPTIONS))
        })
        .collect();
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
        let (floats, _) = expand(&format!("{base}/floats/*.zarr"), &StorageOptions::new())
            .await
            .unwrap();
        assert_eq!(floats.len(), 4);
        assert!(floats[0].ends_with("floats/f1.zarr"));
        let (nested, _) = expand(
            &format!("{base}/regions/**/profile.zarr"),
            &StorageOptions::new(),
        )
        .await
        .unwrap();
        assert_eq!(nested.len(), 3);
        let none = expand(&format!("{base}/nothing/*.zarr"), &StorageOptions::new())
            .await
            .unwrap_err();
        assert!(none.to_string().contains("matches no Zarr array or group"));
    }
}
