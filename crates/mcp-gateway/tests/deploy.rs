//! The deployment files under `deploy/` stay true to the binary (book: docs/src/deploying.md):
//!
//! - the Kubernetes manifests (`deploy/kubernetes/`): container ports are the listen ports of the
//!   ConfigMap's `gateway.toml`, probes are `/healthz` and `/readyz` on the admin port, every
//!   environment variable is one the gateway reads, the grace period outlasts the drain, the
//!   Services, PodDisruptionBudget and ServiceMonitor select what they should, and
//!   `mcp-gateway check-config` accepts the ConfigMap with the example Secret's values (on a
//!   private Redis: a Redis store's check reads every stored document);
//! - every metric the Grafana dashboard (`deploy/grafana/`) and the alert rules
//!   (`deploy/prometheus/`) query is on the `/metrics` of a real gateway serving that same
//!   `gateway.toml` after some traffic (a call, errors, an open breaker, a 2025 session);
//! - `promtool check rules` and `promtool test rules` pass on the rules, and `promtool check
//!   rules` on the dashboard's queries (as recording rules).
//!
//! Why this file is long: the three checks share one reading of the deployment files (the
//! manifests' YAML, the ConfigMap's TOML, the dashboard's and rules' queries), which would
//! otherwise be parsed by three files that must agree.
//!
//! Needs `redis-server` (as the other Redis-backed tests) and `promtool` (Debian's `prometheus`
//! package, installed by `cargo xtask test`); without them the parts that need them skip loudly,
//! and fail under `CI=true`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_config_store::{RedisStore, RedisStoreConfig, UserConfig};
use mcp_test_backends::{BackendSpec, TestBackend};
use mcp_test_support::RedisServer;
use serde::Deserialize;
use serde_json::{Value, json};
use support::{
    GatewayProcess, ISSUER, admin_get, legacy_delete, legacy_initialize, legacy_post, modern,
    poll_until, run_cli, send_body, workdir, write,
};

/// The repository's `deploy/` directory.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every YAML document of `path` (a manifest may hold several, `---` apart), as JSON values.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    serde_norway::Deserializer::from_str(&text)
        .map(|document| {
            Value::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: not valid YAML: {e}", path.display()))
        })
        .filter(|document| !document.is_null())
        .collect()
}

/// The one document of `kind` (and `name`, when given) among `documents`.
fn find<'a>(documents: &'a [Value], kind: &str, name: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = documents
        .iter()
        .filter(|d| d["kind"] == kind && name.is_none_or(|n| d["metadata"]["name"] == n))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} {name:?} in deploy/kubernetes, found {}",
        found.len()
    );
    found[0]
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `selector` (a `matchLabels`-style map) selects objects labelled `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = string_map(selector);
    let labels = string_map(labels);
    !selector.is_empty()
        && selector
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
}

/// The environment variable of every key, from `mcp-gateway config-keys` (its Markdown table:
/// key, type, default, environment variable, description).
fn config_key_env_names() -> BTreeSet<String> {
    let (code, out, err) = run_cli(&["config-keys"], &[]);
    assert_eq!(code, 0, "config-keys failed: {err}");
    let names: BTreeSet<String> = out
        .lines()
        .skip(2) // the header and its rule
        .filter_map(|row| row.split(" | ").nth(3))
        .map(|cell| cell.trim().trim_matches('`').to_owned())
        .collect();
    assert!(
        names.contains("MCP_GATEWAY_LISTEN_ADDR") && names.len() > 50,
        "could not read the environment variables of config-keys:\n{out}"
    );
    names
}

/// The values of every `*_env` key of a TOML table (the environment variables the
/// configuration names for its secrets), at any depth.
fn referenced_env_names(table: &toml::Table, out: &mut BTreeSet<String>) {
    for (key, value) in table {
        match value {
            toml::Value::Table(inner) => referenced_env_names(inner, out),
            toml::Value::String(name) if key.ends_with("_env") && !name.is_empty() => {
                out.insert(name.clone());
            }
            _ => {}
        }
    }
}

