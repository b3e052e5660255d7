//! Keys and lookups are only what the operator configured: HS256 needs an explicit
//! `auth.jwt.hs256_secret_env` next to another key; with several trusted issuers each issuer's
//! `alice` has her own configuration (file and Redis stores); no store error text or backend URL
//! reaches a client or `/readyz`.

use jsonwebtoken::Algorithm;
use mcp_config_store::{RedisStore, RedisStoreConfig, UserConfig};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use serde_json::{Value, json};

use crate::support::{
    self, AUDIENCE, FIXTURES, GatewayProcess, HS256_LINE, ISSUER, Reply, SECRET, admin_get,
    base_config, legacy_post, modern, modern_with_token, rs256_token, token_with, unix_now,
    workdir,
};

/// The second trusted issuer of the multi-issuer tests.
const OTHER_ISSUER: &str = "https://other-issuer.test";

fn claims(issuer: &str, sub: &str) -> Value {
    json!({"iss": issuer, "aud": AUDIENCE, "sub": sub, "exp": unix_now() + 600})
}

fn hs256(issuer: &str, sub: &str) -> String {
    token_with(claims(issuer, sub), Algorithm::HS256, SECRET.as_bytes())
}

fn rs256(sub: &str) -> String {
    rs256_token(&claims(ISSUER, sub), None)
}

/// A 2026-07-28 `tools/list` on `vhost` with `token` as the bearer.
async fn tools_list(gw: &GatewayProcess, token: &str, vhost: &str) -> Reply {
    modern_with_token(gw.addr, token, vhost, "tools/list", json!({}), &[]).await
}

/// Asserts the 401 of the claims layer with its detail.
fn assert_401(reply: &Reply, detail: &str) {
    assert_eq!(reply.status, 401, "{}", reply.text());
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|c| c.starts_with("Bearer ")),
        "{:?}",
        reply.headers
    );
    assert_eq!(reply.json()["detail"], detail, "{}", reply.text());
}

/// Whether the log holds a line containing every needle.
fn logged(gw: &GatewayProcess, needles: &[&str]) -> bool {
    gw.logs()
        .lines()
        .any(|line| needles.iter().all(|n| line.contains(n)))
}

/// With a PEM key configured and `hs256_secret_env` left unset, `MCP_GATEWAY_JWT_SECRET` in the
/// environment is ignored (with a warning): an HS256 token signed with it is refused while the
/// RS256 token is served. Setting `hs256_secret_env` explicitly turns HS256 on next to the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_needs_an_explicit_secret_env_next_to_another_key() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let users = support::users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]);
    let pem = format!("public_key_pem = \"{FIXTURES}/rsa_public.pem\"\nalgorithms = [\"RS256\"]\n");

    // Implicit: the variable is set (GatewayProcess always sets it) but not configured.
    let dir = workdir("iso-auth-hs256-off");
    support::write(dir.path(), "users.json", &users);
    let gw =
        GatewayProcess::start(dir.path(), &base_config("").replace(HS256_LINE, &pem), &[]).await;
    assert!(
        !tools_list(&gw, &rs256("alice"), "vh1")
            .await
            .tool_names()
            .is_empty()
    );
    assert_401(
        &tools_list(&gw, &hs256(ISSUER, "alice"), "vh1").await,
        "Unsupported token algorithm",
    );
    assert!(
        logged(
            &gw,
            &[
                "MCP_GATEWAY_JWT_SECRET is set but ignored",
                "hs256_secret_env"
            ]
        ),
        "{}",
        gw.logs()
    );

    // Explicit: both keys serve.
    let dir = workdir("iso-auth-hs256-on");
    support::write(dir.path(), "users.json", &users);
    let config = base_config("").replace(HS256_LINE, &format!("{HS256_LINE}{pem}"));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    for token in [rs256("alice"), hs256(ISSUER, "alice")] {
        assert!(!tools_list(&gw, &token, "vh1").await.tool_names().is_empty());
    }
    assert!(!logged(&gw, &["ignored"]), "{}", gw.logs());
}

/// An old configuration with no key at all but the default variable keeps working, with a
/// deprecation warning that says what to write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_implicit_hs256_default_still_loads_with_a_deprecation_warning() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("iso-auth-hs256-legacy");
    support::write(
        dir.path(),
        "users.json",
        &support::users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config("").replace(HS256_LINE, ""), &[]).await;
    let reply = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert!(!reply.tool_names().is_empty());
    assert!(
        logged(
            &gw,
            &[
                "deprecated",
                "set auth.jwt.hs256_secret_env = \\\"MCP_GATEWAY_JWT_SECRET\\\" explicitly"
            ]
        ),
        "{}",
        gw.logs()
    );
}

