//! The `axum_server` example, twice, over real HTTP: two processes on
//! loopback ports sharing one private Redis, so one limit spans both.
//!
//! Every limit here has a window of an hour or more, so no window ends
//! during the test; the one number that moves with the clock is the seconds
//! until a window ends (`t`, `Retry-After`), which the first hit fixes at the
//! full window and later ones can only have counted down from.

use redlimit_test_support::redis_server::RedisServer;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// One running `axum_server`, killed on drop.
struct Instance {
    child: Child,
    url: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds the example once and returns its executable, as cargo reports it.
fn build_example() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--quiet", "--example", "axum_server", "--message-format=json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo build");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains(r#""name":"axum_server""#) && l.contains(r#""executable":""#))
        .expect("cargo names the example's executable");
    let start = line.find(r#""executable":""#).unwrap() + r#""executable":""#.len();
    PathBuf::from(&line[start..start + line[start..].find('"').unwrap()])
}

/// Starts the example on a free port against `redis_url`, trusting loopback as a proxy.
fn start(exe: &PathBuf, redis_url: &str) -> Instance {
    let mut child = Command::new(exe)
        .args(["--port", "0"])
        .env("REDLIMIT_REDIS_URL", redis_url)
        .env("TRUSTED_PROXIES", "127.0.0.1")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start axum_server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Instance { child, url }
}

async fn get(client: &reqwest::Client, url: String, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("the server answers");
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).unwrap_or_else(|| panic!("no {name} in {headers:?}")).to_str().unwrap()
}

/// `t` and `Retry-After` of a window of `window` seconds whose first hit
/// was sent after `since`: `window`, less at most the whole seconds passed
/// since then (rounded up), however slowly the requests went.
fn assert_counting_down(value: &str, window: u64, since: Instant) {
    let secs: u64 = value.parse().unwrap();
    let passed = since.elapsed().as_secs() + 1;
    assert!(secs <= window && secs + passed >= window, "{value} is not {window} less at most {passed}");
}

