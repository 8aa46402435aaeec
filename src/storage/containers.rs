//! The `virtual_chunk_containers` option: which of an Icechunk repository's virtual chunk
//! containers a table may read chunks from, and where a Kerchunk reference file's references
//! may point outside its own folder.

use std::fmt;

use crate::error::{Error, Result};

/// One entry of `virtual_chunk_containers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ContainerGrant {
    /// `file:///data/nc/`, `s3://bucket/nc/`: the container with that URL prefix.
    Prefix(String),
    /// `nc=file:///data/nc/`: the container named `nc` (its chunks have relative
    /// `vcc://nc/...` locations), whose files are under that prefix here.
    Moved { name: String, prefix: String },
}

impl ContainerGrant {
    /// Where the container's files are.
    #[cfg_attr(not(feature = "icechunk"), allow(dead_code))]
    pub(crate) fn prefix(&self) -> &str {
        match self {
            ContainerGrant::Prefix(prefix) | ContainerGrant::Moved { prefix, .. } => prefix,
        }
    }
}

impl fmt::Display for ContainerGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContainerGrant::Prefix(prefix) => f.write_str(prefix),
            ContainerGrant::Moved { name, prefix } => write!(f, "{name}={prefix}"),
        }
    }
}

/// The comma-separated entries of the option, each a URL prefix ending in `/` or
/// `name=prefix`.
pub(crate) fn parse_grants(value: &str) -> Result<Vec<ContainerGrant>> {
    let invalid = |entry: &str, reason: &str| Error::InvalidOption {
        option: "virtual_chunk_containers".into(),
        reason: format!("'{entry}': {reason}"),
    };
    let mut grants = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, prefix) = match entry.split_once('=') {
            Some((name, prefix)) if !name.contains("://") => (Some(name.trim()), prefix.trim()),
            _ => (None, entry),
        };
        if !prefix.contains("://") {
            return Err(invalid(
                entry,
                "expected a URL prefix (file:///data/nc/, s3://bucket/nc/) or name=prefix",
            ));
        }
        if !prefix.ends_with('/') {
            return Err(invalid(entry, "a container's URL prefix ends with '/'"));
        }
        grants.push(match name {
            Some("") => return Err(invalid(entry, "the container name is empty")),
            Some(name) => ContainerGrant::Moved {
                name: name.to_string(),
                prefix: prefix.to_string(),
            },
            None => ContainerGrant::Prefix(prefix.to_string()),
        });
    }
    if grants.is_empty() {
        return Err(invalid(value, "no container given"));
    }
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_moved_named_containers_are_read() {
        let grants = parse_grants("file:///data/nc/, nc=s3://b/nc/").unwrap();
        assert_eq!(
            grants,
            vec![
                ContainerGrant::Prefix("file:///data/nc/".into()),
                ContainerGrant::Moved {
                    name: "nc".into(),
                    prefix: "s3://b/nc/".into()
                }
            ]
        );
    }

    #[test]
    fn malformed_entries_name_the_option_and_the_entry() {
        for (value, says) in [
            ("data/nc/", "expected a URL prefix"),
            ("file:///data/nc", "ends with '/'"),
            ("=file:///x/", "name is empty"),
            (" , ", "no container given"),
        ] {
            let err = parse_grants(value).unwrap_err().to_string();
            assert!(err.contains("virtual_chunk_containers"), "{err}");
            assert!(err.contains(says), "{value}: {err}");
        }
    }
}
