//! [`RedisServer`]: a private `redis-server` on a free loopback port, stopped on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` process this test started and alone uses.
///
/// It listens on 127.0.0.1 on a port the OS chose free, persists nothing
/// (unless asked) and is killed when dropped, so tests never touch a Redis
/// they did not start. It is also killed when this process ends without
/// dropping it (a server kept in a `static`, a test binary killed): a small
/// `sh` watcher waits for this process's end of a pipe to close.
///
/// ```no_run
/// let server = redlimit_test_support::redis_server::RedisServer::start();
/// assert!(server.url().starts_with("redis://127.0.0.1:"));
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// Kills `child` once this process exits; see [`watch`].
    watcher: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    /// Written to `<dir>/redis.conf` and passed first, when set (Sentinel
    /// needs a configuration file it can rewrite).
    config: Option<String>,
    /// For a TLS-only server: the `redis-cli` options that reach it.
    tls_cli: Option<Vec<String>>,
}

impl RedisServer {
    /// Starts a server and waits until it answers.
    ///
    /// # Panics
    /// When `redis-server` or `redis-cli` is not installed (naming the
    /// package, at the test's line) or the server does not come up within 10 s.
    #[track_caller]
    pub fn start() -> RedisServer {
        Self::start_on(free_port, &["--appendonly", "no"], None)
    }

    /// Starts a server that writes every change to its append-only file
    /// before answering (`appendfsync always`), so [`restart`](Self::restart)
    /// keeps the data, even after SIGKILL.
    #[track_caller]
    pub fn start_persistent() -> RedisServer {
        Self::start_on(free_port, &["--appendonly", "yes", "--appendfsync", "always"], None)
    }

    /// Starts a server that closes a client's connection after `seconds`
    /// without a command (`timeout`), as managed services and NAT boxes do.
    #[track_caller]
    pub fn start_idle_timeout(seconds: u32) -> RedisServer {
        Self::start_on(free_port, &["--appendonly", "no", "--timeout", &seconds.to_string()], None)
    }

    /// Starts a server on `port` with extra `redis-server` arguments. For a
    /// server that only speaks TLS, `tls_cli` gives the `redis-cli` options
    /// (`--tls --cacert ...`) used to see that it is up.
    #[track_caller]
    pub fn start_with(port: u16, args: &[&str], tls_cli: Option<Vec<String>>) -> RedisServer {
        require_programs();
        let mut server = RedisServer::on(port, args, tls_cli);
        server.spawn().unwrap_or_else(|why| panic!("{why}"));
        server
    }

    /// [`start_with`](Self::start_with) on a port `choose` picks, and on
    /// another if the server could not listen there: a port found free can
    /// be taken before `redis-server` binds it (by another test's outgoing
    /// connection, whose local port comes from the same range).
    #[track_caller]
    pub fn start_on(choose: fn() -> u16, args: &[&str], tls_cli: Option<Vec<String>>) -> RedisServer {
        require_programs();
        retry_taken_port(|| {
            let mut server = RedisServer::on(choose(), args, tls_cli.clone());
            server.spawn().map(|()| server)
        })
    }

