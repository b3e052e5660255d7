//! What the router needs from the layers in front of it, re-checked (book: docs/src/failure-modes.md): the virtual
//! host id, the caller's principal and user configuration, and the virtual host's configuration.

use std::sync::Arc;

use http::Extensions;
use mcp_config_store::{ConfigSource, UserConfig, VirtualHost, VirtualHostConfig};
use mcp_core::{Era, ErrorObject, Principal, ValidUntil, VirtualHostId, error_code};

/// Largest client capability object accepted (`initialize` params, 2026-07-28 `_meta`), in bytes
/// of JSON. Real clients send well under a kilobyte; the object is kept with every 2025 session
/// and sent to every backend, so its size is what a caller could make the gateway hold.
pub(crate) const MAX_CLIENT_CAPABILITIES_BYTES: usize = 16 * 1024;

/// `-32602` for a capability object over [`MAX_CLIENT_CAPABILITIES_BYTES`], `None` otherwise.
pub(crate) fn oversize_capabilities(caps: &serde_json::value::RawValue) -> Option<ErrorObject> {
    (caps.get().len() > MAX_CLIENT_CAPABILITIES_BYTES).then(|| {
        ErrorObject::invalid_params(format!(
            "Client capabilities too large: at most {MAX_CLIENT_CAPABILITIES_BYTES} bytes"
        ))
    })
}

/// The established facts of one request.
#[derive(Clone, Debug)]
pub(crate) struct RequestContext {
    pub(crate) principal: Principal,
    pub(crate) vhost_id: VirtualHostId,
    pub(crate) vhost: Arc<VirtualHostConfig>,
    /// When the request's credentials expire (set by the authentication layer): notification
    /// streams end then ([`Self::stream_ends`]).
    pub(crate) valid_until: Option<ValidUntil>,
    /// Where the user configuration came from (set by the config store layer): notification
    /// streams end when it no longer has the virtual host ([`Self::stream_ends`]).
    pub(crate) config_source: Option<ConfigSource>,
    /// The request's audit record, when the audit trail is on (put in the extensions by the
    /// front): the operations annotate it.
    pub(crate) audit: Option<crate::audit::AuditHandle>,
}

impl RequestContext {
    /// Resolves when a notification stream opened by this request must end (book:
    /// docs/src/security.md, "Budgets"): its credentials expired (never without a
    /// [`ValidUntil`]), or the caller's configuration no longer has the virtual host (never
    /// without a [`ConfigSource`]). The client opens the stream again with a fresh token, and
    /// a stream never outlives the credentials or the configuration it was opened with.
    pub(crate) fn stream_ends(&self) -> impl Future<Output = ()> + Send + 'static {
        let left = self
            .valid_until
            .map(|until| until.left(std::time::SystemTime::now()));
        // Followed from now on, so that a removal before the stream is first polled counts.
        let removed = self
            .config_source
            .as_ref()
            .map(|source| source.vhost_removed(self.vhost_id.as_str()));
        async move {
            let expired = async move {
                match left {
                    Some(left) => tokio::time::sleep(left).await,
                    None => std::future::pending().await,
                }
            };
            let removed = async move {
                match removed {
                    Some(removed) => removed.await,
                    None => std::future::pending().await,
                }
            };
            futures_util::future::select(Box::pin(expired), Box::pin(removed)).await;
        }
    }
}

/// Reads the context from request extensions. Missing facts are a JSON-RPC internal error whose
/// message starts with `Routing problem`; a virtual host absent from the user config is a
/// resource-not-found error `No configuration` (normally the 404 of the virtual host config layer
/// fires first). Without the `VirtualHost` extension the router looks the virtual host up in the
/// user config itself, so it also works without `VirtualHostConfigLayer`.
pub(crate) fn extract(ext: &Extensions, era: Era) -> Result<RequestContext, ErrorObject> {
    let vhost_id = ext
        .get::<VirtualHostId>()
        .cloned()
        .ok_or_else(|| routing_problem("no virtual host id in the request"))?;
    let principal = ext
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| routing_problem("no authenticated principal (claims) in the request"))?;
    let vhost = match ext.get::<VirtualHost>() {
        Some(v) if v.id == vhost_id => Arc::clone(&v.config),
        _ => {
            let config = ext
                .get::<Arc<UserConfig>>()
                .ok_or_else(|| routing_problem("no user configuration in the request"))?;
            config
                .virtual_hosts
                .get(vhost_id.as_str())
                .cloned()
                .ok_or_else(|| no_configuration(era))?
        }
    };
    Ok(RequestContext {
        principal,
        vhost_id,
        vhost,
        valid_until: ext.get::<ValidUntil>().copied(),
        config_source: ext.get::<ConfigSource>().cloned(),
        audit: ext.get::<crate::audit::AuditHandle>().cloned(),
    })
}

fn routing_problem(what: &str) -> ErrorObject {
    ErrorObject::internal(format!("Routing problem: {what}"))
}

fn no_configuration(era: Era) -> ErrorObject {
    let code = match era {
        Era::Modern => error_code::INVALID_PARAMS,
        Era::Legacy => error_code::RESOURCE_NOT_FOUND_LEGACY,
    };
    ErrorObject::new(code, "No configuration")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_config() -> Arc<UserConfig> {
        Arc::new(
            UserConfig::from_json_str(
                r#"{"virtual_hosts":{"vh":{"backends":{"a":{"url":"http://127.0.0.1:1/mcp"}}}}}"#,
            )
            .expect("config"),
        )
    }

    #[test]
    fn missing_facts_are_routing_problems() {
        let mut ext = Extensions::new();
        let e = extract(&ext, Era::Modern).expect_err("no vhost");
        assert_eq!(e.code, -32603);
        assert!(e.message.starts_with("Routing problem"));
        ext.insert(VirtualHostId::new("vh"));
        assert!(
            extract(&ext, Era::Modern)
                .expect_err("no principal")
                .message
                .starts_with("Routing problem")
        );
        ext.insert(Principal::new("i", "s"));
        assert!(
            extract(&ext, Era::Modern)
                .expect_err("no config")
                .message
                .starts_with("Routing problem")
        );
        ext.insert(user_config());
        assert_eq!(
            extract(&ext, Era::Modern).expect("ok").vhost.backends.len(),
            1
        );
    }

    #[test]
    fn vhost_absent_from_config_is_no_configuration() {
        let mut ext = Extensions::new();
        ext.insert(VirtualHostId::new("other"));
        ext.insert(Principal::new("i", "s"));
        ext.insert(user_config());
        let modern = extract(&ext, Era::Modern).expect_err("absent");
        assert_eq!(
            (modern.code, modern.message.as_str()),
            (-32602, "No configuration")
        );
        assert_eq!(extract(&ext, Era::Legacy).expect_err("absent").code, -32002);
    }
}
