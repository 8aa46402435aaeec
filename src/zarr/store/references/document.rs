//! A Kerchunk reference document (<https://fsspec.github.io/kerchunk/spec.html>), v0 (a map
//! of keys) and v1 (`version`, `refs`, `templates`, `gen`): each key of a Zarr store is its
//! bytes inline, or a file elsewhere (`[url]`), or bytes of one (`[url, offset, length]`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use base64::Engine;
use serde_json::Value as Json;
use zarrs::storage::Bytes;

use super::template::{render, Value};

/// What one key of the store is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reference {
    /// Its bytes, written in the document.
    Inline(Bytes),
    /// Bytes of the file at `urls[url]`: all of it (`None`) or a range.
    File {
        url: usize,
        range: Option<Range<u64>>,
    },
}

/// The keys of a reference document, with the URLs they name as written (templates
/// rendered; resolved against the document's own location by the caller).
#[derive(Debug, Default)]
pub(super) struct References {
    pub keys: BTreeMap<String, Reference>,
    pub urls: Vec<String>,
}

/// Bytes a generated key is counted as beyond its key and URL: what a written one costs in a
/// document (brackets, quotes, offset, length). `gen` may not make more than a document of
/// `max_bytes` could hold.
pub(super) const GENERATED_OVERHEAD: u64 = 32;

impl References {
    /// Reads a document of at most `max_bytes` (the metadata limit it was fetched under);
    /// what `gen` makes is counted against the same limit.
    pub(super) fn parse(document: &[u8], max_bytes: u64) -> Result<Self, String> {
        let json: Json = crate::zarr::metadata::json::from_python_json(document)
            .map_err(|e| format!("not a Kerchunk reference document (JSON): {e}"))?;
        let Json::Object(top) = json else {
            return Err("not a Kerchunk reference document: expected a JSON object".into());
        };
        let mut references = References::default();
        let mut url_ids = HashMap::new();
        let Some(version) = top.get("version") else {
            // v0: the object is the keys.
            for (key, value) in &top {
                let reference = reference(
                    key,
                    value,
                    &HashMap::new(),
                    &mut references.urls,
                    &mut url_ids,
                )?;
                references.keys.insert(key.clone(), reference);
            }
            return Ok(references);
        };
        if version.as_u64() != Some(1) {
            return Err(format!(
                "reference document version {version}: versions 0 (no 'version') and 1 are read"
            ));
        }
        if let Some(other) = top
            .keys()
            .find(|k| !["version", "refs", "templates", "gen"].contains(&k.as_str()))
        {
            return Err(format!(
                "unknown member '{other}' of a version 1 reference document"
            ));
        }
        let mut names = HashMap::new();
        if let Some(templates) = top.get("templates") {
            let Json::Object(templates) = templates else {
                return Err("'templates' is not an object".into());
            };
            for (name, value) in templates {
                let Json::String(value) = value else {
                    return Err(format!("template '{name}' is not a string"));
                };
                names.insert(name.clone(), Value::Text(value.clone()));
            }
        }
        match top.get("refs") {
            Some(Json::Object(refs)) => {
                for (key, value) in refs {
                    let reference =
                        reference(key, value, &names, &mut references.urls, &mut url_ids)?;
                    references.keys.insert(key.clone(), reference);
                }
            }
            Some(_) => return Err("'refs' is not an object".into()),
            None => {}
        }
        match top.get("gen") {
            Some(Json::Array(entries)) => {
                let mut budget = max_bytes.saturating_sub(document.len() as u64);
                for (i, entry) in entries.iter().enumerate() {
                    generate(
                        entry,
                        &names,
                        &mut references,
                        &mut url_ids,
                        &mut budget,
                        max_bytes,
                    )
                    .map_err(|reason| format!("gen entry {i}: {reason}"))?;
                }
            }
            Some(_) => return Err("'gen' is not a list".into()),
            None => {}
        }
        Ok(references)
    }
}