/// Variables the binary reads that are not keys and not named by a key: the configuration
/// file's path (book: docs/src/gateway.md, "Configuration precedence").
const NON_KEY_ENV: &[&str] = &["MCP_GATEWAY_CONFIG"];

/// After the drain (`shutdown_drain_s`) the gateway gives the messages closed calls owe their
/// backends up to 3 s more (book: docs/src/gateway.md, "Shutdown").
const OWED_GRACE_S: u64 = 3;

/// The address the ConfigMap's gateway.toml gives Redis (the Service of deploy/kubernetes/redis).
const REDIS_IN_CLUSTER: &str = "redis://mcp-gateway-redis:6379";

/// The manifests as kustomize would assemble them: every resource of kustomization.yaml, and the
/// ConfigMap's gateway.toml (the configMapGenerator's file).
struct Manifests {
    documents: Vec<Value>,
    gateway_toml: String,
    secret: Value,
}

fn manifests() -> Manifests {
    let dir = deploy_dir().join("kubernetes");
    let kustomization = yaml_documents(&dir.join("kustomization.yaml"));
    let kustomization = &kustomization[0];
    assert_eq!(kustomization["kind"], "Kustomization");
    let common_labels = kustomization["labels"]
        .as_array()
        .expect("kustomization labels")
        .iter()
        .any(|l| l["pairs"]["app.kubernetes.io/name"] == "mcp-gateway");
    assert!(common_labels, "the common label app.kubernetes.io/name");
    let resources: Vec<&str> = kustomization["resources"]
        .as_array()
        .expect("kustomization resources")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Real secrets never come from the repository: the example stays out of the build.
    assert!(!resources.contains(&"secret.example.yaml"), "{resources:?}");
    let documents: Vec<Value> = resources
        .iter()
        .flat_map(|file| yaml_documents(&dir.join(file)))
        .collect();
    let generator = kustomization["configMapGenerator"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "mcp-gateway-config"))
        .expect("a configMapGenerator mcp-gateway-config");
    assert_eq!(generator["files"], json!(["gateway.toml"]));
    let gateway_toml = read(&dir.join("gateway.toml"));
    let secret = yaml_documents(&dir.join("secret.example.yaml"))
        .into_iter()
        .next()
        .expect("the example Secret");
    assert_eq!(secret["kind"], "Secret");
    Manifests {
        documents,
        gateway_toml,
        secret,
    }
}

