//! `fallback = path`: a denied call returns `path(same arguments).await`.

use super::on_global_store;
use redlimit::rate_limit;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SEEN: Mutex<Vec<(u32, String, Vec<u8>)>> = Mutex::new(Vec::new());

async fn from_cache(id: u32, name: String, tags: &[u8]) -> String {
    SEEN.lock().unwrap().push((id, name.clone(), tags.to_vec()));
    format!("cached {id} {name}")
}

#[rate_limit(algo = "fixed_window", strategies = "1/1h", key = "<id>", fallback = from_cache)]
async fn fresh(id: u32, name: String, tags: &[u8]) -> String {
    format!("fresh {id} {name} {}", tags.len())
}

#[test]
fn the_fallback_receives_the_same_arguments() {
    on_global_store(async {
        assert_eq!(fresh(1, "ann".into(), &[1, 2]).await, "fresh 1 ann 2");
        assert_eq!(fresh(1, "bob".into(), &[3]).await, "cached 1 bob");
        assert_eq!(fresh(2, "cy".into(), &[]).await, "fresh 2 cy 0");
        assert_eq!(*SEEN.lock().unwrap(), [(1, "bob".to_string(), vec![3])]);
    });
}

struct Counter {
    hits: u32,
    stale: u32,
}

impl Counter {
    #[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, key = "<by>", fallback = Self::stale)]
    async fn bump(&mut self, by: u32) -> u32 {
        self.hits += by;
        self.hits
    }

    async fn stale(&mut self, by: u32) -> u32 {
        self.stale += by;
        self.hits
    }
}

#[test]
fn a_method_fallback_receives_self() {
    on_global_store(async {
        let mut c = Counter { hits: 0, stale: 0 };
        assert_eq!(c.bump(5).await, 5);
        assert_eq!(c.bump(5).await, 5, "denied: the fallback answers with the current count");
        assert_eq!((c.hits, c.stale), (5, 5));
    });
}

async fn busy(_: u8) -> Result<&'static str, String> {
    Err("busy, try later".into())
}

#[rate_limit(algo = "gcra", rate = "1/1h", burst = 0, on_limit = "wait", max_wait = "50ms", fallback = busy)]
async fn waits_then_falls_back(attempt: u8) -> Result<&'static str, String> {
    Ok(if attempt > 0 { "done" } else { "zero" })
}

#[test]
fn after_max_wait_the_fallback_answers() {
    on_global_store(async {
        assert_eq!(waits_then_falls_back(1).await, Ok("done"));
        let started = Instant::now();
        assert_eq!(waits_then_falls_back(1).await, Err("busy, try later".to_string()));
        assert!(started.elapsed() < Duration::from_millis(500));
    });
}
