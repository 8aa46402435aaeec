//! Naming the data file at fault when Lance fails to read a table. Lance's I/O errors on a
//! file cut short say "failed to fill whole buffer" (or "Invalid argument") without a path;
//! on such an error the table's data files are checked, and the error names those that do not
//! end in Lance's footer (the magic `LANC`: a file cut short or overwritten does not).

use lance::Dataset;
use object_store::path::Path;

use crate::error::Error;
use crate::lance_nd::format::read_error;

/// Data files checked after a failed read, at most: the check is one size request and one
/// 4-byte read each, and a table may have any number of files.
const MAX_FILES_CHECKED: usize = 10_000;

/// Damaged files named, at most.
const MAX_FILES_NAMED: usize = 5;

/// `e`, Lance's error reading `dataset` at `uri`, with the damaged data files named when it
/// is an I/O error and some are.
pub(crate) async fn read_error_naming_files(
    dataset: &Dataset,
    uri: &str,
    e: lance::Error,
) -> Error {
    if !matches!(e, lance::Error::IO { .. }) {
        return read_error(uri, e);
    }
    let damaged = damaged_files(dataset).await;
    if damaged.is_empty() {
        return read_error(uri, e);
    }
    Error::DamagedFiles {
        uri: uri.to_string(),
        files: damaged.join(", "),
        source: e,
    }
}

/// The data files of `dataset` (in its own data folder) that do not end in a Lance footer,
/// each with what is wrong.
async fn damaged_files(dataset: &Dataset) -> Vec<String> {
    let Ok(store) = dataset.object_store(None).await else {
        return Vec::new();
    };
    let dir = dataset.data_dir();
    let files = (dataset.fragments().iter())
        .flat_map(|fragment| fragment.files.iter())
        .filter(|file| file.base_id.is_none())
        .take(MAX_FILES_CHECKED);
    let mut damaged = Vec::new();
    for file in files {
        let path = dir.clone().join(file.path.as_str());
        if let Err(reason) = check_footer(&store, &path).await {
            damaged.push(format!("data/{} ({reason})", file.path));
            if damaged.len() == MAX_FILES_NAMED {
                break;
            }
        }
    }
    damaged
}

async fn check_footer(store: &lance::io::ObjectStore, path: &Path) -> Result<(), String> {
    const MAGIC: &[u8] = b"LANC";
    let size = store.size(path).await.map_err(|e| e.to_string())?;
    let size = usize::try_from(size).map_err(|_| format!("{size} bytes"))?;
    if size < MAGIC.len() {
        return Err(format!("{size} bytes, shorter than a Lance footer"));
    }
    let reader = store.open(path).await.map_err(|e| e.to_string())?;
    let tail = (reader.get_range(size - MAGIC.len()..size).await).map_err(|e| e.to_string())?;
    if tail.as_ref() != MAGIC {
        return Err(format!(
            "{size} bytes, not ending in Lance's footer: cut short or overwritten"
        ));
    }
    Ok(())
}
