//! URIs in backend answers made public: wherever a backend's answer names one of its resources, the
//! client gets the public URI ([`Namer::public`], the mapping merged resource lists use), so that
//! reading it back through the gateway reaches the same backend.
//!
//! The places, per method (both eras; the 2025 engine relays its routed calls through the same
//! code):
//!
//! | answer | rewritten |
//! |---|---|
//! | `tools/call` | `content[]`: `uri` of a `resource_link`, `resource.uri` of an embedded `resource` |
//! | `tasks/get` | the same blocks in the completed task's `result.content[]` |
//! | `prompts/get` | the same blocks in `messages[].content` |
//! | `resources/read` | `contents[].uri` |
//! | `notifications/resources/updated` | `params.uri` (see [`Namer::public`] callers in the listen and GET-stream code) |
//!
//! Every URI in those places belongs to the backend that sent it: the spec defines resource links
//! and embedded resources as resources of the server that returned them (read back with its
//! `resources/read`), so each gets that backend's name, whatever its scheme. Nothing else is
//! touched: text blocks, `structuredContent` (tool-defined data checked against the tool's
//! `outputSchema`; the gateway does not guess which of its strings are URIs), `_meta`, and
//! `completion/complete` values (they are values of a template's variables, which the client puts
//! into the public `uriTemplate` it listed, so they carry no backend URI).
//!
//! Cost: an answer whose raw text names no `"resource` type (the substring every `resource_link`
//! and `resource` block carries) is not parsed past its top level. A backend that spelled those
//! type names with `\u` escapes would not be rewritten; no serialiser does that.

use mcp_core::{Method, RawObject};
use serde_json::value::RawValue;

use crate::naming::Namer;
use mcp_core::ItemKind;

/// What every resource-carrying content block contains (`"resource_link"`, `"resource"`).
const RESOURCE_TYPE: &str = "\"resource";

/// Rewrites the URIs of one backend's answers.
#[derive(Clone, Copy)]
pub(crate) struct PublicUris<'a> {
    namer: Namer<'a>,
    backend: &'a str,
}

impl<'a> PublicUris<'a> {
    /// The rewriter for `backend`'s answers; `None` when the virtual host does not prefix (public
    /// URIs are then the backend's own: nothing to do).
    pub(crate) fn new(namer: Namer<'a>, backend: &'a str) -> Option<Self> {
        namer.prefixing().then_some(Self { namer, backend })
    }

    /// The public form of one of the backend's URIs.
    pub(crate) fn public(&self, uri: &str) -> String {
        self.namer
            .public(self.backend, uri, ItemKind::Resource)
            .into_owned()
    }

    /// Rewrites the URIs in the result of `method`; returns whether anything changed.
    pub(crate) fn result(&self, method: Method, result: &mut RawObject<'_>) -> bool {
        match method {
            Method::ToolsCall => self.field(result, "content", |raw| self.blocks(raw)),
            Method::TasksGet => self.field(result, "result", |raw| {
                let mut task_result = RawObject::from_raw(raw).ok()?;
                self.field(&mut task_result, "content", |raw| self.blocks(raw))
                    .then(|| task_result.to_raw())
            }),
            Method::PromptsGet => self.field(result, "messages", |raw| {
                self.each(raw, |message| {
                    let mut message = RawObject::from_raw(message).ok()?;
                    // One block per message in both eras; an array is accepted too.
                    self.field(&mut message, "content", |content| {
                        self.blocks(content).or_else(|| self.block(content))
                    })
                    .then(|| message.to_raw())
                })
            }),
            Method::ResourcesRead => {
                let contents = result.get("contents").and_then(|raw| {
                    self.each(raw, |item| {
                        let mut item = RawObject::from_raw(item).ok()?;
                        self.uri(&mut item, "uri").then(|| item.to_raw())
                    })
                });
                contents.is_some_and(|contents| {
                    result.set_raw("contents", contents);
                    true
                })
            }
            _ => false,
        }
    }

