//! Where a written store goes, so that nothing half-written is ever seen there.
//!
//! - **Local folder**: the store is written into a hidden folder beside the target
//!   (`.out.zarr.ndfusion-<pid>-<n>`) and renamed into place once complete. An existing
//!   target (with `overwrite`) is renamed aside first and removed after the new one is in
//!   place.
//! - **Object store**: objects have no rename. A new target is written in place with its
//!   commit document (`zarr.json`, a Zarr 2 group's `.zgroup`) last, so no reader sees a store before it is complete;
//!   an existing one (with `overwrite`) is kept until a staged copy under a hidden prefix
//!   beside it is complete, then replaced: its objects deleted, the staged ones copied over
//!   (server-side), the commit document last.
//!
//! A write that fails, or that is dropped (a cancelled query), removes what it wrote: the
//! staging folder, or every object it put.

use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::error::{Error, Result};
use crate::storage::{resolve, RemoteStore, Resolved, StorageOptions};

/// The document that completes a store, written last: the root's `zarr.json` (or a Zarr 2
/// group's `.zgroup`). Until it is there, a reader finds no store.
#[derive(Debug)]
pub(crate) struct Commit {
    pub key: &'static str,
    pub bytes: Vec<u8>,
}

impl Commit {
    pub(crate) fn new(key: &'static str, bytes: Vec<u8>) -> Self {
        Commit { key, bytes }
    }
}

/// Objects deleted or copied at once when a remote store is replaced or cleaned up.
const OBJECTS_IN_FLIGHT: usize = 16;

/// A store being written at one location.
#[derive(Debug)]
pub(crate) struct Target {
    /// The location as the user wrote it, for messages.
    location: String,
    at: Place,
    /// Whether [`commit`](Self::commit) finished: nothing is removed after.
    committed: bool,
}

// One per statement: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Place {
    Local {
        target: PathBuf,
        staging: PathBuf,
        replace: bool,
    },
    Remote {
        target: RemoteStore,
        /// Where objects go until the commit: the target itself, or a hidden prefix beside
        /// it when an existing store is replaced.
        staging: RemoteStore,
        /// Every object put, so a failed write can remove them.
        written: Arc<Mutex<Vec<Path>>>,
    },
}

/// A unique suffix for staging names in this process.
fn staging_suffix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "ndfusion-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An error about the target at `location`.
fn failed(location: &str, reason: impl std::fmt::Display) -> Error {
    Error::Write {
        location: location.to_string(),
        reason: reason.to_string(),
    }
}

/// The error for a location that holds something and may not be replaced.
fn exists(location: &str) -> Error {
    failed(
        location,
        "something is already there; write elsewhere, or replace it with OPTIONS ('overwrite' \
         'true')",
    )
}

impl Target {
    /// Whether something is at `location` already (a file, a folder, or objects below the
    /// prefix).
    pub(crate) async fn occupied(location: &str, storage: &StorageOptions) -> Result<bool> {
        match resolve(location, storage)? {
            Resolved::Local(path) => Ok(std::fs::symlink_metadata(&path).is_ok()),
            Resolved::Remote(remote) => {
                let mut listing = remote.store.list(Some(&remote.root));
                match listing.next().await {
                    None => Ok(false),
                    Some(Ok(_)) => Ok(true),
                    Some(Err(e)) => Err(failed(&remote.shown, e)),
                }
            }
        }
    }

    /// Starts a store at `location`: an error naming it when something is there and
    /// `overwrite` is false.
    pub(crate) async fn create(
        location: &str,
        storage: &StorageOptions,
        overwrite: bool,
    ) -> Result<Self> {
        let occupied = Target::occupied(location, storage).await?;
        if occupied && !overwrite {
            return Err(exists(location));
        }
        let at = match resolve(location, storage)? {
            Resolved::Local(target) => {
                let name = target
                    .file_name()
                    .ok_or_else(|| failed(location, "the location names no folder"))?
                    .to_string_lossy()
                    .to_string();
                let parent = parent_of(&target);
                std::fs::create_dir_all(&parent).map_err(|e| failed(location, e))?;
                let staging = parent.join(format!(".{name}.{}", staging_suffix()));
                std::fs::create_dir(&staging).map_err(|e| {
                    failed(location, format!("creating {}: {e}", staging.display()))
                })?;
                Place::Local {
                    target,
                    staging,
                    replace: occupied,
                }
            }
            Resolved::Remote(target) => {
                let staging = match occupied {
                    false => target.clone(),
                    true => {
                        let root = target.root.as_ref();
                        let (parent, name) = root.rsplit_once('/').unwrap_or(("", root));
                        let hidden = format!(".{name}.{}", staging_suffix());
                        let root = match parent {
                            "" => Path::from(hidden),
                            _ => Path::from(format!("{parent}/{hidden}")),
                        };
                        RemoteStore {
                            root,
                            ..target.clone()
                        }
                    }
                };
                Place::Remote {
                    target,
                    staging,
                    written: Arc::default(),
                }
            }
        };
        Ok(Target {
            location: location.to_string(),
            at,
            committed: false,
        })
    }

