//! The load drivers: closed loop (N clients, each sending its next request when the previous
//! one is answered) and open loop (a fixed arrival rate, latency measured from each request's
//! *intended* send time, so a stalled server cannot hide its queue: no coordinated omission).

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hdrhistogram::Histogram;

use crate::client::{McpClient, OpError};
use crate::protocol::{Endpoint, Era};
use crate::stats::Summary;

/// What each client does once per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `tools/call` of the endpoint's tool (legacy clients open their session before timing).
    CallTool,
    /// `tools/list` on every endpoint of the workload at once; the iteration ends when the last
    /// answers (with several endpoints: the client-side fan-out, the baseline of a gateway's).
    ListTools,
    /// `server/discover` (modern).
    Discover,
    /// A whole legacy session: `initialize` + `notifications/initialized` + DELETE.
    SessionCycle,
    /// A legacy session with one list in it: `initialize` + `notifications/initialized` +
    /// `tools/list` + DELETE (the performance issue's session cycle).
    SessionCycleWithList,
}

impl Operation {
    /// Whether each iteration opens (and ends) a session of its own, rather than using the one
    /// the client opened before the clock started.
    #[must_use]
    pub fn opens_its_own_session(self) -> bool {
        matches!(self, Self::SessionCycle | Self::SessionCycleWithList)
    }
}

/// How iterations are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Each client starts its next iteration as soon as the previous one ends.
    Closed,
    /// `rate` iterations per second in total, spread evenly over the clients; an iteration's
    /// latency counts from when it should have started.
    Open {
        /// Iterations per second, all clients together.
        rate: f64,
    },
}

/// One load run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Every client talks to each of these endpoints (one connection per endpoint).
    pub endpoints: Vec<Endpoint>,
    /// The era the clients speak.
    pub era: Era,
    /// What they do.
    pub operation: Operation,
    /// How many clients run at once.
    pub concurrency: usize,
    /// Pacing.
    pub pace: Pace,
    /// Time run but not measured first (connections, caches, allocator warm up).
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
}

/// What a load run measured.
#[derive(Clone, Debug)]
pub struct LoadResult {
    /// Latency of the iterations started in the measured window, in nanoseconds.
    pub histogram: Histogram<u64>,
    /// Successful iterations started in the measured window.
    pub ops: u64,
    /// Iterations (any outcome) including warmup: the denominator of per-request CPU time.
    pub total_ops: u64,
    /// Failed iterations (any time, setup included).
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// The measured window.
    pub window: Duration,
}

/// Histogram bounds: 1 µs .. 60 s at 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("static bounds are valid")
}

impl LoadResult {
    fn empty(window: Duration) -> Self {
        Self {
            histogram: new_histogram(),
            ops: 0,
            total_ops: 0,
            errors: 0,
            first_error: None,
            window,
        }
    }

    /// Adds another run's figures (histograms merged, counts and windows summed): rounds of an
    /// A/B comparison are reported together.
    pub fn merge(&mut self, other: &Self) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms of the same bounds merge");
        self.ops += other.ops;
        self.total_ops += other.total_ops;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        self.window += other.window;
    }

    /// Like [`merge`](Self::merge) but keeps this result's window (workers of one run share it).
    fn merge_counts(&mut self, other: &Self) {
        let window = self.window;
        self.merge(other);
        self.window = window;
    }

    /// Throughput and latency percentiles.
    #[must_use]
    pub fn summary(&self) -> Summary {
        Summary::of(self)
    }

    fn error(&mut self, e: &OpError) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// Runs `workload` and returns its measurements. Clients connect (and legacy clients open
/// their session, except for the session cycles) before the clock starts.
pub async fn run(workload: &Workload) -> LoadResult {
    let concurrency = workload.concurrency.max(1);
    let setups = (0..concurrency).map(|_| async {
        let mut clients: Vec<McpClient> = workload
            .endpoints
            .iter()
            .map(|e| McpClient::new(e.clone(), workload.era))
            .collect();
        let mut failure = None;
        if !workload.operation.opens_its_own_session() {
            for client in &mut clients {
                if let Err(e) = client.ensure_session().await {
                    failure = Some(e);
                }
            }
        }
        (clients, failure)
    });
    let mut result = LoadResult::empty(workload.duration);
    let mut ready = Vec::with_capacity(concurrency);
    for (clients, failure) in join_all(setups).await {
        if let Some(e) = failure {
            result.error(&e);
        }
        ready.push(clients);
    }
    let start = Instant::now();
    let workers = ready.into_iter().enumerate().map(|(index, clients)| {
        let workload = workload.clone();
        tokio::spawn(async move { worker(&workload, clients, start, index, concurrency).await })
    });
    for outcome in join_all(workers).await {
        match outcome {
            Ok(part) => result.merge_counts(&part),
            Err(e) => result.error(&OpError::from_panic(&e)),
        }
    }
    result
}

