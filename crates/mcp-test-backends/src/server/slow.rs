//! `slow {steps, delay_ms, pad}`: progress and log notifications, then `<backend>: done`.

// Logging is deprecated by SEP-2577, but both protocol eras this crate serves still define it.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolResult, JsonObject, ProgressNotificationParam},
    service::RequestContext,
};
use serde_json::{Value, json};

use super::{SessionLogLevel, Shared, logging, tools::text_result};

const DEFAULT_STEPS: u64 = 3;
const DEFAULT_DELAY_MS: u64 = 100;
const MAX_STEPS: u64 = 10_000;
const MAX_DELAY_MS: u64 = 60_000;
/// Largest `pad`: a progress message of 1 MiB.
const MAX_PAD: u64 = 1024 * 1024;

/// For each step `1..=steps`: a progress notification (when the request has a progress token)
/// and an info log message (when logging is enabled for the request), then `delay_ms` of sleep
/// before the next step. With `pad`, each progress message is filled with `x` to `pad` bytes
/// (large notifications for tests of what the gateway holds). Returns `Err` as soon as the
/// request's cancellation token fires.
pub(crate) async fn run(
    shared: &Shared,
    log_level: &SessionLogLevel,
    arguments: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let backend = shared.spec.name.as_str();
    let number = |key: &str, default: u64, max: u64| {
        arguments
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or(default)
            .min(max)
    };
    let steps = number("steps", DEFAULT_STEPS, MAX_STEPS);
    let delay = Duration::from_millis(number("delay_ms", DEFAULT_DELAY_MS, MAX_DELAY_MS));
    let pad = usize::try_from(number("pad", 0, MAX_PAD)).unwrap_or(0);
    let progress_token = context.meta.get_progress_token();
    let info = rmcp::model::LoggingLevel::Info;
    let log = logging::enabled(log_level, context, info);

    for step in 1..=steps {
        if context.ct.is_cancelled() {
            return Err(cancelled());
        }
        let message = format!("{backend}: step {step}/{steps}");
        if let Some(token) = &progress_token {
            // A failed send means the client is gone; the cancellation token says so next.
            let _ = context
                .peer
                .notify_progress(
                    ProgressNotificationParam::new(token.clone(), step as f64)
                        .with_total(steps as f64)
                        .with_message(padded(&message, pad)),
                )
                .await;
        }
        if log {
            let notification = rmcp::model::LoggingMessageNotificationParam::new(
                info,
                json!({ "message": message }),
            )
            .with_logger(backend);
            let _ = context.peer.notify_logging_message(notification).await;
        }
        if step < steps {
            tokio::select! {
                () = context.ct.cancelled() => return Err(cancelled()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
    Ok(text_result(backend, "done"))
}

/// `message` filled with `x` to `pad` bytes (unchanged when it is as long already).
fn padded(message: &str, pad: usize) -> String {
    let mut padded = message.to_owned();
    padded.extend(std::iter::repeat_n('x', pad.saturating_sub(message.len())));
    padded
}

fn cancelled() -> ErrorData {
    ErrorData::internal_error("slow: request cancelled", None)
}