/// The example Secret's values, as the pods get them (`envFrom`).
fn secret_env(secret: &Value) -> Vec<(String, String)> {
    string_map(&secret["stringData"]).into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_manifests_match_the_binary() {
    let Manifests {
        documents,
        gateway_toml,
        secret,
    } = manifests();
    let config = mcp_gateway::config::GatewayConfig::from_toml_str(&gateway_toml)
        .unwrap_or_else(|e| panic!("deploy/kubernetes/gateway.toml: {e}"));
    let mcp_port = u64::from(config.listen.addr.port());
    let admin_port = u64::from(
        config
            .listen
            .admin_addr
            .expect("the admin listener is on (probes and metrics)")
            .port(),
    );

    // The Deployment: replicas, image, ports, probes, grace period, config mount, environment.
    let deployment = find(&documents, "Deployment", Some("mcp-gateway"));
    assert!(
        deployment["spec"]["replicas"]
            .as_u64()
            .is_some_and(|n| n >= 2),
        "several replicas"
    );
    let pod = &deployment["spec"]["template"];
    assert!(
        selects(
            &deployment["spec"]["selector"]["matchLabels"],
            &pod["metadata"]["labels"]
        ),
        "the Deployment's selector matches its pods"
    );
    let containers = pod["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(
        container["image"],
        format!("mcp-gateway:{}", env!("CARGO_PKG_VERSION")),
        "the image `cargo xtask image` tags with the workspace version"
    );
    let ports: BTreeMap<String, u64> = container["ports"]
        .as_array()
        .expect("container ports")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().expect("named port").to_owned(),
                p["containerPort"].as_u64().expect("containerPort"),
            )
        })
        .collect();
    assert_eq!(
        ports,
        BTreeMap::from([
            ("admin".to_owned(), admin_port),
            ("mcp".to_owned(), mcp_port)
        ]),
        "the container ports are gateway.toml's listen.addr and listen.admin_addr"
    );
    // A probe names the admin port by name or number.
    let on_admin = |port: &Value| port == "admin" || port.as_u64() == Some(admin_port);
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(on_admin(&get["port"]), "{probe} on the admin port: {get}");
    }
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    let drain = config.shutdown_drain.as_secs();
    assert!(
        grace > pre_stop + drain + OWED_GRACE_S,
        "terminationGracePeriodSeconds {grace} must outlast the preStop sleep ({pre_stop} s), \
         shutdown_drain_s ({drain} s) and the {OWED_GRACE_S} s after it"
    );
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    for kind in ["requests", "limits"] {
        assert!(
            container["resources"][kind]["memory"].is_string(),
            "resources.{kind}.memory"
        );
    }

    // gateway.toml reaches the binary: the ConfigMap's volume, mounted where the configuration
    // path points.
    let env = container["env"].as_array().cloned().unwrap_or_default();
    let config_path = env
        .iter()
        .find(|e| e["name"] == "MCP_GATEWAY_CONFIG")
        .and_then(|e| e["value"].as_str())
        .expect("MCP_GATEWAY_CONFIG in the container's env");
    let volume = pod["spec"]["volumes"]
        .as_array()
        .and_then(|v| {
            v.iter()
                .find(|v| v["configMap"]["name"] == "mcp-gateway-config")
        })
        .expect("a volume of the ConfigMap mcp-gateway-config");
    let mount = container["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == volume["name"]))
        .and_then(|m| m["mountPath"].as_str())
        .expect("the ConfigMap's volume is mounted");
    assert_eq!(config_path, format!("{mount}/gateway.toml"));

    // Every variable the pods get is one the gateway reads: a key's variable, one that
    // gateway.toml names for a secret, or the configuration path; and every variable gateway.toml
    // names is in the Secret (the gateway refuses to start without it).
    let key_names = config_key_env_names();
    let table: toml::Table = toml::from_str(&gateway_toml).expect("gateway.toml is TOML");
    let mut named = BTreeSet::new();
    referenced_env_names(&table, &mut named);
    let secret_name = secret["metadata"]["name"].as_str().expect("Secret name");
    let from_secret = container["envFrom"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["secretRef"]["name"] == secret_name));
    assert!(
        from_secret,
        "the container takes the Secret {secret_name} as env"
    );
    let secret_vars: Vec<String> = secret_env(&secret).into_iter().map(|(k, _)| k).collect();
    let env_vars = env
        .iter()
        .map(|e| e["name"].as_str().expect("env name").to_owned());
    for name in env_vars.chain(secret_vars.iter().cloned()) {
        assert!(
            key_names.contains(&name)
                || named.contains(&name)
                || NON_KEY_ENV.contains(&name.as_str()),
            "{name} is neither a configuration key's variable (mcp-gateway config-keys), nor one \
             that gateway.toml names ({named:?}), nor {NON_KEY_ENV:?}"
        );
    }
    for name in &named {
        assert!(
            secret_vars.contains(name),
            "gateway.toml names {name}, which the Secret does not hold"
        );
    }

    // The Services reach the named ports of the pods; the PDB and the ServiceMonitor select them.
    let service_port = |name: &str| {
        let service = find(&documents, "Service", Some(name));
        assert!(
            selects(&service["spec"]["selector"], &pod["metadata"]["labels"]),
            "Service {name} selects the gateway's pods"
        );
        service["spec"]["ports"].as_array().expect("ports").clone()
    };
    let mcp_ports = service_port("mcp-gateway");
    assert!(
        mcp_ports.iter().all(|p| p["targetPort"] == "mcp"),
        "the client-facing Service exposes the MCP port only: {mcp_ports:?}"
    );
    let admin_ports = service_port("mcp-gateway-admin");
    assert!(
        admin_ports.iter().any(|p| p["targetPort"] == "admin"),
        "{admin_ports:?}"
    );
    let pdb = find(&documents, "PodDisruptionBudget", Some("mcp-gateway"));
    assert!(selects(
        &pdb["spec"]["selector"]["matchLabels"],
        &pod["metadata"]["labels"]
    ));
    let monitor = find(&documents, "ServiceMonitor", Some("mcp-gateway"));
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let admin_service = find(&documents, "Service", Some("mcp-gateway-admin"));
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &admin_service["metadata"]["labels"]
    ));
    assert!(
        !selects(
            &monitor["spec"]["selector"]["matchLabels"],
            &find(&documents, "Service", Some("mcp-gateway"))["metadata"]["labels"]
        ),
        "the ServiceMonitor scrapes the admin Service only"
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    assert!(
        admin_ports.iter().any(|p| p["name"] == endpoint["port"]),
        "the ServiceMonitor's port is a port of the admin Service"
    );

    // The optional Redis (deploy/kubernetes/redis) is the Service gateway.toml's URLs name.
    let redis_documents = yaml_documents(&deploy_dir().join("kubernetes/redis/redis.yaml"));
    let redis_service = find(&redis_documents, "Service", None);
    let redis_port = redis_service["spec"]["ports"][0]["port"]
        .as_u64()
        .expect("the Redis Service's port");
    assert_eq!(
        format!(
            "redis://{}:{redis_port}",
            redis_service["metadata"]["name"].as_str().expect("name")
        ),
        REDIS_IN_CLUSTER
    );
    assert_eq!(
        gateway_toml.matches(REDIS_IN_CLUSTER).count(),
        2,
        "config_store.url and sessions.url"
    );

    // check-config accepts the ConfigMap with the example Secret's values; its Redis store is
    // read, so the in-cluster Redis address becomes a private Redis's.
    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why (a panic under CI=true).
    };
    let dir = workdir("deploy-check-config");
    let path = write(
        dir.path(),
        "gateway.toml",
        &gateway_toml.replace(REDIS_IN_CLUSTER, &redis.url()),
    );
    let env = secret_env(&secret);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (code, out, err) = run_cli(
        &["check-config", "--config", path.to_str().expect("path")],
        &env,
    );
    assert_eq!(
        code, 0,
        "check-config of the ConfigMap's gateway.toml:\n{out}{err}"
    );
    assert!(out.contains("configuration OK"), "{out}{err}");
    // Nothing to warn about either (e.g. a variable that names no key).
    assert!(err.trim().is_empty(), "check-config warned:\n{err}");
}

