//! [`PathPattern`]: matches `{prefix}/{virtual_host_id}{suffix}` and extracts the id.

use std::borrow::Cow;

use mcp_core::VirtualHostId;
use percent_encoding::percent_decode_str;

/// The well-known prefix of RFC 9728 protected resource metadata.
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// Why a path did not yield a virtual host id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is not `{prefix}/{id}{suffix}`.
    #[error("path is not an MCP endpoint")]
    NotAnEndpoint,
    /// The id segment is empty, too long, not UTF-8 after percent-decoding, or has characters
    /// outside the allowed set.
    #[error("invalid virtual host id")]
    InvalidId,
}

/// Where the virtual host id sits in a request path, and what an id may contain.
///
/// The default is `/servers/{virtual_host_id}/mcp`, ids of 1 to 128 characters from
/// `A-Z a-z 0-9 . _ ~ -` (the URI "unreserved" set, so an id never needs escaping in a URL),
/// percent-decoded before checking: `team%2Da` is `team-a`, `a%2Fb` is rejected.
///
/// ```
/// use mcp_vhost::{PathError, PathPattern};
///
/// let p = PathPattern::default();
/// assert_eq!(p.extract("/servers/team-a/mcp").unwrap().as_str(), "team-a");
/// assert_eq!(p.extract("/servers/team%2Da/mcp").unwrap().as_str(), "team-a");
/// assert_eq!(p.extract("/servers/a%2Fb/mcp"), Err(PathError::InvalidId));
/// assert_eq!(p.extract("/servers/team-a/mcp/"), Err(PathError::NotAnEndpoint));
///
/// let wk = p.well_known();
/// assert_eq!(
///     wk.extract("/.well-known/oauth-protected-resource/servers/team-a/mcp").unwrap().as_str(),
///     "team-a"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    prefix: String,
    suffix: String,
    other_suffixes: Vec<String>,
    max_id_len: usize,
    extra_id_chars: String,
}

impl Default for PathPattern {
    fn default() -> Self {
        Self {
            prefix: "/servers".to_owned(),
            suffix: "/mcp".to_owned(),
            other_suffixes: Vec::new(),
            max_id_len: 128,
            extra_id_chars: String::new(),
        }
    }
}

impl PathPattern {
    /// The default pattern, `/servers/{virtual_host_id}/mcp`.
    pub fn new() -> Self {
        Self::default()
    }

    /// The path before the id segment (default `/servers`); `""` puts the id first.
    /// A trailing `/` is ignored.
    #[must_use]
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = normalise(prefix);
        self
    }

    /// The path after the id segment (default `/mcp`); `""` makes the id the last segment.
    #[must_use]
    pub fn suffix(mut self, suffix: &str) -> Self {
        self.suffix = normalise(suffix);
        self
    }

    /// Another path after the id segment that [`extract`](Self::extract) accepts too, e.g. `/sse`
    /// and `/messages` for the 2024-11-05 SSE transport next to `/mcp` (the inner service tells
    /// the endpoints apart by the path); [`path_for`](Self::path_for) keeps the main suffix.
    ///
    /// ```
    /// use mcp_vhost::PathPattern;
    ///
    /// let p = PathPattern::default().also_suffix("/sse");
    /// assert_eq!(p.extract("/servers/team-a/sse").unwrap().as_str(), "team-a");
    /// assert_eq!(p.extract("/servers/team-a/mcp").unwrap().as_str(), "team-a");
    /// assert!(p.extract("/servers/team-a/messages").is_err());
    /// ```
    #[must_use]
    pub fn also_suffix(mut self, suffix: &str) -> Self {
        self.other_suffixes.push(normalise(suffix));
        self
    }

    /// The longest accepted id, in bytes after percent-decoding (default 128).
    #[must_use]
    pub fn max_id_len(mut self, max: usize) -> Self {
        self.max_id_len = max;
        self
    }

    /// Extra characters allowed in ids besides `A-Z a-z 0-9 . _ ~ -` (e.g. `":@"`), among those a
    /// URI path segment carries unescaped: `! $ & ' ( ) * + , ; = : @`. Others are ignored: `/`
    /// would split the segment, and `%`, `?`, `#` or any character that needs escaping would make
    /// [`path_for`](Self::path_for) build a path that does not lead back to the id (found by the
    /// `vhost_path` fuzz target: with `%` allowed, the id `%41` came back as `A`).
    #[must_use]
    pub fn allow_chars(mut self, chars: &str) -> Self {
        self.extra_id_chars = chars
            .chars()
            .filter(|c| "!$&'()*+,;=:@".contains(*c))
            .collect();
        self
    }

    /// The RFC 9728 variant of this pattern: the same path under
    /// `/.well-known/oauth-protected-resource`, where clients look for protected resource metadata.
    #[must_use]
    pub fn well_known(&self) -> Self {
        Self {
            prefix: format!("{WELL_KNOWN_PREFIX}{}", self.prefix),
            ..self.clone()
        }
    }

    /// The path for an id, e.g. `/servers/team-a/mcp` (for building URLs such as the RFC 9728
    /// `resource`). Ids accepted by [`extract`](Self::extract) never need escaping.
    pub fn path_for(&self, id: &VirtualHostId) -> String {
        format!("{}/{}{}", self.prefix, id.as_str(), self.suffix)
    }

    /// Extracts the virtual host id from a request path (without query string).
    pub fn extract(&self, path: &str) -> Result<VirtualHostId, PathError> {
        let rest = path
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .ok_or(PathError::NotAnEndpoint)?;
        // The first suffix that leaves exactly one segment: with an empty main suffix, `x/sse`
        // must still match the `/sse` alternative.
        let raw = std::iter::once(&self.suffix)
            .chain(&self.other_suffixes)
            .filter_map(|suffix| rest.strip_suffix(suffix.as_str()))
            .find(|raw| !raw.contains('/'))
            .ok_or(PathError::NotAnEndpoint)?;
        let decoded: Cow<'_, str> = percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| PathError::InvalidId)?;
        // `.` and `..` are dot-segments: proxies and clients normalise them away, so such an id
        // could never be addressed reliably (and user configs refuse them as ids too).
        if decoded.is_empty()
            || decoded == "."
            || decoded == ".."
            || decoded.len() > self.max_id_len
            || !decoded.chars().all(|c| self.id_char(c))
        {
            return Err(PathError::InvalidId);
        }
        Ok(VirtualHostId::new(decoded.as_ref()))
    }

    fn id_char(&self, c: char) -> bool {
        c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '~' | '-')
            || self.extra_id_chars.contains(c)
    }
}

