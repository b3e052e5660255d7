//! Per-tool call counters, and the drop guard that feeds them from inside a tool call.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

/// How many calls of one tool started, finished and were cancelled.
///
/// `started == finished + cancelled + (calls still running)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolCalls {
    /// Calls whose handler began.
    pub started: u64,
    /// Calls whose handler returned a result or an error.
    pub finished: u64,
    /// Calls that ended early: the handler future was dropped, or the request's cancellation
    /// token fired (client disconnect, `notifications/cancelled`, backend stop).
    pub cancelled: u64,
}

/// Counters for every tool of one backend, kept across restarts.
#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    by_tool: Mutex<HashMap<String, ToolCalls>>,
}

impl CallCounters {
    pub(crate) fn get(&self, tool: &str) -> ToolCalls {
        self.lock().get(tool).copied().unwrap_or_default()
    }

    fn update(&self, tool: &str, change: impl FnOnce(&mut ToolCalls)) {
        change(self.lock().entry(tool.to_owned()).or_default());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ToolCalls>> {
        // The map holds plain counters: a panic elsewhere cannot leave it inconsistent.
        self.by_tool.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts one call: `started` on creation, `finished` on [`CallGuard::finish`], `cancelled`
/// when dropped unfinished (future dropped or cancellation observed).
#[derive(Debug)]
pub(crate) struct CallGuard {
    counters: Arc<CallCounters>,
    tool: String,
    finished: bool,
}

impl CallGuard {
    pub(crate) fn start(counters: Arc<CallCounters>, tool: &str) -> Self {
        counters.update(tool, |calls| calls.started += 1);
        Self {
            counters,
            tool: tool.to_owned(),
            finished: false,
        }
    }

    pub(crate) fn finish(mut self) {
        self.finished = true;
        self.counters
            .update(&self.tool, |calls| calls.finished += 1);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.counters
                .update(&self.tool, |calls| calls.cancelled += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_and_drop_are_counted_apart() {
        let counters = Arc::new(CallCounters::default());
        CallGuard::start(counters.clone(), "slow").finish();
        drop(CallGuard::start(counters.clone(), "slow"));
        let _running = CallGuard::start(counters.clone(), "slow");
        assert_eq!(
            counters.get("slow"),
            ToolCalls {
                started: 3,
                finished: 1,
                cancelled: 1
            }
        );
        assert_eq!(counters.get("echo"), ToolCalls::default());
    }
}
