//! [`Node`]: one cluster node's connection, made on its first request and
//! independently of every other node's, so a node that hangs holds up only
//! the requests sent to it; and [`Nodes`], every node the slot map has named.

use super::super::idle::Answered;
use super::super::owners::Owners;
use super::super::request::Request;
use super::super::watch::DataWatch;
use super::super::{guarded, open, Address, RedisOptions};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, RedisResult, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// What every node's connection is made with.
pub(super) struct Settings {
    /// The nodes' settings (credentials, TLS); its address is each node's own.
    pub(super) template: ConnectionInfo,
    pub(super) options: RedisOptions,
    pub(super) config: ConnectionManagerConfig,
    /// A cluster's is not enabled: requests pass it to `guarded` only.
    pub(super) watch: Arc<DataWatch>,
}

pub(super) struct Node {
    /// `host:port`, as the slot map names it.
    pub(super) name: String,
    address: Option<Address>,
    settings: Arc<Settings>,
    /// Made by the first request that needs it; a failed attempt leaves it
    /// empty, for the next request to try again.
    manager: tokio::sync::OnceCell<ConnectionManager>,
    answered: Answered,
    /// A request to it was given up unanswered or could not reach it, and
    /// none has been answered since: requests to every master and slot map
    /// lookups do not wait for it.
    stalled: AtomicBool,
}

impl Node {
    fn new(name: String, settings: Arc<Settings>) -> Node {
        let address = name.rsplit_once(':').and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)));
        Node {
            name,
            address,
            settings,
            manager: tokio::sync::OnceCell::new(),
            answered: Answered::new(),
            stalled: AtomicBool::new(false),
        }
    }

    /// The host it is reached at, as its name says.
    pub(super) fn host(&self) -> &str {
        self.address.as_ref().map_or("", |(host, _)| host.as_str())
    }

    /// This node's connection, made now if it is not yet, within the connect timeout.
    pub(super) async fn manager(&self) -> RedisResult<ConnectionManager> {
        let settings = &self.settings;
        let made = self.manager.get_or_try_init(|| async {
            let Some(address) = &self.address else {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "a Redis Cluster node named by no host:port",
                    self.name.clone(),
                )));
            };
            let bound = settings.options.connect_timeout;
            match tokio::time::timeout(bound, open(&settings.template, address, &settings.options, &settings.config))
                .await
            {
                Ok(made) => made,
                Err(_) => Err(no_answer(format!("{} did not let a connection be made within {bound:?}", self.name))),
            }
        });
        made.await.cloned()
    }

    /// `cmd` on this node, as on a single server (`guarded`: the idle
    /// probe, a resend after a dead socket only when `replayable`).
    pub(super) async fn request(&self, cmd: Request<'_>, replayable: bool) -> RedisResult<Value> {
        let reply = match self.manager().await {
            Ok(mut manager) => guarded(&mut manager, &self.answered, &self.settings.watch, cmd, replayable).await,
            Err(e) => Err(e),
        };
        self.settle(&reply);
        reply
    }

    /// Whether this node is [stalled](Node::stalled).
    pub(super) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    pub(super) fn stall(&self) {
        self.stalled.store(true, Ordering::Relaxed);
    }

    /// Remembers whether `reply` came from the node: any answer of its
    /// own, an error included, says it is up.
    fn settle(&self, reply: &RedisResult<Value>) {
        let unreached = reply.as_ref().is_err_and(|e| {
            e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
        });
        self.stalled.store(unreached, Ordering::Relaxed);
    }

    /// The store's options: what a request's parts are bounded by.
    pub(super) fn options(&self) -> &RedisOptions {
        &self.settings.options
    }
}

/// A node did not answer in time: a timeout, which opens its breaker (an
/// `Io` error of redis-rs's own making would read as a dead socket, which does not).
pub(super) fn no_answer(what: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// Marks a node stalled if the request it guards is dropped before its
/// answer: the caller gave up on it (its response timeout).
pub(super) struct Awaited<'a>(pub(super) Option<&'a Node>);

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        if let Some(node) = self.0 {
            node.stall();
        }
    }
}

/// Every node named so far, by the index [`Owners`] gives its name.
pub(super) struct Nodes {
    settings: Arc<Settings>,
    all: RwLock<Vec<Arc<Node>>>,
}

impl Nodes {
    pub(super) fn new(settings: Settings) -> Nodes {
        Nodes { settings: Arc::new(settings), all: RwLock::default() }
    }

    /// Node `index` of `owners`; its connection is not made yet if it is new.
    pub(super) fn get(&self, owners: &Owners, index: usize) -> Option<Arc<Node>> {
        if let Some(node) = self.all.read().unwrap_or_else(PoisonError::into_inner).get(index) {
            return Some(node.clone());
        }
        if index >= owners.known() {
            return None;
        }
        let mut all = self.all.write().unwrap_or_else(PoisonError::into_inner);
        while all.len() <= index {
            let name = owners.name(all.len());
            all.push(Arc::new(Node::new(name, self.settings.clone())));
        }
        all.get(index).cloned()
    }

    /// The name of a node at `info`'s address, as the slot map writes one.
    pub(super) fn name_of(info: &ConnectionInfo) -> Option<String> {
        match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Some(format!("{host}:{port}"))
            }
            _ => None,
        }
    }
}
