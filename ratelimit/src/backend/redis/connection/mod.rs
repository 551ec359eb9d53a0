//! [`Connection`]: one multiplexed connection to a single server, a cluster,
//! or the master a Sentinel names, behind redis-rs's `ConnectionLike`; and
//! how a request survives a connection that died while idle.
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
//! (`failure.rs`), whether the server's data may be gone (`watch.rs`), and
//! which master the sentinels name (`sentinel.rs`).
//!
//! # Bounds, resends, the breaker
//!
//! - `connect` is bounded as a whole by `connect_timeout`; every duration of
//!   `RedisOptions` is bounded to 1 ms..1 h, so no arithmetic overflows.
//! - A peek, `SCRIPT LOAD` and `DEL` are resent once, and any call after
//!   `NOSCRIPT` or `READONLY` (Redis refused it without running it); a
//!   decision never is. Through Sentinel, a timeout, an unreachable master,
//!   `READONLY` or `NOREPLICAS` makes the sentinels be asked at once, besides
//!   their notifications and a lookup every second (`sentinel.rs`). redis-rs's cluster connection resends a request
//!   whose node connection dropped, so there a decision can be counted
//!   twice (never admitted twice).
//! - The breaker opens on a timeout, a refused connect or any other
//!   unavailability except a dead socket (being replaced already), and
//!   calls fail fast with `Error::Unavailable` while it is open. It is per
//!   node (`owners.rs` says which node serves a key: a cluster's master of
//!   the key's slot), so a cluster master that is down fails its own keys
//!   only; a start-up, `PING` and `SCRIPT LOAD` need one master's answer.

pub(super) mod breaker;
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

use self::endpoint::Endpoint;
use self::idle::Answered;
#[cfg(feature = "cluster")]
use self::idle::{slot, SLOTS, SLOTS_PER_GROUP};
use self::owners::Owners;
use self::request::Request;
#[cfg(feature = "sentinel")]
use self::sentinel::SentinelMaster;
use self::watch::DataWatch;
use super::RedisOptions;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::io::tcp::TcpSettings;
#[cfg(feature = "cluster")]
use redis::ErrorKind;
use redis::{Cmd, ConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// A connection shared by every limiter and task; clones are cheap.
#[derive(Clone)]
pub(crate) struct Connection {
    kind: Kind,
    /// When a single server's or a Sentinel master's connection last answered.
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
    /// Redis Cluster: routes each EVALSHA by its key, follows MOVED/ASK, reconnects.
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
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
        let groups = if matches!(endpoint, Endpoint::Cluster { .. }) { SLOTS / SLOTS_PER_GROUP } else { 1 };
        #[cfg(not(feature = "cluster"))]
        let groups = 1;
        let watch = Arc::new(DataWatch::new(groups == 1));
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
                let nodes: Vec<ConnectionInfo> = nodes.into_iter().map(|n| n.set_tcp_settings(tcp())).collect();
                #[allow(unused_mut)]
                let mut builder = redis::cluster::ClusterClientBuilder::new(nodes)
                    .connection_timeout(options.connect_timeout)
                    .response_timeout(options.response_timeout)
                    .retries(options.reconnect_retries as u32)
                    .min_retry_wait(50)
                    .max_retry_wait(1000);
                #[cfg(feature = "tls")]
                if let Some(root) = &options.tls_root_cert {
                    tls::install_crypto_provider();
                    builder = builder.certs(redis::TlsCertificates { client_tls: None, root_cert: Some(root.clone()) });
                }
                Kind::Cluster(builder.build()?.get_async_connection().await?)
            }
            #[cfg(feature = "sentinel")]
            Endpoint::Sentinel { sentinels, master, node } => {
                Kind::Sentinel(SentinelMaster::connect(sentinels, master, node, options, watch.clone()).await?)
            }
        };
        let mut connection = Connection { kind, answered: Arc::new(Answered::new(groups)), watch, owners };
        // A server that wants a password lets a connection without one open
        // and refuses its first command (NOAUTH): ask one now, so a missing
        // password fails start-up as a wrong one does. On a cluster `PING`
        // goes to every master, and one answer is enough: a master that is
        // down fails its own keys' calls, not the start-up.
        // The first request checks the data watch too: what it sees is what later checks compare with.
        connection.req_packed_command(&redis::cmd("PING")).await.and_then(Value::extract_error)?;
        Ok(connection)
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
    /// it once).
    ///
    /// On a cluster the `PING` goes to the node of `key`'s slot, and is
    /// asked when that slot's group has been idle: redis-rs pings nothing,
    /// and resends a request whose node connection dropped (up to the
    /// configured retries) whether or not it ran, which this makes rare.
    pub(crate) async fn request(&mut self, cmd: Request<'_>, key: &[u8], replayable: bool) -> RedisResult<Value> {
        // Only a cluster routes by the key.
        #[cfg(not(feature = "cluster"))]
        let _ = key;
        let reply = match &mut self.kind {
            Kind::Single(manager) => guarded(manager, &self.answered, &self.watch, cmd, replayable).await,
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(sentinel) => sentinel.request(cmd, &self.answered, &self.watch, replayable).await,
            #[cfg(feature = "cluster")]
            Kind::Cluster(cluster) => {
                let group = slot(key) as usize / SLOTS_PER_GROUP;
                if self.answered.idle(group) {
                    // Boxed: only a call after an idle spell takes this path.
                    Box::pin(ping_node(cluster, key)).await?;
                }
                let reply = cmd.on(cluster).await;
                if reply.is_ok() {
                    self.answered.touch(group);
                }
                reply
            }
        };
        reply.and_then(Value::extract_error)
    }
}

/// `PING` on the node that serves `key`, up to three times: redis-rs may
/// answer the first after a dead socket before its reconnect is done.
#[cfg(feature = "cluster")]
async fn ping_node(cluster: &mut ClusterConnection, key: &[u8]) -> RedisResult<Value> {
    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master)));
    let mut attempt = 1;
    loop {
        match cluster.route_command(redis::cmd("PING"), route.clone()).await {
            Err(e) if attempt < 3 && (is_dead_socket(&e) || e.kind() == ErrorKind::ClusterConnectionNotFound) => {
                tracing::debug!(target: "redlimit", "a Redis Cluster node's connection was closed while idle: {e}");
                attempt += 1;
            }
            reply => return reply,
        }
    }
}

/// `PING` and `SCRIPT LOAD` go to every master, and one master's answer is
/// enough: a master that is down must not fail the start-up or every
/// node's first call. A script it missed is loaded again on its `NOSCRIPT`.
#[cfg(feature = "cluster")]
fn every_master(cmd: &Cmd) -> Option<RoutingInfo> {
    let mut args = cmd.args_iter().filter_map(|arg| match arg {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()?;
    let fanned = name.eq_ignore_ascii_case(b"PING")
        || (name.eq_ignore_ascii_case(b"SCRIPT") && args.next().is_some_and(|a| a.eq_ignore_ascii_case(b"LOAD")));
    fanned.then_some(RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, Some(ResponsePolicy::OneSucceeded))))
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
    if answered.idle(0) {
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
        Ok(_) => answered.touch(0),
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
        Ok(_) => answered.touch(0),
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
            Kind::Cluster(c) => match every_master(cmd) {
                Some(routing) => Box::pin(c.route_command(cmd.clone(), routing)),
                None => c.req_packed_command(cmd),
            },
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
            Kind::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => c.get_db(),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => s.current().1.get_db(),
        }
    }
}
