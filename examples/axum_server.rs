//! An axum service limited two ways: `#[rate_limit]` on a handler, and a
//! `RateLimitLayer` in front of routes. Denials are `429` with `Retry-After`,
//! `RateLimit-Policy`, `RateLimit` and a problem+json body.
//!
//! ```text
//! cargo run --example axum_server -- --port 3000
//! REDLIMIT_REDIS_URL=redis://127.0.0.1:6379 PORT=3001 cargo run --example axum_server
//! curl -i localhost:3000/hello
//! ```
//!
//! On the in-memory store each process counts alone; with `REDLIMIT_REDIS_URL`
//! every instance on that Redis shares the limits (`tests/http_axum_server.rs`
//! runs two). The port comes from `--port` or `PORT` (default 3000; 0 picks a
//! free one); the first line printed is `listening on http://<address>`.
//! `TRUSTED_PROXIES` (e.g. `127.0.0.1,10.0.0.0/8`) names the reverse proxies
//! whose `X-Forwarded-For` is believed.
//!
//! | route | limit | key |
//! |---|---|---|
//! | `GET /hello` | layer, `fixed_window 5/1h` | client IP |
//! | `GET /search` | layer, `token_bucket` of 3 refilled 1 per hour, with the legacy `X-RateLimit-*` headers | header `x-api-key` (required) |
//! | `GET /users/{id}` | `#[rate_limit]`, `fixed_window 3/1h,10/1d` (fields on allowed responses through `DecisionHeadersLayer`) | the user id |

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use redlimit::http::{DecisionHeadersLayer, HeaderStyle, KeyBy, RateLimitLayer, TrustedProxies};
use redlimit::{rate_limit, Policy, RateLimited};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

/// The service's errors; a denial answers as the limiter's 429 (or 503).
#[derive(Debug)]
enum ApiError {
    Limited(RateLimited),
}

impl From<RateLimited> for ApiError {
    fn from(denied: RateLimited) -> Self {
        ApiError::Limited(denied)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Limited(denied) => denied.into_response(),
        }
    }
}

/// 3 lookups of one user per hour and 10 per day, whoever asks.
#[rate_limit(algo = "fixed_window", strategies = "3/1h,10/1d", key = "user:<id>", name = "axum_server.user")]
async fn user(Path(id): Path<u64>) -> Result<String, ApiError> {
    Ok(format!("profile of user {id}\n"))
}

async fn hello() -> &'static str {
    "hello\n"
}

async fn search() -> &'static str {
    "results\n"
}

fn app(proxies: TrustedProxies) -> Result<Router, redlimit::Error> {
    let hello_limit =
        RateLimitLayer::new("axum_server.hello", Policy::fixed_window("5/1h")?).key(KeyBy::client_ip(proxies));
    let search_limit = RateLimitLayer::new("axum_server.search", Policy::token_bucket(3, "1/1h")?)
        .key(KeyBy::header("x-api-key")?)
        .header_style(HeaderStyle::DraftAndLegacy);
    Ok(Router::new()
        .route("/hello", get(hello).layer(hello_limit))
        .route("/search", get(search).layer(search_limit))
        .route("/users/{id}", get(user))
        // Puts the RateLimit fields of what `#[rate_limit]` handlers decided on their responses.
        .layer(DecisionHeadersLayer::new()))
}

/// `--port N`, else `PORT`, else 3000.
fn port() -> Result<u16, String> {
    let args: Vec<String> = std::env::args().collect();
    let text = match args.iter().position(|a| a == "--port") {
        Some(i) => args.get(i + 1).cloned().ok_or("--port needs a number")?,
        None => std::env::var("PORT").unwrap_or_else(|_| "3000".into()),
    };
    text.parse().map_err(|_| format!("invalid port `{text}`: give a number from 0 to 65535"))
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let port = port()?;
    let proxies = std::env::var("TRUSTED_PROXIES").unwrap_or_default();
    let proxies = TrustedProxies::new(proxies.split(',').map(str::trim).filter(|p| !p.is_empty()))?;
    // Without this the layers and the handler would build the store at their
    // first request, and a wrong REDLIMIT_REDIS_URL would only be logged while
    // `on_error` settled every request; here it stops the server instead.
    let store = redlimit::init_from_env().await?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    tracing::info!(store = store.kind(), "serving");
    // ConnectInfo gives the layer each request's peer address.
    axum::serve(listener, app(proxies)?.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("axum_server: {error}");
            ExitCode::FAILURE
        }
    }
}
