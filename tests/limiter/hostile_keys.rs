//! Keys come from users: whatever the bytes, no panic, no error, no shared
//! limit between distinct keys, and nothing unbounded stored in Redis.

use proptest::prelude::*;
use redis::AsyncCommands;
use redlimit::{Limiter, Policy, Store};
use redlimit_test_support::stores::BothStores;

fn hostile_keys() -> Vec<Vec<u8>> {
    let long = "x".repeat(64 * 1024);
    vec![
        b"".to_vec(),
        b" ".to_vec(),
        b"a b".to_vec(),
        b"line\nbreak\r\n".to_vec(),
        b"{tag}".to_vec(),
        b"}{".to_vec(),
        b"{".to_vec(),
        b"\0".to_vec(),
        b"\0\0".to_vec(),
        vec![0xff, 0xfe, 0x80],
        "ключ 🔑".as_bytes().to_vec(),
        long.clone().into_bytes(),
        format!("{long}y").into_bytes(),
        format!("y{long}").into_bytes(),
        b"*".to_vec(),
        b"redlimit:gcra:1:x:y".to_vec(),
    ]
}

#[tokio::test]
async fn hostile_keys_work_and_each_has_its_own_limit() {
    let both = BothStores::start().await;
    for (backend, store) in both.each() {
        for policy in [
            Policy::sliding_log("1/1h").unwrap(),
            Policy::gcra("1/1h", 0).unwrap(),
            Policy::fixed_window("1/1h").unwrap(),
        ] {
            let limiter = Limiter::new("hostile", policy.clone(), store);
            for key in hostile_keys() {
                let first = limiter.check(&key, 1).await.unwrap_or_else(|e| panic!("{backend} {policy}: {e}"));
                assert!(
                    first.allowed,
                    "{backend} {policy}: key {:?} shared a limit with another",
                    String::from_utf8_lossy(&key[..key.len().min(20)])
                );
            }
            for key in hostile_keys() {
                assert!(!limiter.check(&key, 1).await.unwrap().allowed, "{backend} {policy}: key lost its state");
            }
        }
    }
    // Long keys are stored by digest: no key name in Redis is anywhere near 64 KiB.
    let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<Vec<u8>> = con.keys("*").await.unwrap();
    assert_eq!(keys.len(), 3 * hostile_keys().len());
    assert!(keys.iter().all(|k| k.len() < 200), "{:?}", keys.iter().map(Vec::len).max());
}

/// The same distinct keys, on a store with another prefix, still get their
/// own state: prefixes separate applications.
#[tokio::test]
async fn prefixes_separate_applications() {
    let store = Store::memory();
    let a = Limiter::new("same", Policy::fixed_window("1/1h").unwrap(), &store.clone().with_prefix("app-a"));
    let b = Limiter::new("same", Policy::fixed_window("1/1h").unwrap(), &store.with_prefix("app-b"));
    assert!(a.check("k", 1).await.unwrap().allowed);
    assert!(b.check("k", 1).await.unwrap().allowed);
}

