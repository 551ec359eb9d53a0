//! [`Connection`]: one multiplexed connection to a single server, or the
//! master a Sentinel names, or one per master of a cluster, behind
//! redis-rs's `ConnectionLike`; and how a request survives a connection
//! that died while idle.
//!
//! redis-rs's `ConnectionManager` does not resend a request that failed on a
//! dropped connection: it returns the error and starts reconnecting, and the
//! next request waits for the new connection. Its error cannot say whether
//! the request reached Redis: a broken pipe is reported alike when the
//! connection was already gone before sending and when it closed while the
//! reply was awaited. So a request that may write is never resent here.
//! Instead, a connection that has not answered for a while (as long as
//! Redis's shortest idle `timeout` could close it, or a NAT box forget it)
//! is first asked `PING`, which can be resent freely: a dead socket is found
//! and replaced by that, and the decision goes out on a connection that has
//! just answered.
//!
//! The folder owns the connection to Redis: which deployment a URL names
//! (`endpoint.rs`), the connection's options (`options.rs`), when it is idle
//! and which slot a key is in (`idle.rs`), TLS (`tls.rs`), failing fast
//! on a node's keys after its failure (`breaker.rs`, `owners.rs`), what a redis-rs error means
//! (`failure.rs`), whether the server's data may be gone (`watch.rs`),
//! which master the sentinels name (`sentinel.rs`), and a cluster's
//! routing, node by node (`cluster/`).
//!
//! # Bounds, resends, the breaker
//!
//! - `connect` is bounded as a whole by `connect_timeout`; every duration of
//!   `RedisOptions` is bounded to 1 ms..1 h, so no arithmetic overflows.
//! - A peek, `SCRIPT LOAD` and `DEL` are resent once, and any call after
//!   `NOSCRIPT`, `READONLY` or, on a cluster, `MOVED`, `ASK`, `CLUSTERDOWN`,
//!   `TRYAGAIN`, `MASTERDOWN` and `LOADING` (Redis refused it without
//!   running it; `cluster/routing.rs`); a decision never is otherwise, on
//!   any deployment. Through Sentinel, a timeout, an unreachable master,
//!   `READONLY` or `NOREPLICAS` makes the sentinels be asked at once, besides
//!   their notifications and a lookup every second (`sentinel.rs`). A
//!   cluster's slot map is asked again after a `MOVED`, a node's failure,
//!   and periodically, of every node at once (`cluster/slots.rs`).
//! - The breaker opens on a timeout, a refused connect or any other
//!   unavailability except a dead socket (being replaced already), and
//!   calls fail fast with `Error::Unavailable` while it is open. It is per
//!   node (`owners.rs` says which node serves a key: a cluster's master of
//!   the key's slot), so a cluster master that is down or hung fails its
//!   own keys only: each master has a connection of its own, and nothing
//!   another master's call does waits on it (`cluster/mod.rs`). A start-up
//!   needs one node's answer (the slot map), `PING` and `SCRIPT LOAD` one
//!   master's.

pub(super) mod breaker;
#[cfg(feature = "cluster")]
mod cluster;
pub(super) mod endpoint;
pub(super) mod failure;
pub(super) mod idle;
pub(crate) mod options;
pub(super) mod owners;
pub(crate) mod request;
#[cfg(feature = "sentinel")]
mod sentinel;
#[cfg(feature = "tls")]
mod tls;
pub(crate) mod watch;

#[cfg(feature = "cluster")]
use self::cluster::Cluster;
use self::endpoint::Endpoint;
use self::idle::Answered;
use self::owners::Owners;
use self::request::Request;
#[cfg(feature = "sentinel")]
use self::sentinel::SentinelMaster;
use self::watch::DataWatch;
use super::RedisOptions;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
#[cfg(any(feature = "cluster", feature = "sentinel"))]
use redis::ConnectionAddr;
use redis::{Cmd, ConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// A connection shared by every limiter and task; clones are cheap.
#[derive(Clone)]
pub(crate) struct Connection {
    kind: Kind,
    /// When a single server's or a Sentinel master's connection last
    /// answered (a cluster's nodes each keep their own).
    answered: Arc<Answered>,
    /// Whether the server's data may be gone since this process last looked.
    pub(crate) watch: Arc<DataWatch>,
    /// Which node serves a key: what the breaker remembers failures by.
    pub(super) owners: Arc<Owners>,
}

#[derive(Clone)]
enum Kind {
    /// One server, through a reconnecting `ConnectionManager`.
    Single(ConnectionManager),
    /// Redis Cluster: a connection per master, each request routed by its key (`cluster/`).
    #[cfg(feature = "cluster")]
    Cluster(Arc<Cluster>),
    /// The master the sentinels name, followed as they name another (`sentinel.rs`).
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<SentinelMaster>),
}

