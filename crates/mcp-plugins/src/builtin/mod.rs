//! The built-in plugin kinds, registered by [`Registry::new`](crate::Registry::new).
//!
//! | kind | hooks | what it does |
//! |---|---|---|
//! | [`tool_filter`] | `tool_pre_invoke` | operator allow/deny lists of upstream tool names (scope them per virtual host and backend with `conditions`); denied tools are also left out of `tools/list` |
//! | [`size_limit`] | pre (arguments) and/or post (results) | denies arguments or results larger than a byte limit |
//! | [`secret_filter`] | all | finds private keys, cloud access keys, tokens and custom regexes in arguments and results; denies or redacts |
//! | [`rate_limit`] | pre | per-principal, per-tool or per-principal-and-tool token buckets |
//! | [`upstream_headers`] | pre | adds headers and `_meta` entries to the upstream request, with `{subject}`-style placeholders |
//!
//! Every kind that denies takes an optional `code` (the JSON-RPC error code, default -32600,
//! except `rate_limit`: [`rate_limit::RATE_LIMITED`]). Denial messages never echo the payload.

pub mod rate_limit;
pub mod secret_filter;
pub mod size_limit;
pub mod tool_filter;
pub mod upstream_headers;

use crate::Registry;

pub(crate) fn register_all(registry: Registry) -> Registry {
    registry
        .register(tool_filter::KIND, tool_filter::ToolFilter::from_config)
        .register(size_limit::KIND, size_limit::SizeLimit::from_config)
        .register(
            secret_filter::KIND,
            secret_filter::SecretFilter::from_config,
        )
        .register(rate_limit::KIND, rate_limit::RateLimit::from_config)
        .register(
            upstream_headers::KIND,
            upstream_headers::UpstreamHeaders::from_config,
        )
}

fn default_deny_code() -> i64 {
    crate::DEFAULT_DENY_CODE
}
