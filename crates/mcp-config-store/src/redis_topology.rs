//! [`RedisTopology`]: the one place where the gateway decides how to reach Redis (the type's docs
//! say how).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::aio::{ConnectionLike, PubSub};
use deadpool_redis::redis::cluster::ClusterClientBuilder;
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::sentinel::{
    SentinelClient, SentinelNodeConnectionInfo, SentinelServerType,
};
use deadpool_redis::redis::{
    self, AsyncConnectionConfig, ErrorKind, RedisConnectionInfo, RedisError, RedisFuture,
};
use deadpool_redis::{PoolError, Runtime};
use percent_encoding::percent_decode_str;
use tokio::sync::OnceCell;

/// Why a Redis URL was refused. The URL itself is never repeated (it may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TopologyError(String);

/// Where Redis is and how it is deployed: the one place where the gateway decides how to reach
/// Redis — a single server, a primary found through Redis Sentinel, or a Redis Cluster — shared
/// by every Redis user (config store, session store, node bus, plugin document, `mcp-gateway
/// users`).
///
/// The topology is chosen by the URL scheme, so every existing `*.url` setting accepts all three
/// without new keys:
///
/// | URL | topology |
/// |-----|----------|
/// | `redis://[user:pass@]host:port[/db]`, `rediss://…`, `unix://…` | one server (deadpool-redis pool) |
/// | `redis+sentinel://[user:pass@]s1:26379,s2:26379,s3:26379/<master>[/db]` | the primary of `<master>` as the sentinels report it (deadpool-redis `sentinel` pool over redis-rs `SentinelClient`) |
/// | `redis+cluster://[user:pass@]n1:7000,n2:7001,…` | a Redis Cluster (redis-rs `cluster-async`; seeds only, the rest is discovered) |
///
/// The credentials of a Sentinel URL are those of the data nodes (primary and replicas), not of
/// the sentinels, which are asked without authentication.
///
/// Connections made through Sentinel ask the sentinels for the current primary each time a pooled
/// connection is created; after a failover the old primary's connections break (Sentinel kills the
/// clients of a demoted primary, and a dead one drops them), the pool discards them and the next
/// connection goes to the promoted replica. A Cluster connection follows `MOVED`/`ASK` redirects
/// and refreshes its slot map itself.
///
/// Pub/sub: on one server and behind Sentinel the subscriber connects to the (current) primary.
/// In a Cluster, a classic `PUBLISH` reaches every node, so the subscriber connects to the first
/// seed that answers; keyspace notifications, however, are local to the node holding the key, so
/// in a Cluster they are only seen for keys on that node (write through `mcp-gateway users` or
/// `PUBLISH`, which every node sees).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisTopology {
    /// One server (`redis://`, `rediss://`, `unix://`).
    Standalone {
        /// The server URL as given.
        url: String,
    },
    /// The primary of `master` as reported by `sentinels` (`redis+sentinel://`).
    Sentinel {
        /// `redis://host:port` of each sentinel.
        sentinels: Vec<String>,
        /// The monitored master's name.
        master: String,
        /// Database number on the data nodes.
        db: i64,
        /// Username on the data nodes.
        username: Option<String>,
        /// Password on the data nodes.
        password: Option<String>,
    },
    /// A Redis Cluster (`redis+cluster://`).
    Cluster {
        /// `redis://[user:pass@]host:port` of each seed node.
        nodes: Vec<String>,
    },
}

impl fmt::Debug for RedisTopology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // URLs and passwords stay out of logs.
        match self {
            Self::Standalone { .. } => f.write_str("Standalone"),
            Self::Sentinel {
                sentinels, master, ..
            } => f
                .debug_struct("Sentinel")
                .field("sentinels", &sentinels.len())
                .field("master", master)
                .finish_non_exhaustive(),
            Self::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &nodes.len())
                .finish(),
        }
    }
}

/// Pool limits and timeouts shared by every topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolSettings {
    /// Most pooled connections (one server, Sentinel; a Cluster shares one multiplexed
    /// connection per node).
    pub max_size: usize,
    /// How long a caller may wait for a free pooled connection.
    pub wait_timeout: Duration,
    /// TCP connect + handshake timeout of a new connection.
    pub connect_timeout: Duration,
    /// Timeout of one command (in a Cluster: including its redirects and retries).
    pub response_timeout: Duration,
}