fn tcp() -> TcpSettings {
    // Decisions are small requests: don't let Nagle's algorithm delay them.
    TcpSettings::default().set_nodelay(true)
}

fn manager_config(options: &RedisOptions) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        // No response timeout here: every request the backend sends is
        // bounded as a whole (a wait for a reconnect or a script reload included).
        .set_response_timeout(None)
        .set_number_of_retries(options.reconnect_retries)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(1))
}

/// A node's address: host and port.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(super) type Address = (String, u16);

/// A manager connected to the node at `address`, with the nodes' settings
/// (credentials, database, TLS) taken from `node`.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(super) async fn open(
    node: &ConnectionInfo,
    address: &Address,
    options: &RedisOptions,
    config: &ConnectionManagerConfig,
) -> RedisResult<ConnectionManager> {
    let (host, port) = address.clone();
    let addr = match node.addr() {
        ConnectionAddr::TcpTls { insecure, .. } => {
            ConnectionAddr::TcpTls { host, port, insecure: *insecure, tls_params: None }
        }
        _ => ConnectionAddr::Tcp(host, port),
    };
    ConnectionManager::new_with_config(client(node.clone().set_addr(addr), options)?, config.clone()).await
}

fn client(info: ConnectionInfo, options: &RedisOptions) -> RedisResult<redis::Client> {
    let info = info.set_tcp_settings(tcp());
    #[cfg(feature = "tls")]
    if let Some(root) = &options.tls_root_cert {
        tls::install_crypto_provider();
        let certificates = redis::TlsCertificates { client_tls: None, root_cert: Some(root.clone()) };
        return redis::Client::build_with_tls(info, certificates);
    }
    let _ = options;
    redis::Client::open(info)
}

impl Connection {
    /// Connects to `endpoint`. Scripts are loaded as limiters are bound.
    pub(crate) async fn connect(endpoint: Endpoint, options: &RedisOptions) -> RedisResult<Connection> {
        // Every deployment but a cluster is one server's data, watched.
        #[cfg(feature = "cluster")]
        let one_server = !matches!(endpoint, Endpoint::Cluster { .. });
        #[cfg(not(feature = "cluster"))]
        let one_server = true;
        let watch = Arc::new(DataWatch::new(one_server));
        let owners = Arc::new(match &endpoint {
            Endpoint::Single(info) => Owners::one(info.addr().to_string()),
            #[cfg(feature = "cluster")]
            Endpoint::Cluster { .. } => Owners::cluster(),
            #[cfg(feature = "sentinel")]
            Endpoint::Sentinel { master, .. } => Owners::one(format!("the master the sentinels name {master}")),
        });
        let kind = match endpoint {
            Endpoint::Single(info) => {
                Kind::Single(ConnectionManager::new_with_config(client(info, options)?, manager_config(options)).await?)
            }
            #[cfg(feature = "cluster")]
            Endpoint::Cluster { nodes } => {
                // Its slot map, asked of every seed at once, is its start-up's
                // check: one node's answer is enough, and a node that wants a
                // password refuses it without one. A master that is down
                // fails its own keys' calls, not the start-up.
                let nodes = nodes.into_iter().map(|n| n.set_tcp_settings(tcp())).collect();
                return Ok(Connection {
                    kind: Kind::Cluster(Cluster::connect(nodes, options, owners.clone(), watch.clone()).await?),
                    answered: Arc::new(Answered::new()),
                    watch,
                    owners,
                });
            }
            #[cfg(feature = "sentinel")]
            Endpoint::Sentinel { sentinels, master, node } => {
                Kind::Sentinel(SentinelMaster::connect(sentinels, master, node, options, watch.clone()).await?)
            }
        };
        let mut connection = Connection { kind, answered: Arc::new(Answered::new()), watch, owners };
        // A server that wants a password lets a connection without one open
        // and refuses its first command (NOAUTH): ask one now, so a missing
        // password fails start-up as a wrong one does.
        // The first request checks the data watch too: what it sees is what later checks compare with.
        connection.req_packed_command(&redis::cmd("PING")).await.and_then(Value::extract_error)?;
        Ok(connection)
    }

