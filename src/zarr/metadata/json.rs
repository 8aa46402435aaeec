//! Metadata documents as JSON. Python's `json` module writes a non-finite float as a bare
//! `NaN`, `Infinity` or `-Infinity`, which is not JSON; zarr-python 2's attributes, xarray's
//! float attributes and VirtualiZarr's `.zattrs` carry them. Such a document is read with each
//! bare token quoted (`"NaN"`), the spelling Zarr gives non-finite fill values, which the CF
//! rules and the fill value parser read as the float.

use serde_json::Value;

use crate::error::{Error, Result};

/// Parses the metadata document at `path` (named in errors).
pub(crate) fn parse(path: &str, bytes: &[u8]) -> Result<Value> {
    from_python_json(bytes).map_err(|e| error(path, e))
}

/// Parses JSON as Python writes it; the error is the one of the document as given.
pub(crate) fn from_python_json(bytes: &[u8]) -> std::result::Result<Value, serde_json::Error> {
    let first = match serde_json::from_slice(bytes) {
        Ok(doc) => return Ok(doc),
        Err(e) => e,
    };
    // Tried only after a failure, so a valid document costs nothing more; the retry reads
    // the document once more, which the metadata size limit already bounds.
    match quote_non_finite(bytes).map(|quoted| serde_json::from_slice(&quoted)) {
        Some(Ok(doc)) => Ok(doc),
        _ => Err(first),
    }
}

fn error(path: &str, source: serde_json::Error) -> Error {
    // serde_json stops at 128 levels; what nests so deep is a struct type in practice.
    if source.to_string().starts_with("recursion limit exceeded") {
        return Error::InvalidMetadata {
            path: path.to_string(),
            reason: format!(
                "the document nests more than 128 levels deep ({source}): a struct data type \
                 nests at most {} levels",
                crate::zarr::metadata::data_type::MAX_STRUCT_DEPTH
            ),
        };
    }
    Error::MetadataJson {
        path: path.to_string(),
        source,
    }
}

/// `bytes` with every `NaN`, `Infinity` and `-Infinity` outside strings quoted; `None` when
/// there is none.
fn quote_non_finite(bytes: &[u8]) -> Option<Vec<u8>> {
    const TOKENS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let (mut in_string, mut escaped, mut found) = (false, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(token) = TOKENS.iter().find(|t| bytes[i..].starts_with(t)) {
            out.push(b'"');
            out.extend_from_slice(token);
            out.push(b'"');
            i += token.len();
            found = true;
            continue;
        }
        out.push(b);
        i += 1;
    }
    found.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bare_non_finite_floats_read_as_zarr_spells_them() {
        let doc = parse(
            "a/.zattrs",
            br#"{"_FillValue":NaN,"r":[Infinity, -Infinity, 1]}"#,
        );
        assert_eq!(
            doc.unwrap(),
            json!({"_FillValue": "NaN", "r": ["Infinity", "-Infinity", 1]})
        );
    }

    #[test]
    fn text_inside_strings_is_left_alone() {
        let doc = parse("a/.zattrs", br#"{"t":"NaN and \"Infinity\"", "x": NaN}"#).unwrap();
        assert_eq!(doc, json!({"t": "NaN and \"Infinity\"", "x": "NaN"}));
    }

    #[test]
    fn other_invalid_json_is_an_error_naming_the_document() {
        let err = parse("a/.zattrs", br#"{"x": NaN,}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a/.zattrs"), "{err}");
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(parse("b/zarr.json", b"{\"x\": nan}").is_err());
    }
}