/// Metric names in a PromQL expression (or a Grafana `label_values(...)` query): identifiers
/// starting with `mcp_` outside label matchers (`{...}`), grouping and matching label lists
/// (`by (...)`, `on (...)`, ...), strings, range selectors and Grafana variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const LABEL_LISTS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut braces = 0_usize;
    let mut i = 0;
    let skip_to = |from: usize, end: char| {
        let mut j = from;
        while j < chars.len() && chars[j] != end {
            j += if chars[j] == '\\' { 2 } else { 1 };
        }
        j + 1
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_to(i + 1, c),
            '[' => i = skip_to(i + 1, ']'),
            '{' => {
                braces += 1;
                i += 1;
            }
            '}' => {
                braces = braces.saturating_sub(1);
                i += 1;
            }
            '$' => {
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if braces > 0 {
                    continue; // a label name
                }
                if LABEL_LISTS.contains(&word.as_str()) {
                    let mut j = i;
                    while j < chars.len() && chars[j].is_whitespace() {
                        j += 1;
                    }
                    if chars.get(j) == Some(&'(') {
                        i = skip_to(j + 1, ')');
                    }
                    continue;
                }
                if word.starts_with("mcp_")
                    && word.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

#[test]
fn the_metric_tokenizer_skips_labels_strings_and_variables() {
    let names = metric_names(
        r#"sum by (mcp_method_name, error_type) (rate(mcp_client_operation_duration_seconds_count{job=~"$job", mcp_method_name!="mcp_x"}[$__rate_interval]))
           / ignoring(mcp_label) mcp_gateway_budget_limit{limit="ceiling"} or on (mcp_z) vector(0)"#,
    );
    assert_eq!(
        names,
        BTreeSet::from([
            "mcp_client_operation_duration_seconds_count".to_owned(),
            "mcp_gateway_budget_limit".to_owned()
        ])
    );
    assert_eq!(
        metric_names("label_values(mcp_gateway_build_info{job=~\"$job\"}, instance)"),
        BTreeSet::from(["mcp_gateway_build_info".to_owned()])
    );
}

/// Every query of the dashboard: `(where, PromQL)`; `label_values(...)` template queries too.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = deploy_dir().join("grafana/mcp-gateway.json");
    let dashboard: Value =
        serde_json::from_str(&read(&path)).expect("deploy/grafana/mcp-gateway.json is JSON");
    // The data source is the template variable, so the dashboard imports into any Grafana.
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a datasource variable of type prometheus"
    );
    let mut queries = Vec::new();
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        let query = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str())
            .expect("a template query");
        queries.push((format!("variable {}", variable["name"]), query.to_owned()));
    }
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "panel {}",
            panel["title"]
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(
            !targets.is_empty(),
            "panel {} queries nothing",
            panel["title"]
        );
        for target in targets {
            queries.push((
                format!("panel {} {}", panel["title"], target["refId"]),
                target["expr"].as_str().expect("expr").to_owned(),
            ));
        }
    }
    queries
}

