//! The files a reference document points into: each URL resolved against the document's own
//! location, allowed only inside the document's folder (or prefix) or a granted
//! `virtual_chunk_containers` prefix, and read by byte range — local files on blocking
//! threads, object stores with one client per bucket or host.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use url::Url;
use zarrs::storage::Bytes;

use crate::error::{BoxError, Error, Result};
use crate::storage::{redact_url, resolve, Location, Resolved, StorageOptions};

/// One file the references point into.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Local(PathBuf),
    Remote {
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
    },
}

/// Where `url`, as written in the document at `base`, is: relative URLs (`data.nc`,
/// `../x/data.nc`, `/abs/data.nc`) resolve against the document's URL, as a browser would.
pub(super) fn absolute(url: &str, base: &Url) -> std::result::Result<Url, String> {
    base.join(url)
        .map_err(|e| format!("'{url}' is not a URL relative to {base}: {e}"))
}

/// Whether `url` may be read: inside `home` (the document's folder or prefix, ending in `/`)
/// or one of `granted` (URL prefixes ending in `/`). An error names the prefix to grant.
pub(super) fn check_allowed(
    url: &Url,
    home: &str,
    granted: &[String],
) -> std::result::Result<(), String> {
    let s = url.as_str();
    if s.starts_with(home) || granted.iter().any(|p| s.starts_with(p.as_str())) {
        return Ok(());
    }
    let mut folder = url.clone();
    folder.set_query(None);
    folder.set_fragment(None);
    if let Ok(mut segments) = folder.path_segments_mut() {
        segments.pop().push("");
    }
    Err(format!(
        "a reference points to {}, outside the reference file's folder {home}: grant it with \
         OPTIONS ('virtual_chunk_containers' '{}')",
        redact_url(url),
        redact_url(&folder)
    ))
}

/// Opens the targets of `urls` (absolute, allowed) with the table's storage settings: one
/// object-store client per scheme and bucket (or host), made once.
pub(super) fn open_targets(urls: &[Url], options: &StorageOptions) -> Result<Vec<Target>> {
    let mut stores: HashMap<String, Arc<dyn ObjectStore>> = HashMap::new();
    let mut targets = Vec::with_capacity(urls.len());
    for url in urls {
        let target = match Location::parse(url.as_str())? {
            Location::Local(_) => match resolve(url.as_str(), options)? {
                Resolved::Local(path) => Target::Local(path),
                // A local-looking path in a store the application gave.
                Resolved::Remote(remote) => Target::Remote {
                    store: remote.store,
                    path: remote.root,
                },
            },
            Location::Remote { .. } => {
                let root = format!("{}://{}/", url.scheme(), url.authority());
                let store = match stores.get(&root) {
                    Some(store) => Arc::clone(store),
                    None => {
                        let Resolved::Remote(remote) = resolve(&root, options)? else {
                            return Err(Error::Internal(format!(
                                "{root} resolved to a local path"
                            )));
                        };
                        stores.insert(root, Arc::clone(&remote.store));
                        remote.store
                    }
                };
                let path =
                    ObjectPath::from_url_path(url.path()).map_err(|e| Error::InvalidLocation {
                        location: redact_url(url),
                        reason: format!("invalid path: {e}"),
                    })?;
                Target::Remote { store, path }
            }
        };
        targets.push(target);
    }
    Ok(targets)
}

/// The file at `location` (a path, or an object-store URL), read with `options`.
pub(crate) fn open_file(location: &str, options: &StorageOptions) -> Result<Target> {
    Ok(match resolve(location, options)? {
        Resolved::Local(path) => Target::Local(path),
        Resolved::Remote(remote) => Target::Remote {
            store: remote.store,
            path: remote.root,
        },
    })
}

impl Target {
    /// Why a local path is no file to read (a folder); `None` for a file, an absent path
    /// (which reads as absent) and objects.
    pub(crate) async fn not_a_file(&self) -> Option<String> {
        let Target::Local(path) = self else {
            return None;
        };
        let path = path.clone();
        let meta = tokio::task::spawn_blocking(move || std::fs::metadata(path)).await;
        match meta {
            Ok(Ok(meta)) if meta.is_dir() => Some("a folder, not a file".into()),
            _ => None,
        }
    }

    /// The whole file's size, `None` when it does not exist.
    pub(crate) async fn size(&self) -> std::result::Result<Option<u64>, BoxError> {
        match self {
            Target::Local(path) => {
                let path = path.clone();
                let meta = tokio::task::spawn_blocking(move || std::fs::metadata(path)).await?;
                match meta {
                    Ok(meta) => Ok(Some(meta.len())),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(Box::new(e)),
                }
            }
            Target::Remote { store, path } => match store.head(path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(Box::new(e)),
            },
        }
    }

