//! [`LogCapture`]: collect what `tracing` writes, to assert on log lines.

use once_cell::sync::OnceCell;
use std::io::Write;
use std::sync::{Arc, Mutex};
use tracing::level_filters::LevelFilter;
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// A `tracing` writer that keeps everything written to it; clones share it.
///
/// ```
/// let logs = redlimit_test_support::log_capture::LogCapture::default();
/// let _guard = logs.install();
/// tracing::warn!("hello");
/// assert!(logs.text().contains("WARN") && logs.text().contains("hello"));
/// ```
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Makes this the current thread's subscriber until the guard drops.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        keep_a_bystander_registered();
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Like [`install`](Self::install), but down to DEBUG and with a line
    /// for every span when it closes, carrying the fields recorded in it.
    pub fn install_debug(&self) -> tracing::subscriber::DefaultGuard {
        keep_a_bystander_registered();
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

/// Registers, once per process, a dispatcher that wants nothing and lives
/// as long as the process, so that `tracing` always sees two or more.
///
/// With only one dispatcher registered, `tracing-core` works out a
/// callsite's interest from the *registering thread's* default alone. A
/// test on another thread (with no subscriber of its own) that reaches a
/// callsite first then caches `never` for it, and the thread whose capture
/// is installed loses every line from that callsite: the decision span
/// test failed that way in about one run in 150. With two, every callsite
/// is asked of every live dispatcher, the capture's included.
fn keep_a_bystander_registered() {
    // Filtered at OFF: it enables no callsite and does not raise the
    // global max level.
    static BYSTANDER: OnceCell<Dispatch> = OnceCell::new();
    BYSTANDER.get_or_init(|| Dispatch::new(tracing_subscriber::registry().with(LevelFilter::OFF)));
}

#[cfg(test)]
mod tests {
    use super::LogCapture;
    use tracing::level_filters::LevelFilter;

    fn emit() {
        tracing::debug!("from a shared callsite");
    }

    /// Fails without the bystander: the other thread registers the callsite
    /// first, with no subscriber of its own, and `never` is cached for it.
    #[test]
    fn a_callsite_first_reached_on_another_thread_is_still_captured() {
        let logs = LogCapture::default();
        let _guard = logs.install_debug();
        assert_eq!(LevelFilter::current(), LevelFilter::DEBUG, "the bystander raised the max level");
        std::thread::spawn(emit).join().unwrap();
        emit();
        assert_eq!(logs.text().matches("from a shared callsite").count(), 1, "{}", logs.text());
    }
}
