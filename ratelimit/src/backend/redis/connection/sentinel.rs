//! [`SentinelMaster`]: the master the sentinels name, followed as they name another.
//!
//! One path switches: [`SentinelMaster::follow`] connects to the address the
//! sentinels name and swaps it in, when it differs from the one connected.
//! What triggers it:
//!
//! - a `+switch-master` notification from any sentinel (one pub/sub
//!   connection per sentinel): the switch follows within about a round trip;
//! - a lookup, every sentinel asked at once for the master's config epoch
//!   (`SENTINEL MASTER`) and address (`GET-MASTER-ADDR-BY-NAME`, which names
//!   the promoted replica while a failover ends), and the answer with the
//!   highest epoch taken (a sentinel that has not learned of a failover yet
//!   names the old master under an older epoch).
//!   One runs every [`LOOKUP_EVERY`] (a notification lost with its
//!   connection is caught up so), and at once after a call that timed out,
//!   could not reach the master, or was refused with `READONLY` or
//!   `NOREPLICAS` (a node that is not, or cannot act as, a writable master).
//!
//! A call refused with `READONLY` did not run, so it is sent once more on
//! the master the lookup found. Any other failed call fails (it may have run).
//! What is not covered: before the sentinels name a new master, the old
//! one is the master as far as anyone can tell, and calls keep going to it.