/// Splits `"5/1h";r=3;t=3600` into its name, `r` and `t`.
fn state(field: &str) -> (String, u64, String) {
    let mut parts = field.split(';');
    let name = parts.next().unwrap().to_owned();
    let r = parts.next().unwrap().strip_prefix("r=").unwrap().parse().unwrap();
    let t = parts.next().unwrap().strip_prefix("t=").unwrap().to_owned();
    (name, r, t)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_on_one_redis_share_limits_and_answer_with_standard_headers() {
    let redis = RedisServer::start();
    let exe = build_example();
    let (a, b) = (start(&exe, &redis.url()), start(&exe, &redis.url()));
    let client = reqwest::Client::new();

    // /hello: 5 per hour per client IP, counted by both instances together.
    let hello_since = Instant::now();
    for (i, server) in [&a, &b, &a, &b, &a].into_iter().enumerate() {
        let (status, headers, body) = get(&client, format!("{}/hello", server.url), &[]).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "hello\n"));
        assert_eq!(header(&headers, "ratelimit-policy"), r#""5/1h";q=5;w=3600"#);
        let (name, remaining, t) = state(header(&headers, "ratelimit"));
        assert_eq!((name.as_str(), remaining), (r#""5/1h""#, 4 - i as u64), "request {i}");
        if i == 0 {
            assert_eq!(t, "3600");
        } else {
            assert_counting_down(&t, 3600, hello_since);
        }
        assert!(headers.get("retry-after").is_none());
        assert!(headers.get("x-ratelimit-limit").is_none(), "legacy headers are opt-in");
    }
    let (status, headers, body) = get(&client, format!("{}/hello", b.url), &[]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&headers, "content-type"), "application/problem+json");
    let retry_after = header(&headers, "retry-after");
    assert_counting_down(retry_after, 3600, hello_since);
    assert_eq!(header(&headers, "ratelimit"), format!(r#""5/1h";r=0;t={retry_after}"#));
    assert_eq!(
        body,
        format!(
            r#"{{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"rate limited by `axum_server.hello` (5/1h exceeded); retry after {retry_after}s","retry_after":{retry_after},"violated-policies":["5/1h"]}}"#
        )
    );
    assert!(!body.contains("127.0.0.1"), "the key never reaches the body: {body}");

    // Behind the trusted proxy (loopback), the client is the rightmost
    // untrusted X-Forwarded-For hop; the forged first hop changes nothing.
    for (server, forged) in [(&a, "6.6.6.6"), (&b, "7.7.7.7")] {
        let xff = format!("{forged}, 198.51.100.7");
        let (status, headers, _) = get(&client, format!("{}/hello", server.url), &[("x-forwarded-for", &xff)]).await;
        assert_eq!(status, StatusCode::OK);
        let expected = if forged == "6.6.6.6" { 4 } else { 3 };
        assert_eq!(state(header(&headers, "ratelimit")).1, expected);
    }

    // /users/{id}: #[rate_limit] with 3/1h,10/1d per user, shared too.
    let users_since = Instant::now();
    for (server, left) in [(&a, 2), (&b, 1), (&a, 0)] {
        let (status, headers, body) = get(&client, format!("{}/users/7", server.url), &[]).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "profile of user 7\n"));
        // The handler's own decision, on its allowed response.
        assert_eq!(header(&headers, "ratelimit-policy"), r#""3/1h";q=3;w=3600, "10/1d";q=10;w=86400"#);
        let items: Vec<_> = header(&headers, "ratelimit").split(", ").map(state).collect();
        assert_eq!((items[0].1, items[1].1), (left, left + 7));
    }
    let (status, headers, body) = get(&client, format!("{}/users/7", b.url), &[]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&headers, "ratelimit-policy"), r#""3/1h";q=3;w=3600, "10/1d";q=10;w=86400"#);
    assert_counting_down(header(&headers, "retry-after"), 3600, users_since);
    let items: Vec<_> = header(&headers, "ratelimit").split(", ").map(state).collect();
    assert_eq!(
        items.iter().map(|(name, r, _)| (name.as_str(), *r)).collect::<Vec<_>>(),
        [(r#""3/1h""#, 0), (r#""10/1d""#, 7)]
    );
    assert_counting_down(&items[0].2, 3600, users_since);
    assert_counting_down(&items[1].2, 86_400, users_since);
    assert!(body.contains("rate limited by `axum_server.user` (3/1h exceeded)"), "{body}");
    // Another user is untouched.
    assert_eq!(get(&client, format!("{}/users/8", a.url), &[]).await.0, StatusCode::OK);

    // /search: a token bucket of 3 (1 per hour) per API key, legacy headers on.
    let search_since = Instant::now();
    for (i, server) in [&a, &b, &a].into_iter().enumerate() {
        let (status, headers, _) = get(&client, format!("{}/search", server.url), &[("x-api-key", "key-1")]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(header(&headers, "ratelimit-policy"), r#""token_bucket 3 per 1/1h";q=3;w=10800"#);
        assert_eq!(header(&headers, "x-ratelimit-limit"), "3");
        assert_eq!(header(&headers, "x-ratelimit-remaining"), (2 - i).to_string());
        let (_, remaining, _) = state(header(&headers, "ratelimit"));
        assert_eq!(remaining, 2 - i as u64);
    }
    let (status, headers, _) = get(&client, format!("{}/search", b.url), &[("x-api-key", "key-1")]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
    assert_counting_down(header(&headers, "retry-after"), 3600, search_since);
    // A request without the key is refused, not let through.
    let (status, headers, body) = get(&client, format!("{}/search", a.url), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(header(&headers, "content-type"), "application/problem+json");
    assert!(body.contains("per header `x-api-key`"), "{body}");
}