/// Every alert expression of the rules file: `(alert, PromQL)`.
fn rule_queries() -> Vec<(String, String)> {
    let rules = yaml_documents(&deploy_dir().join("prometheus/alerts.yaml"));
    let groups = rules[0]["groups"].as_array().expect("rule groups");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .map(|rule| {
            let name = rule["alert"]
                .as_str()
                .or_else(|| rule["record"].as_str())
                .expect("a rule's name");
            (
                format!("rule {name}"),
                rule["expr"].as_str().expect("expr").to_owned(),
            )
        })
        .collect()
}

/// The metric names of a Prometheus text exposition: every sample's name, and each histogram's
/// and summary's family name (so that `x_bucket` is found by its family `x` too).
fn scraped_names(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut samples = BTreeSet::new();
    let mut families = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some("histogram" | "summary")) = (parts.next(), parts.next()) {
                families.insert(name.to_owned());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            samples.insert(line[..end].to_owned());
        }
    }
    (samples, families)
}

/// The metrics `wanted` names that the scrape lacks: a name is there when some sample has it, or
/// when it is `<family>_bucket`/`_sum`/`_count` of a histogram or summary family with samples.
fn missing(wanted: &BTreeMap<String, Vec<String>>, scrape: &str) -> Vec<String> {
    let (samples, families) = scraped_names(scrape);
    wanted
        .iter()
        .filter(|(name, _)| {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix));
            let in_family = family
                .is_some_and(|f| families.contains(f) && samples.iter().any(|s| s.starts_with(f)));
            !samples.contains(name.as_str()) && !in_family
        })
        .map(|(name, used_by)| format!("{name} (used by {})", used_by.join("; ")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_query_is_on_metrics() {
    // What the dashboard and the rules read, and where: gathered first, so that a query without
    // any gateway metric (a tokenizer that lost track) fails before a gateway starts.
    let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (place, query) in dashboard_queries().into_iter().chain(rule_queries()) {
        let names = metric_names(&query);
        assert!(!names.is_empty(), "{place} reads no mcp_ metric: {query}");
        for name in names {
            wanted.entry(name).or_default().push(place.clone());
        }
    }

    let Some(redis) = RedisServer::start().await else {
        return; // RedisServer::start said loudly why (a panic under CI=true).
    };
    let alpha = TestBackend::start(BackendSpec::modern("alpha")).await;
    let beta = TestBackend::start(BackendSpec::legacy("beta")).await;
    // A port nobody listens on: carol's only backend fails until its breaker opens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let dead = format!("http://{}/mcp", closed.local_addr().expect("address"));
    drop(closed);

    // The ConfigMap's gateway.toml itself, with loopback listeners on free ports and the private
    // Redis in place of the in-cluster one; users in its store under its key prefix.
    let Manifests {
        gateway_toml,
        secret,
        ..
    } = manifests();
    for needle in [REDIS_IN_CLUSTER, "\"0.0.0.0:8080\"", "\"0.0.0.0:9090\""] {
        assert!(gateway_toml.contains(needle), "{needle} in gateway.toml");
    }
    let config = gateway_toml
        .replace(REDIS_IN_CLUSTER, &redis.url())
        .replace("\"0.0.0.0:8080\"", "\"127.0.0.1:0\"")
        .replace("\"0.0.0.0:9090\"", "\"127.0.0.1:0\"");
    let store = RedisStore::connect(RedisStoreConfig::new(redis.url()))
        .await
        .expect("connect to Redis");
    let user = |vhosts: Value| {
        UserConfig::from_json_str(&json!({ "virtual_hosts": vhosts }).to_string())
            .expect("a valid user configuration")
    };
    store
        .put(
            "alice",
            &user(json!({
                "vh1": {"backends": {"alpha": {"url": alpha.url()}}},
                "vh2": {"backends": {"beta": {"url": beta.url()}}},
            })),
        )
        .await
        .expect("put alice");
    store
        .put(
            "carol",
            &user(json!({"vh1": {"backends": {"dead": {"url": dead, "timeout_ms": 2000}}}})),
        )
        .await
        .expect("put carol");

    // The Secret's sealing secret; the tokens' own secret and issuer are the test's (the process
    // helper sets MCP_GATEWAY_JWT_SECRET), the issuer overridden as operators do, by environment.
    let secrets = secret_env(&secret);
    let sealing = secrets
        .iter()
        .find(|(k, _)| k == "MCP_GATEWAY_SEALING_SECRET")
        .map(|(_, v)| v.as_str())
        .expect("the sealing secret in the example Secret");
    let dir = workdir("deploy-metrics");
    let gw = GatewayProcess::start(
        dir.path(),
        &config,
        &[
            ("MCP_GATEWAY_SEALING_SECRET", sealing),
            ("MCP_GATEWAY_AUTH_JWT_ISSUER", ISSUER),
        ],
    )
    .await;
    let addr = gw.addr;

    // Traffic: a successful call, a tool error, a JSON-RPC error, a 401.
    let listed = modern(addr, "alice", "vh1", "tools/list", json!({}), &[]).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let call = |name: &str| {
        let params = json!({"name": name, "arguments": {"text": "hi"}});
        async move { modern(addr, "alice", "vh1", "tools/call", params, &[]).await }
    };
    let ok = call("alpha-echo").await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        ok.last_message()["result"]["content"][0]["text"],
        "alpha: hi"
    );
    let failed = call("alpha-fail").await;
    assert_eq!(
        failed.last_message()["result"]["isError"],
        true,
        "{}",
        failed.text()
    );
    let unknown = call("nobody-echo").await;
    assert!(
        unknown.last_message()["error"]["code"].is_i64(),
        "{}",
        unknown.text()
    );
    let unauthenticated = send_body(addr, "POST", "/servers/vh1/mcp", &[], "{}").await;
    assert_eq!(unauthenticated.status, 401);

    // A 2025 session in the Redis session store: opened, used, ended.
    let session = legacy_initialize(addr, "alice", "vh2").await;
    let on_beta = legacy_post(
        addr,
        "alice",
        "vh2",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "beta-echo", "arguments": {"text": "hi"}}}),
    )
    .await;
    assert_eq!(on_beta.status, 200, "{}", on_beta.text());
    let ended = legacy_delete(addr, "alice", "vh2", &session).await;
    assert!(ended.status.is_success(), "{}", ended.text());

    // Carol's calls fail until her breaker of `dead` opens (a transition counted), then one is
    // refused by it.
    let scrape = || async { admin_get(&gw, "/metrics").await.text().to_owned() };
    let opened = poll_until(Duration::from_secs(120), || async {
        let _ = modern(addr, "carol", "vh1", "tools/list", json!({}), &[]).await;
        scrape()
            .await
            .contains(r#"mcp_breaker_transitions_total{breaker="dead",from="closed",to="open"}"#)
    })
    .await;
    assert!(opened, "carol's breaker did not open:\n{}", scrape().await);
    let _ = modern(addr, "carol", "vh1", "tools/list", json!({}), &[]).await;

    // Every metric is there; the ones recorded asynchronously (the store's readiness, refreshed
    // by /readyz and every 5 s) get time on a loaded machine.
    let complete = poll_until(Duration::from_secs(60), || async {
        let _ = admin_get(&gw, "/readyz").await;
        missing(&wanted, &scrape().await).is_empty()
    })
    .await;
    let text = scrape().await;
    assert!(
        complete,
        "metrics the dashboard or the alert rules query are not on /metrics:\n{}\n\n{text}",
        missing(&wanted, &text).join("\n")
    );
    let ready = admin_get(&gw, "/readyz").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert!(
        text.contains("mcp_gateway_config_store_ready 1"),
        "the Redis config store is ready:\n{text}"
    );
}

