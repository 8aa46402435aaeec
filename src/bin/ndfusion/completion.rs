//! The REPL's line editor helper: Tab completion and multi-line statements.
//!
//! Completion offers, by where the cursor is: backslash commands at the start of a line;
//! local paths inside `LOCATION '...'`; the `OPTIONS` keys of the format named in
//! `STORED AS` inside `OPTIONS (...)`; formats after `STORED AS`; and otherwise SQL keywords,
//! table names and the columns (struct fields as `point.x`) of the tables the statement
//! names (of all tables while it names none). Names come from a snapshot of the catalog the REPL takes after each statement: the
//! editor cannot wait on the async catalog while a key is pressed.
//!
//! A statement spans lines until one ends with `;`: the editor keeps them as one entry, so
//! the whole statement is edited, and recalled from history, as one.

use std::borrow::Cow;
use std::path::Path;

use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::prelude::SessionContext;
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

/// The backslash commands, with what each does.
pub const COMMANDS: &[(&str, &str)] = &[
    ("\\d", "list tables; \\d NAME describes one"),
    (
        "\\options",
        "the OPTIONS of each STORED AS format and of COPY",
    ),
    ("\\x", "one column per line (on, off; toggles without)"),
    ("\\maxrows", "rows a table shows: N or all"),
    ("\\timing", "print each statement's time (on, off)"),
    (
        "\\plot",
        "draw the last query's result (x, y: a line; x, y, value: a heat map); FILE.png",
    ),
    ("\\?", "this help"),
    ("\\q", "quit (or Ctrl-D)"),
];

/// Words completed in any case (offered in the case the user types).
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "HAVING",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "LIKE",
    "IS",
    "NULL",
    "DISTINCT",
    "JOIN",
    "LEFT",
    "RIGHT",
    "INNER",
    "OUTER",
    "FULL",
    "CROSS",
    "ON",
    "USING",
    "UNION",
    "ALL",
    "WITH",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "ASC",
    "DESC",
    "NULLS",
    "FIRST",
    "LAST",
    "CAST",
    "CREATE",
    "EXTERNAL",
    "TABLE",
    "VIEW",
    "DROP",
    "IF",
    "EXISTS",
    "STORED",
    "LOCATION",
    "OPTIONS",
    "PARTITIONED",
    "COPY",
    "TO",
    "INSERT",
    "INTO",
    "VALUES",
    "EXPLAIN",
    "ANALYZE",
    "VERBOSE",
    "DESCRIBE",
    "SHOW",
    "TABLES",
    "COLUMNS",
    "SET",
    "TRUE",
    "FALSE",
    "INTERVAL",
    "TIMESTAMP",
    "DATE",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "date_trunc",
    "date_bin",
    "arrow_typeof",
];

/// What completion knows of the session: taken by [`Catalog::snapshot`] between statements.
#[derive(Debug, Default)]
pub struct Catalog {
    /// Tables of the default schema, with their columns (struct fields as `a.b`).
    tables: Vec<(String, Vec<String>)>,
}

impl Catalog {
    /// The tables and columns of `ctx`'s default catalog and schema.
    pub async fn snapshot(ctx: &SessionContext) -> Catalog {
        let state = ctx.state();
        let options = state.config().options();
        let schema = ctx
            .catalog(&options.catalog.default_catalog)
            .and_then(|c| c.schema(&options.catalog.default_schema));
        let Some(schema) = schema else {
            return Catalog::default();
        };
        let mut names = schema.table_names();
        names.sort();
        let mut tables = Vec::with_capacity(names.len());
        for name in names {
            let mut columns = Vec::new();
            if let Ok(Some(table)) = schema.table(&name).await {
                for field in table.schema().fields() {
                    column_paths(field, "", &mut columns);
                }
            }
            tables.push((name, columns));
        }
        Catalog { tables }
    }
}

/// `field`'s name and, for a struct, its fields' paths (`point`, `point.x`, `point.y`).
fn column_paths(field: &Field, prefix: &str, out: &mut Vec<String>) {
    let path = format!("{prefix}{}", field.name());
    if let DataType::Struct(fields) = field.data_type() {
        for child in fields {
            column_paths(child, &format!("{path}."), out);
        }
    }
    out.push(path);
}