/// Two prefixes an operator may choose used to make one key:
/// `app` + name `n` + key `x:<layout>:1:m:y` was the key of prefix
/// `app:<layout>:1:n:x` + name `m` + key `y`, so one limiter's calls spent
/// the other's limit.
#[tokio::test]
async fn a_prefix_cannot_spell_another_limiters_key() {
    let both = BothStores::start().await;
    let server_clock = Store::redis(&both.server.url()).await.unwrap();
    let mut con = redis::Client::open(both.server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let policy = Policy::fixed_window("1/1h").unwrap();
    // The layout each store writes (a counter on Redis's clock), read from Redis.
    let mut layouts = Vec::new();
    for store in [&both.redis, &server_clock] {
        Limiter::new("probe", policy.clone(), &store.clone().with_prefix("probe")).check("k", 1).await.unwrap();
        let keys: Vec<String> = con.keys("probe:*").await.unwrap();
        let _: () = con.del(&keys).await.unwrap();
        layouts.push(keys[0].split(':').nth(1).unwrap().to_string());
    }
    let stores = [
        ("memory", &both.memory, &layouts[0]),
        ("redis", &both.redis, &layouts[0]),
        ("redis, server clock", &server_clock, &layouts[1]),
    ];
    for (backend, store, layout) in stores {
        let short = Limiter::new("n", policy.clone(), &store.clone().with_prefix("app"));
        let long = Limiter::new("m", policy.clone(), &store.clone().with_prefix(&format!("app:{layout}:1:n:x")));
        assert!(short.check(format!("x:{layout}:1:m:y"), 1).await.unwrap().allowed, "{backend}");
        assert!(long.check("y", 1).await.unwrap().allowed, "{backend}: the two limiters shared a key");
        assert!(!long.check("y", 1).await.unwrap().allowed, "{backend}");
        // Each Redis store's keys, then gone: both clocks may write one layout.
        let mut keys: Vec<String> = con.keys("app*").await.unwrap();
        if backend == "memory" {
            assert_eq!(keys, Vec::<String>::new());
            continue;
        }
        keys.sort();
        let mut expected =
            vec![format!("app%3A{layout}%3A1%3An%3Ax:{layout}:1:m:y"), format!("app:{layout}:1:n:x:{layout}:1:m:y")];
        expected.sort();
        assert_eq!(keys, expected, "{backend}");
        let _: () = con.del(&keys).await.unwrap();
    }
}

/// A denial carries the key's bytes as given (it was a lossy `String`), and
/// shows them escaped and bounded.
#[tokio::test]
async fn a_denial_carries_the_keys_bytes_and_shows_them_escaped() {
    let limiter = Limiter::new("keys", Policy::fixed_window("1/1h").unwrap(), &Store::memory());
    let raw = b"k\xff\n\x1b[2J\\";
    limiter.limit(raw, 1).await.unwrap();
    let denied = limiter.limit(raw, 1).await.unwrap_err();
    assert_eq!(denied.key().as_bytes(), raw);
    assert_eq!(denied.key().to_str(), None);
    assert_eq!(denied.key().to_string(), r"k\xff\n\u{1b}[2J\\");
    assert_eq!(format!("{:?}", denied.key()), r#"Key("k\xff\n\u{1b}[2J\\")"#);
    assert!(!denied.to_string().contains("[2J"), "a denial's message never shows the key: {denied}");

    let other = limiter.limit("ключ", 1).await.and(limiter.limit("ключ", 1).await).unwrap_err();
    assert_eq!(other.key(), "ключ");
    assert_eq!(other.key().to_str(), Some("ключ"));

    let long = vec![b'\n'; 64 * 1024];
    let denied = limiter.limit(&long, 1).await.and(limiter.limit(&long, 1).await).unwrap_err();
    assert_eq!(denied.key().as_bytes().len(), long.len());
    let shown = denied.key().to_string();
    assert!(shown.len() < 400 && shown.ends_with("…(65536 bytes)"), "{shown}");
}

fn template_key(a: &str, b: &str) -> String {
    let mut key = String::new();
    redlimit::__private::push_key_value(&mut key, &a);
    key.push(':');
    redlimit::__private::push_key_value(&mut key, &b);
    key
}

#[test]
fn template_values_cannot_forge_separators() {
    assert_ne!(template_key("x:y", "z"), template_key("x", "y:z"));
    assert_ne!(template_key("x%3Ay", "z"), template_key("x:y", "z"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Distinct byte keys (short, around the digest threshold, and long) never share a limit.
    #[test]
    fn distinct_keys_never_share_a_limit(a in proptest::collection::vec(any::<u8>(), 0..300), b in proptest::collection::vec(any::<u8>(), 0..300)) {
        prop_assume!(a != b);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let limiter = Limiter::new("prop", Policy::fixed_window("1/1h").unwrap(), &Store::memory());
            prop_assert!(limiter.check(&a, 1).await.unwrap().allowed);
            prop_assert!(limiter.check(&b, 1).await.unwrap().allowed);
            prop_assert!(!limiter.check(&a, 1).await.unwrap().allowed);
            Ok(())
        })?;
    }

    /// Two-placeholder templates give distinct keys for distinct argument pairs.
    #[test]
    fn templates_are_injective(a1 in ".*", b1 in ".*", a2 in ".*", b2 in ".*") {
        prop_assume!((&a1, &b1) != (&a2, &b2));
        prop_assert_ne!(template_key(&a1, &b1), template_key(&a2, &b2));
    }

    #[test]
    fn templates_are_injective_on_separator_heavy_text(a1 in "[:%a3A]{0,6}", b1 in "[:%a3A]{0,6}", a2 in "[:%a3A]{0,6}", b2 in "[:%a3A]{0,6}") {
        prop_assume!((&a1, &b1) != (&a2, &b2));
        prop_assert_ne!(template_key(&a1, &b1), template_key(&a2, &b2));
    }
}
