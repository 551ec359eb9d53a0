//! [`SentinelSet`]: a master, its replicas and three sentinels (quorum 2)
//! on loopback, with short timeouts so a failover takes seconds.

use crate::redis_server::{free_port, RedisServer};
use std::time::{Duration, Instant};

/// How long the sentinels wait before they call a silent master down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// The sentinels' `failover-timeout`: a failover that stalls is tried again after twice this.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// `nodes[0]` starts as the master, the others as its replicas; every
/// process is killed on drop.
pub struct SentinelSet {
    pub name: String,
    pub nodes: Vec<RedisServer>,
    pub sentinels: Vec<RedisServer>,
}

impl SentinelSet {
    /// Starts the master, `replicas` replicas and three sentinels watching
    /// it as `name`, and waits until every sentinel knows the replicas and
    /// the two other sentinels (a failover needs them).
    ///
    /// # Panics
    /// When a server does not start, or the sentinels do not find each other within 40 s.
    #[track_caller]
    pub fn start(name: &str, replicas: usize) -> SentinelSet {
        let master = RedisServer::start();
        let port = master.port().to_string();
        let mut nodes = vec![master];
        for _ in 0..replicas {
            let replica =
                RedisServer::start_with(free_port(), &["--appendonly", "no", "--replicaof", "127.0.0.1", &port], None);
            wait_for("a replica to sync", || replica.cli(&["INFO", "replication"]).contains("master_link_status:up"));
            nodes.push(replica);
        }
        let timeouts = format!(
            "sentinel down-after-milliseconds {name} {}\nsentinel failover-timeout {name} {}\n",
            DOWN_AFTER.as_millis(),
            FAILOVER_TIMEOUT.as_millis()
        );
        let sentinels: Vec<RedisServer> =
            (0..3).map(|_| RedisServer::start_sentinel_quorum(name, nodes[0].port(), 2, &timeouts)).collect();
        for sentinel in &sentinels {
            wait_for("the sentinels to find the replicas and each other", || {
                let known = sentinel.cli(&["SENTINEL", "MASTER", name]);
                field(&known, "num-slaves") == Some(replicas.to_string())
                    && field(&known, "num-other-sentinels") == Some("2".into())
            });
        }
        SentinelSet { name: name.into(), nodes, sentinels }
    }

    /// `redis+sentinel://` naming the three sentinels.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
        format!("redis+sentinel://{}/{}", hosts.join(","), self.name)
    }

    /// The port of the master each sentinel names now (`None`: no answer).
    pub fn named(&self) -> Vec<Option<u16>> {
        self.sentinels
            .iter()
            .map(|s| {
                let reply = s.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.name]);
                reply.lines().nth(1).and_then(|port| port.trim().parse().ok())
            })
            .collect()
    }

    /// Polls until any sentinel names a master other than the one on
    /// `port`, and returns when it was seen (within 20 ms of it, plus a
    /// `redis-cli` run) and the new master's port.
    ///
    /// # Panics
    /// When none does within `within`.
    pub fn wait_named_other_than(&self, port: u16, within: Duration) -> (Instant, u16) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(other) = self.named().into_iter().flatten().find(|named| *named != port) {
                return (Instant::now(), other);
            }
            assert!(Instant::now() < deadline, "no sentinel named a master other than {port} within {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One field of a `SENTINEL MASTER` reply as `redis-cli` prints it (a name line, then its value).
fn field(reply: &str, name: &str) -> Option<String> {
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next().map(|value| value.trim().to_string());
        }
    }
    None
}

#[track_caller]
fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