/// The id of `url` in `urls`, added when new.
pub(super) fn url_id(
    url: String,
    urls: &mut Vec<String>,
    ids: &mut HashMap<String, usize>,
) -> usize {
    *ids.entry(url).or_insert_with_key(|url| {
        urls.push(url.clone());
        urls.len() - 1
    })
}

/// One key's value: a string (text, or `base64:` bytes), a JSON object (a metadata document
/// some writers store unquoted), `[url]` or `[url, offset, length]`.
fn reference(
    key: &str,
    value: &Json,
    names: &HashMap<String, Value>,
    urls: &mut Vec<String>,
    ids: &mut HashMap<String, usize>,
) -> Result<Reference, String> {
    let bad = |reason: &str| format!("key '{key}': {reason}");
    match value {
        Json::String(text) => Ok(Reference::Inline(match text.strip_prefix("base64:") {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| bad(&format!("invalid base64: {e}")))?
                .into(),
            // Kerchunk writes bytes that are valid UTF-8 as text.
            None => Bytes::copy_from_slice(text.as_bytes()),
        })),
        Json::Object(_) => Ok(Reference::Inline(value.to_string().into_bytes().into())),
        Json::Array(parts) => {
            let url = match parts.first() {
                Some(Json::String(url)) => render(url, names).map_err(|e| bad(&e))?,
                _ => return Err(bad("a reference list starts with its URL (a string)")),
            };
            let range = match parts.as_slice() {
                [_] => None,
                [_, offset, length] => {
                    let number = |v: &Json, what: &str| {
                        v.as_u64().ok_or_else(|| {
                            bad(&format!("the {what} {v} is not a non-negative integer"))
                        })
                    };
                    Some(
                        byte_range(number(offset, "offset")?, number(length, "length")?)
                            .map_err(|e| bad(&e))?,
                    )
                }
                _ => return Err(bad("expected [url] or [url, offset, length]")),
            };
            Ok(Reference::File {
                url: url_id(url, urls, ids),
                range,
            })
        }
        other => Err(bad(&format!("expected a string or a list, found {other}"))),
    }
}

fn byte_range(offset: u64, length: u64) -> Result<Range<u64>, String> {
    let end = offset
        .checked_add(length)
        .ok_or_else(|| format!("offset {offset} + length {length} overflows"))?;
    Ok(offset..end)
}