/// The REPL's helper: completion from a catalog snapshot, statements ended by `;`.
#[derive(Default)]
pub struct ReplHelper {
    pub catalog: Catalog,
}

impl ReplHelper {
    /// What completes the text before `pos` in `line`: where the replaced text starts and the
    /// candidates.
    fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        let upper = before.to_uppercase();
        if before.trim_start().starts_with('\\') && !before.trim_start().contains(' ') {
            let start = before.len() - before.trim_start().len();
            let word = &before[start..];
            return (start, starting_with(COMMANDS.iter().map(|c| c.0), word));
        }
        if let Some(quote) = open_quote(before) {
            let quoted = &before[quote + 1..];
            let ahead = upper[..quote].trim_end();
            if ahead.ends_with("LOCATION") {
                return (quote + 1, paths(quoted));
            }
            if let Some(options) = option_position(ahead) {
                let keys = self.option_keys(&upper[..options]);
                return (
                    quote + 1,
                    starting_with(keys.iter().map(String::as_str), quoted),
                );
            }
            return (pos, Vec::new());
        }
        let start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map_or(0, |i| {
                i + before[i..].chars().next().map_or(1, char::len_utf8)
            });
        let word = &before[start..];
        if upper[..start].trim_end().ends_with("STORED AS") {
            let formats = ndfusion::table_kinds().iter().map(|k| k.stored_as());
            return (start, starting_with_any_case(formats, word));
        }
        let mut found = starting_with_any_case(KEYWORDS.iter().copied(), word);
        found.extend(starting_with(
            self.catalog.tables.iter().map(|t| t.0.as_str()),
            word,
        ));
        // The columns of the tables the statement names; of every table before it names one
        // (`SELECT tem` is typed before `FROM ocean`).
        let tables = &self.catalog.tables;
        let named = tables.iter().any(|(table, _)| names_table(line, table));
        for (table, columns) in tables {
            if !named || names_table(line, table) {
                found.extend(starting_with(columns.iter().map(String::as_str), word));
            }
        }
        found.sort();
        found.dedup();
        (start, found)
    }

    /// The option keys of the format `ahead` (upper case) names last in `STORED AS`, with
    /// the write options after `COPY`.
    fn option_keys(&self, ahead: &str) -> Vec<String> {
        let Some(at) = ahead.rfind("STORED AS") else {
            return Vec::new();
        };
        let format = ahead[at + "STORED AS".len()..].split_whitespace().next();
        let Some(kind) = (ndfusion::table_kinds().iter())
            .find(|k| Some(k.stored_as().to_uppercase().as_str()) == format)
        else {
            return Vec::new();
        };
        let writing = ahead.trim_start().starts_with("COPY");
        let mut keys: Vec<String> = match writing {
            true => (kind.documented_write_options().iter())
                .map(|(k, _)| k.to_string())
                .collect(),
            false => kind
                .documented_options()
                .iter()
                .map(|(k, _)| k.to_string())
                .collect(),
        };
        if let Some(other) = kind.takes_options_of().filter(|_| !writing) {
            let other = ndfusion::table_kinds()
                .iter()
                .find(|k| k.stored_as() == other);
            for (key, _) in other.map(|k| k.documented_options()).unwrap_or_default() {
                keys.push(key.to_string());
            }
        }
        keys
    }
}

/// Where the quote left open before the cursor starts, if one is.
fn open_quote(before: &str) -> Option<usize> {
    let mut open = None;
    for (i, c) in before.char_indices() {
        if c == '\'' {
            open = match open {
                Some(_) => None,
                None => Some(i),
            };
        }
    }
    open
}

/// Whether the cursor is inside `OPTIONS (...)` at a key: `ahead` (the text before the
/// quote, upper case) ends with `OPTIONS (` or a previous key and value pair followed by a
/// comma. Returns where `OPTIONS` starts.
fn option_position(ahead: &str) -> Option<usize> {
    let at = ahead.rfind("OPTIONS")?;
    let inside = ahead[at + "OPTIONS".len()..].trim();
    let at_key = inside == "(" || (inside.starts_with('(') && inside.ends_with(','));
    (at_key && !inside.contains(')')).then_some(at)
}

/// Whether `line` names `table` as a word.
fn names_table(line: &str, table: &str) -> bool {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == table)
}

