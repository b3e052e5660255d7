//! The interop matrix: real clients x real backends through one virtual host with prefixing.
//!
//! Backends (each a process): `everything` (`@modelcontextprotocol/server-everything`), `py`
//! (Python SDK 1.x FastMCP, `tests/conformance/py_server.py`), `ts2` (TypeScript SDK 2.x server,
//! `tests/conformance/node/ts2_server.mjs`), `rmcp` (`mcp-test-peer serve`, rmcp dual-era).
//! Clients (each a process): Python SDK 1.x (2025 session) and 2.x (auto), TypeScript SDK 1.x
//! (2025 session) and 2.x (auto), rmcp 2025 client and auto mode.
//!
//! One client run exercises every backend; a cell (client x backend) passes when the backend's
//! prefixed tool is listed and the call, the resource read and the prompt get answer with the
//! backend's expected text. Feature cells, where the backend offers the feature (every client
//! does): `progress` (a call's progress notifications arrive), `logging` (its log messages
//! arrive), `completion` (`completion/complete` on a prompt argument), `elicitation` (a tool asks
//! the user; the client's handler answers, as a 2025 request or a 2026-07-28 input-required
//! round), `sampling` (a tool asks the client's LLM) and `subscription` (the client subscribes
//! to a resource: `resources/subscribe` in a 2025 session, `subscriptions/listen` in 2026-07-28;
//! then calls a tool that changes it and waits for `notifications/resources/updated`). A failing
//! cell is run again directly against its backend (no gateway, unprefixed names), and the report
//! says whether it fails there too: then it is the peers' own limitation, else the gateway's.
//!
//! What the backends offer: `everything` and `rmcp` every feature; `ts2` every feature, but its
//! 2025 leg is stateless (no subscriptions, no server-to-client requests: elicitation and
//! sampling are 2026-07-28 input_required rounds only); `py` (FastMCP 1.x) no elicitation, no
//! sampling and no subscriptions (FastMCP advertises `resources.subscribe: false`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::filter::Filter;
use super::gateway::{self, RunningGateway};
use super::install::Peers;
use super::outcome::Outcome;
use super::process::{self, Spawned};