/// Adds the keys one `gen` entry makes: `key`, `url`, `offset` and `length` rendered for every
/// combination of its `dimensions` (each `{start, stop, step}` or a list of integers), the
/// last dimension varying fastest. What it would make is counted against `budget` before any
/// of it is made.
fn generate(
    entry: &Json,
    templates: &HashMap<String, Value>,
    references: &mut References,
    url_ids: &mut HashMap<String, usize>,
    budget: &mut u64,
    max_bytes: u64,
) -> Result<(), String> {
    let text = |name: &str| -> Result<String, String> {
        match entry.get(name) {
            Some(Json::String(s)) => Ok(s.clone()),
            Some(Json::Number(n)) => Ok(n.to_string()),
            Some(other) => Err(format!("'{name}' is {other}, not a template")),
            None => Err(format!("no '{name}'")),
        }
    };
    let (key_template, url_template) = (text("key")?, text("url")?);
    let offset_length = match (entry.get("offset"), entry.get("length")) {
        (None, None) => None,
        (Some(_), Some(_)) => Some((text("offset")?, text("length")?)),
        _ => return Err("'offset' and 'length' go together".into()),
    };
    let Some(Json::Object(dimensions)) = entry.get("dimensions") else {
        return Err("no 'dimensions' object".into());
    };
    let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
    let mut count: u64 = 1;
    for (name, spec) in dimensions {
        let len = axis_len(spec).map_err(|e| format!("dimension '{name}': {e}"))?;
        count = count.saturating_mul(len);
        axes.push((name.clone(), Vec::new()));
    }
    let each = (key_template.len() + url_template.len()) as u64 + GENERATED_OVERHEAD;
    let cost = count.saturating_mul(each);
    if cost > *budget {
        return Err(format!(
            "it makes {count} keys, more than a reference document of {max_bytes} bytes could \
             hold ({})",
            crate::limits::METADATA_BYTES
        ));
    }
    *budget -= cost;
    // Within the budget: each axis's values may now be listed.
    for ((_, values), spec) in axes.iter_mut().zip(dimensions.values()) {
        *values = axis_values(spec)?;
    }
    let mut names = templates.clone();
    let mut at = vec![0usize; axes.len()];
    for _ in 0..count {
        for ((name, values), &i) in axes.iter().zip(&at) {
            names.insert(name.clone(), Value::Int(values[i]));
        }
        let key = render(&key_template, &names)?;
        let url = url_id(
            render(&url_template, &names)?,
            &mut references.urls,
            url_ids,
        );
        let range = match &offset_length {
            None => None,
            Some((offset, length)) => {
                let number = |template: &str, what: &str| -> Result<u64, String> {
                    let value = render(template, &names)?;
                    value.trim().parse().map_err(|_| {
                        format!("the {what} '{value}' of key '{key}' is not a non-negative integer")
                    })
                };
                Some(byte_range(
                    number(offset, "offset")?,
                    number(length, "length")?,
                )?)
            }
        };
        references.keys.insert(key, Reference::File { url, range });
        // The next combination, the last axis fastest.
        for (i, (_, values)) in axes.iter().enumerate().rev() {
            at[i] += 1;
            if at[i] < values.len() {
                break;
            }
            at[i] = 0;
        }
    }
    Ok(())
}

/// `{start, stop, step}` (start 0 and step 1 by default) or a list of integers.
fn range_of(spec: &Json) -> Result<(i64, i64, i64), String> {
    let get = |name: &str, default: Option<i64>| match spec.get(name) {
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("'{name}' is {v}, not an integer")),
        None => default.ok_or_else(|| format!("no '{name}'")),
    };
    let (start, stop, step) = (
        get("start", Some(0))?,
        get("stop", None)?,
        get("step", Some(1))?,
    );
    if step <= 0 {
        return Err(format!("step {step}: steps are positive"));
    }
    Ok((start, stop, step))
}

/// How many values an axis has, known before any is made.
fn axis_len(spec: &Json) -> Result<u64, String> {
    match spec {
        Json::Array(values) => Ok(values.len() as u64),
        Json::Object(_) => {
            let (start, stop, step) = range_of(spec)?;
            let span = (stop as i128 - start as i128).max(0) as u128;
            Ok(span.div_ceil(step as u128).min(u64::MAX as u128) as u64)
        }
        other => Err(format!(
            "expected {{start, stop, step}} or a list, found {other}"
        )),
    }
}

