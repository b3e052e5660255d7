//! `touch`: change notifications reach 2026-07-28 `subscriptions/listen` streams (within their
//! acknowledged filter) and legacy sessions' GET streams (updates only for subscribed URIs).

// `resources/subscribe` is deprecated for 2026-07-28 but is what legacy sessions use.
#![allow(deprecated)]

use std::time::Duration;

use mcp_test_backends::{BackendSpec, Era, TestBackend, Touched};
use rmcp::{
    ServiceError,
    model::{
        ErrorCode, GetMeta, ServerNotification, SubscribeRequestParams, SubscriptionFilter,
        UnsubscribeRequestParams,
    },
    service::Subscription,
};
use serde_json::json;

use crate::{
    clients::{self, Client, RecordingClient},
    eras::{call, first_text},
};

const WAIT: Duration = Duration::from_secs(5);

/// `method` or `method <uri>` of a notification on a subscription.
fn describe(notification: &ServerNotification) -> String {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => "tools/list_changed".to_owned(),
        ServerNotification::ResourceListChangedNotification(_) => {
            "resources/list_changed".to_owned()
        }
        ServerNotification::ResourceUpdatedNotification(updated) => {
            format!("resources/updated {}", updated.params.uri)
        }
        other => format!("unexpected {other:?}"),
    }
}

/// The notifications of `subscription` up to and including `tools/list_changed` (sent last by
/// `touch`); panics when it does not come within a few seconds.
async fn until_tools_list_changed(subscription: &mut Subscription) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let next = tokio::time::timeout(WAIT, subscription.next())
            .await
            .unwrap_or_else(|_| panic!("no tools/list_changed within {WAIT:?}; saw {seen:?}"))
            .expect("subscription stays valid")
            .unwrap_or_else(|| panic!("subscription ended; saw {seen:?}"));
        assert_eq!(
            next.get_meta().subscription_id().as_ref(),
            Some(subscription.id()),
            "every notification carries the listen id"
        );
        seen.push(describe(&next));
        if seen.last().map(String::as_str) == Some("tools/list_changed") {
            return seen;
        }
    }
}

async fn touch(client: &Client, uri: Option<&str>) -> (String, Touched) {
    let arguments = match uri {
        Some(uri) => json!({ "uri": uri }),
        None => json!({}),
    };
    let result = client
        .call_tool(call("touch", arguments))
        .await
        .expect("touch");
    let counts = result
        .structured_content
        .clone()
        .expect("structured counts");
    let touched = Touched {
        subscriptions: counts["subscriptions"].as_u64().expect("count") as usize,
        sessions: counts["sessions"].as_u64().expect("count") as usize,
    };
    (first_text(&result), touched)
}

#[tokio::test]
async fn modern_listens_get_what_they_asked_for_and_nothing_else() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("listen-{era}");
        let backend =
            TestBackend::start(BackendSpec::new(name.clone(), era).touch_tool(true)).await;
        let static_uri = format!("test://{name}/static");
        let (client, _) = clients::modern(&backend.url()).await;

        let info = client.peer_info().expect("discover result");
        let capabilities = serde_json::to_value(&info.capabilities).expect("json");
        assert_eq!(capabilities["tools"]["listChanged"], true, "{era}");
        assert_eq!(capabilities["resources"]["subscribe"], true, "{era}");
        assert_eq!(capabilities["resources"]["listChanged"], true, "{era}");

        let mut filter = SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        filter.prompts_list_changed = Some(true);
        filter.resource_subscriptions = Some(vec![static_uri.clone(), "test://nope/x".to_owned()]);
        let mut subscription = client.listen(filter).await.expect("listen");
        let acknowledged = subscription.acknowledged();
        assert_eq!(acknowledged.tools_list_changed, Some(true), "{era}");
        assert_eq!(
            acknowledged.prompts_list_changed, None,
            "{era}: prompts.listChanged is not offered"
        );
        assert_eq!(acknowledged.resources_list_changed, None, "{era}");
        assert_eq!(
            acknowledged.resource_subscriptions,
            Some(vec![static_uri.clone()]),
            "{era}: only URIs the backend has"
        );
        assert!(
            backend.wait_until(WAIT, |b| b.subscriptions() == 1).await,
            "{era}: the listen is registered"
        );

        let (text, touched) = touch(&client, Some(&static_uri)).await;
        assert_eq!(text, format!("{name}: touched {static_uri}"));
        assert_eq!(
            touched,
            Touched {
                subscriptions: 1,
                sessions: 0
            }
        );
        // resources/list_changed was not asked for: not sent.
        assert_eq!(
            until_tools_list_changed(&mut subscription).await,
            [
                format!("resources/updated {static_uri}"),
                "tools/list_changed".to_owned()
            ],
            "{era}"
        );

        // An update for a URI outside the filter is not sent; the list change is.
        backend.touch(Some(&format!("test://{name}/item/9"))).await;
        assert_eq!(
            until_tools_list_changed(&mut subscription).await,
            ["tools/list_changed"],
            "{era}"
        );

        drop(subscription);
        assert!(
            backend.wait_until(WAIT, |b| b.subscriptions() == 0).await,
            "{era}: closing the listen unregisters it"
        );
        let (_, touched) = touch(&client, None).await;
        assert_eq!(touched, Touched::default(), "{era}");
        client.cancel().await.expect("cancel");
    }
}