impl PoolSettings {
    /// At most `max_size` connections, a caller waits `wait_timeout` for one, a new one connects
    /// within `connect_timeout`, a command answers within `response_timeout`.
    pub const fn new(
        max_size: usize,
        wait_timeout: Duration,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Self {
        Self {
            max_size,
            wait_timeout,
            connect_timeout,
            response_timeout,
        }
    }
}

impl RedisTopology {
    /// Parses a Redis URL of any supported scheme.
    ///
    /// # Errors
    ///
    /// An unknown scheme, a Sentinel URL without hosts or master name, a Cluster URL without
    /// nodes, or a host list that does not parse.
    pub fn parse(url: &str) -> Result<Self, TopologyError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| TopologyError("not a URL (scheme:// missing)".to_owned()))?;
        match scheme.to_ascii_lowercase().as_str() {
            "redis" | "rediss" | "unix" | "redis+unix" => {
                redis::Client::open(url).map_err(|e| TopologyError(e.to_string()))?;
                Ok(Self::Standalone {
                    url: url.to_owned(),
                })
            }
            "redis+sentinel" => parse_sentinel(rest),
            "redis+cluster" => parse_cluster(rest),
            other => Err(TopologyError(format!(
                "unsupported scheme `{other}` (redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://)"
            ))),
        }
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// The database number (keyspace notification channels name it; always 0 in a Cluster).
    pub fn db(&self) -> i64 {
        match self {
            Self::Standalone { url } => redis::Client::open(url.as_str())
                .map(|c| c.get_connection_info().redis_settings().db())
                .unwrap_or(0),
            Self::Sentinel { db, .. } => *db,
            Self::Cluster { .. } => 0,
        }
    }

    /// A connection pool for this topology. Does not connect.
    ///
    /// # Errors
    ///
    /// A pool that cannot be built (invalid host list for the client library).
    pub fn pool(&self, settings: &PoolSettings) -> Result<RedisPool, TopologyError> {
        let connection = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.response_timeout));
        let inner = match self {
            Self::Standalone { url } => {
                let manager = deadpool_redis::Manager::new_with_config(url.as_str(), connection)
                    .map_err(|e| TopologyError(e.to_string()))?;
                let pool = deadpool_redis::Pool::builder(manager)
                    .max_size(settings.max_size.max(1))
                    .wait_timeout(Some(settings.wait_timeout))
                    .create_timeout(Some(settings.connect_timeout))
                    .recycle_timeout(Some(settings.response_timeout))
                    .runtime(Runtime::Tokio1)
                    .build()
                    .map_err(|e| TopologyError(e.to_string()))?;
                Inner::Standalone(pool)
            }
            Self::Sentinel {
                sentinels, master, ..
            } => {
                let manager = deadpool_redis::sentinel::Manager::new(
                    sentinels.clone(),
                    master.clone(),
                    Some(self.sentinel_node_info_for_pool()),
                    deadpool_redis::sentinel::SentinelServerType::Master,
                )
                .map_err(|e| TopologyError(e.to_string()))?;
                // The sentinel manager connects with redis-rs' default timeouts (1 s connect,
                // 500 ms response); the pool's create timeout bounds the whole discovery.
                let pool = deadpool_redis::sentinel::Pool::builder(manager)
                    .max_size(settings.max_size.max(1))
                    .wait_timeout(Some(settings.wait_timeout))
                    .create_timeout(Some(settings.connect_timeout * 2))
                    .recycle_timeout(Some(settings.response_timeout))
                    .runtime(Runtime::Tokio1)
                    .build()
                    .map_err(|e| TopologyError(e.to_string()))?;
                Inner::Sentinel(pool)
            }
            Self::Cluster { nodes } => {
                let client = ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(settings.connect_timeout)
                    .response_timeout(settings.response_timeout)
                    .build()
                    .map_err(|e| TopologyError(e.to_string()))?;
                Inner::Cluster {
                    client,
                    connection: OnceCell::new(),
                    connect_timeout: settings.connect_timeout,
                }
            }
        };
        Ok(RedisPool {
            inner: Arc::new(inner),
        })
    }

    /// A pub/sub connection: to the (current) primary, or in a Cluster to the first seed that
    /// answers (see [`RedisTopology`] for why).
    ///
    /// # Errors
    ///
    /// No server (or sentinel) reachable, or a refusal (authentication).
    pub async fn pubsub(&self) -> Result<PubSub, RedisError> {
        match self {
            Self::Standalone { url } => redis::Client::open(url.as_str())?.get_async_pubsub().await,
            Self::Sentinel { .. } => {
                let mut sentinel = self.sentinel_client()?;
                sentinel.async_get_client().await?.get_async_pubsub().await
            }
            Self::Cluster { nodes } => {
                let mut last = RedisError::from((ErrorKind::Io, "no cluster node answered"));
                for node in nodes {
                    match redis::Client::open(node.as_str())?.get_async_pubsub().await {
                        Ok(pubsub) => return Ok(pubsub),
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }

    fn sentinel_client(&self) -> Result<SentinelClient, RedisError> {
        let Self::Sentinel {
            sentinels,
            master,
            db,
            username,
            password,
        } = self
        else {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "not a Sentinel topology",
            )));
        };
        let mut info = RedisConnectionInfo::default().set_db(*db);
        if let Some(user) = username {
            info = info.set_username(user);
        }
        if let Some(pass) = password {
            info = info.set_password(pass);
        }
        SentinelClient::build(
            sentinels.clone(),
            master.clone(),
            Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(info)),
            SentinelServerType::Master,
        )
    }

    fn sentinel_node_info_for_pool(&self) -> deadpool_redis::sentinel::SentinelNodeConnectionInfo {
        let (db, username, password) = match self {
            Self::Sentinel {
                db,
                username,
                password,
                ..
            } => (*db, username.clone(), password.clone()),
            _ => (0, None, None),
        };
        deadpool_redis::sentinel::SentinelNodeConnectionInfo {
            tls_mode: None,
            redis_connection_info: Some(deadpool_redis::RedisConnectionInfo {
                db,
                username,
                password,
                protocol: deadpool_redis::ProtocolVersion::RESP2,
            }),
        }
    }
}

