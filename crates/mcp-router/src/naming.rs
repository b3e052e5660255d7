//! Public names: how backend items are named in merged lists, and how a public name is traced
//! back to the backend that owns it (book: docs/src/architecture.md).
//!
//! - Tools and prompts: `<backend>-<name>`; resources and resource templates: `<backend>-<uri>`
//!   (the URI itself is prefixed, as in the original design: `weather-file:///a` reads `file:///a`
//!   from backend `weather`; a backend name is a valid URI-scheme prefix, so the result is still a
//!   URI).
//! - `naming = "auto"` with exactly one backend leaves every name unchanged.
//! - A backend's `aliases` map a public name (taken literally, not prefixed) to an upstream tool or
//!   prompt name: `{"wx": "get_current_weather"}` exposes `get_current_weather` as `wx`.
//! - Backend names may contain `-`: a public name is split on every configured backend name it
//!   starts with, longest first. When more than one backend could own it, the caller decides by
//!   asking those backends what they expose ([`Resolution::Several`]).

use std::borrow::Cow;

use mcp_config_store::{Naming, VirtualHostConfig};
use mcp_core::ItemKind;

/// One backend item a public name may stand for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The backend's configured name.
    pub backend: &'a str,
    /// The item's name (or URI) at the backend.
    pub upstream: Cow<'a, str>,
}

/// What a public name resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resolution<'a> {
    /// No configured backend can own it.
    None,
    /// Exactly one backend can own it.
    One(Target<'a>),
    /// Several backends could own it, longest backend name first; only asking them tells which.
    Several(Vec<Target<'a>>),
}

/// Naming rules of one virtual host.
#[derive(Clone, Copy, Debug)]
pub struct Namer<'a> {
    vhost: &'a VirtualHostConfig,
    prefixing: bool,
}

impl<'a> Namer<'a> {
    /// The rules for a virtual host.
    pub fn new(vhost: &'a VirtualHostConfig) -> Self {
        let prefixing = !(vhost.naming == Naming::Auto && vhost.backends.len() == 1);
        Self { vhost, prefixing }
    }

    /// Whether names carry the `<backend>-` prefix.
    pub fn prefixing(&self) -> bool {
        self.prefixing
    }

    /// The public name of a backend item.
    pub fn public(&self, backend: &str, upstream: &'a str, kind: ItemKind) -> Cow<'a, str> {
        if kind != ItemKind::Resource
            && let Some(alias) = self.alias_for(backend, upstream)
        {
            return Cow::Owned(alias.to_owned());
        }
        if self.prefixing {
            Cow::Owned(format!("{backend}-{upstream}"))
        } else {
            Cow::Borrowed(upstream)
        }
    }

    fn alias_for(&self, backend: &str, upstream: &str) -> Option<&'a str> {
        let config = self.vhost.backends.get(backend)?;
        config
            .aliases
            .iter()
            .find(|(_, target)| target.as_str() == upstream)
            .map(|(public, _)| public.as_str())
    }

    /// Traces a public name back to the backend items it may stand for.
    pub fn resolve<'n>(&self, public: &'n str, kind: ItemKind) -> Resolution<'a>
    where
        'n: 'a,
    {
        let mut targets: Vec<Target<'a>> = Vec::new();
        if kind != ItemKind::Resource {
            for (backend, config) in &self.vhost.backends {
                if let Some(upstream) = config.aliases.get(public) {
                    targets.push(Target {
                        backend: backend.as_str(),
                        upstream: Cow::Borrowed(upstream.as_str()),
                    });
                }
            }
        }
        if self.prefixing {
            let mut by_prefix: Vec<Target<'a>> = self
                .vhost
                .backends
                .keys()
                .filter_map(|backend| {
                    let rest = public.strip_prefix(backend.as_str())?.strip_prefix('-')?;
                    (!rest.is_empty()).then_some(Target {
                        backend: backend.as_str(),
                        upstream: Cow::Borrowed(rest),
                    })
                })
                .collect();
            by_prefix.sort_by_key(|t| std::cmp::Reverse(t.backend.len()));
            targets.extend(by_prefix);
        } else if let Some(backend) = self.vhost.backends.keys().next() {
            targets.push(Target {
                backend: backend.as_str(),
                upstream: Cow::Borrowed(public),
            });
        }
        targets.dedup();
        match targets.len() {
            0 => Resolution::None,
            1 => Resolution::One(targets.remove(0)),
            _ => Resolution::Several(targets),
        }
    }
}