/// The run id of the matrix in the report and the baseline.
pub(crate) const RUN: &str = "interop@gateway";
/// The virtual host holding every matrix backend (`naming` prefix).
const VHOST: &str = "matrix";
/// Longest run of one client (interpreter start-up on a loaded 2-core machine included).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// What a backend offers and answers (names are upstream names; the gateway prefixes them).
struct BackendPlan {
    name: &'static str,
    tool: &'static str,
    arguments: Value,
    call_text: &'static str,
    resource: &'static str,
    read_text: &'static str,
    prompt: &'static str,
    prompt_arguments: Value,
    prompt_text: &'static str,
    /// A tool that reports progress, and its arguments (feature cell `progress`).
    progress: Option<(&'static str, Value)>,
    /// (prompt, argument, typed value, a value the completions must contain) (feature cell
    /// `completion`).
    completion: Option<(&'static str, &'static str, &'static str, &'static str)>,
    /// A tool that asks the user (elicitation), its arguments and the text of its answer once
    /// the client accepted (feature cell `elicitation`).
    elicitation: Option<(&'static str, Value, &'static str)>,
    /// A tool that asks the client's LLM (sampling), its arguments and the text of its answer
    /// (feature cell `sampling`).
    sampling: Option<(&'static str, Value, &'static str)>,
    /// Whether the progress tool also sends log messages (feature cell `logging`).
    logs: bool,
    /// A resource to subscribe to and the tool that changes it (feature cell `subscription`).
    subscription: Option<Subscription>,
}

/// What the `subscription` cell of a backend subscribes to and how it makes the change.
struct Subscription {
    /// The resource (upstream URI).
    resource: &'static str,
    /// The tool that announces a change of it, and its arguments.
    touch: &'static str,
    touch_arguments: Value,
    /// Whether to call the tool again when no update came (server-everything's tool toggles
    /// 5-second updates on and off: it is called once).
    repeat: bool,
    /// A text in the tool's answer saying it switched updates off: the client then calls it
    /// again. server-everything toggles per upstream session, and the gateway shares a
    /// caller's upstream sessions between the caller's sessions (every matrix client is the same
    /// caller), so an earlier client may have left the updates on.
    off_text: Option<&'static str>,
}

/// What the basic cell of a client and a backend checks.
const BASIC_CHECKS: &str = "list, call, read, prompt";

/// The feature cells, each judged where the backend offers it.
const FEATURES: [&str; 6] = [
    "progress",
    "logging",
    "completion",
    "elicitation",
    "sampling",
    "subscription",
];

fn plans() -> Vec<BackendPlan> {
    vec![
        BackendPlan {
            name: "everything",
            tool: "echo",
            arguments: json!({"message": "hi"}),
            call_text: "Echo: hi",
            resource: "demo://resource/static/document/architecture.md",
            read_text: "",
            prompt: "args-prompt",
            prompt_arguments: json!({"city": "Paris"}),
            prompt_text: "Paris",
            progress: Some((
                "trigger-long-running-operation",
                json!({"duration": 0.3, "steps": 3}),
            )),
            completion: Some(("completable-prompt", "department", "Eng", "Engineering")),
            elicitation: Some((
                "trigger-elicitation-request",
                json!({}),
                "User provided the requested information",
            )),
            sampling: Some((
                "trigger-sampling-request",
                json!({"prompt": "hi", "maxTokens": 10}),
                "sampled by the matrix",
            )),
            logs: false,
            subscription: Some(Subscription {
                resource: "demo://resource/static/document/architecture.md",
                touch: "toggle-subscriber-updates",
                touch_arguments: json!({}),
                repeat: false,
                off_text: Some("Stopped simulated resource updates"),
            }),
        },
        BackendPlan {
            name: "py",
            tool: "echo",
            arguments: json!({"text": "hi"}),
            call_text: "py: hi",
            resource: "test://py/static",
            read_text: "static from py",
            prompt: "greet",
            prompt_arguments: json!({"who": "bob"}),
            prompt_text: "Hello bob from py",
            progress: Some(("slow", json!({"steps": 3}))),
            completion: Some(("greet", "who", "a", "alice")),
            elicitation: None,
            sampling: None,
            logs: true,
            subscription: None,
        },
        BackendPlan {
            name: "ts2",
            tool: "echo",
            arguments: json!({"text": "hi"}),
            call_text: "ts2: hi",
            resource: "test://ts2/static",
            read_text: "static from ts2",
            prompt: "greet",
            prompt_arguments: json!({"who": "bob"}),
            prompt_text: "Hello bob from ts2",
            progress: Some(("slow", json!({"steps": 3}))),
            completion: Some(("greet", "who", "a", "alice")),
            elicitation: Some(("ask", json!({}), "ts2: Ferris likes orange")),
            sampling: Some((
                "sample",
                json!({"prompt": "hi"}),
                "ts2: sampled sampled by the matrix",
            )),
            logs: true,
            subscription: Some(Subscription {
                resource: "test://ts2/static",
                touch: "touch",
                touch_arguments: json!({}),
                repeat: true,
                off_text: None,
            }),
        },
        BackendPlan {
            name: "rmcp",
            tool: "echo",
            arguments: json!({"text": "hi"}),
            call_text: "rmcp: hi",
            resource: "test://rmcp/static",
            read_text: "static from rmcp",
            prompt: "greet",
            prompt_arguments: json!({"who": "bob"}),
            prompt_text: "Hello bob from rmcp",
            progress: Some(("slow", json!({"steps": 3, "delay_ms": 20}))),
            completion: Some(("greet", "who", "a", "alice")),
            elicitation: Some(("ask", json!({}), "rmcp: Ferris likes orange")),
            sampling: Some((
                "sample",
                json!({"prompt": "hi"}),
                "rmcp: sampled sampled by the matrix",
            )),
            logs: true,
            subscription: Some(Subscription {
                resource: "test://rmcp/static",
                touch: "touch",
                // The tool takes the upstream URI: the gateway does not rewrite arguments.
                touch_arguments: json!({"uri": "test://rmcp/static"}),
                repeat: true,
                off_text: None,
            }),
        },
    ]
}

/// The plan a client runs: public names through the gateway (`prefix`), upstream names directly.
fn plan_json(plans: &[&BackendPlan], prefix: bool) -> String {
    let public = |backend: &str, name: &str| {
        if prefix {
            format!("{backend}-{name}")
        } else {
            name.to_owned()
        }
    };
    let entries: Vec<Value> = plans
        .iter()
        .map(|plan| {
            let mut entry = json!({
                "backend": plan.name,
                "tool": public(plan.name, plan.tool),
                "arguments": plan.arguments,
                "resource": public(plan.name, plan.resource),
                "prompt": public(plan.name, plan.prompt),
                "prompt_arguments": plan.prompt_arguments,
            });
            if let Some((tool, arguments)) = &plan.progress {
                entry["progress_tool"] = json!(public(plan.name, tool));
                entry["progress_arguments"] = arguments.clone();
            }
            if let Some((tool, arguments, _)) = &plan.elicitation {
                entry["elicit_tool"] = json!(public(plan.name, tool));
                entry["elicit_arguments"] = arguments.clone();
            }
            if let Some((tool, arguments, _)) = &plan.sampling {
                entry["sample_tool"] = json!(public(plan.name, tool));
                entry["sample_arguments"] = arguments.clone();
            }
            if let Some(subscription) = &plan.subscription {
                entry["subscribe_resource"] = json!(public(plan.name, subscription.resource));
                entry["touch_tool"] = json!(public(plan.name, subscription.touch));
                entry["touch_arguments"] = subscription.touch_arguments.clone();
                entry["touch_repeat"] = json!(subscription.repeat);
                if let Some(off) = subscription.off_text {
                    entry["touch_off_text"] = json!(off);
                }
            }
            if let Some((prompt, argument, value, _)) = plan.completion {
                entry["complete_prompt"] = json!(public(plan.name, prompt));
                entry["complete_argument"] = json!(argument);
                entry["complete_value"] = json!(value);
            }
            entry
        })
        .collect();
    Value::Array(entries).to_string()
}

/// A matrix client: its name in the report and how to start it.
struct Client {
    name: &'static str,
    program: PathBuf,
    /// Arguments before `URL TOKEN ... PLAN`; `mode` goes where each client wants it.
    head: Vec<String>,
    /// Arguments between `TOKEN` and `PLAN` (Python: the mode).
    middle: Vec<String>,
    dir: PathBuf,
}

impl Client {
    fn command(&self, url: &str, token: &str, plan: &str) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.head)
            .args([url, token])
            .args(&self.middle)
            .arg(plan)
            .current_dir(&self.dir);
        command
    }
}