fn axis_values(spec: &Json) -> Result<Vec<i64>, String> {
    match spec {
        Json::Array(values) => values
            .iter()
            .map(|v| v.as_i64().ok_or_else(|| format!("{v} is not an integer")))
            .collect(),
        _ => {
            let (start, stop, step) = range_of(spec)?;
            Ok((start..stop).step_by(step as usize).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(doc: &str) -> Result<References, String> {
        References::parse(doc.as_bytes(), 1 << 20)
    }

    fn file(refs: &References, key: &str) -> (String, Option<Range<u64>>) {
        match &refs.keys[key] {
            Reference::File { url, range } => (refs.urls[*url].clone(), range.clone()),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn version_0_keys_are_inline_text_base64_or_file_ranges() {
        let refs = parse(
            r#"{".zgroup": "{\"zarr_format\":2}", "a/0": "base64:AAEC", "a/1": ["data.nc", 10, 5],
                "a/2": ["s3://b/whole.bin"], "b/.zattrs": {"x": 1}}"#,
        )
        .unwrap();
        assert_eq!(
            refs.keys[".zgroup"],
            Reference::Inline(Bytes::from_static(b"{\"zarr_format\":2}"))
        );
        assert_eq!(
            refs.keys["a/0"],
            Reference::Inline(Bytes::from_static(&[0, 1, 2]))
        );
        assert_eq!(file(&refs, "a/1"), ("data.nc".into(), Some(10..15)));
        assert_eq!(file(&refs, "a/2"), ("s3://b/whole.bin".into(), None));
        assert_eq!(
            refs.keys["b/.zattrs"],
            Reference::Inline(Bytes::from_static(b"{\"x\":1}"))
        );
    }

    #[test]
    fn version_1_renders_templates_and_generates_keys() {
        let refs = parse(
            r#"{"version": 1, "templates": {"u": "s3://b/run"},
                "refs": {"x/0": ["{{u}}/f.nc", 0, 8]},
                "gen": [{"key": "y/{{i}}.{{j}}", "url": "{{u}}/g_{{i}}.nc",
                         "offset": "{{(j + 1) * 100}}", "length": "100",
                         "dimensions": {"i": {"stop": 2}, "j": [0, 5]}}]}"#,
        )
        .unwrap();
        assert_eq!(file(&refs, "x/0"), ("s3://b/run/f.nc".into(), Some(0..8)));
        assert_eq!(
            file(&refs, "y/0.0"),
            ("s3://b/run/g_0.nc".into(), Some(100..200))
        );
        assert_eq!(
            file(&refs, "y/1.5"),
            ("s3://b/run/g_1.nc".into(), Some(600..700))
        );
        assert_eq!(refs.keys.len(), 5);
        // One id per distinct URL.
        assert_eq!(refs.urls.len(), 3);
    }

    #[test]
    fn gen_beyond_what_a_document_could_hold_is_refused_before_it_is_made() {
        let doc = r#"{"version": 1, "gen": [{"key": "k/{{i}}", "url": "f.nc",
                      "dimensions": {"i": {"stop": 9223372036854775807}, "j": {"stop": 1000000}}}]}"#;
        let err = parse(doc).unwrap_err();
        assert!(err.contains("gen entry 0"), "{err}");
        assert!(err.contains("NDFUSION_MAX_METADATA_BYTES"), "{err}");
    }

    #[test]
    fn malformed_documents_name_the_key_and_what_is_wrong() {
        for (doc, says) in [
            ("[1]", "expected a JSON object"),
            ("{not json", "JSON"),
            (r#"{"version": 2}"#, "version 2"),
            (r#"{"version": 1, "refz": {}}"#, "unknown member 'refz'"),
            (r#"{"a/0": 7}"#, "key 'a/0': expected a string or a list"),
            (r#"{"a/0": "base64:!!"}"#, "key 'a/0': invalid base64"),
            (r#"{"a/0": ["f.nc", -1, 5]}"#, "key 'a/0': the offset -1"),
            (r#"{"a/0": ["f.nc", 1]}"#, "key 'a/0': expected [url]"),
            (
                r#"{"a/0": [3, 1, 2]}"#,
                "key 'a/0': a reference list starts with its URL",
            ),
            (r#"{"a/0": ["f.nc", 18446744073709551615, 5]}"#, "overflows"),
            (
                r#"{"version": 1, "refs": {"a/0": ["{{v}}/f.nc"]}}"#,
                "'v' is neither",
            ),
            (
                r#"{"version": 1, "gen": [{"key": "k", "url": "u", "dimensions": {"i": {"stop": 2, "step": 0}}}]}"#,
                "steps are positive",
            ),
            (
                r#"{"version": 1, "gen": [{"key": "k", "url": "u", "offset": "1", "dimensions": {}}]}"#,
                "go together",
            ),
        ] {
            let err = parse(doc).unwrap_err();
            assert!(err.contains(says), "{doc}: {err}");
        }
    }
}
