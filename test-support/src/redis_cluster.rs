//! [`RedisCluster`]: a private 3-master, 3-replica Redis Cluster on loopback.

use crate::redis_server::{free_cluster_port, RedisServer};
use std::process::Command;
use std::time::{Duration, Instant};

/// Six `redis-server --cluster-enabled yes` processes joined with
/// `redis-cli --cluster create --cluster-replicas 1`; killed on drop.
///
/// Node timeout is 1 s and replicas may always take over, so a replica
/// replaces a killed master within a few seconds.
pub struct RedisCluster {
    /// Every node; the first three start as masters.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every node says
    /// `cluster_state:ok` and every replica has synced with its master.
    #[track_caller]
    pub fn start() -> RedisCluster {
        crate::programs::require("redis-server");
        crate::programs::require("redis-cli");
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_on(
                    free_cluster_port,
                    &[
                        "--appendonly",
                        "no",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                        "--cluster-replica-validity-factor",
                        "0",
                    ],
                    None,
                )
            })
            .collect();
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            status.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&status.stdout)
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_ok();
        cluster
    }

    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ok = self.nodes.iter().all(|n| info(n.port(), "CLUSTER", "INFO").contains("cluster_state:ok"));
            // A replica that has not synced yet cannot take over its master.
            let synced = self.nodes.iter().all(|n| {
                let replication = info(n.port(), "INFO", "replication");
                replication.contains("role:master") || replication.contains("master_link_status:up")
            });
            if ok && synced {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the cluster did not reach cluster_state:ok within 30 s");
    }

    /// `redis+cluster://` with the three masters as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes[..3].iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// Indexes (into `nodes`) of the nodes that are masters now.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].pid().is_some() && info(self.nodes[i].port(), "ROLE", "").starts_with("master"))
            .collect()
    }

    /// Per slot, the index (into `nodes`) of the master serving it now,
    /// from a live node's `CLUSTER NODES`; `None` for a slot it names no master for.
    pub fn slot_owners(&self) -> Vec<Option<usize>> {
        let mut owners = vec![None; SLOTS];
        for line in self.describe().lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 || !fields[2].split(',').any(|f| f == "master") {
                continue;
            }
            let port = fields[1].split('@').next().and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok());
            let Some(node) = self.nodes.iter().position(|n| Some(n.port()) == port) else { continue };
            for range in &fields[8..] {
                let mut bounds = range.split('-').map(|b| b.parse::<usize>());
                let (Some(Ok(first)), last) = (bounds.next(), bounds.next()) else { continue };
                let last = match last {
                    Some(Ok(last)) => last,
                    _ => first,
                };
                for owner in &mut owners[first..=last.min(SLOTS - 1)] {
                    *owner = Some(node);
                }
            }
        }
        owners
    }

    /// The `CLUSTER NODES` view of a live node.
    pub fn describe(&self) -> String {
        let live = self.nodes.iter().find(|n| n.pid().is_some()).expect("a live node");
        info(live.port(), "CLUSTER", "NODES")
    }
}

fn info(port: u16, command: &str, argument: &str) -> String {
    let mut cli = Command::new("redis-cli");
    cli.args(["-p", &port.to_string(), command]);
    if !argument.is_empty() {
        cli.arg(argument);
    }
    cli.output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
}

/// A cluster's hash slots.
pub const SLOTS: usize = 16_384;

/// Redis Cluster's slot of `key`: CRC16 (XMODEM) of its hash tag (between
/// the first `{` and the next `}`, when not empty), else of the whole key.
pub fn key_slot(key: &[u8]) -> usize {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    usize::from(crc) % SLOTS
}
