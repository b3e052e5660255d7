//! [`OriginPolicy`]: which browser `Origin`s may call the endpoint (DNS-rebinding protection).

use http::HeaderValue;
use url::Url;

/// Which `Origin` header values are accepted. Requests without `Origin` (SDK clients, agents,
/// curl) are always accepted; a present `Origin` must be allowed, else the router answers 403.
///
/// Entries are origins like `https://app.example` or `http://localhost:6274`; an entry without a
/// port matches every port of that scheme and host (`http://localhost` allows
/// `http://localhost:3000`).
///
/// ```
/// use http::HeaderValue;
/// use mcp_router::OriginPolicy;
///
/// let p = OriginPolicy::allow(["http://localhost", "https://app.example"]);
/// assert!(p.allows(&HeaderValue::from_static("http://localhost:6274")));
/// assert!(p.allows(&HeaderValue::from_static("https://app.example")));
/// assert!(!p.allows(&HeaderValue::from_static("https://evil.example")));
/// assert!(!OriginPolicy::default().allows(&HeaderValue::from_static("http://localhost")));
/// assert!(OriginPolicy::any().allows(&HeaderValue::from_static("https://evil.example")));
/// ```
#[derive(Debug, Clone, Default)]
pub struct OriginPolicy {
    any: bool,
    allowed: Vec<(String, String, Option<u16>)>,
}

impl OriginPolicy {
    /// Accepts the listed origins (unparsable entries are ignored).
    pub fn allow<I, S>(origins: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let allowed = origins
            .into_iter()
            .filter_map(|o| {
                let url = Url::parse(o.as_ref()).ok()?;
                Some((
                    url.scheme().to_owned(),
                    url.host_str()?.to_owned(),
                    url.port(),
                ))
            })
            .collect();
        Self {
            any: false,
            allowed,
        }
    }

    /// Accepts every origin (no DNS-rebinding protection: only behind another check).
    pub fn any() -> Self {
        Self {
            any: true,
            allowed: Vec::new(),
        }
    }

    /// Whether an `Origin` header value is accepted.
    pub fn allows(&self, origin: &HeaderValue) -> bool {
        if self.any {
            return true;
        }
        let Some(url) = origin.to_str().ok().and_then(|o| Url::parse(o).ok()) else {
            return false;
        };
        let Some(host) = url.host_str() else {
            return false;
        };
        self.allowed.iter().any(|(scheme, allowed_host, port)| {
            scheme == url.scheme()
                && allowed_host.eq_ignore_ascii_case(host)
                && port.is_none_or(|p| Some(p) == url.port())
        })
    }
}