/// The user configurations of the multi-issuer tests: `alice` of each issuer on her own virtual
/// host and backend, `carol` of the first issuer only, and a bare `alice` that no one gets.
fn two_issuer_users(alpha: &TestBackend, beta: &TestBackend) -> Vec<(String, Value)> {
    let vhost = |name: &str, backend: &str, url: String| json!({"virtual_hosts": {name: {"backends": {backend: {"url": url, "timeout_ms": 10000}}}}});
    let first = |sub: &str| format!("{ISSUER}#{sub}");
    vec![
        (first("alice"), vhost("vh-a", "alpha", alpha.url())),
        (
            format!("{OTHER_ISSUER}#alice"),
            vhost("vh-b", "beta", beta.url()),
        ),
        (first("carol"), vhost("vh-a", "alpha", alpha.url())),
        ("alice".to_owned(), vhost("vh-bare", "alpha", alpha.url())),
    ]
}

/// Two trusted issuers: `<issuer>#<sub>` keys, so each issuer's alice gets her own virtual host,
/// a subject configured for one issuer only is 400 for the other, and a bare entry is used for no
/// one (and named in the log).
async fn assert_issuers_are_kept_apart(
    gw: &GatewayProcess,
    alpha: &TestBackend,
    beta: &TestBackend,
) {
    let alice_a = hs256(ISSUER, "alice");
    let alice_b = hs256(OTHER_ISSUER, "alice");
    // A first: a cache keyed by subject alone would now hand A's entry to B.
    let a = tools_list(gw, &alice_a, "vh-a").await.tool_names();
    assert!(
        a.iter().all(|n| n.starts_with("alpha")) && !a.is_empty(),
        "{a:?}"
    );
    let b = tools_list(gw, &alice_b, "vh-b").await.tool_names();
    assert!(
        b.iter().all(|n| n.starts_with("beta")) && !b.is_empty(),
        "{b:?}"
    );
    // Neither reaches the other's virtual host, nor the bare entry's.
    for (token, vhost) in [
        (&alice_a, "vh-b"),
        (&alice_b, "vh-a"),
        (&alice_a, "vh-bare"),
        (&alice_b, "vh-bare"),
    ] {
        tools_list(gw, token, vhost)
            .await
            .assert_detail(404, "Server not found");
    }
    // Carol is configured for the first issuer only (control: her token of that issuer works).
    assert!(
        !tools_list(gw, &hs256(ISSUER, "carol"), "vh-a")
            .await
            .tool_names()
            .is_empty()
    );
    tools_list(gw, &hs256(OTHER_ISSUER, "carol"), "vh-a")
        .await
        .assert_detail(400, "No user configuration");
    assert!(!alpha.requests_for("tools/list").is_empty());
    assert!(!beta.requests_for("tools/list").is_empty());
}