    /// Learns a cluster's slot map again, in the background: a node failed
    /// (it may have been failed over) or a batch met a slot that moved.
    pub(crate) fn relearn_slots(&self) {
        #[cfg(feature = "cluster")]
        if let Kind::Cluster(cluster) = &self.kind {
            cluster.refresh_later();
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        return matches!(self.kind, Kind::Cluster(_));
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// Sends `cmd`, which touches `key`; a server's error is an `Err`. A
    /// connection idle for [`PROBE_AFTER`](idle::PROBE_AFTER) is asked `PING` first (see the
    /// module's doc). `cmd` itself is sent again after a dead socket only
    /// when `replayable` (it writes nothing, or writing it twice is writing
    /// it once). On a cluster, the connection is that of the master of
    /// `key`'s slot, and its idleness that connection's.
    pub(crate) async fn request(&mut self, cmd: Request<'_>, key: &[u8], replayable: bool) -> RedisResult<Value> {
        // Only a cluster routes by the key.
        #[cfg(not(feature = "cluster"))]
        let _ = key;
        let reply = match &mut self.kind {
            Kind::Single(manager) => guarded(manager, &self.answered, &self.watch, cmd, replayable).await,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(sentinel) => sentinel.request(cmd, &self.answered, &self.watch, replayable).await,
            #[cfg(feature = "cluster")]
            Kind::Cluster(cluster) => cluster.request(cmd, key, replayable).await,
        };
        reply.and_then(Value::extract_error)
    }
}

/// A socket that was open and is not any more: closed by the server or a
/// middlebox, reset. Not a refused connect, which says the server is down.
pub(crate) fn is_dead_socket(error: &RedisError) -> bool {
    error.is_connection_dropped() && !error.is_connection_refusal()
}

/// `cmd` on `manager`, after a `PING` if the connection has been idle and
/// the data watch's check when one is due; see [`Connection::request`].
async fn guarded(
    manager: &mut ConnectionManager,
    answered: &Answered,
    watch: &DataWatch,
    cmd: Request<'_>,
    replayable: bool,
) -> RedisResult<Value> {
    if answered.idle() {
        // Boxed: only a call after an idle spell takes this path.
        Box::pin(resent_once(manager, answered, watch, Request::One(&redis::cmd("PING")))).await?;
    }
    if watch.claim() {
        // Boxed: once a second at most, and after a reconnect.
        Box::pin(watch.check(manager)).await;
    }
    if replayable {
        return resent_once(manager, answered, watch, cmd).await;
    }
    let reply = cmd.on(manager).await;
    match &reply {
        Ok(_) => answered.touch(),
        Err(e) => suspect(watch, e),
    }
    reply.and_then(Value::extract_error)
}

/// `cmd`, and once more if its connection turned out dead: the manager has
/// then started a new one, which the second request waits for.
async fn resent_once(
    manager: &mut ConnectionManager,
    answered: &Answered,
    watch: &DataWatch,
    cmd: Request<'_>,
) -> RedisResult<Value> {
    let reply = match cmd.on(manager).await {
        Err(e) if is_dead_socket(&e) => {
            tracing::debug!(target: "redlimit", "the Redis connection was closed while idle; reconnecting");
            watch.suspect();
            cmd.on(manager).await
        }
        reply => reply,
    };
    match &reply {
        Ok(_) => answered.touch(),
        Err(e) => suspect(watch, e),
    }
    reply.and_then(Value::extract_error)
}

/// A request that failed for its connection: the next one may meet a
/// server that restarted, so it checks first.
fn suspect(watch: &DataWatch, error: &RedisError) {
    if error.is_connection_dropped() || error.is_connection_refusal() || error.is_io_error() || error.is_timeout() {
        watch.suspect();
    }
}

impl ConnectionLike for Connection {
    /// What scripts.rs and bound.rs send besides decisions (`SCRIPT LOAD`,
    /// `DEL`) is resent freely after a dead socket: doing either twice is
    /// doing it once.
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.kind {
            Kind::Single(manager) => Box::pin(guarded(manager, &self.answered, &self.watch, Request::One(cmd), true)),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => Box::pin(c.command(cmd)),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => Box::pin(s.request(Request::One(cmd), &self.answered, &self.watch, true)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.kind {
            Kind::Single(c) => c.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => Box::pin(c.pipeline(pipeline, offset, count)),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(c) => c.get_db(),
            // A cluster has only database 0.
            #[cfg(feature = "cluster")]
            Kind::Cluster(_) => 0,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.current().1.get_db(),
        }
    }
}