    /// Replaces `key` with what `rewrite` makes of it, when its text may carry a resource block.
    fn field(
        &self,
        obj: &mut RawObject<'_>,
        key: &str,
        rewrite: impl FnOnce(&RawValue) -> Option<Box<RawValue>>,
    ) -> bool {
        let Some(rewritten) = obj
            .get(key)
            .filter(|raw| raw.get().contains(RESOURCE_TYPE))
            .and_then(rewrite)
        else {
            return false;
        };
        obj.set_raw(key, rewritten);
        true
    }

    /// An array of content blocks with their URIs public; `None` when nothing changed (or it is
    /// not an array).
    fn blocks(&self, raw: &RawValue) -> Option<Box<RawValue>> {
        self.each(raw, |block| self.block(block))
    }

    /// An array with `item` applied to every element; `None` when no element changed.
    fn each(
        &self,
        raw: &RawValue,
        item: impl Fn(&RawValue) -> Option<Box<RawValue>>,
    ) -> Option<Box<RawValue>> {
        let items: Vec<&RawValue> = serde_json::from_str(raw.get()).ok()?;
        let mut changed = false;
        let out: Vec<Box<RawValue>> = items
            .into_iter()
            .map(|element| match item(element) {
                Some(rewritten) => {
                    changed = true;
                    rewritten
                }
                None => element.to_owned(),
            })
            .collect();
        if !changed {
            return None;
        }
        serde_json::value::to_raw_value(&out).ok()
    }

    /// One content block with its URI public; `None` when it names no resource.
    fn block(&self, raw: &RawValue) -> Option<Box<RawValue>> {
        if !raw.get().contains(RESOURCE_TYPE) {
            return None;
        }
        let mut block = RawObject::from_raw(raw).ok()?;
        let changed = match block.get_str("type").as_deref() {
            Some("resource_link") => self.uri(&mut block, "uri"),
            Some("resource") => {
                let resource = block.get("resource").and_then(|raw| {
                    let mut resource = RawObject::from_raw(raw).ok()?;
                    self.uri(&mut resource, "uri").then(|| resource.to_raw())
                });
                resource.is_some_and(|resource| {
                    block.set_raw("resource", resource);
                    true
                })
            }
            _ => false,
        };
        changed.then(|| block.to_raw())
    }