use super::idle::Answered;
use super::request::Request;
use super::watch::DataWatch;
use super::{guarded, manager_config, open, Address, RedisOptions};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{ConnectionInfo, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// How often the sentinels are asked who the master is, notifications or not.
pub(crate) const LOOKUP_EVERY: Duration = Duration::from_secs(1);

/// How long a lost pub/sub connection to a sentinel waits before it is opened again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// A sentinel, and the connection lookups ask it on.
struct Sentinel {
    info: ConnectionInfo,
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

/// The master connected, and where it is.
struct Current {
    address: Address,
    manager: ConnectionManager,
}

pub(crate) struct SentinelMaster {
    name: String,
    sentinels: Arc<[Sentinel]>,
    /// The nodes' settings (credentials, db, TLS); its address is replaced by the master's.
    node: ConnectionInfo,
    options: RedisOptions,
    config: ConnectionManagerConfig,
    current: RwLock<Current>,
    /// Bumped on every switch, so a call knows whether the master changed under it.
    generation: AtomicU64,
    /// One switch at a time.
    switching: tokio::sync::Mutex<()>,
    /// Asks the lookup task to look now.
    wake: Arc<Notify>,
    watch: Arc<DataWatch>,
    /// The lookup and notification tasks, ended with this.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl SentinelMaster {
    /// Asks the sentinels for `master`, connects to it, and starts following them.
    pub(super) async fn connect(
        sentinels: Vec<ConnectionInfo>,
        name: String,
        node: ConnectionInfo,
        options: &RedisOptions,
        watch: Arc<DataWatch>,
    ) -> RedisResult<Arc<SentinelMaster>> {
        let sentinels: Arc<[Sentinel]> = sentinels
            .into_iter()
            .map(|info| Sentinel { info: info.set_tcp_settings(super::tcp()), connection: Default::default() })
            .collect();
        let address = lookup(&sentinels, &name, options.connect_timeout).await?;
        let config = manager_config(options);
        let manager = open(&node, &address, options, &config).await?;
        let master = Arc::new(SentinelMaster {
            name,
            sentinels,
            node,
            options: options.clone(),
            config,
            current: RwLock::new(Current { address, manager }),
            generation: AtomicU64::new(0),
            switching: tokio::sync::Mutex::new(()),
            wake: Arc::new(Notify::new()),
            watch,
            tasks: Mutex::new(Vec::new()),
        });
        let mut tasks = vec![tokio::spawn(lookups(Arc::downgrade(&master), master.wake.clone())).abort_handle()];
        for index in 0..master.sentinels.len() {
            tasks.push(tokio::spawn(notifications(Arc::downgrade(&master), index)).abort_handle());
        }
        *master.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        Ok(master)
    }

    pub(super) fn current(&self) -> (u64, ConnectionManager) {
        let current = self.current.read().unwrap_or_else(|p| p.into_inner());
        (self.generation.load(Ordering::Acquire), current.manager.clone())
    }

    fn address(&self) -> Address {
        self.current.read().unwrap_or_else(|p| p.into_inner()).address.clone()
    }

    /// Connects to `named` and sends calls there from now on, unless it is
    /// the master already connected.
    async fn follow(&self, named: Address, why: &str) -> RedisResult<()> {
        let _one = self.switching.lock().await;
        let before = self.address();
        if before == named {
            return Ok(());
        }
        // The new master may lack the scripts: the first call to meet NOSCRIPT reloads them.
        let bound = self.options.connect_timeout;
        let manager = match tokio::time::timeout(bound, open(&self.node, &named, &self.options, &self.config)).await {
            Ok(manager) => manager?,
            Err(_) => {
                return Err(RedisError::from((ErrorKind::Io, "no answer from the new master", format!("{bound:?}"))))
            }
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Current { address: named.clone(), manager };
        self.generation.fetch_add(1, Ordering::AcqRel);
        // Its data is another server's: the deny cache must not trust what it remembered.
        self.watch.suspect();
        tracing::warn!(
            target: "redlimit",
            "the sentinels name {}:{} as the Redis master `{}` ({why}); calls go there from now on, no longer to {}:{}",
            named.0, named.1, self.name, before.0, before.1,
        );
        Ok(())
    }

    /// Asks the sentinels who the master is, and follows it.
    async fn look_up(&self, why: &str) -> RedisResult<()> {
        let named = lookup(&self.sentinels, &self.name, self.options.connect_timeout).await?;
        self.follow(named, why).await
    }

    pub(super) async fn request(
        &self,
        cmd: Request<'_>,
        answered: &Answered,
        watch: &DataWatch,
        replayable: bool,
    ) -> RedisResult<Value> {
        let (seen, mut current) = self.current();
        // Dropped before it is answered (the call timed out): the master may be hung.
        let mut stalled = Stalled(Some(&self.wake));
        let reply = guarded(&mut current, answered, watch, cmd, replayable).await;
        let reply = match reply {
            // A replica refuses a script before running it, so one retry on
            // the new master cannot count a call twice.
            Err(e) if is_read_only(&e) => {
                watch.suspect();
                if self.generation.load(Ordering::Acquire) == seen {
                    let _ = self.look_up("the old one answered READONLY").await;
                }
                let (now, mut current) = self.current();
                match now == seen {
                    true => Err(e),
                    false => guarded(&mut current, answered, watch, cmd, replayable).await,
                }
            }
            // Not writable now: the call fails (it may have run in part), and the sentinels are asked.
            Err(e) if e.code() == Some("NOREPLICAS") => {
                let _ = self.look_up("the old one answered NOREPLICAS").await;
                Err(e)
            }
            Err(e) if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() || e.is_timeout() => {
                // The master may be gone; the next call uses whatever the sentinels say now.
                let _ = self.look_up("the old one could not be reached").await;
                Err(e)
            }
            other => other,
        };
        stalled.0 = None;
        reply
    }
}

impl Drop for SentinelMaster {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}

/// Wakes the lookup task when dropped armed: a request abandoned unanswered.
struct Stalled<'a>(Option<&'a Notify>);

impl Drop for Stalled<'_> {
    fn drop(&mut self) {
        if let Some(wake) = self.0 {
            wake.notify_one();
        }
    }
}

/// The master `name` as the sentinels name it: every sentinel asked at
/// once, each within `bound`; the answer of the highest config epoch wins
/// (the first sentinel's among equals).
async fn lookup(sentinels: &[Sentinel], name: &str, bound: Duration) -> RedisResult<Address> {
    let mut asks: Vec<_> = sentinels.iter().map(|s| Some(Box::pin(s.master(name, bound)))).collect();
    let mut answers: Vec<Option<RedisResult<(u64, Address)>>> = asks.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (ask, answer) in asks.iter_mut().zip(answers.iter_mut()) {
            if let Some(future) = ask {
                if let std::task::Poll::Ready(told) = future.as_mut().poll(cx) {
                    *answer = Some(told);
                    *ask = None;
                }
            }
        }
        match asks.iter().all(Option::is_none) {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        }
    })
    .await;
    let mut best: Option<(u64, Address)> = None;
    let mut last_error = None;
    for answer in answers.into_iter().flatten() {
        match answer {
            Ok((epoch, address)) if best.as_ref().is_none_or(|(b, _)| epoch > *b) => best = Some((epoch, address)),
            Ok(_) => {}
            Err(e) => last_error = Some(e),
        }
    }
    match (best, last_error) {
        (Some((_, address)), _) => Ok(address),
        (None, Some(e)) => Err(e),
        (None, None) => Err(RedisError::from((ErrorKind::MasterNameNotFoundBySentinel, "no sentinel named a master"))),
    }
}