fn normalise(part: &str) -> String {
    let trimmed = part.trim_end_matches('/');
    if trimmed.is_empty() || trimmed.starts_with('/') {
        trimmed.to_owned()
    } else {
        format!("/{trimmed}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_everything_that_is_not_exactly_an_endpoint() {
        let p = PathPattern::default();
        for path in [
            "/",
            "/servers",
            "/servers/",
            "/servers/mcp",
            "/servers//mcp",
            "/servers/a/b/mcp",
            "/servers/a/mcpx",
            "/server/a/mcp",
            "/servers/a/mcp/x",
            "servers/a/mcp",
        ] {
            assert!(p.extract(path).is_err(), "{path}");
        }
        assert_eq!(p.extract("/servers//mcp"), Err(PathError::InvalidId));
    }

    #[test]
    fn checks_charset_length_and_encoding() {
        let p = PathPattern::default().max_id_len(8);
        assert!(p.extract("/servers/abcdefgh/mcp").is_ok());
        assert!(
            p.extract("/servers/.../mcp").is_ok(),
            "only dot-segments are refused"
        );
        assert_eq!(
            p.extract("/servers/abcdefghi/mcp"),
            Err(PathError::InvalidId)
        );
        for bad in [
            "a%20b", "%C3%A9", "%FF", "a:b", "a%00b", "a%2fb", ".", "..", "%2e", "%2E%2e",
        ] {
            assert_eq!(
                p.extract(&format!("/servers/{bad}/mcp")),
                Err(PathError::InvalidId),
                "{bad}"
            );
        }
        let p = p.allow_chars(":/");
        assert!(p.extract("/servers/a:b/mcp").is_ok());
        assert!(
            p.extract("/servers/a%2Fb/mcp").is_err(),
            "slash can never be allowed"
        );
    }

    #[test]
    fn custom_prefix_and_suffix() {
        let p = PathPattern::new().prefix("api/v1/").suffix("");
        assert_eq!(
            p.extract("/api/v1/x").map(|id| id.to_string()),
            Ok("x".to_owned())
        );
        assert_eq!(p.path_for(&VirtualHostId::new("x")), "/api/v1/x");
        let both = PathPattern::new().suffix("").also_suffix("sse");
        assert_eq!(
            both.extract("/servers/x/sse").map(|id| id.to_string()),
            Ok("x".to_owned())
        );
        assert_eq!(
            both.extract("/servers/x").map(|id| id.to_string()),
            Ok("x".to_owned())
        );
        assert_eq!(both.extract("/servers/x/y"), Err(PathError::NotAnEndpoint));
        assert_eq!(both.path_for(&VirtualHostId::new("x")), "/servers/x");
        let root = PathPattern::new().prefix("").suffix("/mcp");
        assert!(root.extract("/x/mcp").is_ok());
        assert_eq!(
            root.well_known().path_for(&VirtualHostId::new("x")),
            "/.well-known/oauth-protected-resource/x/mcp"
        );
    }
}