    /// Makes the string at `key` public; whether there was one.
    fn uri(&self, obj: &mut RawObject<'_>, key: &str) -> bool {
        let Some(uri) = obj.get_str(key) else {
            return false;
        };
        obj.set_str(key, &self.public(&uri));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_config_store::VirtualHostConfig;
    use serde_json::{Value, json};

    fn vhost(json: Value) -> VirtualHostConfig {
        serde_json::from_value(json).expect("valid vhost config")
    }

    fn two() -> VirtualHostConfig {
        vhost(json!({"backends": {
            "ev": {"url": "http://127.0.0.1:1/mcp"},
            "b": {"url": "http://127.0.0.1:2/mcp"}}}))
    }

    /// The result of `method` after the rewrite, and whether it changed.
    fn rewritten(vhost: &VirtualHostConfig, method: Method, result: &Value) -> (Value, bool) {
        let text = result.to_string();
        let mut obj = RawObject::parse(&text).expect("an object");
        let changed = PublicUris::new(Namer::new(vhost), "ev")
            .is_some_and(|uris| uris.result(method, &mut obj));
        let out = serde_json::from_str(&obj.to_json()).expect("JSON");
        (out, changed)
    }

    #[test]
    fn tool_result_links_and_embedded_resources_become_public() {
        let result = json!({"content": [
            {"type": "text", "text": "see demo://resource/dynamic/text/2"},
            {"type": "resource_link", "uri": "demo://resource/dynamic/text/2", "name": "Text 2"},
            {"type": "resource", "resource": {"uri": "https://example.com/a", "text": "A"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "structuredContent": {"uri": "demo://x"}, "isError": false});
        let (out, changed) = rewritten(&two(), Method::ToolsCall, &result);
        assert!(changed);
        assert_eq!(
            out["content"][1]["uri"],
            "ev-demo://resource/dynamic/text/2"
        );
        assert_eq!(
            out["content"][2]["resource"]["uri"],
            "ev-https://example.com/a"
        );
        assert_eq!(
            out["content"][0]["text"], "see demo://resource/dynamic/text/2",
            "text is not touched"
        );
        assert_eq!(out["content"][3], result["content"][3]);
        assert_eq!(
            out["structuredContent"]["uri"], "demo://x",
            "tool-defined data is not touched"
        );
        assert_eq!(out["content"][1]["name"], "Text 2");
    }

    #[test]
    fn a_result_without_resource_blocks_is_left_alone() {
        let result = json!({"content": [{"type": "text", "text": "uri: demo://a"}]});
        let (out, changed) = rewritten(&two(), Method::ToolsCall, &result);
        assert!(!changed);
        assert_eq!(out, result);
        // Mentioning the word is not enough to change anything either.
        let result = json!({"content": [{"type": "text", "text": "\"resource\" is a word"}]});
        assert_eq!(
            rewritten(&two(), Method::ToolsCall, &result),
            (result, false)
        );
    }

    #[test]
    fn prompt_messages_task_results_and_read_contents() {
        let prompt = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "look"}},
            {"role": "user", "content": {"type": "resource",
                "resource": {"uri": "demo://resource/dynamic/text/1", "text": "one"}}}]});
        let (out, changed) = rewritten(&two(), Method::PromptsGet, &prompt);
        assert!(changed);
        assert_eq!(
            out["messages"][1]["content"]["resource"]["uri"],
            "ev-demo://resource/dynamic/text/1"
        );
        assert_eq!(out["messages"][0], prompt["messages"][0]);

        let task = json!({"resultType": "complete", "taskId": "t", "status": "completed",
            "result": {"content": [{"type": "resource_link", "uri": "file:///r", "name": "r"}]}});
        let (out, changed) = rewritten(&two(), Method::TasksGet, &task);
        assert!(changed);
        assert_eq!(out["result"]["content"][0]["uri"], "ev-file:///r");

        let read = json!({"contents": [{"uri": "demo://a", "text": "a"}, {"uri": "demo://b", "blob": "Yg=="}]});
        let (out, changed) = rewritten(&two(), Method::ResourcesRead, &read);
        assert!(changed);
        assert_eq!(out["contents"][0]["uri"], "ev-demo://a");
        assert_eq!(out["contents"][1]["uri"], "ev-demo://b");
    }

    #[test]
    fn completion_values_are_not_uris() {
        let completion =
            json!({"completion": {"values": ["resource", "demo://a"], "hasMore": false}});
        assert_eq!(
            rewritten(&two(), Method::CompletionComplete, &completion),
            (completion, false)
        );
    }

    #[test]
    fn without_prefixes_nothing_is_rewritten() {
        let one =
            vhost(json!({"naming": "auto", "backends": {"ev": {"url": "http://127.0.0.1:1/mcp"}}}));
        let result =
            json!({"content": [{"type": "resource_link", "uri": "demo://a", "name": "a"}]});
        assert_eq!(rewritten(&one, Method::ToolsCall, &result), (result, false));
    }

    #[test]
    fn public_uris_route_back_to_the_backend_that_sent_them() {
        let vhost = two();
        let namer = Namer::new(&vhost);
        let uris = PublicUris::new(namer, "ev").expect("prefixing");
        let public = uris.public("demo://resource/dynamic/text/2");
        assert_eq!(
            namer.resolve(&public, ItemKind::Resource),
            crate::naming::Resolution::One(crate::naming::Target {
                backend: "ev",
                upstream: "demo://resource/dynamic/text/2".into(),
            })
        );
    }
}