fn clients(root: &Path, peers: &Peers, peer: &Path) -> Vec<Client> {
    let py = root
        .join("tests/conformance/py_cell.py")
        .display()
        .to_string();
    let ts = peers.project.join("ts_cell.mjs").display().to_string();
    let python = |name, program: &Path, mode: &str| Client {
        name,
        program: program.to_path_buf(),
        head: vec![py.clone()],
        middle: vec![mode.to_owned()],
        dir: root.to_path_buf(),
    };
    let node = |name, major: &str| Client {
        name,
        program: peers.node.clone(),
        head: vec![ts.clone(), major.to_owned()],
        middle: Vec::new(),
        dir: peers.project.clone(),
    };
    let rmcp = |name, mode: &str| Client {
        name,
        program: peer.to_path_buf(),
        head: vec!["client".to_owned(), mode.to_owned()],
        middle: Vec::new(),
        dir: root.to_path_buf(),
    };
    vec![
        python("python-mcp-1.x (2025 session)", &peers.python1, "legacy"),
        python("python-mcp-2.x (auto)", &peers.python2, "auto"),
        node("ts-sdk-1.x (2025 session)", "1"),
        node("ts-sdk-2.x (auto)", "2"),
        rmcp("rmcp (2025 session)", "legacy"),
        rmcp("rmcp (auto)", "auto"),
    ]
}

