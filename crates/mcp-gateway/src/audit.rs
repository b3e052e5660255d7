//! The audit trail's writer (`[telemetry.audit]`): the router hands each
//! [`AuditRecord`](mcp_router::audit::AuditRecord) to [`JsonLines`], which serialises it (one
//! JSON object per line) on the caller's thread and queues the line, without ever waiting, to a
//! writer thread of its own that appends it to the process's stdout or to a file opened once at
//! start. The queue is bounded (`telemetry.audit.queue` records, each bounded by
//! `telemetry.audit.max_payload_bytes`): when it is full, the record is dropped and counted
//! (`mcp_gateway_audit_dropped_total{reason="queue_full"}`), so one tenant's flood costs the
//! others no call and the trail no unbounded memory. A write the target refuses (disk full) is
//! logged once per outage and its records counted (`reason="write_error"`); the calls never
//! notice. The writer flushes whenever its queue runs empty, so a record reaches the target as
//! soon as the thread gets to it, and at the end (the last router clone dropped) it drains the
//! queue, waiting at most [`FLUSH_AT_EXIT`] for it.
//!
//! A file target is opened again at its path after every applied reload ([`AuditFile`]), before
//! the next write: rotating it (rename, then SIGHUP) needs no `copytruncate`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_router::McpRouterBuilder;
use mcp_router::audit::{Audit, AuditPayloads, AuditRecord, AuditSink};

use crate::config::{AuditTarget, GatewayConfig};
use crate::error::GatewayError;
use crate::metrics::AUDIT_DROPPED;

/// The longest the end of the trail waits for the writer to drain its queue.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(2);
/// Lines gathered into one write when the queue holds several.
const BATCH_BYTES: usize = 64 * 1024;

/// One option on the router builder (the gateway's `RouterOption`).
type RouterOption = Box<dyn FnOnce(McpRouterBuilder) -> McpRouterBuilder + Send>;

/// Asks the writer of a file target to open its path again before the next write (a reload:
/// the file may have been rotated).
#[derive(Clone, Debug)]
pub(crate) struct AuditFile(Arc<AtomicBool>);

