//! [`SilentListener`]: a loopback port that accepts TCP connections and never
//! answers, as a hung server or a black-holing proxy would.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Accepts every connection on a free loopback port, holds it open, reads
/// nothing and writes nothing; stops when dropped.
///
/// ```
/// let silent = redlimit_test_support::silent_listener::SilentListener::start();
/// let _held = std::net::TcpStream::connect(("127.0.0.1", silent.port())).unwrap();
/// assert!(silent.url().starts_with("redis://127.0.0.1:"));
/// ```
pub struct SilentListener {
    port: u16,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl SilentListener {
    /// Listens on a free loopback port.
    pub fn start() -> SilentListener {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a free loopback port");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let port = listener.local_addr().expect("local address").port();
        let (stop, accepted) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let thread = {
            let (stop, accepted) = (stop.clone(), accepted.clone());
            std::thread::spawn(move || {
                // Held, so each connection stays open and silent until the end.
                let held: Mutex<Vec<TcpStream>> = Mutex::default();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            held.lock().unwrap().push(stream);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        SilentListener { port, stop, accepted, thread: Some(thread) }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
