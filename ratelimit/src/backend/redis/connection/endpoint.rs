//! Store URLs: which Redis deployment to reach and how.
//!
//! - `redis://[user[:password]@]host[:port][/db]`, `rediss://...` (TLS)
//! - `redis+cluster://[user[:password]@]host:port,host:port,...` (`rediss+cluster://` for TLS)
//! - `redis+sentinel://[user[:password]@]host:port,.../master_name[/db]`
//!   (`rediss+sentinel://` for TLS to the Redis nodes); credentials are for
//!   the Redis nodes, the sentinels are asked without them.

use crate::error::Error;
use redis::{ConnectionInfo, IntoConnectionInfo};
use redlimit_grammar::quote;

/// A parsed store URL.
#[derive(Debug, Clone)]
// Parsed once per connect: the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Endpoint {
    /// One server.
    Single(ConnectionInfo),
    /// A Redis Cluster, by its seed nodes.
    #[cfg(feature = "cluster")]
    Cluster { nodes: Vec<ConnectionInfo> },
    /// A master found through Sentinel.
    #[cfg(feature = "sentinel")]
    Sentinel { sentinels: Vec<ConnectionInfo>, master: String, node: ConnectionInfo },
}

const SCHEMES: &str =
    "redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://";

fn invalid(url: &str, problem: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("invalid Redis URL {}: {problem}", quote(&redact(url))))
}

/// Parses any of the forms above; the error names the part that is wrong.
pub(crate) fn parse(url: &str) -> Result<Endpoint, Error> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(invalid(url, format!("no scheme: expected {SCHEMES}")));
    };
    #[cfg(not(any(feature = "cluster", feature = "sentinel")))]
    let _ = rest;
    if scheme.starts_with("rediss") && !cfg!(feature = "tls") {
        return Err(invalid(
            url,
            format!("`{}://` needs TLS: enable the `tls` feature of the redlimit crate", quote(&scheme)),
        ));
    }
    // Deployments left out of the build are named, not reported as unknown schemes.
    let optional = [
        ("+cluster", "Redis Cluster", "cluster", cfg!(feature = "cluster")),
        ("+sentinel", "Sentinel", "sentinel", cfg!(feature = "sentinel")),
    ];
    for (suffix, what, feature, enabled) in optional {
        if !enabled && scheme.starts_with("redis") && scheme.ends_with(suffix) {
            return Err(invalid(
                url,
                format!("`{}://` needs {what}: enable the `{feature}` feature of the redlimit crate", quote(&scheme)),
            ));
        }
    }
    match scheme {
        "redis" | "rediss" => {
            check_single(url, rest)?;
            let info = url.into_connection_info().map_err(|e| invalid(url, quote(&e.to_string())))?;
            Ok(Endpoint::Single(info))
        }
        #[cfg(feature = "cluster")]
        "redis+cluster" | "rediss+cluster" => {
            let tls = scheme.starts_with("rediss");
            let (credentials, hosts) = split_credentials(rest);
            let (hosts, path) = hosts.split_once('/').map_or((hosts, ""), |(h, p)| (h, p));
            if !path.is_empty() {
                return Err(invalid(url, format!("a cluster has no database or path, found `/{}`", quote(&path))));
            }
            // No default port: a cluster's nodes seldom share one, so a node
            // written without one is a slip, not a request for 6379.
            let nodes = host_list(url, hosts, None)?
                .iter()
                .map(|host| node_info(url, tls, credentials, host, ""))
                .collect::<Result<_, _>>()?;
            Ok(Endpoint::Cluster { nodes })
        }
        #[cfg(feature = "sentinel")]
        "redis+sentinel" | "rediss+sentinel" => {
            let tls = scheme.starts_with("rediss");
            let (credentials, rest) = split_credentials(rest);
            let Some((hosts, path)) = rest.split_once('/') else {
                return Err(invalid(url, "no master name: expected redis+sentinel://host:port,.../master_name"));
            };
            let (master, db) = path.split_once('/').map_or((path, ""), |(m, d)| (m, d));
            if master.is_empty() {
                return Err(invalid(url, "empty master name: expected redis+sentinel://host:port,.../master_name"));
            }
            if !db.is_empty() && db.parse::<u16>().is_err() {
                return Err(invalid(url, format!("database `{}` is not a number", quote(&db))));
            }
            let sentinels = host_list(url, hosts, Some(26379))?
                .iter()
                .map(|host| {
                    format!("redis://{host}")
                        .into_connection_info()
                        .map_err(|e| invalid(url, format!("sentinel `{}`: {}", quote(&host), quote(&e.to_string()))))
                })
                .collect::<Result<_, _>>()?;
            // The master's address comes from the sentinels; this carries the rest.
            let node = node_info(url, tls, credentials, "master.invalid:6379", db)?;
            Ok(Endpoint::Sentinel { sentinels, master: master.to_string(), node })
        }
        other => Err(invalid(url, format!("unknown scheme `{}://`: expected {SCHEMES}", quote(&other)))),
    }
}