/// `[user:pass@]h1:p1,h2:p2/<master>[/db]`
fn parse_sentinel(rest: &str) -> Result<RedisTopology, TopologyError> {
    let (userinfo, hosts, path) = split_authority(rest);
    let sentinels = host_urls(hosts, 26379, None)?;
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let master = segments
        .next()
        .map(|m| percent_decode_str(m).decode_utf8_lossy().into_owned())
        .ok_or_else(|| {
            TopologyError(
                "a redis+sentinel:// URL names the master after the hosts: redis+sentinel://host:26379,host:26380/<master>[/db]"
                    .to_owned(),
            )
        })?;
    let db = match segments.next() {
        None => 0,
        Some(db) => db.parse().map_err(|_| {
            TopologyError("the database after the master name must be a number".to_owned())
        })?,
    };
    let (username, password) = credentials(userinfo);
    Ok(RedisTopology::Sentinel {
        sentinels,
        master,
        db,
        username,
        password,
    })
}

/// `[user:pass@]h1:p1,h2:p2[/]`
fn parse_cluster(rest: &str) -> Result<RedisTopology, TopologyError> {
    let (userinfo, hosts, path) = split_authority(rest);
    if !path.trim_matches('/').is_empty() && path.trim_matches('/') != "0" {
        return Err(TopologyError(
            "a Redis Cluster has only database 0: redis+cluster://host:7000,host:7001".to_owned(),
        ));
    }
    Ok(RedisTopology::Cluster {
        nodes: host_urls(hosts, 6379, userinfo)?,
    })
}

/// Splits `[userinfo@]hosts[/path]` (the userinfo ends at the last `@` before the first `/`).
fn split_authority(rest: &str) -> (Option<&str>, &str, &str) {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts, path),
        None => (None, authority, path),
    }
}

fn credentials(userinfo: Option<&str>) -> (Option<String>, Option<String>) {
    let Some(userinfo) = userinfo else {
        return (None, None);
    };
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    match userinfo.split_once(':') {
        Some((user, pass)) => (
            Some(decode(user)).filter(|u| !u.is_empty()),
            Some(decode(pass)),
        ),
        None => (Some(decode(userinfo)).filter(|u| !u.is_empty()), None),
    }
}

/// `h1:p1,h2` as `redis://[userinfo@]h1:p1/` URLs (checked by the client library).
fn host_urls(
    hosts: &str,
    default_port: u16,
    userinfo: Option<&str>,
) -> Result<Vec<String>, TopologyError> {
    let auth = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    let urls: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            let has_port = h.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
            if has_port {
                format!("redis://{auth}{h}/")
            } else {
                format!("redis://{auth}{h}:{default_port}/")
            }
        })
        .collect();
    if urls.is_empty() {
        return Err(TopologyError("no hosts before the path".to_owned()));
    }
    for url in &urls {
        redis::Client::open(url.as_str())
            .map_err(|e| TopologyError(format!("a host in the list does not parse: {e}")))?;
    }
    Ok(urls)
}

/// Connections to a [`RedisTopology`]; clones share them.
#[derive(Clone)]
pub struct RedisPool {
    inner: Arc<Inner>,
}

