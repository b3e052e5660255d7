//! The tasks extension (`io.modelcontextprotocol/tasks`, only with [`BackendSpec::tasks`]):
//! `long_task {delay_ms}` as a task when the request declares the extension, synchronously
//! otherwise, and `tasks/get`, `tasks/update`, `tasks/cancel` over rmcp's [`TaskManager`].
//!
//! [`BackendSpec::tasks`]: crate::BackendSpec::tasks

use std::{
    sync::{Mutex, PoisonError},
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolResponse, CreateTaskResult, JsonObject},
    service::RequestContext,
    task_manager::{TaskExit, TaskManager, TaskOptions},
};
use serde_json::Value;

use super::{Shared, is_modern, tools::text_result};
use crate::counters::CallGuard;

const DEFAULT_DELAY_MS: u64 = 200;
const MAX_DELAY_MS: u64 = 60_000;
/// `pollIntervalMs` suggested on the backend's tasks.
pub(crate) const POLL_INTERVAL_MS: u64 = 50;

/// Every task one backend made, kept across restarts (a restart forgets the tasks themselves, as
/// a server without a durable store would).
#[derive(Default)]
pub(crate) struct Tasks {
    manager: TaskManager,
    /// Raw ids handed out, in creation order.
    minted: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("minted", &self.ids())
            .finish_non_exhaustive()
    }
}

impl Tasks {
    /// The raw task ids minted so far, oldest first.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.lock_minted().clone()
    }

    /// Tasks not yet completed, failed or cancelled.
    pub(crate) fn running(&self) -> usize {
        self.manager.running_task_count()
    }

    /// Aborts every running task and forgets them all (their ids are `-32602` afterwards).
    pub(crate) fn shutdown(&self) {
        self.manager.shutdown();
    }

    pub(crate) fn manager(&self) -> &TaskManager {
        &self.manager
    }

    fn lock_minted(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // Only ever appended to.
        self.minted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// True when this request may be answered with a task: the backend offers the extension, the
/// request is 2026-07-28 and its `clientCapabilities` declare the extension.
fn task_mode(shared: &Shared, context: &RequestContext<RoleServer>) -> bool {
    shared.spec.tasks
        && shared.spec.era.speaks_modern()
        && is_modern(context)
        && context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// `long_task {delay_ms}`: a task completing after `delay_ms` with `<backend>: task done` when the
/// request declared the extension (ended early, and counted as cancelled, by `tasks/cancel`), the
/// same result synchronously otherwise (ended early by the request's cancellation).
pub(crate) async fn long_task(
    shared: &Shared,
    arguments: &JsonObject,
    context: &RequestContext<RoleServer>,
    guard: CallGuard,
) -> Result<CallToolResponse, ErrorData> {
    let delay = Duration::from_millis(
        arguments
            .get("delay_ms")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_DELAY_MS)
            .min(MAX_DELAY_MS),
    );
    let backend = shared.spec.name.clone();
    if !task_mode(shared, context) {
        // Cancellation returns early and drops the guard unfinished: counted as cancelled.
        tokio::select! {
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("long_task: request cancelled", None));
            }
            () = tokio::time::sleep(delay) => {}
        }
        guard.finish();
        return Ok(text_result(&backend, "task done").into());
    }
    let options = TaskOptions::new().with_poll_interval_ms(POLL_INTERVAL_MS);
    let task = shared.tasks.manager.spawn(options, move |task| {
        Box::pin(async move {
            tokio::select! {
                // The guard is dropped unfinished: counted as cancelled.
                () = task.cancelled() => Err(TaskExit::Cancelled),
                () = tokio::time::sleep(delay) => {
                    guard.finish();
                    Ok(text_result(&backend, "task done"))
                }
            }
        })
    });
    shared.tasks.lock_minted().push(task.task_id.clone());
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}