/// Starts the backends and a gateway, runs every client, judges every cell.
/// `peer` is the `mcp-test-peer` binary (rmcp as a process).
pub(crate) fn run(
    root: &Path,
    peers: &Peers,
    gateway_binary: &Path,
    peer: &Path,
    filter: &Filter,
    work: &Path,
) -> Result<Vec<Outcome>, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    // The TypeScript scripts import the SDKs: they run next to the installed node_modules.
    for script in ["ts_cell.mjs", "ts2_server.mjs"] {
        std::fs::copy(
            root.join("tests/conformance/node").join(script),
            peers.project.join(script),
        )
        .map_err(|e| format!("cannot copy {script}: {e}"))?;
    }
    let plans = plans();
    let mut backends: Vec<(Spawned, String)> = Vec::new();
    for plan in &plans {
        backends.push(start_backend(root, peers, peer, plan.name, work)?);
    }
    let mut config = serde_json::Map::new();
    for (plan, (_, url)) in plans.iter().zip(&backends) {
        config.insert(plan.name.to_owned(), json!({ "url": url }));
    }
    let users = json!({"virtual_hosts": {VHOST: {"naming": "prefix", "backends": config}}});
    let gateway = RunningGateway::start(gateway_binary, &work.join("gateway"), &users.to_string())?;
    let token = gateway.token(gateway::SUBJECT)?;
    let url = gateway.url(VHOST);
    let all: Vec<&BackendPlan> = plans.iter().collect();
    let through = plan_json(&all, true);
    let mut outcomes = Vec::new();
    for client in clients(root, peers, peer)
        .into_iter()
        .filter(|client| filter.client(client.name))
    {
        let seen = run_client(&client, &url, &token, &through);
        for (plan, (_, backend_url)) in plans.iter().zip(&backends) {
            // (scenario, feature (None: the basic cell), problems)
            let mut cells = vec![(
                format!("{} x {}", client.name, plan.name),
                None,
                judge(&seen, plan, true),
            )];
            for feature in FEATURES {
                if let Some(problems) = judge_feature(&seen, plan, feature) {
                    let scenario = format!("{} x {}: {feature}", client.name, plan.name);
                    cells.push((scenario, Some(feature), problems));
                }
            }
            // A failing cell is run again without the gateway: whose limitation is it?
            let direct = cells
                .iter()
                .any(|(_, _, problems)| !problems.is_empty())
                .then(|| run_client(&client, backend_url, "", &plan_json(&[plan], false)));
            for (scenario, feature, problems) in cells {
                let checks = feature.unwrap_or(BASIC_CHECKS);
                let mut outcome = Outcome::new(RUN, &scenario, problems.is_empty(), checks);
                if let (false, Some(direct)) = (problems.is_empty(), &direct) {
                    let direct_problems = match feature {
                        None => judge(direct, plan, false),
                        Some(feature) => judge_feature(direct, plan, feature).unwrap_or_default(),
                    };
                    let verdict = if direct_problems.is_empty() {
                        "passes directly against the backend (the difference comes from the gateway hop)".to_owned()
                    } else {
                        format!(
                            "fails directly too (the peers' own limitation): {}",
                            direct_problems.join("; ")
                        )
                    };
                    outcome.detail = format!("{}; {verdict}", problems.join("; "));
                }
                outcomes.push(outcome);
            }
        }
    }
    Ok(outcomes)
}

