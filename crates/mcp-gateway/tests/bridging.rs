//! A 2025 backend's mid-call elicitation reaching a 2026-07-28 client through the real
//! `mcp-gateway` process: `input_required` rounds over one parked upstream call, and the
//! `mcp_gateway_parked_calls` gauge counting the call while it waits.

mod support;

use std::time::Duration;

use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::{accept_elicitation, ask_params, modern_meta_with};
use serde_json::{Value, json};
use support::{GatewayProcess, base_config, metric, modern, users_json, workdir};

const PARKED: &str = "mcp_gateway_parked_calls";

/// `beta-ask`, with the client declaring elicitation, retried with `answer` (`{key: value}`) and
/// `state` when given.
fn ask(answer: Option<(&str, &str)>, state: Option<&Value>) -> Value {
    let answers = answer.map(|(key, value)| accept_elicitation(key, value));
    let mut params = ask_params("beta-ask", answers, state);
    params["_meta"] = modern_meta_with(json!({"elicitation": {}}));
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_backends_elicitation_is_answered_in_input_required_rounds() {
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    let dir = workdir("gw-bridging");
    let users = users_json(&[("alice", "vh", &[("beta", beta.url())])]);
    support::write(dir.path(), "users.json", &users);
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    assert_eq!(metric(&gw, PARKED).await, Some(0.0));

    let call = |params: Value| modern(gw.addr, "alice", "vh", "tools/call", params, &[]);
    let first = call(ask(None, None))
        .await
        .messages()
        .pop()
        .expect("answer");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["elicitation"]["method"],
        "elicitation/create"
    );
    assert_eq!(
        metric(&gw, PARKED).await,
        Some(1.0),
        "the upstream call waits"
    );

    let second = call(ask(Some(("name", "Ada")), Some(&result["requestState"])))
        .await
        .messages()
        .pop()
        .expect("answer");
    let state = &second["result"]["requestState"];
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    let done = call(ask(Some(("color", "teal")), Some(state)))
        .await
        .messages()
        .pop()
        .expect("answer");
    assert_eq!(
        done["result"]["content"][0]["text"], "beta: Ada likes teal",
        "{done}"
    );
    let settled = support::poll_until(Duration::from_secs(10), || async {
        metric(&gw, PARKED).await == Some(0.0)
    })
    .await;
    assert!(settled, "the answered call is no longer parked");
}