/// Touches until `handler` has seen `tools/list_changed` (the GET stream that carries it opens
/// shortly after `initialize`: a touch before that is lost); returns what it saw.
async fn touch_until_seen(client: &Client, handler: &RecordingClient, uri: &str) -> Vec<String> {
    for _ in 0..5 {
        touch(client, Some(uri)).await;
        let seen = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                let changes = handler.changes();
                if changes.iter().any(|c| c == "tools/list_changed") {
                    return changes;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        if let Ok(changes) = seen {
            return changes;
        }
    }
    panic!("no tools/list_changed on the GET stream after 5 touches")
}

#[tokio::test]
async fn legacy_sessions_get_list_changes_and_updates_for_what_they_subscribed() {
    for era in [Era::Legacy, Era::Both] {
        let name = format!("sub-{era}");
        let backend =
            TestBackend::start(BackendSpec::new(name.clone(), era).touch_tool(true)).await;
        let static_uri = format!("test://{name}/static");
        let (subscriber, subscriber_seen) = clients::legacy(&backend.url()).await.expect("legacy");
        let (bystander, bystander_seen) = clients::legacy(&backend.url()).await.expect("legacy");

        let capabilities = serde_json::to_value(
            &subscriber
                .peer_info()
                .expect("initialize result")
                .capabilities,
        )
        .expect("json");
        assert_eq!(capabilities["tools"]["listChanged"], true, "{era}");
        assert_eq!(capabilities["resources"]["subscribe"], true, "{era}");

        let unknown = subscriber
            .subscribe(SubscribeRequestParams::new("test://nope/x"))
            .await
            .expect_err("unknown URI");
        match unknown {
            ServiceError::McpError(error) => {
                assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND, "{era}")
            }
            other => panic!("{era}: expected a JSON-RPC error, got {other:?}"),
        }
        subscriber
            .subscribe(SubscribeRequestParams::new(static_uri.clone()))
            .await
            .expect("resources/subscribe");
        assert_eq!(backend.sessions_subscribed_to(&static_uri), 1, "{era}");

        let seen = touch_until_seen(&subscriber, &subscriber_seen, &static_uri).await;
        let expected = [
            format!("resources/updated {static_uri}"),
            "resources/list_changed".to_owned(),
            "tools/list_changed".to_owned(),
        ];
        assert_eq!(seen[seen.len() - 3..], expected, "{era}: {seen:?}");

        // The other session hears about list changes, never about a URI it did not subscribe to.
        let seen = touch_until_seen(&bystander, &bystander_seen, &static_uri).await;
        assert!(
            seen.iter().all(|c| !c.starts_with("resources/updated")),
            "{era}: {seen:?}"
        );
        assert!(seen.contains(&"resources/list_changed".to_owned()), "{era}");

        subscriber
            .unsubscribe(UnsubscribeRequestParams::new(static_uri.clone()))
            .await
            .expect("resources/unsubscribe");
        assert_eq!(backend.sessions_subscribed_to(&static_uri), 0, "{era}");
        let (_, touched) = touch(&subscriber, Some(&static_uri)).await;
        assert_eq!(touched.sessions, 2, "{era}: both sessions are live");

        subscriber.cancel().await.expect("cancel");
        bystander.cancel().await.expect("cancel");
    }
}

#[tokio::test]
async fn touch_is_not_a_tool_unless_enabled() {
    let backend = TestBackend::start(BackendSpec::modern("no-touch")).await;
    let (client, _) = clients::modern(&backend.url()).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().all(|tool| tool.name != "touch"));
    let error = client
        .call_tool(call("touch", json!({})))
        .await
        .expect_err("unknown tool");
    assert!(matches!(error, ServiceError::McpError(_)), "{error:?}");
    client.cancel().await.expect("cancel");
}
