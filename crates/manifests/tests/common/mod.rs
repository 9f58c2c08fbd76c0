//! Helpers shared by the manifest loading tests.

use lockstep_manifests::{Loaded, load_str};

/// Loads `text` as `test.yaml`, failing the test on an error.
pub fn ok(text: &str) -> Loaded {
    load_str("test.yaml", text).unwrap_or_else(|e| panic!("unexpected error: {e}"))
}

/// The error message of loading `text`, failing the test when it loads.
pub fn err(text: &str) -> String {
    match load_str("test.yaml", text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that `message` contains every part.
pub fn assert_contains(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "{message:?} should contain {part:?}"
        );
    }
}