/// The local paths that complete `partial`: the entries of its folder starting with its last
/// part, folders ending in `/`.
fn paths(partial: &str) -> Vec<String> {
    let (folder, prefix) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let read = if folder.is_empty() {
        Path::new(".")
    } else {
        Path::new(folder)
    };
    let Ok(entries) = std::fs::read_dir(read) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            let slash = if entry.path().is_dir() { "/" } else { "" };
            Some(format!("{folder}{name}{slash}"))
        })
        .collect();
    found.sort();
    found
}

fn starting_with<'a>(words: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    words
        .filter(|w| w.starts_with(prefix) && *w != prefix)
        .map(str::to_string)
        .collect()
}

/// Words starting with `prefix` in any case, in the case of `prefix` (lower case when it is
/// all lower case).
fn starting_with_any_case<'a>(words: impl Iterator<Item = &'a str>, prefix: &str) -> Vec<String> {
    if prefix.is_empty() {
        return Vec::new();
    }
    let lower = prefix.chars().all(|c| !c.is_uppercase());
    words
        .filter(|w| w.to_uppercase().starts_with(&prefix.to_uppercase()))
        .map(|w| match lower {
            true => w.to_lowercase(),
            false => w.to_string(),
        })
        .filter(|w| w != prefix)
        .collect()
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, words) = self.candidates(line, pos);
        let pairs = words
            .into_iter()
            .map(|word| Pair {
                display: word.clone(),
                replacement: word,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Validator for ReplHelper {
    /// A statement is whole when it ends with `;`; a backslash command is a line.
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input().trim();
        let whole = input.is_empty() || input.starts_with('\\') || input.ends_with(';');
        Ok(match whole {
            true => ValidationResult::Valid(None),
            false => ValidationResult::Incomplete,
        })
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        _default: bool,
    ) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Helper for ReplHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> ReplHelper {
        ReplHelper {
            catalog: Catalog {
                tables: vec![
                    (
                        "ocean".into(),
                        vec!["day".into(), "depth".into(), "temperature".into()],
                    ),
                    (
                        "points".into(),
                        vec![
                            "id".into(),
                            "point.x".into(),
                            "point.y".into(),
                            "point".into(),
                        ],
                    ),
                ],
            },
        }
    }

    fn complete(line: &str) -> Vec<String> {
        helper().candidates(line, line.len()).1
    }

    #[test]
    fn keywords_tables_and_the_columns_of_tables_named() {
        assert!(complete("SEL").contains(&"SELECT".to_string()));
        assert!(complete("sel").contains(&"select".to_string()));
        assert_eq!(complete("SELECT * FROM oc"), ["ocean"]);
        assert_eq!(complete("SELECT tem"), ["temperature"]);
        assert_eq!(
            complete("SELECT i FROM points WHERE poi"),
            ["point", "point.x", "point.y", "points"]
        );
        let line = "SELECT tem FROM ocean";
        assert_eq!(
            helper().candidates(line, 10),
            (7, vec!["temperature".into()])
        );
        let line = "SELECT point. FROM points";
        assert_eq!(
            helper().candidates(line, 13).1,
            ["point.x".to_string(), "point.y".to_string()]
        );
    }

    #[test]
    fn formats_option_keys_and_commands() {
        assert!(complete("CREATE EXTERNAL TABLE t STORED AS za").contains(&"zarr".to_string()));
        let keys =
            complete("CREATE EXTERNAL TABLE t STORED AS ICECHUNK LOCATION 'r' OPTIONS ('bra");
        assert_eq!(keys, ["branch"]);
        let keys =
            complete("CREATE EXTERNAL TABLE t STORED AS zarr LOCATION 'r' OPTIONS ('x' 'y', '");
        assert!(keys.contains(&"variables".to_string()), "{keys:?}");
        assert_eq!(complete("\\ti"), ["\\timing"]);
        assert_eq!(complete("\\d"), Vec::<String>::new());
    }

    #[test]
    fn local_paths_inside_location() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::create_dir(folder.path().join("sea.zarr")).unwrap();
        std::fs::write(folder.path().join("notes.txt"), "").unwrap();
        let at = folder.path().display();
        let found = complete(&format!(
            "CREATE EXTERNAL TABLE s STORED AS ZARR LOCATION '{at}/se"
        ));
        assert_eq!(found, [format!("{at}/sea.zarr/")]);
    }
}
