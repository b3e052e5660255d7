//! The router's side of `mcp-plugins`: the pre hook of a routed call before the backend sees it,
//! the post hook on its final result, and list filtering.
//!
//! | method | pre hook | post hook | lists filtered |
//! |---|---|---|---|
//! | `tools/call` | `tool_pre_invoke` (arguments) | `tool_post_invoke` (result) | `tools/list` |
//! | `prompts/get` | `prompt_pre_fetch` (arguments) | `prompt_post_fetch` (result) | `prompts/list` |
//! | `resources/read` | `resource_pre_read` (URI only) | `resource_post_read` (result) | `resources/list` |
//!
//! Plugins see the backend's own names (the upstream tool/prompt name or resource URI) and the
//! caller's public name. Post hooks run on a complete final result only: error responses and
//! non-final results (`input_required`, a created task) pass untouched. A task's result is the
//! result of the call that created it: when a tasks-extension follow-up (`tasks/get`, or
//! `tasks/update`/`tasks/cancel` should a backend answer with it) carries the task's `result`,
//! that call's post hook runs on it, with the call's names ([`task_post`]), so running a tool as
//! a task bypasses no plugin. A runtime whose last reload failed
//! answers every hooked method with its internal error (fail closed, book: docs/src/failure-modes.md), whether or not
//! a plugin would have applied: the gateway cannot know which would.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use mcp_core::{Envelope, ErrorObject, Method, Principal, RawObject, RequestId, encode_result};
use mcp_plugins::{Hook, PluginChain, PluginContext};
use serde_json::value::RawValue;

use crate::ops::scope::Scope;
use crate::ops::task_id::Origin;
use mcp_core::ItemKind;

/// The (pre, post) hooks of a routed method, if it has any.
fn hooks(method: Method) -> Option<(Hook, Hook)> {
    match method {
        Method::ToolsCall => Some((Hook::ToolPreInvoke, Hook::ToolPostInvoke)),
        Method::PromptsGet => Some((Hook::PromptPreFetch, Hook::PromptPostFetch)),
        Method::ResourcesRead => Some((Hook::ResourcePreRead, Hook::ResourcePostRead)),
        _ => None,
    }
}

/// What the pre hooks left for the rest of the call.
#[derive(Default)]
pub(crate) struct Governed {
    /// Headers for the upstream request.
    pub(crate) headers: Option<HeaderMap>,
    /// The request `_meta` with the plugins' entries merged in.
    pub(crate) meta: Option<Box<RawValue>>,
    /// The post hook to run on the result.
    pub(crate) post: Option<PostHook>,
}

/// Runs the pre hooks of a routed call (`params` are the upstream params: rewritten arguments are
/// written back). `Ok(None)`: no plugin governs the call.
pub(crate) async fn pre(
    scope: &Scope<'_>,
    method: Method,
    backend: &str,
    upstream: &str,
    public: &str,
    params: &mut RawObject<'_>,
) -> Result<Option<Governed>, ErrorObject> {
    let (Some(runtime), Some((pre_hook, post_hook))) = (&scope.ops.plugins, hooks(method)) else {
        return Ok(None);
    };
    let chain = runtime.load()?;
    let vhost = scope.ctx.vhost_id.as_str();
    let runs_pre = chain.applies(pre_hook, vhost, backend, upstream);
    let runs_post = chain.applies(post_hook, vhost, backend, upstream);
    if !runs_pre && !runs_post {
        return Ok(None);
    }
    let mut governed = Governed::default();
    if runs_pre {
        let ctx = PluginContext::new(pre_hook, vhost, backend, upstream)
            .with_principal(Some(&scope.ctx.principal))
            .with_public_name(public)
            .with_meta(scope.meta);
        let outcome = chain.pre(&ctx, params.get("arguments")).await?;
        if let Some(arguments) = outcome.arguments {
            params.set_raw("arguments", arguments);
        }
        governed.meta = outcome.extras.merged_meta(scope.meta);
        if !outcome.extras.headers.is_empty() {
            governed.headers = Some(outcome.extras.headers);
        }
    }
    governed.post = runs_post.then(|| PostHook {
        chain,
        hook: post_hook,
        vhost: vhost.to_owned(),
        backend: backend.to_owned(),
        upstream: upstream.to_owned(),
        public: public.to_owned(),
        principal: scope.ctx.principal.clone(),
        meta: scope.meta.map(ToOwned::to_owned),
        subject: Subject::Result,
    });
    Ok(Some(governed))
}

/// The post hook of a task follow-up: the creating call's (`origin`), run on the `result` member
/// of the task the backend answers with. `Ok(None)`: no plugin governs that call; an error when
/// the runtime is failed and the creating method is hooked (fail closed, as the call itself).
pub(crate) fn task_post(
    scope: &Scope<'_>,
    origin: &Origin,
    backend: &str,
) -> Result<Option<Governed>, ErrorObject> {
    let (Some(runtime), Some((_, hook))) = (&scope.ops.plugins, hooks(origin.method)) else {
        return Ok(None);
    };
    let chain = runtime.load()?;
    let vhost = scope.ctx.vhost_id.as_str();
    if !chain.applies(hook, vhost, backend, &origin.name) {
        return Ok(None);
    }
    let kind = hook.item();
    let public = scope
        .namer()
        .public(backend, &origin.name, kind)
        .into_owned();
    Ok(Some(Governed {
        post: Some(PostHook {
            chain,
            hook,
            vhost: vhost.to_owned(),
            backend: backend.to_owned(),
            upstream: origin.name.clone(),
            public,
            principal: scope.ctx.principal.clone(),
            meta: scope.meta.map(ToOwned::to_owned),
            subject: Subject::TaskResult,
        }),
        ..Governed::default()
    }))
}

