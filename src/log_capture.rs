//! [`LogCapture`]: collect what `tracing` writes, to assert on log lines.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A `tracing` writer that keeps everything written to it; clones share it.
///
/// ```
/// let logs = ratelimit_examples::log_capture::LogCapture::default();
/// let _guard = logs.install();
/// tracing::warn!("hello");
/// assert!(logs.text().contains("WARN") && logs.text().contains("hello"));
/// ```
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Makes this the current thread's subscriber until the guard drops.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Like [`install`](Self::install), but down to DEBUG and with a line
    /// for every span when it closes, carrying the fields recorded in it.
    pub fn install_debug(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
