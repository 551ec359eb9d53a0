//! Requests to an axum `Router` in process, and what its responses say: what
//! the HTTP tests share.

use axum::body::{to_bytes, Body};
use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Router;
use sfv::{BareItem, ListEntry, Parser};
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

/// The structured-field list (RFC 9651) in `headers`' field `field`, parsed:
/// each item's name with its parameters in order, an integer as its digits
/// and a string quoted, as `("5/1m", [("q", "5"), ("w", "60")])`. Empty
/// when the field is absent; a field that is not such a list fails the test.
pub fn list_items(headers: &HeaderMap, field: &str) -> Vec<(String, Vec<(String, String)>)> {
    let Some(value) = headers.get(field) else { return Vec::new() };
    let list = Parser::parse_list(value.as_bytes()).unwrap_or_else(|e| panic!("{field} {value:?}: {e}"));
    let text = |value: &BareItem| match (value.as_int(), value.as_str()) {
        (Some(int), _) => int.to_string(),
        (None, Some(text)) => format!("{text:?}"),
        _ => panic!("{field} {value:?}: a parameter is neither an integer nor a string"),
    };
    list.into_iter()
        .map(|entry| {
            let ListEntry::Item(item) = entry else { panic!("{field} holds an inner list") };
            let name = item.bare_item.as_str().unwrap_or_else(|| panic!("{field}: an item's name is a string"));
            (name.to_owned(), item.params.iter().map(|(key, value)| (key.as_str().to_owned(), text(value))).collect())
        })
        .collect()
}

/// The items of `field` whose parameters are exactly `keys`, both
/// integers: `(name, first, second)`.
pub fn integer_items(headers: &HeaderMap, field: &str, keys: [&str; 2]) -> Vec<(String, i64, i64)> {
    list_items(headers, field)
        .into_iter()
        .map(|(name, params)| {
            let names: Vec<&str> = params.iter().map(|(key, _)| key.as_str()).collect();
            assert_eq!(names, keys, "{field} parameters of {name}");
            let int = |i: usize| {
                params[i].1.parse().unwrap_or_else(|_| panic!("{field} {name}: {} is not an integer", keys[i]))
            };
            let (a, b) = (int(0), int(1));
            (name, a, b)
        })
        .collect()
}
