//! Property tests of virtual host path extraction (the `vhost_path` fuzz target in `fuzz/` drives
//! the same entry point): no panic on arbitrary paths, only ids within the rules, and
//! `path_for` → `extract` gives back every valid id.

use mcp_vhost::{PathError, PathPattern, VirtualHostId};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(256)
}

/// Ids the default pattern accepts (the dot-segments `.` and `..` are never ids).
fn valid_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._~-]{1,128}".prop_filter("not a dot-segment", |id| id != "." && id != "..")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn extract_never_panics_and_accepts_only_valid_ids(
        path in prop_oneof![
            any::<String>(),
            "/servers/[^/]{0,40}/mcp",
            "/servers/(%[0-9A-Fa-f]{2}|[a-z]){0,20}/mcp",
        ],
    ) {
        let pattern = PathPattern::default();
        for p in [pattern.clone(), pattern.well_known()] {
            if let Ok(id) = p.extract(&path) {
                let id = id.as_str();
                prop_assert!((1..=128).contains(&id.len()), "{:?}", id);
                prop_assert!(
                    id.chars().all(|c| c.is_ascii_alphanumeric() || ".-_~".contains(c)),
                    "{:?}", id
                );
            }
        }
    }

    #[test]
    fn path_for_then_extract_round_trips(id in valid_id()) {
        let id = VirtualHostId::new(id);
        let pattern = PathPattern::default();
        let custom = PathPattern::new().prefix("api/v1/").suffix("");
        for p in [pattern.well_known(), pattern, custom] {
            let path = p.path_for(&id);
            prop_assert_eq!(p.extract(&path), Ok(id.clone()));
        }
    }

    /// Percent-encoding every character of a valid id does not change what is extracted.
    #[test]
    fn percent_encoded_ids_decode_to_the_same_id(id in valid_id()) {
        let encoded = utf8_percent_encode(&id, NON_ALPHANUMERIC).to_string();
        let path = format!("/servers/{encoded}/mcp");
        prop_assert_eq!(PathPattern::default().extract(&path), Ok(VirtualHostId::new(id)));
    }

    #[test]
    fn ids_with_other_characters_are_refused(
        head in "[a-z]{0,5}",
        bad in "[^A-Za-z0-9._~/%-]",
        tail in "[a-z]{0,5}",
    ) {
        let path = format!("/servers/{head}{bad}{tail}/mcp");
        prop_assert_eq!(PathPattern::default().extract(&path), Err(PathError::InvalidId));
    }

    /// With every extra character a pattern may allow, `path_for` still leads back to the id.
    #[test]
    fn extra_characters_round_trip(id in "[A-Za-z0-9._~!$&'()*+,;=:@-]{3,40}") {
        let p = PathPattern::default().allow_chars("!$&'()*+,;=:@");
        let id = VirtualHostId::new(id);
        prop_assert_eq!(p.extract(&p.path_for(&id)), Ok(id));
    }
}

/// Regression (found by the `vhost_path` fuzz target): with `%` allowed, `/servers/%2541/mcp`
/// gave the id `%41`, whose `path_for` (`/servers/%41/mcp`) extracted as `A`. Characters that
/// need escaping in a path are never allowed.
#[test]
fn characters_needing_escapes_are_never_allowed() {
    let p = PathPattern::default().allow_chars("%?#/ \"<>^`{|}");
    for path in [
        "/servers/%2541/mcp",
        "/servers/a%3Fb/mcp",
        "/servers/a%23b/mcp",
        "/servers/a%2Fb/mcp",
        "/servers/a%20b/mcp",
        "/servers/a%22b/mcp",
    ] {
        assert_eq!(p.extract(path), Err(PathError::InvalidId), "{path}");
    }
    let p = PathPattern::default().allow_chars("%:@");
    assert_eq!(
        p.extract("/servers/a:b@c/mcp").map(|id| id.to_string()),
        Ok("a:b@c".to_owned())
    );
}