    /// A server on `port`, not started yet.
    fn on(port: u16, args: &[&str], tls_cli: Option<Vec<String>>) -> RedisServer {
        let dir = std::env::temp_dir().join(format!("redlimit-redis-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a directory for redis-server");
        let args = args.iter().map(|a| a.to_string()).collect();
        RedisServer { child: None, watcher: None, port, dir, args, config: None, tls_cli }
    }

    /// Starts a Sentinel on a free port watching the master on
    /// `master_port` as `master_name` (quorum 1, down after 1 s).
    #[track_caller]
    pub fn start_sentinel(master_name: &str, master_port: u16) -> RedisServer {
        RedisServer::start_sentinel_with(master_name, master_port, "")
    }

    /// [`start_sentinel`](Self::start_sentinel) with more lines of
    /// configuration after the `sentinel monitor` line (TLS towards the
    /// master, `sentinel auth-user`, ...).
    #[track_caller]
    pub fn start_sentinel_with(master_name: &str, master_port: u16, extra_config: &str) -> RedisServer {
        RedisServer::start_sentinel_quorum(master_name, master_port, 1, extra_config)
    }

    /// [`start_sentinel_with`](Self::start_sentinel_with) with `quorum`
    /// sentinels needed to agree the master is down.
    #[track_caller]
    pub fn start_sentinel_quorum(master_name: &str, master_port: u16, quorum: u32, extra_config: &str) -> RedisServer {
        let config = format!(
            "sentinel monitor {master_name} 127.0.0.1 {master_port} {quorum}\n\
             sentinel down-after-milliseconds {master_name} 1000\n\
             sentinel failover-timeout {master_name} 5000\n\
             {extra_config}"
        );
        require_programs();
        retry_taken_port(|| {
            let mut server = RedisServer::on(free_port(), &["--sentinel"], None);
            server.config = Some(config.clone());
            server.spawn().map(|()| server)
        })
    }

    /// Starts the process and waits until it answers; `Err` if it exited
    /// first (it could not listen on its port, for one).
    fn spawn(&mut self) -> Result<(), String> {
        let port_flag = if self.tls_cli.is_some() { "--tls-port" } else { "--port" };
        let mut command = Command::new("redis-server");
        if let Some(config) = &self.config {
            let path = self.dir.join("redis.conf");
            std::fs::write(&path, config).expect("write redis.conf");
            command.arg(path);
        }
        if self.tls_cli.is_some() {
            command.args(["--port", "0"]);
        }
        let child = command
            .args([port_flag, &self.port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(&self.args)
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
        self.watcher = Some(watch(&child, &self.dir));
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Whatever answered, it was not this server if it has exited.
            let answered = self.answers();
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.kill();
                return Err(format!("redis-server on port {} exited before it answered ({status})", self.port));
            }
            if answered {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not answer within 10 s", self.port);
    }

    /// Any reply to PING (PONG, or NOAUTH from a server that wants a password).
    fn answers(&self) -> bool {
        if let Some(cli) = &self.tls_cli {
            let output = Command::new("redis-cli").args(cli).args(["-p", &self.port.to_string(), "PING"]).output();
            return output.is_ok_and(|o| !o.stdout.is_empty());
        }
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut first = [0u8; 1];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut first).is_ok()
            && (first[0] == b'+' || first[0] == b'-')
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `EVALSHA` calls the server has run (`INFO commandstats`): how many
    /// decisions reached it.
    pub async fn evalsha_calls(&self) -> u64 {
        self.command_calls("evalsha").await
    }

    /// Calls of `command` (lower case, as `INFO commandstats` names it) the
    /// server has run, a script's own included.
    pub async fn command_calls(&self, command: &str) -> u64 {
        let mut con = redis::Client::open(self.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut con).await.unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
    }

    /// `CONFIG SET name value`, through `redis-cli`.
    pub fn config_set(&self, name: &str, value: &str) {
        let reply = self.cli(&["CONFIG", "SET", name, value]);
        assert!(reply.trim() == "OK", "CONFIG SET {name} {value} on port {}: {reply}", self.port);
    }

    /// Connections the server has accepted since it started
    /// (`total_connections_received`), not counting the one this asks on: a
    /// reconnect shows as one more.
    pub fn connections_received(&self) -> u64 {
        let info = self.cli(&["INFO", "stats"]);
        info.lines()
            .find_map(|line| line.strip_prefix("total_connections_received:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .map(|n| n - 1)
            .unwrap_or_else(|| panic!("no total_connections_received in INFO stats: {info}"))
    }

    /// A command through `redis-cli`, its output as text.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(self.tls_cli.iter().flatten())
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The server's process id (to freeze it with SIGSTOP, for example).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the server, through `kill`:
    /// `STOP` freezes it as a hung host would, `CONT` lets it go on.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().unwrap_or_else(|| panic!("redis-server on port {} is not running", self.port));
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut watcher) = self.watcher.take() {
            let _ = watcher.kill();
            let _ = watcher.wait();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port: empty, or with
    /// its data for a [`start_persistent`](Self::start_persistent) server.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|why| panic!("{why}"));
    }
}

/// The servers, and `redis-cli`, which waits for TLS servers and asks any server for its state.
#[track_caller]
fn require_programs() {
    crate::programs::require("redis-server");
    crate::programs::require("redis-cli");
}

/// A process that kills `server` (and removes `dir`) once the pipe to its
/// stdin closes, which happens when this process exits, however it exits.
/// The pipe is close-on-exec, so no other child keeps it open.
fn watch(server: &Child, dir: &std::path::Path) -> Child {
    Command::new("sh")
        .args(["-c", r#"read -r _; kill -9 "$1" 2>/dev/null; rm -rf "$2""#, "redis-watcher"])
        .arg(server.id().to_string())
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sh to watch redis-server")
}

/// `start` again, up to five times, while the server exits before it
/// answers; each attempt picks its own port.
fn retry_taken_port(mut start: impl FnMut() -> Result<RedisServer, String>) -> RedisServer {
    let mut why = String::new();
    for _ in 0..5 {
        match start() {
            Ok(server) => return server,
            Err(exited) => why = exited,
        }
    }
    panic!("{why}, five times on different ports");
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nothing listens on.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

/// A free port whose cluster bus port (port + 10000) is free too.
pub fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// The numbers of a window script's reply, which packs them as little-endian
/// doubles (`ratelimit/lua/README.md`, "Replies"): for tests and the bench
/// that call a script by hand.
pub fn window_numbers(reply: &[u8]) -> Vec<i64> {
    assert_eq!(reply.len() % 8, 0, "a window reply is whole doubles: {reply:?}");
    reply.chunks_exact(8).map(|d| f64::from_le_bytes(d.try_into().expect("8 bytes")) as i64).collect()
}

#[cfg(test)]
mod tests {
    use super::{free_port, RedisServer};
    use once_cell::sync::OnceCell;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static TAKEN: OnceCell<TcpListener> = OnceCell::new();
    static CHOSEN: AtomicUsize = AtomicUsize::new(0);

    /// The port another socket listens on, then free ones.
    fn taken_then_free() -> u16 {
        match CHOSEN.fetch_add(1, Ordering::SeqCst) {
            0 => TAKEN.get().unwrap().local_addr().unwrap().port(),
            _ => free_port(),
        }
    }

    #[test]
    fn a_server_whose_port_was_taken_starts_on_another() {
        let taken = TAKEN.get_or_init(|| TcpListener::bind(("127.0.0.1", 0)).unwrap()).local_addr().unwrap().port();
        let server = RedisServer::start_on(taken_then_free, &["--appendonly", "no"], None);
        assert_eq!(CHOSEN.load(Ordering::SeqCst), 2, "the taken port was tried first, then one other");
        assert_ne!(server.port(), taken);
        assert!(server.pid().is_some());
    }
}
