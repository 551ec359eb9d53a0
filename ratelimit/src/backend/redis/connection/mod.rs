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
//! after a failure (`breaker.rs`), what a redis-rs error means
//! (`failure.rs`), and whether the server's data may be gone (`watch.rs`).
//!
//! # Bounds, resends, the breaker
//!
//! - `connect` is bounded as a whole by `connect_timeout`; every duration of
//!   `RedisOptions` is bounded to 1 ms..1 h, so no arithmetic overflows.
//! - A peek, `SCRIPT LOAD` and `DEL` are resent once, and any call after
//!   `NOSCRIPT` or `READONLY` (Redis refused it without running it); a
//!   decision never is. redis-rs's cluster connection resends a request
//!   whose node connection dropped, so there a decision can be counted
//!   twice (never admitted twice).
//! - The breaker opens on a timeout, a refused connect or any other
//!   unavailability except a dead socket (being replaced already), and
//!   calls fail fast with `Error::Unavailable` while it is open.

pub(super) mod breaker;
pub(super) mod endpoint;
pub(super) mod failure;
pub(super) mod idle;
pub(crate) mod options;
#[cfg(feature = "tls")]
mod tls;
pub(crate) mod watch;

use self::endpoint::Endpoint;
use self::idle::Answered;
#[cfg(feature = "cluster")]
use self::idle::{slot, SLOTS, SLOTS_PER_GROUP};
use self::watch::DataWatch;
use super::RedisOptions;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::io::tcp::TcpSettings;
#[cfg(feature = "sentinel")]
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
#[cfg(any(feature = "cluster", feature = "sentinel"))]
use redis::ErrorKind;
#[cfg(feature = "sentinel")]
use redis::ServerErrorKind;
use redis::{Cmd, ConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, Value};
#[cfg(feature = "sentinel")]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
#[cfg(feature = "sentinel")]
use std::sync::RwLock;
use std::time::Duration;

/// A connection shared by every limiter and task; clones are cheap.
#[derive(Clone)]
pub(crate) struct Connection {
    kind: Kind,
    /// When a single server's or a Sentinel master's connection last answered.
    answered: Arc<Answered>,
    /// Whether the server's data may be gone since this process last looked.
    pub(crate) watch: Arc<DataWatch>,
}