impl AuditFile {
    pub(crate) fn reopen(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A file target: its path, and whether a reload asked to open it again.
struct Reopen {
    path: PathBuf,
    asked: Arc<AtomicBool>,
}

/// `options` plus the audit trail `config` asks for (none with `telemetry.audit.target = "off"`),
/// and the handle that reopens a file target.
///
/// # Errors
///
/// The audit file cannot be opened for appending (named with `telemetry.audit.path`).
pub(crate) fn with_audit(
    mut options: Vec<RouterOption>,
    config: &GatewayConfig,
) -> Result<(Vec<RouterOption>, Option<AuditFile>), GatewayError> {
    let Some((audit, file)) = router_audit(config)? else {
        return Ok((options, None));
    };
    options.push(Box::new(move |builder| builder.audit(audit)));
    Ok((options, file))
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The router's audit settings for `config`, `None` when the trail is off.
fn router_audit(
    config: &GatewayConfig,
) -> Result<Option<(Audit, Option<AuditFile>)>, GatewayError> {
    let c = &config.telemetry.audit;
    let (out, reopen): (Box<dyn Write + Send>, _) = match &c.target {
        AuditTarget::Stdout => (Box::new(std::io::stdout()), None),
        AuditTarget::File(path) => {
            let file = append(path).map_err(|e| {
                config.problem(
                    "telemetry.audit.path",
                    format!("cannot open {} for appending: {e}", path.display()),
                )
            })?;
            let reopen = Reopen {
                path: path.clone(),
                asked: Arc::default(),
            };
            (Box::new(file), Some(reopen))
        }
        _ => return Ok(None),
    };
    let file = reopen.as_ref().map(|r| AuditFile(Arc::clone(&r.asked)));
    // The counter shows from the start (at 0) once the gateway's recorder is installed.
    let _ = crate::metrics::handle();
    for reason in ["queue_full", "write_error"] {
        metrics::counter!(AUDIT_DROPPED, "reason" => reason).absolute(0);
    }
    let sink = JsonLines::start(out, c.queue, reopen);
    let payloads = if c.payloads_per_vhost {
        AuditPayloads::PerVhost
    } else {
        AuditPayloads::Never
    };
    tracing::info!(target = ?c.target, payloads = ?payloads, "audit trail on");
    let audit = Audit::new(sink)
        .payloads(payloads)
        .max_payload_bytes(c.max_payload_bytes);
    Ok(Some((audit, file)))
}

/// Audit records as JSON lines, written by a thread of their own (see the module docs).
pub(crate) struct JsonLines {
    lines: Option<SyncSender<Vec<u8>>>,
    /// Signalled by the writer when it has written everything and stopped.
    drained: Mutex<Receiver<()>>,
}

impl JsonLines {
    /// Starts the writer thread on `out`, with room for `queue` lines; `reopen`: the file `out`
    /// is, to open again when asked.
    fn start(out: Box<dyn Write + Send>, queue: usize, reopen: Option<Reopen>) -> Self {
        let (lines, pending) = mpsc::sync_channel(queue.max(1));
        let (done, drained) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("mcp-audit".to_owned())
            .spawn(move || {
                write_lines(&pending, out, reopen.as_ref());
                let _ = done.send(());
            });
        if let Err(e) = spawned {
            // Then every record is counted as dropped (the receiver is gone).
            tracing::error!(error = %e, "cannot start the audit writer thread");
        }
        Self {
            lines: Some(lines),
            drained: Mutex::new(drained),
        }
    }
}

impl AuditSink for JsonLines {
    fn record(&self, record: AuditRecord) {
        match serde_json::to_vec(&record) {
            Ok(mut line) => {
                line.push(b'\n');
                self.push(line);
            }
            Err(e) => tracing::warn!(error = %e, "cannot serialise an audit record"),
        }
    }
}

impl JsonLines {
    /// Queues `line` for the writer, or drops and counts it when the queue is full.
    fn push(&self, line: Vec<u8>) {
        let Some(lines) = &self.lines else {
            return;
        };
        match lines.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                metrics::counter!(AUDIT_DROPPED, "reason" => "queue_full").increment(1);
            }
            Err(TrySendError::Disconnected(_)) => {
                metrics::counter!(AUDIT_DROPPED, "reason" => "write_error").increment(1);
            }
        }
    }
}

impl Drop for JsonLines {
    fn drop(&mut self) {
        // The writer ends once the queue is empty and closed; the records still queued are
        // written first, for a short while at most.
        drop(self.lines.take());
        let drained = self.drained.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(RecvTimeoutError::Timeout) = drained.recv_timeout(FLUSH_AT_EXIT) {
            tracing::warn!("the audit writer did not drain its queue in time at exit");
        }
    }
}

/// The writer thread: lines from `pending` to `out`, gathered into batches while the queue
/// holds several, flushed whenever it runs empty.
fn write_lines(
    pending: &Receiver<Vec<u8>>,
    mut out: Box<dyn Write + Send>,
    reopen: Option<&Reopen>,
) {
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
    let mut records = 0u64;
    let mut failing = false;
    loop {
        let line = match pending.try_recv() {
            Ok(line) => Some(line),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => break,
        };
        let line = match line {
            Some(line) => line,
            None => {
                reopen_if_asked(&mut out, reopen, &batch);
                write_batch(&mut out, &mut batch, &mut records, &mut failing);
                match pending.recv() {
                    Ok(line) => line,
                    Err(_) => break,
                }
            }
        };
        batch.extend_from_slice(&line);
        records += 1;
        if batch.len() >= BATCH_BYTES {
            reopen_if_asked(&mut out, reopen, &batch);
            write_batch(&mut out, &mut batch, &mut records, &mut failing);
        }
    }
    reopen_if_asked(&mut out, reopen, &batch);
    write_batch(&mut out, &mut batch, &mut records, &mut failing);
}

/// Before writing a batch: opens the file again at its path when a reload asked (the old one
/// may have been renamed away); one that cannot be opened keeps the old, and says so.
fn reopen_if_asked(out: &mut Box<dyn Write + Send>, reopen: Option<&Reopen>, batch: &[u8]) {
    let Some(reopen) = reopen else {
        return;
    };
    // Asked with nothing to write: the next batch opens it.
    if batch.is_empty() || !reopen.asked.swap(false, Ordering::Relaxed) {
        return;
    }
    match append(&reopen.path) {
        Ok(file) => {
            let _ = out.flush();
            *out = Box::new(file);
            tracing::info!(path = %reopen.path.display(), "audit file opened again");
        }
        Err(e) => {
            tracing::error!(path = %reopen.path.display(), error = %e, "cannot open the audit file again; records go to the one open")
        }
    }
}

/// Writes and flushes `batch` (`records` lines); a failure counts them as dropped and is logged
/// when the target starts failing (and again when it recovers), not per record.
fn write_batch(out: &mut dyn Write, batch: &mut Vec<u8>, records: &mut u64, failing: &mut bool) {
    if batch.is_empty() {
        return;
    }
    let written = out.write_all(batch).and_then(|()| out.flush());
    match written {
        Ok(()) if *failing => {
            *failing = false;
            tracing::info!("the audit target takes records again");
        }
        Ok(()) => {}
        Err(e) => {
            metrics::counter!(AUDIT_DROPPED, "reason" => "write_error").increment(*records);
            if !*failing {
                *failing = true;
                tracing::error!(error = %e, "cannot write audit records; they are dropped and counted until the target takes them again");
            }
        }
    }
    batch.clear();
    *records = 0;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A target that keeps what it is given, or refuses every write.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>, bool);

    impl Write for Kept {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.1 {
                return Err(std::io::Error::other("disk full"));
            }
            self.0.lock().expect("kept").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn line(n: usize) -> Vec<u8> {
        format!("{{\"n\":{n}}}\n").into_bytes()
    }

    #[test]
    fn lines_are_written_in_order_and_the_end_drains_the_queue() {
        let kept = Kept::default();
        let sink = JsonLines::start(Box::new(kept.clone()), 1024, None);
        for n in 0..500 {
            sink.push(line(n));
        }
        drop(sink);
        let text = String::from_utf8(kept.0.lock().expect("kept").clone()).expect("utf-8");
        let expected: String = (0..500).map(|n| format!("{{\"n\":{n}}}\n")).collect();
        assert_eq!(text, expected);
    }

    #[test]
    fn a_refusing_target_costs_the_caller_nothing() {
        let sink = JsonLines::start(Box::new(Kept(Arc::default(), true)), 1, None);
        // Never blocks, whatever the target does and however full the queue is.
        for n in 0..10_000 {
            sink.push(line(n));
        }
        drop(sink);
    }
}