    /// A handle that puts objects (chunks) into the staging place from other tasks.
    pub(crate) fn writer(&self) -> ObjectWriter {
        ObjectWriter {
            location: self.location.clone(),
            at: match &self.at {
                Place::Local { staging, .. } => WriterAt::Local(staging.clone()),
                Place::Remote {
                    staging, written, ..
                } => WriterAt::Remote(staging.clone(), Arc::clone(written)),
            },
        }
    }

    /// Writes the commit document and puts the complete store at the location.
    pub(crate) async fn commit(mut self, commit: Commit) -> Result<()> {
        let location = self.location.clone();
        match &self.at {
            Place::Local {
                target,
                staging,
                replace,
            } => {
                let (target, staging, replace) = (target.clone(), staging.clone(), *replace);
                tokio::task::spawn_blocking(move || {
                    commit_local(&location, &target, &staging, replace, &commit)
                })
                .await
                .map_err(|e| failed(&self.location, e))??;
            }
            Place::Remote {
                target,
                staging,
                written,
            } => {
                if staging.root != target.root {
                    replace_remote(&location, target, staging, written).await?;
                }
                let key = target.path(commit.key);
                target
                    .store
                    .put(&key, PutPayload::from(commit.bytes))
                    .await
                    .map_err(|e| failed(&location, e))?;
            }
        }
        self.committed = true;
        Ok(())
    }
}

impl Target {
    /// Ends a write: on success puts the `commit` document and the store in place; on an error waits for the chunk writes already started (`writes`), then removes
    /// what was written. The outcome's value is returned, or its error.
    pub(crate) async fn finish<T>(
        self,
        outcome: datafusion::common::Result<(T, Commit)>,
        writes: &mut tokio::task::JoinSet<Result<usize>>,
    ) -> datafusion::common::Result<T> {
        match outcome {
            Ok((value, commit)) => {
                self.commit(commit).await?;
                Ok(value)
            }
            Err(e) => {
                while writes.join_next().await.is_some() {}
                self.abort().await;
                Err(e)
            }
        }
    }

    /// Removes what a failed write put (the staging folder, or every object put), and waits
    /// for it: the caller has waited for every chunk write first.
    pub(crate) async fn abort(mut self) {
        self.committed = true; // nothing left for `drop`
        match &self.at {
            Place::Local { staging, .. } => {
                let staging = staging.clone();
                let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(staging)).await;
            }
            Place::Remote {
                staging, written, ..
            } => {
                let paths = written.lock().map(|w| w.clone()).unwrap_or_default();
                if let Err(e) = delete_all(&staging.store, paths).await {
                    log::warn!(
                        "removing the objects of a failed write to {}: {e}",
                        self.location
                    );
                }
            }
        }
    }
}

/// The folder `path` is in (`.` for a bare name).
fn parent_of(path: &FsPath) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes the commit document into the staging folder and renames it to `target`; an existing target
/// (when `replace`) is renamed aside first, put back if the rename fails, and removed after.
fn commit_local(
    location: &str,
    target: &FsPath,
    staging: &FsPath,
    replace: bool,
    commit: &Commit,
) -> Result<()> {
    std::fs::write(staging.join(commit.key), &commit.bytes).map_err(|e| failed(location, e))?;
    let aside = match replace {
        false => None,
        true => {
            let name = target.file_name().unwrap_or_default().to_string_lossy();
            let aside = parent_of(target).join(format!(".{name}.old.{}", staging_suffix()));
            match std::fs::rename(target, &aside) {
                Ok(()) => Some(aside),
                // Removed meanwhile: nothing to put aside.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(failed(location, format!("moving the old store aside: {e}"))),
            }
        }
    };
    if let Err(e) = std::fs::rename(staging, target) {
        if let Some(aside) = &aside {
            let _ = std::fs::rename(aside, target);
        }
        let reason = match target.exists() {
            true => "something was put there while the store was written".to_string(),
            false => e.to_string(),
        };
        return Err(failed(location, reason));
    }
    if let Some(aside) = aside {
        remove_path(&aside).map_err(|e| {
            failed(
                location,
                format!(
                    "the new store is in place, but the old one at {} could not be removed: {e}",
                    aside.display()
                ),
            )
        })?;
    }
    Ok(())
}

/// Removes a folder or a file.
fn remove_path(path: &FsPath) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path)?.is_dir() {
        true => std::fs::remove_dir_all(path),
        false => std::fs::remove_file(path),
    }
}

