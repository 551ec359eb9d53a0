//! Both backends side by side, driven by one manual clock, for tests that
//! must show the same decisions on each.

use crate::redis_server::RedisServer;
use redlimit::{ManualClock, RedisOptions, Store};
use std::time::Duration;

/// A private Redis, and a memory store and a Redis store sharing one clock.
pub struct BothStores {
    /// The Redis behind [`BothStores::redis`]; killed on drop.
    pub server: RedisServer,
    /// The clock both stores read.
    pub clock: ManualClock,
    /// The in-process store.
    pub memory: Store,
    /// The store on the private Redis.
    pub redis: Store,
}

impl BothStores {
    /// Starts a private Redis and connects to it, with a response timeout
    /// no busy machine reaches: these tests compare decisions, and a call
    /// timed out would be settled by `on_error` instead of decided.
    pub async fn start() -> BothStores {
        let server = RedisServer::start();
        let clock = ManualClock::new();
        let patient = RedisOptions::default().with_response_timeout(Duration::from_secs(10));
        let redis = Store::redis_with(&server.url(), patient)
            .await
            .expect("connect to the private redis-server")
            .with_clock(clock.clone());
        let memory = Store::memory().with_clock(clock.clone());
        BothStores { server, clock, memory, redis }
    }

    /// `[("memory", store), ("redis", store)]`, for running one check on each.
    pub fn each(&self) -> [(&'static str, &Store); 2] {
        [("memory", &self.memory), ("redis", &self.redis)]
    }
}