async fn worker(
    workload: &Workload,
    mut clients: Vec<McpClient>,
    start: Instant,
    index: usize,
    concurrency: usize,
) -> LoadResult {
    let measure_from = start + workload.warmup;
    let end = measure_from + workload.duration;
    let mut result = LoadResult::empty(workload.duration);
    // Open loop: this client's share of the rate, phase-shifted so clients do not fire together.
    let interval = match workload.pace {
        Pace::Closed => None,
        Pace::Open { rate } => Some(Duration::from_secs_f64(concurrency as f64 / rate.max(1e-3))),
    };
    let mut intended = interval.map(|i| start + i.mul_f64(index as f64 / concurrency as f64));
    loop {
        let began = match intended {
            Some(at) => {
                if at >= end {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                at
            }
            None => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                now
            }
        };
        let outcome = iterate(workload.operation, &mut clients).await;
        let latency = began.elapsed();
        result.total_ops += 1;
        match outcome {
            Ok(()) if began >= measure_from => {
                result.ops += 1;
                let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
                result.histogram.saturating_record(nanos);
            }
            Ok(()) => {}
            Err(e) => {
                result.error(&e);
                // A dead target must not turn the run into a busy loop of instant failures.
                if result.errors > 1_000 && result.errors > result.total_ops / 2 {
                    break;
                }
            }
        }
        if let (Some(at), Some(step)) = (intended.as_mut(), interval) {
            *at += step;
        }
    }
    result
}

pub(crate) async fn iterate(
    operation: Operation,
    clients: &mut [McpClient],
) -> Result<(), OpError> {
    match (operation, clients) {
        (Operation::ListTools, clients) if clients.len() > 1 => {
            let answers = join_all(clients.iter_mut().map(McpClient::list_tools)).await;
            answers.into_iter().try_for_each(|a| a.map(drop))
        }
        (_, []) => Err(OpError::from_message("a workload needs an endpoint")),
        (Operation::CallTool, [client, ..]) => client.call_tool().await,
        (Operation::ListTools, [client, ..]) => client.list_tools().await.map(drop),
        (Operation::Discover, [client, ..]) => client.discover().await,
        (Operation::SessionCycle, [client, ..]) => client.session_cycle().await,
        (Operation::SessionCycleWithList, [client, ..]) => client.session_cycle_with_list().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::echo::EchoBackend;

    async fn run_against(backends: &[EchoBackend], era: Era, operation: Operation) -> LoadResult {
        run(&Workload {
            endpoints: backends
                .iter()
                .map(|b| Endpoint::new(b.addr(), "/mcp"))
                .collect(),
            era,
            operation,
            concurrency: 3,
            pace: Pace::Closed,
            warmup: Duration::from_millis(10),
            duration: Duration::from_millis(50),
        })
        .await
    }

    #[tokio::test]
    async fn closed_loops_of_each_operation_complete_without_errors() {
        let modern = [
            EchoBackend::builder().spawn().await.expect("bind"),
            EchoBackend::builder().tools(5).spawn().await.expect("bind"),
        ];
        let legacy = [EchoBackend::builder()
            .era(Era::Legacy)
            .spawn()
            .await
            .expect("bind")];
        for (backends, era, operation) in [
            (&modern[..], Era::Modern, Operation::ListTools),
            (&modern[..1], Era::Modern, Operation::Discover),
            (&legacy[..], Era::Legacy, Operation::SessionCycle),
            (&legacy[..], Era::Legacy, Operation::SessionCycleWithList),
            (&legacy[..], Era::Legacy, Operation::CallTool),
        ] {
            let result = run_against(backends, era, operation).await;
            assert_eq!(result.errors, 0, "{operation:?}: {:?}", result.first_error);
            assert!(result.ops > 0, "{operation:?}");
            assert!(result.total_ops >= result.ops);
            assert_eq!(result.histogram.len(), result.ops);
        }
    }

    #[tokio::test]
    async fn failures_are_counted_with_the_first_message() {
        // A modern client cannot call a legacy backend: every iteration fails the same way.
        let legacy = [EchoBackend::builder()
            .era(Era::Legacy)
            .spawn()
            .await
            .expect("bind")];
        let result = run_against(&legacy, Era::Modern, Operation::CallTool).await;
        assert_eq!(result.ops, 0);
        assert!(result.errors > 0);
        let first = result.first_error.expect("a message");
        assert!(first.contains("missing session"), "{first}");
    }
}