fn start_backend(
    root: &Path,
    peers: &Peers,
    peer: &Path,
    name: &str,
    work: &Path,
) -> Result<(Spawned, String), String> {
    let port = process::free_port()?;
    let log = work.join(format!("backend-{name}.log"));
    let command = match name {
        "everything" => {
            let mut command = Command::new(&peers.node);
            // It has a `get-env` tool: start it with an empty environment.
            command
                .arg(peers.package("@modelcontextprotocol/server-everything", "dist/index.js"))
                .arg("streamableHttp")
                .env_clear()
                .env("PORT", port.to_string())
                .current_dir(&peers.project);
            command
        }
        "py" => {
            let mut command = Command::new(&peers.python1);
            command
                .arg(root.join("tests/conformance/py_server.py"))
                .arg(port.to_string())
                .current_dir(work);
            command
        }
        "ts2" => {
            let mut command = Command::new(&peers.node);
            command
                .arg("ts2_server.mjs")
                .arg(port.to_string())
                .current_dir(&peers.project);
            command
        }
        _ => {
            let mut command = Command::new(peer);
            command.args(["serve", name, &port.to_string()]);
            command
        }
    };
    let mut backend = Spawned::start(&format!("backend {name}"), command, &log)?;
    backend.wait_listening(process::loopback(port), &log)?;
    Ok((backend, format!("http://127.0.0.1:{port}/mcp")))
}

