//! The transports this build leaves out (features `stdio`, `sse`): the same pools, refusing every
//! call with [`UpstreamError::TransportDisabled`], so the call sites do not change and a
//! configuration naming such a backend gets a clear error instead of a silent gap. Without `sse`
//! the spec's HTTP+SSE fallback rule finds nothing either: the original error of the refused
//! `initialize` stands.

#[cfg(not(feature = "stdio"))]
pub(crate) use stdio::StdioPool;

#[cfg(not(feature = "sse"))]
pub(crate) use sse::SsePool;

#[cfg(any(test, not(feature = "stdio")))]
mod stdio {
    use bytes::Bytes;
    use mcp_core::Budget;
    use serde_json::value::RawValue;

    use crate::upstream::link::LinkBuffers;
    use crate::upstream::stdio::catalog::StdioRules;
    use crate::upstream::{Call, LinkEvents, Target, UpstreamError, UpstreamReply};

    const OFF: UpstreamError = UpstreamError::TransportDisabled("stdio");

    /// No process is ever started.
    pub(crate) struct StdioPool;

    impl StdioPool {
        pub(crate) fn new(_: StdioRules, _: usize, _: Box<RawValue>, _: LinkBuffers) -> Self {
            Self
        }

        /// None: no process is ever held.
        pub(crate) fn budget(&self) -> Option<&Budget> {
            None
        }

        /// Nothing to replace: no process is ever started.
        // Unused in the tests of a build with stdio, which compile this module for its own tests.
        #[cfg_attr(test, allow(dead_code))]
        pub(crate) fn replace_rules(&self, _: StdioRules) {}

        pub(crate) async fn send(
            &self,
            _: &Target<'_>,
            _: &Call<'_>,
        ) -> Result<UpstreamReply, UpstreamError> {
            Err(OFF)
        }

        pub(crate) async fn describe(&self, _: &Target<'_>) -> Result<Bytes, UpstreamError> {
            Err(OFF)
        }

        pub(crate) async fn listen(&self, _: &Target<'_>) -> Result<LinkEvents, UpstreamError> {
            Err(OFF)
        }
    }
}

#[cfg(any(test, not(feature = "sse")))]
mod sse {
    use bytes::Bytes;
    use mcp_core::Budget;
    use serde_json::value::RawValue;
    use url::Url;

    use crate::upstream::link::LinkBuffers;
    use crate::upstream::transport::ScopedPools;
    use crate::upstream::{
        Call, CredentialScope, LinkEvents, Target, UpstreamError, UpstreamReply,
    };

    const OFF: UpstreamError = UpstreamError::TransportDisabled("sse");

    /// No HTTP+SSE connection is ever opened.
    pub(crate) struct SsePool;

    impl SsePool {
        pub(crate) fn new(
            _: std::sync::Arc<ScopedPools>,
            _: Box<RawValue>,
            _: LinkBuffers,
        ) -> Self {
            Self
        }

        /// None: no connection is ever held.
        pub(crate) fn budget(&self) -> Option<&Budget> {
            None
        }

        pub(crate) async fn send(
            &self,
            _: &Target<'_>,
            _: &Url,
            _: &CredentialScope,
            _: &Call<'_>,
        ) -> Result<UpstreamReply, UpstreamError> {
            Err(OFF)
        }

        pub(crate) async fn describe(
            &self,
            _: &Target<'_>,
            _: &Url,
            _: &CredentialScope,
        ) -> Result<Bytes, UpstreamError> {
            Err(OFF)
        }

        pub(crate) async fn listen(
            &self,
            _: &Target<'_>,
            _: &Url,
            _: &CredentialScope,
        ) -> Result<LinkEvents, UpstreamError> {
            Err(OFF)
        }

        pub(crate) async fn connect(
            &self,
            _: &Target<'_>,
            _: &Url,
            _: &CredentialScope,
        ) -> Result<(), UpstreamError> {
            Err(OFF)
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;
    use mcp_config_store::BackendConfig;
    use mcp_core::{Budget, Era, Principal};
    use serde_json::value::RawValue;

    use crate::upstream::link::LinkBuffers;
    use crate::upstream::transport::ScopedPools;
    use crate::upstream::{CredentialScope, Target, UpstreamError};

    fn unbounded() -> LinkBuffers {
        LinkBuffers::new(Budget::new("link_buffers"))
    }

    fn backend(json: &str) -> BackendConfig {
        serde_json::from_str(json).expect("backend config")
    }

    /// A build without a transport refuses its backends' calls with an error that names the
    /// transport, never trying the network or a process.
    #[tokio::test]
    async fn a_transport_left_out_refuses_every_call_by_name() {
        let caps = RawValue::from_string("{}".into()).expect("raw");
        let headers = HeaderMap::new();
        let principal = Principal::new("iss", "alice");
        let stdio_config = backend(r#"{"command":"mcp-server"}"#);
        let target = Target::new(
            "local",
            &stdio_config,
            &headers,
            &principal,
            &caps,
            None,
            Era::Modern,
        );
        let call = crate::upstream::Call {
            method: "tools/list",
            params: mcp_core::RawObject::new(),
            name: None,
            progress_token: None,
            hints: mcp_fallback::ToolHints::NONE,
            headers: None,
        };
        let stdio = super::stdio::StdioPool::new(Default::default(), 1, caps.clone(), unbounded());
        let refused = UpstreamError::TransportDisabled("stdio");
        assert_eq!(
            stdio.send(&target, &call).await.err(),
            Some(refused.clone())
        );
        assert_eq!(stdio.describe(&target).await.err(), Some(refused.clone()));
        assert_eq!(stdio.listen(&target).await.err(), Some(refused.clone()));
        assert!(stdio.budget().is_none(), "no process is ever held");
        assert_eq!(
            refused.to_string(),
            "backend transport stdio not built into this gateway"
        );
        assert!(refused.never_sent(), "a replica may take the call");

        let sse_config = backend(r#"{"url":"http://127.0.0.1:9/mcp","transport":"sse"}"#);
        let target = Target::new(
            "local",
            &sse_config,
            &headers,
            &principal,
            &caps,
            None,
            Era::Modern,
        );
        let url = url::Url::parse("http://127.0.0.1:9/mcp").expect("url");
        let scope: CredentialScope = crate::upstream::Client::scope(&target, url.as_str());
        let pools = ScopedPools::new(
            crate::upstream::transport::build_connector(
                std::time::Duration::from_secs(1),
                crate::upstream::DestinationPolicy::default(),
                &mcp_core::tls::ClientTls::default(),
            ),
            1,
            1,
            1,
            std::time::Duration::from_secs(1),
        );
        let sse = super::sse::SsePool::new(std::sync::Arc::new(pools), caps.clone(), unbounded());
        let refused = UpstreamError::TransportDisabled("sse");
        assert!(sse.budget().is_none(), "no connection is ever held");
        assert_eq!(
            sse.send(&target, &url, &scope, &call).await.err(),
            Some(refused.clone())
        );
        assert_eq!(
            sse.connect(&target, &url, &scope).await.err(),
            Some(refused.clone())
        );
        assert_eq!(
            sse.describe(&target, &url, &scope).await.err(),
            Some(refused.clone())
        );
        assert_eq!(sse.listen(&target, &url, &scope).await.err(), Some(refused));
    }
}
