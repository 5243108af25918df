#![no_main]
//! Arbitrary bytes as an AGD dataset's `manifest.json` (`Manifest::from_json`: serde plus the
//! checks `Manifest::read` makes), the file a dataset from a shared bucket is trusted through.
//!
//! Must hold: errors, never panics; an accepted manifest writes back (`to_json`) to JSON that is
//! accepted again and equal, and every directory it names (core groups and extra groups) is a plain
//! name inside the dataset: no `/`, no `..`, not hidden.

use libfuzzer_sys::fuzz_target;
use sortase_agd::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = Manifest::from_json(text) else {
        return;
    };
    let again = Manifest::from_json(&m.to_json()).expect("a written manifest reads back");
    assert_eq!(again, m);
    for g in &m.extra {
        for name in [&g.dir, &g.name] {
            assert!(
                !name.is_empty() && !name.contains('/') && !name.starts_with('.'),
                "{name:?}"
            );
        }
    }
});
