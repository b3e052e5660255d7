//! [`Pattern`]: a name pattern with `*` wildcards, matched without allocating.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A name pattern: exact text, where `*` matches any run of characters (also none).
///
/// Used by conditions and the tool filter. There is no other special character, so tool names and
/// URIs (`test://notes/*`) need no escaping.
///
/// ```
/// use mcp_plugins::Pattern;
///
/// assert!(Pattern::new("delete_*").matches("delete_note"));
/// assert!(Pattern::new("*secret*").matches("my_secret_tool"));
/// assert!(Pattern::new("echo").matches("echo"));
/// assert!(!Pattern::new("echo").matches("echo2"));
/// assert!(Pattern::new("*").matches(""));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Pattern(Box<str>);

impl Pattern {
    /// A pattern from its text.
    pub fn new(text: impl Into<Box<str>>) -> Self {
        Self(text.into())
    }

    /// The pattern text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches. Linear-time wildcard matching with one backtrack point.
    pub fn matches(&self, name: &str) -> bool {
        let (p, n) = (self.0.as_bytes(), name.as_bytes());
        let (mut pi, mut ni) = (0, 0);
        // Position after the last `*` seen, and the name position it was tried at.
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && p[pi] == b'*' {
                pi += 1;
                star = Some((pi, ni));
            } else if pi < p.len() && p[pi] == n[ni] {
                pi += 1;
                ni += 1;
            } else if let Some((after, tried)) = star {
                pi = after;
                ni = tried + 1;
                star = Some((after, tried + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|b| *b == b'*')
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Err(serde::de::Error::custom("empty pattern"));
        }
        Ok(Pattern::new(text))
    }
}

/// Whether any pattern matches `name`.
pub(crate) fn any_matches(patterns: &[Pattern], name: &str) -> bool {
    patterns.iter().any(|p| p.matches(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_backtrack() {
        let p = Pattern::new("a*b*c");
        assert!(p.matches("abc"));
        assert!(p.matches("aXbYbZc"));
        assert!(!p.matches("aXbYbZ"));
        assert!(!p.matches("xabc"));
        assert!(Pattern::new("test://notes/*").matches("test://notes/item/1"));
        assert!(!Pattern::new("").matches("x"));
        assert!(Pattern::new("**").matches("anything"));
    }
}
