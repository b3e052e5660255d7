//! `server/discover`: the gateway's own answer, with capabilities merged from every backend.
//!
//! A capability family (`tools`, `prompts`, `resources`, `completions`, `logging`) is advertised when
//! any backend has it, with `listChanged`/`subscribe` true when any backend's is (the gateway relays
//! them: `subscriptions/listen` for 2026-07-28 clients, the GET stream for 2025 sessions);
//! `extensions` are merged by key (the tasks extension included: task ids are routed, see
//! `task_id`). Instructions of the backends are
//! joined under a heading per backend. `ttlMs` is the smallest of the modern backends' (legacy
//! backends contribute 0); `cacheScope` is `private`. A backend that fails is answered from its
//! last good description for the same caller within the stale-if-error window (marked stale).

use futures_util::future::join_all;
use mcp_core::{Era, ProtocolVersion, RawObject};
use serde_json::{Map, Value};

use crate::degraded::{CACHE_SCOPE, Degraded, TtlMin, ttl_of};
use crate::ops::list::stale_key;
use crate::ops::scope::{BackendFailure, Scope};

const FAMILIES: [&str; 5] = ["tools", "prompts", "resources", "completions", "logging"];

/// What one backend says about itself.
struct BackendInfo {
    capabilities: Value,
    instructions: Option<String>,
    ttl_ms: u64,
    /// Set when this is the backend's last good answer (it failed just now).
    stale_age: Option<std::time::Duration>,
}

async fn backend_info(
    scope: &Scope<'_>,
    name: &str,
    config: &mcp_config_store::BackendConfig,
) -> Result<BackendInfo, BackendFailure> {
    let target = scope.target(name, config);
    let deadline = scope.fanout_deadline(config);
    let key = stale_key(&target, scope, "server/discover", "");
    let described = tokio::time::timeout(deadline, scope.ops.upstream.describe(&target))
        .await
        .map_err(|_| BackendFailure::Deadline(deadline))
        .and_then(|d| d.map_err(BackendFailure::Upstream));
    let (raw, ttl_ms, stale_age) = match described {
        Ok(description) => {
            let raw = serde_json::value::RawValue::from_string(
                String::from_utf8_lossy(&description.result).into_owned(),
            )
            .map_err(|_| {
                BackendFailure::Upstream(crate::upstream::UpstreamError::Malformed(
                    "result is not JSON",
                ))
            })?;
            let result = RawObject::from_raw(&raw).unwrap_or_default();
            // Legacy backends send no cache hints: they count as 0.
            let ttl = match description.era {
                Era::Modern => ttl_of(&result),
                Era::Legacy => 0,
            };
            if !scope.ops.stale_if_error.is_zero() {
                scope.ops.stale.insert(&scope.ctx.principal, key, &raw);
            }
            (raw, ttl, None)
        }
        Err(failure) => match scope.ops.stale.get(&key, scope.ops.stale_if_error) {
            Some((value, age)) if !scope.ops.stale_if_error.is_zero() => (value, 0, Some(age)),
            _ => return Err(failure),
        },
    };
    let result = RawObject::from_raw(&raw).unwrap_or_default();
    Ok(BackendInfo {
        capabilities: result.get_as("capabilities").unwrap_or(Value::Null),
        instructions: result.get_str("instructions"),
        ttl_ms,
        stale_age,
    })
}

/// Builds the merged `DiscoverResult`.
pub(crate) async fn discover(scope: &Scope<'_>) -> RawObject<'static> {
    let backends = &scope.ctx.vhost.backends;
    let infos = join_all(
        backends
            .iter()
            .map(|(name, config)| async move { (name, backend_info(scope, name, config).await) }),
    )
    .await;
    let mut capabilities = Map::new();
    let mut instructions = Vec::new();
    let mut ttl = TtlMin::default();
    let mut degraded = Degraded::default();
    if let Some(own) = &scope.ops.instructions {
        instructions.push(own.clone());
    }
    for (name, info) in infos {
        match info {
            Ok(info) => {
                merge_capabilities(&mut capabilities, &info.capabilities);
                if let Some(text) = info.instructions.filter(|t| !t.trim().is_empty()) {
                    instructions.push(format!("## {name}\n{text}"));
                }
                ttl.add(info.ttl_ms);
                if let Some(age) = info.stale_age {
                    degraded.stale(name, age);
                }
            }
            Err(failure) => degraded.backend(name, failure.reason()),
        }
    }
    let mut result = RawObject::new();
    result.set_str("resultType", "complete");
    result.set_json(
        "supportedVersions",
        &ProtocolVersion::supported_strings(Era::Modern),
    );
    result.set_json("capabilities", &capabilities);
    if !instructions.is_empty() {
        result.set_str("instructions", &instructions.join("\n\n"));
    }
    result.set_json("ttlMs", &ttl.get());
    result.set_str("cacheScope", CACHE_SCOPE);
    degraded.annotate_span();
    result.set_raw("_meta", degraded.to_meta(&scope.ops.server_info));
    result
}

/// Keeps a sub-capability; boolean flags (`listChanged`, `subscribe`) are true if any backend's is.
fn merge_flag(entry: &mut Map<String, Value>, key: &str, value: &Value) {
    match (entry.get_mut(key), value) {
        (Some(Value::Bool(current)), Value::Bool(new)) => *current |= *new,
        (Some(_), _) => {}
        (None, v) => {
            entry.insert(key.to_owned(), v.clone());
        }
    }
}

/// Merges one backend's capabilities into `acc` (see the module docs for what is left out).
pub(crate) fn merge_capabilities(acc: &mut Map<String, Value>, caps: &Value) {
    let Some(caps) = caps.as_object() else {
        return;
    };
    for (family, value) in caps {
        if FAMILIES.contains(&family.as_str()) {
            let entry = acc
                .entry(family.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if let (Some(entry), Some(value)) = (entry.as_object_mut(), value.as_object()) {
                for (key, v) in value {
                    merge_flag(entry, key, v);
                }
            }
        } else if family == "extensions"
            && let Some(extensions) = value.as_object()
        {
            let entry = acc
                .entry("extensions".to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(entry) = entry.as_object_mut() {
                for (key, v) in extensions {
                    entry.entry(key.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_family_present_in_any_backend_is_advertised() {
        let mut acc = Map::new();
        merge_capabilities(
            &mut acc,
            &json!({"tools": {"listChanged": true}, "logging": {}}),
        );
        merge_capabilities(
            &mut acc,
            &json!({"prompts": {}, "resources": {"subscribe": true, "listChanged": true},
            "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {"v": 1}},
            "experimental": {"x": {}}}),
        );
        merge_capabilities(&mut acc, &json!({"tools": {"listChanged": false}}));
        assert_eq!(
            Value::Object(acc),
            json!({"tools": {"listChanged": true}, "logging": {}, "prompts": {},
                   "resources": {"subscribe": true, "listChanged": true},
                   "extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {"v": 1}}})
        );
    }
}