fn split_credentials(rest: &str) -> (&str, &str) {
    match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    }
}

/// A single server's `host[:port][/db]`, checked part by part so the
/// error names the part (redis-rs would only say the URL did not parse).
fn check_single(url: &str, rest: &str) -> Result<(), Error> {
    let (_, rest) = split_credentials(rest);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, path) = rest.split_at(end);
    if host.trim().is_empty() {
        return Err(invalid(url, "no host: expected redis://host:port"));
    }
    host_port(url, host, Some(6379))?;
    let db = path.strip_prefix('/').unwrap_or("");
    let db = &db[..db.find(['?', '#']).unwrap_or(db.len())];
    if !db.is_empty() && db.parse::<u16>().is_err() {
        return Err(invalid(url, format!("database `{}` is not a number", quote(&db))));
    }
    Ok(())
}

/// `host:port,host:port` with each port checked; a missing port is
/// `default`, or an error naming the host when there is none.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
fn host_list(url: &str, hosts: &str, default: Option<u16>) -> Result<Vec<String>, Error> {
    if hosts.trim().is_empty() {
        return Err(invalid(url, "no hosts: list them as host:port,host:port"));
    }
    hosts.split(',').map(|host| host_port(url, host, default)).collect()
}

/// One `host[:port]`, as `host:port`; a missing port is `default`, or an
/// error naming the host when there is none.
fn host_port(url: &str, host: &str, default: Option<u16>) -> Result<String, Error> {
    let host = host.trim();
    // `[v6]:port`: the address's own colons are inside the brackets.
    let (name, port) = match host.find(']').filter(|_| host.starts_with('[')) {
        Some(end) => {
            let (name, after) = host.split_at(end + 1);
            (name, after.strip_prefix(':').unwrap_or(after))
        }
        None => host.rsplit_once(':').unwrap_or((host, "")),
    };
    if name.is_empty() {
        return Err(invalid(url, format!("empty host in `{}`", quote(&host))));
    }
    let port = if port.is_empty() {
        default.ok_or_else(|| invalid(url, format!("no port in `{}`: write every node as host:port", quote(&host))))?
    } else {
        port.parse().map_err(|_| invalid(url, format!("invalid port `{}` in `{}`", quote(&port), quote(&host))))?
    };
    Ok(format!("{name}:{port}"))
}

/// Whether `url` is a store URL this crate can use; the error names the
/// part that is not (no connection is made).
pub(crate) fn check_url(url: &str) -> Result<(), Error> {
    parse(url).map(drop)
}

#[cfg(any(feature = "cluster", feature = "sentinel"))]
fn node_info(url: &str, tls: bool, credentials: &str, host: &str, db: &str) -> Result<ConnectionInfo, Error> {
    let scheme = if tls { "rediss" } else { "redis" };
    let db = if db.is_empty() { String::new() } else { format!("/{db}") };
    format!("{scheme}://{credentials}{host}{db}")
        .into_connection_info()
        .map_err(|e| invalid(url, format!("node `{}`: {}", quote(&host), quote(&e.to_string()))))
}

