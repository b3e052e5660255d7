//! [`ClientMeta`]: what a client's `_meta` asks of a routed call (its progress token and the log
//! messages it wants), read once per call, by the modern front while validating or on demand.

use mcp_core::{Era, RawObject};
use serde_json::value::RawValue;

use crate::log_level;
use crate::ops::scope::Scope;
use crate::upstream::PROGRESS_TOKEN;

/// What a relay needs from the client's `_meta` (read once per call).
#[derive(Clone)]
pub(crate) struct ClientMeta {
    /// The client's progress token, as raw JSON.
    pub(crate) progress_token: Option<Box<RawValue>>,
    /// Which log messages the client gets: a modern client only those its `_meta` `logLevel`
    /// asks for (none without it; an unknown level relays everything rather than guess); a
    /// legacy client's level is its session's business, so everything passes here.
    pub(crate) log_threshold: Option<usize>,
}

impl ClientMeta {
    pub(crate) fn of(scope: &Scope<'_>) -> Self {
        match scope.client_meta {
            Some(client) => client.clone(),
            None => Self::from_meta(scope.era, scope.meta),
        }
    }

    /// From a request's `_meta` (a client of `era`).
    pub(crate) fn from_meta(era: Era, meta: Option<&RawValue>) -> Self {
        let meta = meta.and_then(|m| RawObject::from_raw(m).ok());
        Self::from_object(era, meta.as_ref())
    }

    /// From a request's `_meta` already parsed (the front reads it once to validate it).
    pub(crate) fn from_object(era: Era, meta: Option<&RawObject<'_>>) -> Self {
        let log_threshold = match era {
            Era::Legacy => Some(0),
            Era::Modern => meta
                .and_then(|m| m.get_str(log_level::META_KEY))
                .map(|level| log_level::severity(&level).unwrap_or(0)),
        };
        Self {
            progress_token: meta.and_then(|m| m.get(PROGRESS_TOKEN).map(|t| t.to_owned())),
            log_threshold,
        }
    }
}