/// Deletes the objects below `target`, copies the staged ones over (the commit document is put by
/// the caller, last) and deletes the staged ones.
async fn replace_remote(
    location: &str,
    target: &RemoteStore,
    staging: &RemoteStore,
    written: &Mutex<Vec<Path>>,
) -> Result<()> {
    let store = &target.store;
    let old: Vec<Path> = store
        .list(Some(&target.root))
        .map_ok(|meta| meta.location)
        .try_collect()
        .await
        .map_err(|e| failed(location, e))?;
    delete_all(store, old)
        .await
        .map_err(|e| failed(location, e))?;
    let staged: Vec<Path> = written.lock().map(|w| w.clone()).unwrap_or_default();
    let prefix = staging.root.as_ref().len();
    let copies: Vec<(Path, Path)> = (staged.iter())
        .map(|from| {
            let key = from.as_ref()[prefix..].trim_start_matches('/');
            (from.clone(), target.path(key))
        })
        .collect();
    futures::stream::iter(copies)
        .map(|(from, to)| {
            let store = Arc::clone(store);
            async move { store.copy(&from, &to).await }
        })
        .buffer_unordered(OBJECTS_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .map_err(|e| failed(location, format!("copying the new store into place: {e}")))?;
    delete_all(store, staged)
        .await
        .map_err(|e| failed(location, e))
}

/// Deletes `paths`, several at a time.
async fn delete_all(store: &Arc<dyn ObjectStore>, paths: Vec<Path>) -> object_store::Result<()> {
    futures::stream::iter(paths)
        .map(|p| {
            let store = Arc::clone(store);
            async move {
                match store.delete(&p).await {
                    Err(object_store::Error::NotFound { .. }) => Ok(()),
                    other => other,
                }
            }
        })
        .buffer_unordered(OBJECTS_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

impl Drop for Target {
    /// A write dropped before it committed or aborted (a cancelled query) removes what it
    /// wrote, in the background: the query is not waited for.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        match &self.at {
            Place::Local { staging, .. } => {
                let staging = staging.clone();
                // A chunk write may still be finishing on a blocking thread: try again a
                // few times if a file appears while the folder is removed.
                let remove = move || {
                    for _ in 0..5 {
                        match std::fs::remove_dir_all(&staging) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                std::thread::sleep(std::time::Duration::from_millis(50))
                            }
                            _ => return,
                        }
                    }
                };
                match tokio::runtime::Handle::try_current() {
                    Ok(handle) => drop(handle.spawn_blocking(remove)),
                    Err(_) => remove(),
                }
            }
            Place::Remote {
                staging, written, ..
            } => {
                let paths = written.lock().map(|w| w.clone()).unwrap_or_default();
                let store = Arc::clone(&staging.store);
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    handle.spawn(async move {
                        if let Err(e) = delete_all(&store, paths).await {
                            log::warn!("removing the objects of a failed write: {e}");
                        }
                    });
                }
            }
        }
    }
}

/// Puts objects into a target's staging place; cheap to clone into tasks.
#[derive(Debug, Clone)]
pub(crate) struct ObjectWriter {
    location: String,
    at: WriterAt,
}

#[derive(Debug, Clone)]
enum WriterAt {
    Local(PathBuf),
    Remote(RemoteStore, Arc<Mutex<Vec<Path>>>),
}

impl ObjectWriter {
    /// Whether puts block (local files: call from a blocking thread).
    pub(crate) fn is_local(&self) -> bool {
        matches!(self.at, WriterAt::Local(_))
    }

    /// Writes `bytes` at `key` (`c/0`) of a local staging folder. Blocks.
    pub(crate) fn put_local(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let WriterAt::Local(staging) = &self.at else {
            return Err(Error::Internal("put_local on a remote target".into()));
        };
        // Folders below the staging folder one level at a time, never the staging folder
        // itself: a write still running after its store was removed (a cancelled query)
        // fails instead of leaving a folder behind.
        let mut folder = staging.clone();
        let parts: Vec<&str> = key.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            folder.push(part);
            match std::fs::create_dir(&folder) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(failed(&self.location, format!("writing {key}: {e}")))
                }
                _ => {}
            }
        }
        let path = staging.join(key);
        std::fs::write(&path, bytes)
            .map_err(|e| failed(&self.location, format!("writing {key}: {e}")))
    }

    /// Puts `bytes` at `key` of a remote staging prefix.
    pub(crate) async fn put_remote(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        let WriterAt::Remote(staging, written) = &self.at else {
            return Err(Error::Internal("put_remote on a local target".into()));
        };
        let path = staging.path(key);
        // Recorded first: an object whose put was cut off may still have landed.
        if let Ok(mut w) = written.lock() {
            w.push(path.clone());
        }
        staging
            .store
            .put(&path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| failed(&self.location, format!("writing {key}: {e}")))
    }
}