impl Sentinel {
    /// `(config epoch, address)` of the master `name` as this sentinel sees it.
    async fn master(&self, name: &str, bound: Duration) -> RedisResult<(u64, Address)> {
        let mut cached = self.connection.lock().await;
        let ask = async {
            if cached.is_none() {
                *cached = Some(redis::Client::open(self.info.clone())?.get_multiplexed_async_connection().await?);
            }
            let Some(connection) = cached.as_mut() else { unreachable!("set just above") };
            // A sentinel leading a failover gives the new epoch in `SENTINEL
            // MASTER` but the old address until the failover ends; the
            // address it gives clients already names the promoted replica.
            let (fields, address): (HashMap<String, String>, Option<(String, u16)>) = redis::pipe()
                .cmd("SENTINEL")
                .arg("MASTER")
                .arg(name)
                .cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name)
                .query_async(connection)
                .await?;
            let (epoch, master) = parse_master(&fields)?;
            Ok((epoch, address.unwrap_or(master)))
        };
        let answer = match tokio::time::timeout(bound, ask).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from((ErrorKind::Io, "a sentinel did not answer", format!("{bound:?}")))),
        };
        if answer.as_ref().is_err_and(|e| e.kind() != ErrorKind::MasterNameNotFoundBySentinel) {
            *cached = None;
        }
        answer
    }
}

fn parse_master(fields: &HashMap<String, String>) -> RedisResult<(u64, Address)> {
    let field = |name: &str| fields.get(name).map(String::as_str);
    let malformed = || RedisError::from((ErrorKind::UnexpectedReturnType, "a malformed SENTINEL MASTER reply"));
    let ip = field("ip").ok_or_else(malformed)?;
    let port = field("port").and_then(|p| p.parse::<u16>().ok()).ok_or_else(malformed)?;
    let epoch = field("config-epoch").and_then(|e| e.parse::<u64>().ok()).unwrap_or(0);
    Ok((epoch, (ip.to_string(), port)))
}

/// Looks the master up every [`LOOKUP_EVERY`], and whenever woken.
async fn lookups(master: Weak<SentinelMaster>, wake: Arc<Notify>) {
    loop {
        let _ = tokio::time::timeout(LOOKUP_EVERY, wake.notified()).await;
        let Some(master) = master.upgrade() else { return };
        if let Err(e) = master.look_up("found by a lookup").await {
            tracing::debug!(target: "redlimit", "could not ask the sentinels who the Redis master is: {e}");
        }
    }
}

/// Follows the `+switch-master` notifications of sentinel `index`, for as long as `master` lives.
async fn notifications(master: Weak<SentinelMaster>, index: usize) {
    loop {
        let Some((info, bound, wake)) =
            master.upgrade().map(|m| (m.sentinels[index].info.clone(), m.options.connect_timeout, m.wake.clone()))
        else {
            return;
        };
        let subscribed = tokio::time::timeout(bound, async {
            let mut pubsub = redis::Client::open(info)?.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            RedisResult::Ok(pubsub)
        })
        .await;
        if let Ok(Ok(pubsub)) = subscribed {
            // A switch announced while no one listened is caught up by a lookup now.
            wake.notify_one();
            let mut messages = std::pin::pin!(pubsub.into_on_message());
            while let Some(message) =
                std::future::poll_fn(|cx| futures_core::Stream::poll_next(messages.as_mut(), cx)).await
            {
                let Some(master) = master.upgrade() else { return };
                let Ok(payload) = message.get_payload::<String>() else { continue };
                if let Some(named) = switched_to(&payload, &master.name) {
                    if let Err(e) = master.follow(named, "a sentinel announced +switch-master").await {
                        tracing::warn!(target: "redlimit", "could not connect to the new Redis master: {e}");
                        master.wake.notify_one();
                    }
                }
            }
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// The new master in a `+switch-master` payload (`name old-ip old-port new-ip new-port`), if it is `name`'s.
fn switched_to(payload: &str, name: &str) -> Option<Address> {
    let parts: Vec<&str> = payload.split(' ').collect();
    match parts.as_slice() {
        [master, _, _, ip, port] if *master == name => Some((ip.to_string(), port.parse().ok()?)),
        _ => None,
    }
}

fn is_read_only(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

impl SentinelMaster {
    pub(super) fn req_packed_commands<'a>(
        &self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        let (_, mut current) = self.current();
        Box::pin(async move { current.req_packed_commands(pipeline, offset, count).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_names_the_new_master_of_its_name() {
        let payload = "orders 127.0.0.1 6379 127.0.0.1 6380";
        assert_eq!(switched_to(payload, "orders"), Some(("127.0.0.1".into(), 6380)));
        assert_eq!(switched_to(payload, "other"), None);
        assert_eq!(switched_to("orders 127.0.0.1 6379", "orders"), None);
    }
}
