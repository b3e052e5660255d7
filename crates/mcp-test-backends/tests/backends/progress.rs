//! `slow`: progress notifications and log messages reach the client, per era rules.

// Logging is deprecated by SEP-2577, but the backends still send log messages to observe.
#![allow(deprecated)]

use std::time::{Duration, Instant};

use mcp_test_backends::{BackendSpec, Era, TestBackend};
use rmcp::model::{LoggingLevel, RequestMetaObject, SetLevelRequestParams};
use serde_json::json;

use crate::{
    clients::{self, RecordingClient},
    eras::{call, first_text},
    raw_http,
};

/// Polls `count` until it reaches `at_least` or two seconds pass; returns the last value.
async fn eventually(at_least: usize, count: impl Fn() -> usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let current = count();
        if current >= at_least || Instant::now() >= deadline {
            return current;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn assert_progress(handler: &RecordingClient, backend: &str) {
    let progress = handler.progress();
    let steps: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(steps, [1.0, 2.0, 3.0], "{backend}");
    assert!(progress.iter().all(|p| p.total == Some(3.0)));
    assert_eq!(
        progress[2].message.as_deref(),
        Some(&*format!("{backend}: step 3/3"))
    );
}

#[tokio::test]
async fn modern_client_receives_progress_and_opt_in_logs() {
    for era in [Era::Modern, Era::Both] {
        let name = format!("pm-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let (client, handler) = clients::modern(&backend.url()).await;

        let done = client
            .call_tool(call("slow", json!({ "steps": 3, "delay_ms": 20 })))
            .await
            .expect("slow");
        assert_eq!(first_text(&done), format!("{name}: done"));
        assert_eq!(eventually(3, || handler.progress().len()).await, 3);
        assert_progress(&handler, &name);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            handler.logs().is_empty(),
            "{era}: no logLevel, no log messages"
        );

        let mut params = call("slow", json!({ "steps": 2, "delay_ms": 10 }));
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(LoggingLevel::Info);
        params.meta = Some(meta);
        client.call_tool(params).await.expect("slow with logLevel");
        assert_eq!(eventually(2, || handler.logs().len()).await, 2, "{era}");
        let log = &handler.logs()[0];
        assert_eq!(log.level, LoggingLevel::Info);
        assert_eq!(log.logger.as_deref(), Some(name.as_str()));
        assert_eq!(log.data["message"], format!("{name}: step 1/2"));

        let mut params = call("slow", json!({ "steps": 2, "delay_ms": 10 }));
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(LoggingLevel::Error);
        params.meta = Some(meta);
        client
            .call_tool(params)
            .await
            .expect("slow with logLevel error");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            handler.logs().len(),
            2,
            "{era}: info is below the error threshold"
        );
        client.cancel().await.expect("cancel");
    }
}

#[tokio::test]
async fn legacy_client_receives_progress_and_logs_until_set_level() {
    for era in [Era::Legacy, Era::Both] {
        let name = format!("pl-{era}");
        let backend = TestBackend::start(BackendSpec::new(name.clone(), era)).await;
        let (client, handler) = clients::legacy(&backend.url()).await.expect("legacy");

        let done = client
            .call_tool(call("slow", json!({ "steps": 3, "delay_ms": 20 })))
            .await
            .expect("slow");
        assert_eq!(first_text(&done), format!("{name}: done"));
        assert_eq!(eventually(3, || handler.progress().len()).await, 3);
        assert_progress(&handler, &name);
        assert_eq!(
            eventually(3, || handler.logs().len()).await,
            3,
            "{era}: legacy logs by default"
        );

        client
            .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
            .await
            .expect("logging/setLevel");
        client
            .call_tool(call("slow", json!({ "steps": 2, "delay_ms": 10 })))
            .await
            .expect("slow");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(handler.logs().len(), 3, "{era}: info is below warning");
        client.cancel().await.expect("cancel");
    }
}

#[tokio::test]
async fn raw_modern_call_streams_progress_before_the_result() {
    let backend = TestBackend::start(BackendSpec::modern("raw-progress")).await;
    let response = raw_http::modern_request(
        &backend.url(),
        7,
        "tools/call",
        json!({
            "name": "slow",
            "arguments": { "steps": 2, "delay_ms": 10 },
            "_meta": { "progressToken": "tok-1", "io.modelcontextprotocol/logLevel": "debug" }
        }),
    )
    .await;
    let messages = response.messages();
    let methods: Vec<&str> = messages
        .iter()
        .map(|message| message["method"].as_str().unwrap_or("<reply>"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/progress",
            "notifications/message",
            "<reply>"
        ]
    );
    assert_eq!(messages[0]["params"]["progressToken"], "tok-1");
    assert_eq!(response.reply()["id"], 7);
    assert_eq!(
        response.reply()["result"]["content"][0]["text"],
        "raw-progress: done"
    );
}
