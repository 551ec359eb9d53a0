//! Requests to an axum `Router` in process, and what its responses say: what
//! the HTTP tests share.

use axum::body::{to_bytes, Body};
use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use axum::Router;
use std::net::SocketAddr;
use tower_service::Service;

/// A `GET` of `path` with `headers`.
pub fn request(path: &str, headers: &[(&str, &str)]) -> Request {
    let mut request = Request::builder().uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::empty()).unwrap()
}

/// A `GET /` from `peer` (as `into_make_service_with_connect_info` gives it) with `headers`.
pub fn from(peer: &str, headers: &[(&str, &str)]) -> Request {
    let mut request = request("/", headers);
    request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    request
}

/// `app`'s response to `request`.
pub async fn send(app: &mut Router, request: Request) -> Response {
    app.call(request).await.unwrap()
}

/// The header field `name` of `response`, as text.
pub fn header(response: &Response, name: &str) -> Option<String> {
    response.headers().get(name).map(|v| v.to_str().unwrap().to_owned())
}

/// The body of `response`, as text.
pub async fn body(response: Response) -> String {
    String::from_utf8(to_bytes(response.into_body(), 64 * 1024).await.unwrap().to_vec()).unwrap()
}
