//! Store URLs: which Redis deployment to reach and how.
//!
//! - `redis://[user[:password]@]host[:port][/db]`, `rediss://...` (TLS)
//! - `redis+cluster://[user[:password]@]host:port,host:port,...` (`rediss+cluster://` for TLS)
//! - `redis+sentinel://[user[:password]@]host:port,.../master_name[/db]`
//!   (`rediss+sentinel://` for TLS to the Redis nodes); credentials are for
//!   the Redis nodes, the sentinels are asked without them.

use crate::Error;
use redis::{ConnectionInfo, IntoConnectionInfo};
use redlimit_grammar::quote;

/// A parsed store URL.
#[derive(Debug, Clone)]
pub(crate) enum Endpoint {
    /// One server.
    Single(ConnectionInfo),
    /// A Redis Cluster, by its seed nodes.
    Cluster { nodes: Vec<ConnectionInfo> },
    /// A master found through Sentinel.
    Sentinel { sentinels: Vec<ConnectionInfo>, master: String, node: ConnectionInfo, tls: bool },
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
    if scheme.starts_with("rediss") && !cfg!(feature = "tls") {
        return Err(invalid(
            url,
            format!("`{}://` needs TLS: enable the `tls` feature of the redlimit crate", quote(&scheme)),
        ));
    }
    match scheme {
        "redis" | "rediss" => {
            let info = url.into_connection_info().map_err(|e| invalid(url, quote(&e.to_string())))?;
            Ok(Endpoint::Single(info))
        }
        "redis+cluster" | "rediss+cluster" => {
            let tls = scheme.starts_with("rediss");
            let (credentials, hosts) = split_credentials(rest);
            let (hosts, path) = hosts.split_once('/').map_or((hosts, ""), |(h, p)| (h, p));
            if !path.is_empty() {
                return Err(invalid(url, format!("a cluster has no database or path, found `/{}`", quote(&path))));
            }
            let nodes = host_list(url, hosts, 6379)?
                .iter()
                .map(|host| node_info(url, tls, credentials, host, ""))
                .collect::<Result<_, _>>()?;
            Ok(Endpoint::Cluster { nodes })
        }
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
            let sentinels = host_list(url, hosts, 26379)?
                .iter()
                .map(|host| {
                    format!("redis://{host}")
                        .into_connection_info()
                        .map_err(|e| invalid(url, format!("sentinel `{}`: {}", quote(&host), quote(&e.to_string()))))
                })
                .collect::<Result<_, _>>()?;
            // The master's address comes from the sentinels; this carries the rest.
            let node = node_info(url, tls, credentials, "master.invalid:6379", db)?;
            Ok(Endpoint::Sentinel { sentinels, master: master.to_string(), node, tls })
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

/// `host:port,host:port` with each port checked; a missing port is `default`.
fn host_list(url: &str, hosts: &str, default: u16) -> Result<Vec<String>, Error> {
    if hosts.trim().is_empty() {
        return Err(invalid(url, "no hosts: list them as host:port,host:port"));
    }
    hosts
        .split(',')
        .map(|host| {
            let host = host.trim();
            let (name, port) = match host.rsplit_once(':') {
                Some((name, port)) if !name.ends_with(']') || host.starts_with('[') => (name, port),
                _ => (host, ""),
            };
            if name.is_empty() {
                return Err(invalid(url, format!("empty host in `{}`", quote(&hosts))));
            }
            let port = if port.is_empty() {
                default
            } else {
                port.parse()
                    .map_err(|_| invalid(url, format!("invalid port `{}` in `{}`", quote(&port), quote(&host))))?
            };
            Ok(format!("{name}:{port}"))
        })
        .collect()
}

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
            Endpoint::Sentinel { sentinels, master, node, tls } => {
                assert_eq!(sentinels.len(), 2);
                assert_eq!(sentinels[0].addr().to_string(), "10.0.0.1:26379");
                assert_eq!(master, "mymaster");
                assert_eq!(node.redis_settings().db(), 3);
                assert!(!tls);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_schemes_need_the_tls_feature() {
        let result = parse("rediss+sentinel://u:p@10.0.0.1/mymaster");
        if cfg!(feature = "tls") {
            assert!(matches!(result, Ok(Endpoint::Sentinel { tls: true, .. })));
        } else {
            assert!(result.unwrap_err().to_string().contains("enable the `tls` feature"));
        }
    }

    #[test]
    fn errors_name_the_wrong_part_and_hide_the_password() {
        assert!(error("http://localhost").contains("unknown scheme `http://`"));
        assert!(error("localhost:6379").contains("no scheme"));
        assert!(error("redis+cluster://").contains("no hosts"));
        assert!(error("redis+cluster://a:7000,b:x").contains("invalid port `x` in `b:x`"));
        assert!(error("redis+cluster://a:7000/2").contains("no database"));
        assert!(error("redis+sentinel://a:26379").contains("no master name"));
        assert!(error("redis+sentinel://a:26379/").contains("empty master name"));
        assert!(error("redis+sentinel://a/m/x").contains("database `x`"));
        let e = error("redis+cluster://user:s3cret@a:1,:2");
        assert!(e.contains("empty host") && !e.contains("s3cret") && e.contains("user:***@"), "{e}");
        assert!(error("redis://localhost:notaport").contains("invalid Redis URL redis://localhost:notaport"));
    }
}