// One value per pool, behind an `Arc`: boxing the cluster variant would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Standalone(deadpool_redis::Pool),
    Sentinel(deadpool_redis::sentinel::Pool),
    Cluster {
        client: redis::cluster::ClusterClient,
        /// One multiplexed cluster connection (it holds one connection per node and reconnects
        /// itself); made on first use so that building never needs the cluster up.
        connection: OnceCell<ClusterConnection>,
        connect_timeout: Duration,
    },
}

impl fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &*self.inner {
            Inner::Standalone(_) => "standalone",
            Inner::Sentinel(_) => "sentinel",
            Inner::Cluster { .. } => "cluster",
        };
        f.debug_struct("RedisPool")
            .field("topology", &kind)
            .finish()
    }
}

impl RedisPool {
    /// Whether the pool talks to a Redis Cluster (some commands, like `SCAN`, need per-node
    /// handling there).
    pub fn is_cluster(&self) -> bool {
        matches!(*self.inner, Inner::Cluster { .. })
    }

    /// A connection (a pooled one; in a Cluster a clone of the shared multiplexed one).
    ///
    /// # Errors
    ///
    /// Pool wait or create timeouts, or Redis failing to connect.
    pub async fn get(&self) -> Result<RedisConnection, PoolError> {
        let conn = match &*self.inner {
            Inner::Standalone(pool) => pool.get().await.map(Conn::Standalone),
            Inner::Sentinel(pool) => pool.get().await.map(|c| Conn::Sentinel(Box::new(c))),
            Inner::Cluster {
                client,
                connection,
                connect_timeout,
            } => {
                let connect = async {
                    match tokio::time::timeout(
                        // Discovery asks several nodes; allow a few connects.
                        *connect_timeout * 3,
                        client.get_async_connection(),
                    )
                    .await
                    {
                        Ok(result) => result,
                        Err(_) => Err(RedisError::from((ErrorKind::Io, "cluster connect timeout"))),
                    }
                };
                connection
                    .get_or_try_init(|| connect)
                    .await
                    .map(|c| Conn::Cluster(c.clone()))
                    .map_err(PoolError::Backend)
            }
        }?;
        Ok(RedisConnection {
            conn: Some(conn),
            demoted: false,
        })
    }
}

/// One connection from a [`RedisPool`]; runs commands like any redis-rs connection.
///
/// A connection answered `READONLY` reaches a server that is no longer the primary. Sentinel
/// closes a demoted server's client connections when it reconfigures it, but one that outlives
/// that (a write racing the reconfiguration, a `REPLICAOF` by hand) would answer every write with
/// `READONLY` for as long as it lives, since the pool's recycle check is a `PING`, which a replica
/// answers. So it is closed instead of going back to the pool when dropped, and the next
/// connection asks the sentinels again (a one-server URL connects to the same server again). A
/// replica refuses no read and no `PUBLISH`: a connection that only does those is moved by
/// Sentinel's disconnection alone.
pub struct RedisConnection {
    /// Always `Some` but in `drop`, which takes it out to close a demoted connection.
    conn: Option<Conn>,
    /// Answered `READONLY`: discard rather than return to the pool.
    demoted: bool,
}

enum Conn {
    /// From the one-server pool.
    Standalone(deadpool_redis::Connection),
    /// From the Sentinel pool (to the primary at the time it was made).
    Sentinel(Box<deadpool_redis::sentinel::Connection>),
    /// The shared Cluster connection (it follows the cluster's topology itself).
    Cluster(ClusterConnection),
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.inner() {
            Conn::Standalone(_) => "standalone",
            Conn::Sentinel(_) => "sentinel",
            Conn::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisConnection")
            .field("topology", &kind)
            .field("demoted", &self.demoted)
            .finish()
    }
}

impl RedisConnection {
    const PRESENT: &'static str = "a RedisConnection holds its connection until dropped";

    fn inner(&self) -> &Conn {
        self.conn.as_ref().expect(Self::PRESENT)
    }

    fn conn(&mut self) -> &mut (dyn ConnectionLike + Send) {
        match self.conn.as_mut().expect(Self::PRESENT) {
            Conn::Standalone(c) => c,
            Conn::Sentinel(c) => c.as_mut(),
            Conn::Cluster(c) => c,
        }
    }

    /// Whether this connection (to one server, or through Sentinel) was answered `READONLY`: it
    /// will be closed, not pooled, when dropped.
    pub fn is_demoted(&self) -> bool {
        self.demoted
    }

    /// Marks the connection demoted when `result` carries `READONLY`: as an error, or as a
    /// server error value (redis-rs turns those into errors only when a reply is converted). A
    /// Cluster connection never is: the cluster client follows the topology itself.
    fn note(&mut self, result: &redis::RedisResult<redis::Value>) {
        if matches!(self.inner(), Conn::Cluster(_)) {
            return;
        }
        self.demoted |= match result {
            Err(e) => reached_a_replica(e),
            Ok(value) => readonly_value(value),
        };
    }