/// `promtool` on `PATH`, or `None` after a loud message (a panic under `CI=true`).
#[allow(clippy::print_stderr)]
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("promtool"))
            .find(|c| c.is_file())
    });
    if found.is_none() {
        assert!(
            !mcp_test_support::peers::in_ci(),
            "promtool not found; CI=true requires the deploy test to check the alert rules \
             (apt-get install prometheus; `cargo xtask test` installs it)"
        );
        eprintln!(
            "\n*** SKIPPING PROMTOOL CHECKS: promtool not found (apt-get install prometheus) ***\n"
        );
    }
    found
}

fn run_promtool(promtool: &Path, args: &[&str], cwd: &Path) {
    let out = std::process::Command::new(promtool)
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_checks_the_rules_and_the_dashboards_queries() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = deploy_dir().join("prometheus");
    run_promtool(&promtool, &["check", "rules", "alerts.yaml"], &dir);
    // The alerts fire on their conditions and only there (alerts.test.yaml).
    run_promtool(&promtool, &["test", "rules", "alerts.test.yaml"], &dir);

    // The dashboard's queries parse as PromQL: each becomes a recording rule, Grafana's
    // variables replaced by what they expand to (an interval, a regular expression).
    let mut rules = Vec::new();
    for (index, (place, query)) in dashboard_queries().into_iter().enumerate() {
        if query.starts_with("label_values(") {
            continue; // Grafana's template function, not PromQL
        }
        let expanded = query
            .replace("$__rate_interval", "5m")
            .replace("$job", ".*")
            .replace("$instance", ".*");
        assert!(
            !expanded.contains('$'),
            "{place}: an unknown variable in {query}"
        );
        rules.push(json!({"record": format!("dashboard:query_{index}"), "expr": expanded}));
    }
    let file = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let work = workdir("deploy-promtool");
    // JSON is YAML: promtool reads it as a rules file.
    write(work.path(), "dashboard.rules.yaml", &file.to_string());
    run_promtool(
        &promtool,
        &["check", "rules", "dashboard.rules.yaml"],
        work.path(),
    );
}
