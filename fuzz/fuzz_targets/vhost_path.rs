//! `mcp_vhost::PathPattern::extract` on arbitrary paths and patterns: never panics, only accepts
//! ids within the pattern's rules, and `path_for` of an accepted id extracts that id again.
//!
//! Input: `prefix \0 suffix \0 allowed extra chars \0 path`; fewer parts use the default pattern.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_vhost::PathPattern;

fn check(pattern: &PathPattern, max_len: usize, extra: &str, path: &str) {
    let Ok(id) = pattern.extract(path) else {
        return;
    };
    let id_text = id.as_str();
    assert!(
        !id_text.is_empty() && id_text.len() <= max_len,
        "{id_text:?}"
    );
    assert!(
        id_text.chars().all(|c| c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '~' | '-')
            || ("!$&'()*+,;=:@".contains(c) && extra.contains(c))),
        "id {id_text:?} has a character outside the allowed set"
    );
    let again = pattern.path_for(&id);
    assert_eq!(
        pattern.extract(&again).as_ref().map(|id| id.as_str()),
        Ok(id_text),
        "path_for gave {again:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parts: Vec<&str> = text.splitn(4, '\0').collect();
    if let [prefix, suffix, extra, path] = parts[..] {
        let max_len = 1 + prefix.len() % 64;
        let pattern = PathPattern::new()
            .prefix(prefix)
            .suffix(suffix)
            .max_id_len(max_len)
            .allow_chars(extra);
        check(&pattern, max_len, extra, path);
        check(&pattern.well_known(), max_len, extra, path);
    } else {
        let pattern = PathPattern::default();
        check(&pattern, 128, "", &text);
        check(&pattern.well_known(), 128, "", &text);
    }
});