    fn note_all(&mut self, result: &redis::RedisResult<Vec<redis::Value>>) {
        if matches!(self.inner(), Conn::Cluster(_)) {
            return;
        }
        self.demoted |= match result {
            Err(e) => reached_a_replica(e),
            Ok(values) => values.iter().any(readonly_value),
        };
    }
}

/// Whether a reply is (or, for a transaction's `EXEC`, holds) a `READONLY` server error.
fn readonly_value(value: &redis::Value) -> bool {
    match value {
        redis::Value::ServerError(e) => e.kind() == Some(redis::ServerErrorKind::ReadOnly),
        redis::Value::Array(items) => items.iter().any(readonly_value),
        _ => false,
    }
}

impl Drop for RedisConnection {
    fn drop(&mut self) {
        if !self.demoted {
            return;
        }
        // Taking the connection out of its pool object detaches it: it is closed here.
        match self.conn.take() {
            Some(Conn::Standalone(c)) => drop(deadpool_redis::Connection::take(c)),
            Some(Conn::Sentinel(c)) => drop(deadpool_redis::sentinel::Connection::take(*c)),
            Some(Conn::Cluster(_)) | None => {}
        }
    }
}

/// Whether `err` says the server is not the primary (any more): `READONLY`, alone or inside a
/// transaction or pipeline.
fn reached_a_replica(err: &RedisError) -> bool {
    err.kind() == ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
        || err.clone().into_server_errors().is_some_and(|errors| {
            errors
                .iter()
                .any(|(_, e)| e.kind() == Some(redis::ServerErrorKind::ReadOnly))
        })
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let result = self.conn().req_packed_command(cmd).await;
            self.note(&result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let result = self.conn().req_packed_commands(cmd, offset, count).await;
            self.note_all(&result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        match self.inner() {
            Conn::Standalone(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_choose_the_topology() {
        assert!(matches!(
            RedisTopology::parse("redis://127.0.0.1:6379/2"),
            Ok(RedisTopology::Standalone { .. })
        ));
        assert_eq!(
            RedisTopology::parse("redis://127.0.0.1:6379/2").map(|t| t.db()),
            Ok(2)
        );
        assert_eq!(
            RedisTopology::parse("redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2/mymaster/3"),
            Ok(RedisTopology::Sentinel {
                sentinels: vec![
                    "redis://10.0.0.1:26379/".to_owned(),
                    "redis://10.0.0.2:26379/".to_owned()
                ],
                master: "mymaster".to_owned(),
                db: 3,
                username: None,
                password: Some("s3cret".to_owned()),
            })
        );
        assert_eq!(
            RedisTopology::parse("redis+cluster://u:p@h1:7000,h2:7001"),
            Ok(RedisTopology::Cluster {
                nodes: vec![
                    "redis://u:p@h1:7000/".to_owned(),
                    "redis://u:p@h2:7001/".to_owned()
                ]
            })
        );
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        for (url, expect) in [
            ("http://:pw@h/", "unsupported scheme `http`"),
            ("redis+sentinel://:pw@h1:26379", "names the master"),
            ("redis+sentinel://:pw@h1:26379/m/x", "must be a number"),
            ("redis+cluster://:pw@/", "no hosts"),
            ("redis+cluster://:pw@h:1/4", "only database 0"),
            ("127.0.0.1:6379", "scheme:// missing"),
        ] {
            let err = RedisTopology::parse(url).expect_err(url).to_string();
            assert!(err.contains(expect), "{url}: {err}");
            assert!(!err.contains("pw"), "{url}: {err}");
        }
    }

    #[test]
    fn readonly_is_found_alone_and_inside_a_transactions_reply() {
        let readonly =
            |wire: &str| redis::parse_redis_value(wire.as_bytes()).map(|v| readonly_value(&v));
        assert_eq!(readonly("-READONLY You can't write\r\n"), Ok(true));
        assert_eq!(
            readonly("*2\r\n+OK\r\n-READONLY You can't write\r\n"),
            Ok(true)
        );
        assert_eq!(readonly("*2\r\n+OK\r\n-WRONGTYPE no\r\n"), Ok(false));
        assert_eq!(readonly("+OK\r\n"), Ok(false));
    }

    #[test]
    fn debug_shows_no_secrets() {
        let topology =
            RedisTopology::parse("redis+sentinel://:s3cret@h:26379/m").expect("sentinel");
        assert!(!format!("{topology:?}").contains("s3cret"));
    }
}