fn two_issuer_config() -> String {
    base_config("").replace(
        &format!("issuer = \"{ISSUER}\"\n"),
        &format!("issuer = \"{ISSUER}\"\nissuers = [\"{OTHER_ISSUER}\"]\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_issuers_each_alice_her_own_config_file_store() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::modern("beta")).await;
    let users: serde_json::Map<String, Value> =
        two_issuer_users(&alpha, &beta).into_iter().collect();
    let dir = workdir("iso-auth-issuers-file");
    support::write(
        dir.path(),
        "users.json",
        &json!({ "users": users }).to_string(),
    );
    let gw = GatewayProcess::start(dir.path(), &two_issuer_config(), &[]).await;
    assert_issuers_are_kept_apart(&gw, &alpha, &beta).await;
    assert!(
        logged(
            &gw,
            &[
                "user configuration never used",
                "users.alice",
                "a bare subject"
            ]
        ),
        "{}",
        gw.logs()
    );
    // check-config names the bare entry too, as a warning (the configuration is still OK).
    let config = support::write(dir.path(), "check.toml", &two_issuer_config());
    let (code, out, err) = support::run_cli(
        &["check-config", "--config", config.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("warning") && err.contains("users.alice: a bare subject"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_issuers_each_alice_her_own_config_redis_store() {
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::modern("beta")).await;
    let store = RedisStore::connect({
        let mut config = RedisStoreConfig::new(redis.url());
        config.key_prefix = "iso".into();
        config
    })
    .await
    .expect("connect");
    for (key, user) in two_issuer_users(&alpha, &beta) {
        let user = UserConfig::from_json_str(&user.to_string()).expect("valid user config");
        store.put(&key, &user).await.expect("put");
    }
    let config = two_issuer_config().replace(
        "kind = \"file\"\npath = \"users.json\"\npoll_interval_ms = 100",
        &format!(
            "kind = \"redis\"\nurl = \"{}\"\nkey_prefix = \"iso\"",
            redis.url()
        ),
    );
    let dir = workdir("iso-auth-issuers-redis");
    // check-config scans the keys and names the bare one (a warning: still OK).
    let path = support::write(dir.path(), "check.toml", &config);
    let (code, out, err) = support::run_cli(
        &["check-config", "--config", path.to_str().expect("path")],
        &[("MCP_GATEWAY_JWT_SECRET", SECRET)],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("redis key iso:user:alice: alice: a bare subject"),
        "{err}"
    );
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    assert_issuers_are_kept_apart(&gw, &alpha, &beta).await;

    // An edit of B's alice reaches B's alice only (the cache is keyed the same way).
    let moved = json!({"virtual_hosts": {"vh-b2": {"backends": {"beta": {"url": beta.url()}}}}});
    let moved = UserConfig::from_json_str(&moved.to_string()).expect("valid user config");
    store
        .put(&format!("{OTHER_ISSUER}#alice"), &moved)
        .await
        .expect("put");
    let alice_b = hs256(OTHER_ISSUER, "alice");
    let seen = support::poll_until(std::time::Duration::from_secs(20), || async {
        tools_list(&gw, &alice_b, "vh-b2").await.status == 200
    })
    .await;
    assert!(seen, "B's edited configuration is served");
    assert!(
        !tools_list(&gw, &hs256(ISSUER, "alice"), "vh-a")
            .await
            .tool_names()
            .is_empty()
    );
}

/// A session store failure is answered with its kind only: neither the Redis address nor the
/// store's own error text (here Redis refusing commands: `NoPerm: ...`) reaches the client; the
/// log has the details. Then Redis is killed: the outage answer is as plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_store_errors_are_not_echoed() {
    let Some(mut redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why.
    };
    let Some(redis) = redis.controllable() else {
        return; // An external REDIS_URL server cannot be broken on purpose.
    };
    let alpha = TestBackend::start(BackendSpec::legacy("alpha")).await;
    let dir = workdir("iso-auth-session-errors");
    support::write(
        dir.path(),
        "users.json",
        &support::users_json(&[("alice", "vh1", &[("alpha", alpha.url())])]),
    );
    let config = base_config(&format!(
        "\n[sessions]\nkind = \"redis\"\nurl = \"{}\"\n",
        redis.url()
    ));
    let gw = GatewayProcess::start(dir.path(), &config, &[]).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "iso", "version": "0"}}});
    // Control: sessions are created while Redis serves.
    let ok = legacy_post(gw.addr, "alice", "vh1", None, &initialize).await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    let port = redis.port().to_string();
    let assert_plain = |reply: &Reply, expected: &str| {
        assert_eq!(reply.status, 503, "{}", reply.text());
        let message = reply.json()["error"]["message"].clone();
        assert_eq!(message, expected, "{}", reply.text());
        let text = reply.text().to_ascii_lowercase();
        for leak in [port.as_str(), "127.0.0.1", "noperm", "permission", "redis"] {
            assert!(!text.contains(leak), "{leak} in {}", reply.text());
        }
    };

    // Redis refuses every command of the default user: a non-transient store error.
    let client = deadpool_redis::redis::Client::open(redis.url()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    deadpool_redis::redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg("-@all")
        .query_async::<()>(&mut conn)
        .await
        .expect("ACL SETUSER");
    let refused = legacy_post(gw.addr, "alice", "vh1", None, &initialize).await;
    assert_plain(&refused, "Cannot create a session: session store error");
    assert!(
        logged(&gw, &["cannot create a session", "NoPerm"]),
        "{}",
        gw.logs()
    );

    // Redis gone.
    redis.stop().await;
    let down = legacy_post(gw.addr, "alice", "vh1", None, &initialize).await;
    assert_plain(&down, "Cannot create a session: session store unavailable");
}

/// `/readyz` names backends and their breaker states, never their URLs: a user configuration's
/// URL with a token in its query and a password in its userinfo stays out of the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_shows_backend_names_not_urls() {
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let dir = workdir("iso-auth-readyz");
    let url = alpha
        .url()
        .replacen("http://", "http://reader:pw-in-userinfo@", 1)
        + "?token=secret-in-query";
    support::write(
        dir.path(),
        "users.json",
        &support::users_json(&[("alice", "vh1", &[("alpha", url)])]),
    );
    let gw = GatewayProcess::start(dir.path(), &base_config(""), &[]).await;
    let reply = modern(gw.addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert!(!reply.tool_names().is_empty());

    let ready = admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    // Control: the backend is listed (so its URL would have been there to leak).
    let backends = ready.json()["checks"]["backends"].clone();
    assert!(
        backends.as_array().is_some_and(|b| b
            .iter()
            .any(|b| b["backend"] == "alpha" && b["breaker"] == "closed")),
        "{}",
        ready.text()
    );
    for leak in [
        "secret-in-query",
        "token=",
        "pw-in-userinfo",
        "reader",
        "127.0.0.1",
    ] {
        assert!(!ready.text().contains(leak), "{leak} in {}", ready.text());
    }
}