/// The URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(url: &str) -> String {
        parse(url).unwrap_err().to_string()
    }

    #[cfg(all(feature = "cluster", feature = "sentinel"))]
    #[test]
    fn parses_every_form() {
        assert!(matches!(parse("redis://localhost:6379/2").unwrap(), Endpoint::Single(_)));
        match parse("redis+cluster://app:pw@127.0.0.1:7000,127.0.0.1:7001").unwrap() {
            Endpoint::Cluster { nodes } => {
                assert_eq!(nodes.len(), 2);
                assert_eq!(nodes[1].redis_settings().username(), Some("app"));
                assert_eq!(nodes[1].redis_settings().password(), Some("pw"));
            }
            other => panic!("{other:?}"),
        }
        match parse("redis+sentinel://u:p@10.0.0.1,10.0.0.2:26380/mymaster/3").unwrap() {
            Endpoint::Sentinel { sentinels, master, node } => {
                assert_eq!(sentinels.len(), 2);
                assert_eq!(sentinels[0].addr().to_string(), "10.0.0.1:26379");
                assert_eq!(master, "mymaster");
                assert_eq!(node.redis_settings().db(), 3);
                assert!(matches!(node.addr(), redis::ConnectionAddr::Tcp(..)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[cfg(feature = "sentinel")]
    #[test]
    fn tls_schemes_need_the_tls_feature() {
        let result = parse("rediss+sentinel://u:p@10.0.0.1/mymaster");
        if cfg!(feature = "tls") {
            let Ok(Endpoint::Sentinel { node, .. }) = result else { panic!("{result:?}") };
            assert!(matches!(node.addr(), redis::ConnectionAddr::TcpTls { .. }));
        } else {
            assert!(result.unwrap_err().to_string().contains("enable the `tls` feature"));
        }
    }

    #[test]
    fn deployments_left_out_of_the_build_name_their_feature() {
        let cases = [
            ("redis+cluster://a:7000", "Redis Cluster: enable the `cluster` feature", cfg!(feature = "cluster")),
            ("redis+sentinel://a:26379/m", "Sentinel: enable the `sentinel` feature", cfg!(feature = "sentinel")),
        ];
        for (url, message, enabled) in cases {
            match parse(url) {
                Ok(_) => assert!(enabled, "{url}"),
                Err(e) => assert!(!enabled && e.to_string().contains(message), "{url}: {e}"),
            }
        }
    }

    #[test]
    fn errors_name_the_scheme_or_the_url() {
        assert!(error("http://localhost").contains("unknown scheme `http://`"));
        assert!(error("localhost:6379").contains("no scheme"));
        assert!(error("redis://localhost:notaport").contains("invalid Redis URL redis://localhost:notaport"));
    }

    #[cfg(all(feature = "cluster", feature = "sentinel"))]
    #[test]
    fn errors_name_the_wrong_part_and_hide_the_password() {
        assert!(error("redis+cluster://").contains("no hosts"));
        assert!(error("redis+cluster://a:7000,b:x").contains("invalid port `x` in `b:x`"));
        assert!(error("redis+cluster://a:7000/2").contains("no database"));
        assert!(error("redis+sentinel://a:26379").contains("no master name"));
        assert!(error("redis+sentinel://a:26379/").contains("empty master name"));
        assert!(error("redis+sentinel://a/m/x").contains("database `x`"));
        let e = error("redis+cluster://user:s3cret@a:1,:2");
        assert!(e.contains("empty host") && !e.contains("s3cret") && e.contains("user:***@"), "{e}");
    }

    #[cfg(feature = "cluster")]
    #[test]
    fn a_cluster_node_without_a_port_is_named() {
        assert_eq!(
            error("redis+cluster://[::1]:7000,[::1]"),
            "invalid Redis URL redis+cluster://[::1]:7000,[::1]: no port in `[::1]`: write every node as host:port"
        );
        assert!(error("redis+cluster://a:7000,b").contains("no port in `b`"));
        assert!(error("redis+cluster://a:7000,b:").contains("no port in `b:`"));
        assert!(error("redis+cluster://[::1]:").contains("no port in `[::1]:`"));
        assert!(matches!(parse("redis+cluster://[::1]:7000,[::1]:7001").unwrap(), Endpoint::Cluster { .. }));
    }

    #[test]
    fn a_single_server_url_names_its_wrong_part() {
        let e = error("redis://app:s3cret@127.0.0.1:x/0");
        assert_eq!(e, "invalid Redis URL redis://app:***@127.0.0.1:x/0: invalid port `x` in `127.0.0.1:x`");
        assert!(error("redis://127.0.0.1:99999").contains("invalid port `99999`"));
        assert!(error("redis://127.0.0.1:6379/x").contains("database `x` is not a number"));
        assert!(error("redis://:pw@/0").contains("no host") && !error("redis://:pw@/0").contains("pw"));
        assert!(error("redis://[::1]x").contains("invalid port `x`"));
        assert!(matches!(parse("redis://[::1]:6380/2").unwrap(), Endpoint::Single(_)));
        assert!(matches!(parse("redis://[::1]").unwrap(), Endpoint::Single(_)));
        assert!(matches!(parse("redis://h?protocol=resp3").unwrap(), Endpoint::Single(_)));
        assert!(matches!(parse("redis://h/3").unwrap(), Endpoint::Single(_)));
    }
}