#[derive(Clone)]
enum Kind {
    /// One server, through a reconnecting `ConnectionManager`.
    Single(ConnectionManager),
    /// Redis Cluster: routes each EVALSHA by its key, follows MOVED/ASK, reconnects.
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
    /// The master named by Sentinel, re-resolved after a failover.
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
            Endpoint::Sentinel { sentinels, master, node, tls } => {
                Kind::Sentinel(Arc::new(SentinelMaster::connect(sentinels, master, node, tls, options).await?))
            }
        };
        #[cfg(feature = "cluster")]
        let groups = if matches!(kind, Kind::Cluster(_)) { SLOTS / SLOTS_PER_GROUP } else { 1 };
        #[cfg(not(feature = "cluster"))]
        let groups = 1;
        let watch = Arc::new(DataWatch::new(groups == 1));
        let mut connection = Connection { kind, answered: Arc::new(Answered::new(groups)), watch };
        // A server that wants a password lets a connection without one open
        // and refuses its first command (NOAUTH): ask one now, so a missing
        // password fails start-up as a wrong one does. On a cluster `PING`
        // goes to every master.
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
    pub(crate) async fn request(&mut self, cmd: &Cmd, key: &[u8], replayable: bool) -> RedisResult<Value> {
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
                let reply = cluster.req_packed_command(cmd).await;
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
    cmd: &Cmd,
    replayable: bool,
) -> RedisResult<Value> {
    if answered.idle(0) {
        // Boxed: only a call after an idle spell takes this path.
        Box::pin(resent_once(manager, answered, watch, &redis::cmd("PING"))).await?;
    }
    if watch.claim() {
        // Boxed: once a second at most, and after a reconnect.
        Box::pin(watch.check(manager)).await;
    }
    if replayable {
        return resent_once(manager, answered, watch, cmd).await;
    }
    let reply = manager.req_packed_command(cmd).await;
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
    cmd: &Cmd,
) -> RedisResult<Value> {
    let reply = match manager.req_packed_command(cmd).await {
        Err(e) if is_dead_socket(&e) => {
            tracing::debug!(target: "redlimit", "the Redis connection was closed while idle; reconnecting");
            watch.suspect();
            manager.req_packed_command(cmd).await
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
            Kind::Single(manager) => Box::pin(guarded(manager, &self.answered, &self.watch, cmd, true)),
            #[cfg(feature = "cluster")]
            Kind::Cluster(c) => c.req_packed_command(cmd),
            #[cfg(feature = "sentinel")]
            Kind::Sentinel(s) => Box::pin(s.request(cmd, &self.answered, &self.watch, true)),
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
            Kind::Sentinel(s) => {
                let (_, mut current) = s.current();
                Box::pin(async move { current.req_packed_commands(pipeline, offset, count).await })
            }
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

/// The master a Sentinel names. redis-rs resolves the master only when it
/// connects; after a failover the old master answers writes with READONLY (or
/// is gone), so on either we ask the sentinels again and reconnect.
#[cfg(feature = "sentinel")]
pub(crate) struct SentinelMaster {
    sentinel: tokio::sync::Mutex<SentinelClient>,
    current: RwLock<ConnectionManager>,
    /// Bumped on every re-resolution, so concurrent failures resolve once.
    generation: AtomicU64,
    config: ConnectionManagerConfig,
}

#[cfg(feature = "sentinel")]
impl SentinelMaster {
    async fn connect(
        sentinels: Vec<ConnectionInfo>,
        master: String,
        node: ConnectionInfo,
        tls: bool,
        options: &RedisOptions,
    ) -> RedisResult<SentinelMaster> {
        let mut node_info = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(node.redis_settings().clone())
            .set_tcp_settings(tcp());
        if tls {
            node_info = node_info.set_tls_mode(redis::TlsMode::Secure);
        }
        #[cfg(feature = "tls")]
        if let (true, Some(root)) = (tls, &options.tls_root_cert) {
            return SentinelMaster::finish(sentinel_with_root_cert(&sentinels, &master, &node, root)?, options).await;
        }
        let sentinels: Vec<ConnectionInfo> = sentinels.into_iter().map(|s| s.set_tcp_settings(tcp())).collect();
        let sentinel = SentinelClient::build(sentinels, master, Some(node_info), SentinelServerType::Master)?;
        SentinelMaster::finish(sentinel, options).await
    }

    async fn finish(mut sentinel: SentinelClient, options: &RedisOptions) -> RedisResult<SentinelMaster> {
        let config = manager_config(options);
        let current = ConnectionManager::new_with_config(sentinel.async_get_client().await?, config.clone()).await?;
        Ok(SentinelMaster {
            sentinel: tokio::sync::Mutex::new(sentinel),
            current: RwLock::new(current),
            generation: AtomicU64::new(0),
            config,
        })
    }

    fn current(&self) -> (u64, ConnectionManager) {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner()).clone();
        (self.generation.load(Ordering::Acquire), current)
    }

    /// Asks the sentinels for the master again, unless another task already
    /// did since `seen` was current.
    async fn re_resolve(&self, seen: u64) -> RedisResult<()> {
        let mut sentinel = self.sentinel.lock().await;
        if self.generation.load(Ordering::Acquire) != seen {
            return Ok(());
        }
        // The new master may lack the scripts: the first call to meet NOSCRIPT reloads them.
        let fresh = ConnectionManager::new_with_config(sentinel.async_get_client().await?, self.config.clone()).await?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        self.generation.fetch_add(1, Ordering::AcqRel);
        tracing::info!(target: "redlimit", "re-resolved the Redis master through Sentinel");
        Ok(())
    }

    async fn request(&self, cmd: &Cmd, answered: &Answered, watch: &DataWatch, replayable: bool) -> RedisResult<Value> {
        let (seen, mut current) = self.current();
        match guarded(&mut current, answered, watch, cmd, replayable).await {
            // A replica refuses a script before running it, so one retry on
            // the new master cannot count a call twice.
            Err(e) if is_read_only(&e) => {
                watch.suspect();
                self.re_resolve(seen).await?;
                self.current().1.req_packed_command(cmd).await.and_then(Value::extract_error)
            }
            Err(e) if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() => {
                // The master may be gone; the next call uses whatever the sentinels say now.
                let _ = self.re_resolve(seen).await;
                Err(e)
            }
            other => other,
        }
    }
}

/// A Sentinel client whose connections to the Redis nodes trust `root` (PEM):
/// redis-rs takes custom certificates for Sentinel only through its builder.
/// The sentinels themselves are reached over plain TCP, as without one.
#[cfg(all(feature = "tls", feature = "sentinel"))]
fn sentinel_with_root_cert(
    sentinels: &[ConnectionInfo],
    master: &str,
    node: &ConnectionInfo,
    root: &[u8],
) -> RedisResult<SentinelClient> {
    tls::install_crypto_provider();
    let settings = node.redis_settings();
    let mut builder = redis::sentinel::SentinelClientBuilder::new(
        sentinels.iter().map(|s| s.addr().clone()),
        master,
        SentinelServerType::Master,
    )?
    .set_client_to_sentinel_tcp_settings(tcp())
    .set_client_to_redis_tcp_settings(tcp())
    .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
    .set_client_to_redis_certificates(redis::TlsCertificates { client_tls: None, root_cert: Some(root.to_vec()) })
    .set_client_to_redis_db(settings.db());
    if let Some(username) = settings.username() {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = settings.password() {
        builder = builder.set_client_to_redis_password(password);
    }
    builder.build()
}

#[cfg(feature = "sentinel")]
fn is_read_only(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}