/// Why a public name may not be listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameProblem {
    /// Longer than the configured limit.
    TooLong,
    /// A tool name outside `A-Z a-z 0-9 _ . -` (the spec's tool name charset), or empty.
    InvalidCharacters,
}

impl NameProblem {
    /// A short reason for the degraded marker.
    pub fn reason(self) -> &'static str {
        match self {
            Self::TooLong => "name too long",
            Self::InvalidCharacters => "invalid name",
        }
    }
}

/// Checks a public name against the limit and, for tools, the spec's character set.
pub fn check_public_name(name: &str, kind: ItemKind, max_len: usize) -> Result<(), NameProblem> {
    if kind != ItemKind::Resource && name.chars().count() > max_len {
        return Err(NameProblem::TooLong);
    }
    let charset_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if kind == ItemKind::Tool && (name.is_empty() || !name.chars().all(charset_ok)) {
        return Err(NameProblem::InvalidCharacters);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vhost(json: &str) -> VirtualHostConfig {
        serde_json::from_str(json).expect("valid vhost config")
    }

    const TWO: &str = r#"{"backends":{
        "a":{"url":"http://127.0.0.1:1/mcp","aliases":{"wx":"get_weather"}},
        "a-b":{"url":"http://127.0.0.1:2/mcp"}}}"#;

    #[test]
    fn prefixes_and_aliases() {
        let v = vhost(TWO);
        let n = Namer::new(&v);
        assert_eq!(n.public("a", "echo", ItemKind::Tool), "a-echo");
        assert_eq!(n.public("a", "get_weather", ItemKind::Tool), "wx");
        assert_eq!(
            n.public("a", "get_weather", ItemKind::Resource),
            "a-get_weather"
        );
        assert_eq!(
            n.public("a-b", "file:///x", ItemKind::Resource),
            "a-b-file:///x"
        );
    }

    #[test]
    fn resolves_longest_first_and_reports_several() {
        let v = vhost(TWO);
        let n = Namer::new(&v);
        assert_eq!(
            n.resolve("a-echo", ItemKind::Tool),
            Resolution::One(Target {
                backend: "a",
                upstream: "echo".into()
            })
        );
        assert_eq!(
            n.resolve("a-b-x", ItemKind::Tool),
            Resolution::Several(vec![
                Target {
                    backend: "a-b",
                    upstream: "x".into()
                },
                Target {
                    backend: "a",
                    upstream: "b-x".into()
                },
            ])
        );
        assert_eq!(
            n.resolve("wx", ItemKind::Tool),
            Resolution::One(Target {
                backend: "a",
                upstream: "get_weather".into()
            })
        );
        assert_eq!(n.resolve("wx", ItemKind::Resource), Resolution::None);
        assert_eq!(n.resolve("zzz-echo", ItemKind::Tool), Resolution::None);
        assert_eq!(n.resolve("a-", ItemKind::Tool), Resolution::None);
        assert_eq!(
            n.resolve("a-b-file:///x", ItemKind::Resource),
            Resolution::Several(vec![
                Target {
                    backend: "a-b",
                    upstream: "file:///x".into()
                },
                Target {
                    backend: "a",
                    upstream: "b-file:///x".into()
                },
            ])
        );
    }

    #[test]
    fn auto_naming_with_one_backend_keeps_names() {
        let v = vhost(r#"{"naming":"auto","backends":{"only":{"url":"http://127.0.0.1:1/mcp"}}}"#);
        let n = Namer::new(&v);
        assert!(!n.prefixing());
        assert_eq!(n.public("only", "echo", ItemKind::Tool), "echo");
        assert_eq!(
            n.resolve("echo", ItemKind::Tool),
            Resolution::One(Target {
                backend: "only",
                upstream: "echo".into()
            })
        );
        let two = vhost(&TWO.replace("{\"backends\"", "{\"naming\":\"auto\",\"backends\""));
        assert!(
            Namer::new(&two).prefixing(),
            "auto with two backends still prefixes"
        );
    }

    #[test]
    fn name_checks() {
        assert_eq!(check_public_name("a-echo", ItemKind::Tool, 128), Ok(()));
        assert_eq!(
            check_public_name("a-echo", ItemKind::Tool, 5),
            Err(NameProblem::TooLong)
        );
        assert_eq!(
            check_public_name("a echo", ItemKind::Tool, 128),
            Err(NameProblem::InvalidCharacters)
        );
        assert_eq!(check_public_name("a echo", ItemKind::Prompt, 128), Ok(()));
        assert_eq!(
            check_public_name(&"x".repeat(300), ItemKind::Resource, 128),
            Ok(())
        );
    }
}