    /// Bytes `range` of the file, exactly: a file shorter than the range is an error (the
    /// references describe a file that is no longer there as it was); `None` when there is no
    /// such file. The range's length was checked by the caller against what it may read.
    pub(crate) async fn read(
        &self,
        range: Range<u64>,
    ) -> std::result::Result<Option<Bytes>, BoxError> {
        let bytes = match self {
            Target::Local(path) => {
                let path = path.clone();
                let range = range.clone();
                let read = tokio::task::spawn_blocking(move || read_local(&path, range)).await?;
                match read {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(Box::new(e)),
                }
            }
            Target::Remote { store, path } => {
                if range.is_empty() {
                    return Ok(Some(Bytes::new()));
                }
                let options = GetOptions {
                    range: Some(GetRange::Bounded(range.clone())),
                    ..GetOptions::default()
                };
                match store.get_opts(path, options).await {
                    Ok(result) => result.bytes().await?,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(e) => return Err(Box::new(e)),
                }
            }
        };
        if bytes.len() as u64 != range.end - range.start {
            return Err(format!(
                "bytes {}..{} were referenced, the file holds {} of them",
                range.start,
                range.end,
                bytes.len()
            )
            .into());
        }
        Ok(Some(bytes))
    }
}

impl Target {
    /// Bytes `ranges` of the file, exactly, in order: a local file's in one blocking task, an
    /// object's with object_store's `get_ranges` (nearby ranges coalesced, requests
    /// concurrent); `None` when there is no such file.
    pub(crate) async fn read_ranges(
        &self,
        ranges: Vec<Range<u64>>,
    ) -> std::result::Result<Option<Vec<Bytes>>, BoxError> {
        let pieces = match self {
            Target::Local(path) => {
                let path = path.clone();
                let wanted = ranges.clone();
                let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Bytes>> {
                    let file = std::fs::File::open(&path)?;
                    let size = file.metadata()?.len();
                    wanted
                        .into_iter()
                        .map(|r| read_at(&file, size, r))
                        .collect()
                })
                .await?;
                match read {
                    Ok(pieces) => pieces,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(Box::new(e)),
                }
            }
            Target::Remote { store, path } => match store.get_ranges(path, &ranges).await {
                Ok(pieces) => pieces,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(Box::new(e)),
            },
        };
        for (piece, range) in pieces.iter().zip(&ranges) {
            if piece.len() as u64 != range.end - range.start {
                return Err(format!(
                    "bytes {}..{} were referenced, the file holds {} of them",
                    range.start,
                    range.end,
                    piece.len()
                )
                .into());
            }
        }
        Ok(Some(pieces))
    }
}

/// Bytes `range` of a local file: what it holds of them (fewer past its end), allocated only
/// for what is there.
fn read_local(path: &std::path::Path, range: Range<u64>) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    read_at(&file, size, range)
}

/// Bytes `range` of an open file of `size` bytes: what it holds of them (fewer past its end).
fn read_at(file: &std::fs::File, size: u64, range: Range<u64>) -> std::io::Result<Bytes> {
    let end = range.end.min(size);
    let len = end.saturating_sub(range.start) as usize;
    Ok(crate::storage::read_file_range(file, range.start, len)?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_urls_resolve_against_the_document_and_stay_in_its_folder() {
        let base = Url::parse("file:///data/refs/ocean.json").unwrap();
        let home = "file:///data/refs/";
        let inside = absolute("ocean.nc", &base).unwrap();
        assert_eq!(inside.as_str(), "file:///data/refs/ocean.nc");
        check_allowed(&inside, home, &[]).unwrap();
        let up = absolute("../secret/x.nc", &base).unwrap();
        let err = check_allowed(&up, home, &[]).unwrap_err();
        assert!(err.contains("file:///data/secret/x.nc"), "{err}");
        assert!(
            err.contains("'virtual_chunk_containers' 'file:///data/secret/'"),
            "{err}"
        );
        check_allowed(&up, home, &["file:///data/secret/".into()]).unwrap();
        let s3 = absolute("s3://bucket/run/x.nc", &base).unwrap();
        assert!(check_allowed(&s3, home, &[]).is_err());
        check_allowed(&s3, home, &["s3://bucket/".into()]).unwrap();
        // A remote document's relative references stay in its bucket and prefix.
        let remote = Url::parse("s3://bucket/refs/a.json").unwrap();
        let sibling = absolute("a.nc", &remote).unwrap();
        check_allowed(&sibling, "s3://bucket/refs/", &[]).unwrap();
        let rooted = absolute("/other/a.nc", &remote).unwrap();
        assert_eq!(rooted.as_str(), "s3://bucket/other/a.nc");
        assert!(check_allowed(&rooted, "s3://bucket/refs/", &[]).is_err());
    }

    #[test]
    fn local_reads_past_the_end_are_short_not_allocated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(&read_local(&path, 2..5).unwrap()[..], b"234");
        assert_eq!(&read_local(&path, 8..u64::MAX).unwrap()[..], b"89");
        assert_eq!(read_local(&path, 20..30).unwrap().len(), 0);
    }
}