/// Runs a client; its JSON line, or `{"failed": "<why>"}`.
fn run_client(client: &Client, url: &str, token: &str, plan: &str) -> Value {
    let command = client.command(url, token, plan);
    match process::output_within(client.name, command, CLIENT_TIMEOUT) {
        Ok((true, stdout, stderr)) => stdout
            .lines()
            .rev()
            .find(|line| line.starts_with('{'))
            .and_then(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(
                || json!({ "failed": format!("no JSON line; stderr: {}", tail(&stderr)) }),
            ),
        Ok((false, _, stderr)) => {
            json!({ "failed": format!("exited with an error: {}", tail(&stderr)) })
        }
        Err(error) => json!({ "failed": error }),
    }
}

/// The last lines of a client's stderr (the error, not the whole trace).
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// What is wrong with one backend's part of a client's summary (empty: the cell passes).
fn judge(seen: &Value, plan: &BackendPlan, prefix: bool) -> Vec<String> {
    if let Some(failed) = seen["failed"].as_str() {
        return vec![format!("client failed: {failed}")];
    }
    let mut problems = Vec::new();
    let tool = if prefix {
        format!("{}-{}", plan.name, plan.tool)
    } else {
        plan.tool.to_owned()
    };
    let listed = seen["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t.as_str() == Some(&tool)));
    if !listed {
        problems.push(format!("tools/list lacks {tool}"));
    }
    let ops = &seen["ops"][plan.name];
    for (op, wanted) in [
        ("call", plan.call_text),
        ("read", plan.read_text),
        ("prompt", plan.prompt_text),
    ] {
        let result = &ops[op];
        if let Some(error) = result["error"].as_str() {
            problems.push(format!("{op}: {error}"));
            continue;
        }
        let texts: Vec<&str> = result["text"]
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if result["is_error"] == true || !texts.iter().any(|t| !t.is_empty() && t.contains(wanted))
        {
            problems.push(format!(
                "{op}: expected text containing {wanted:?}, got {}",
                result
            ));
        }
    }
    problems
}

/// What is wrong with a feature cell, or `None` when the backend does not offer the feature.
fn judge_feature(seen: &Value, plan: &BackendPlan, feature: &str) -> Option<Vec<String>> {
    let ops = &seen["ops"][plan.name];
    let problem = match feature {
        "progress" => {
            plan.progress.as_ref()?;
            let result = &ops["progress"];
            let count = result["progress"].as_u64().unwrap_or(0);
            if let Some(failed) = seen["failed"].as_str() {
                Some(format!("client failed: {failed}"))
            } else if let Some(error) = result["error"].as_str() {
                Some(format!("progress: {error}"))
            } else if count == 0 {
                Some(format!("progress: no progress notification ({result})"))
            } else {
                None
            }
        }
        "logging" => {
            if !plan.logs || plan.progress.is_none() {
                return None;
            }
            let result = &ops["progress"];
            if let Some(failed) = seen["failed"].as_str() {
                Some(format!("client failed: {failed}"))
            } else if let Some(error) = result["error"].as_str() {
                Some(format!("logging: {error}"))
            } else if result["logs"].as_u64().unwrap_or(0) == 0 {
                Some(format!(
                    "logging: no log message during the progress call ({result})"
                ))
            } else {
                None
            }
        }
        "elicitation" | "sampling" => {
            let (key, (_, _, wanted)) = if feature == "elicitation" {
                ("elicit", plan.elicitation.as_ref()?)
            } else {
                ("sample", plan.sampling.as_ref()?)
            };
            let result = &ops[key];
            let texts: Vec<&str> = result["text"]
                .as_array()
                .map(|t| t.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(failed) = seen["failed"].as_str() {
                Some(format!("client failed: {failed}"))
            } else if let Some(error) = result["error"].as_str() {
                Some(format!("{feature}: {error}"))
            } else if result["is_error"] == true || !texts.iter().any(|t| t.contains(wanted)) {
                Some(format!(
                    "{feature}: expected text containing {wanted:?}, got {result}"
                ))
            } else {
                None
            }
        }
        "subscription" => {
            plan.subscription.as_ref()?;
            let result = &ops["subscribe"];
            if let Some(failed) = seen["failed"].as_str() {
                Some(format!("client failed: {failed}"))
            } else if let Some(error) = result["error"].as_str() {
                Some(format!("subscription: {error}"))
            } else if result["updated"].as_u64().unwrap_or(0) == 0 {
                Some(format!(
                    "subscription: no notifications/resources/updated for the resource ({result})"
                ))
            } else {
                None
            }
        }
        _ => {
            let (_, _, _, wanted) = plan.completion?;
            let result = &ops["complete"];
            let listed = result["values"]
                .as_array()
                .is_some_and(|values| values.iter().any(|v| v == wanted));
            if let Some(failed) = seen["failed"].as_str() {
                Some(format!("client failed: {failed}"))
            } else if listed {
                None
            } else {
                Some(format!("completion: expected {wanted:?} among {result}"))
            }
        }
    };
    Some(problem.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{judge, judge_feature, plans};

    #[test]
    fn a_cell_passes_only_with_the_listed_tool_and_the_three_expected_texts() {
        let plans = plans();
        let py = &plans[1];
        let good = json!({"tools": ["py-echo"], "ops": {"py": {
            "call": {"text": ["py: hi"], "is_error": false},
            "read": {"text": ["static from py"]},
            "prompt": {"text": ["Hello bob from py"]}}}});
        assert!(judge(&good, py, true).is_empty());
        let bad = json!({"tools": ["echo"], "ops": {"py": {
            "call": {"error": "boom"}, "read": {"text": []}, "prompt": {"text": ["x"]}}}});
        assert_eq!(judge(&bad, py, true).len(), 4);
        assert_eq!(judge(&json!({"failed": "no"}), py, true).len(), 1);
    }

    #[test]
    fn a_subscription_cell_needs_an_update_and_exists_only_where_offered() {
        let plans = plans();
        let (py, rmcp) = (&plans[1], &plans[3]);
        let heard = json!({"ops": {"rmcp": {"subscribe": {"via": "listen", "updated": 1}}}});
        assert_eq!(judge_feature(&heard, rmcp, "subscription"), Some(vec![]));
        let silent = json!({"ops": {"rmcp": {"subscribe": {"via": "subscribe", "updated": 0}}}});
        let refused = json!({"ops": {"rmcp": {"subscribe": {"error": "Method not found"}}}});
        for seen in [silent, refused, json!({"failed": "no"})] {
            let problems = judge_feature(&seen, rmcp, "subscription").expect("offered");
            assert_eq!(problems.len(), 1, "{seen}");
        }
        // FastMCP 1.x does not offer subscriptions: no cell.
        assert_eq!(judge_feature(&heard, py, "subscription"), None);
    }
}
