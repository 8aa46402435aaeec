//! The configuration every generated-input property runs under: `PROPTEST_CASES` cases (the
//! README's long run sets it), else the property's own default; no failure files written.

use proptest::prelude::ProptestConfig;

pub(crate) fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