/// What of the backend's answer a post hook looks at.
#[derive(Clone, Copy)]
enum Subject {
    /// The result itself (the call's own answer).
    Result,
    /// The `result` member of a task (a tasks-extension follow-up); a task without one (still
    /// working, failed, waiting for input) passes untouched.
    TaskResult,
}

/// The post hook of one call, owned: it runs after the handler returned, on the relay.
pub(crate) struct PostHook {
    chain: Arc<PluginChain>,
    hook: Hook,
    vhost: String,
    backend: String,
    upstream: String,
    public: String,
    principal: Principal,
    meta: Option<Box<RawValue>>,
    subject: Subject,
}

impl PostHook {
    /// The backend's final response `message` (to request `upstream_id`) after the post hook: the
    /// same message, one with the rewritten result, or the plugins' error.
    pub(crate) async fn apply(
        &self,
        upstream_id: &RequestId,
        message: Bytes,
    ) -> Result<Bytes, ErrorObject> {
        let rewritten = {
            let Some(result) = Envelope::parse(&message).ok().and_then(|env| env.result()) else {
                return Ok(message);
            };
            let created_task = RawObject::from_raw(result)
                .ok()
                .and_then(|r| r.get_str("resultType"))
                .is_some_and(|t| t == "task");
            match self.subject {
                Subject::Result if !created_task => self.run(result).await?,
                // A task's result (`tasks/get`), or a created task that already carries one: the
                // hook sees the tool's result inside it, so a task never bypasses it.
                Subject::Result | Subject::TaskResult => {
                    let Ok(mut task) = RawObject::from_raw(result) else {
                        return Ok(message);
                    };
                    let Some(task_result) = task.get("result") else {
                        return Ok(message);
                    };
                    match self.run(task_result).await? {
                        Some(rewritten) => {
                            task.set_raw("result", rewritten);
                            Some(task.to_raw())
                        }
                        None => None,
                    }
                }
            }
        };
        Ok(match rewritten {
            Some(result) => Bytes::from(encode_result(upstream_id, &result)),
            None => message,
        })
    }

    /// The result to send instead (`Ok(Some)`), the backend's (`Ok(None)`), or the error to send.
    async fn run(&self, result: &RawValue) -> Result<Option<Box<RawValue>>, ErrorObject> {
        let final_result = RawObject::from_raw(result)
            .ok()
            .and_then(|r| r.get_str("resultType"))
            .is_none_or(|t| t == "complete");
        if !final_result {
            return Ok(None);
        }
        let ctx = PluginContext::new(self.hook, &self.vhost, &self.backend, &self.upstream)
            .with_principal(Some(&self.principal))
            .with_public_name(&self.public)
            .with_meta(self.meta.as_deref());
        self.chain.post(&ctx, result).await
    }
}

/// The chain that may hide items of `kind` from a list in this virtual host, if any. While the
/// runtime is failed lists are not filtered (the calls themselves fail closed).
pub(crate) fn list_filter(scope: &Scope<'_>, kind: ItemKind) -> Option<Arc<PluginChain>> {
    let chain = scope.ops.plugins.as_ref()?.load().ok()?;
    chain
        .filters_lists(Hook::pre_of(kind), scope.ctx.vhost_id.as_str())
        .then_some(chain)
}

/// Whether `upstream` (an item of `backend`, public name `public`) stays in the list.
pub(crate) fn listed(
    chain: &PluginChain,
    scope: &Scope<'_>,
    kind: ItemKind,
    backend: &str,
    upstream: &str,
    public: &str,
) -> bool {
    let ctx = PluginContext::new(
        Hook::pre_of(kind),
        scope.ctx.vhost_id.as_str(),
        backend,
        upstream,
    )
    .with_principal(Some(&scope.ctx.principal))
    .with_public_name(public);
    chain.listed(&ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacting_hook(subject: Subject) -> PostHook {
        let chain = mcp_plugins::Registry::new()
            .load(
                r#"version = 1
[[plugins]]
name = "redact"
kind = "secret_filter"
hooks = ["tool_post_invoke"]
config = { action = "redact", detectors = [], patterns = { s = "top-secret" } }
"#,
                mcp_plugins::Format::Toml,
            )
            .expect("valid document");
        PostHook {
            chain: Arc::new(chain),
            hook: Hook::ToolPostInvoke,
            vhost: "vh".into(),
            backend: "b".into(),
            upstream: "t".into(),
            public: "b-t".into(),
            principal: Principal::new("i", "alice"),
            meta: None,
            subject,
        }
    }

    async fn applied(hook: &PostHook, result: &str) -> String {
        let id = RequestId::from(1);
        let message = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
        let out = hook
            .apply(&id, Bytes::from(message))
            .await
            .expect("not denied");
        String::from_utf8(out.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn a_created_task_that_carries_its_result_gets_the_post_hook() {
        let hook = redacting_hook(Subject::Result);
        let direct = applied(
            &hook,
            r#"{"content":[{"type":"text","text":"top-secret"}]}"#,
        )
        .await;
        assert!(!direct.contains("top-secret"), "control: {direct}");
        let created = applied(
            &hook,
            r#"{"resultType":"task","taskId":"t1","status":"completed","result":{"content":[{"type":"text","text":"top-secret"}]}}"#,
        )
        .await;
        assert!(!created.contains("top-secret"), "{created}");
        assert!(created.contains(r#""taskId":"t1""#), "{created}");
        let working = r#"{"resultType":"task","taskId":"t2","status":"working"}"#;
        assert!(applied(&hook, working).await.contains(working));
    }
}
