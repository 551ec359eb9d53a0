//! [`Releasing`]: a store's releases sent without waiting (a dropped
//! permit on a store in another process), so that an acquisition of the
//! same limiter name and key is decided only once the releases begun
//! before it are answered.
//! Without it, a caller that drops its permit and asks again at once would
//! race its own release to the store, and lose.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Every key's releases on their way, one lock held only to count.
#[derive(Default)]
pub(crate) struct Releasing {
    pending: Mutex<Pending>,
    /// Releases on their way, over all keys: an acquisition with none to
    /// wait for takes no lock.
    open: AtomicUsize,
    answered: tokio::sync::Notify,
}

/// The releases on their way, numbered in the order they began (over all
/// keys, so a key's numbers keep rising however often its entry goes).
#[derive(Default)]
struct Pending {
    next: u64,
    by_key: HashMap<Box<[u8]>, BTreeSet<u64>>,
}

impl Releasing {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Nothing panics while the lock is held; a poisoned map is still whole.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A release of `name`'s `key` begins: its number, to give to [`end`](Self::end).
    pub(crate) fn begin(&self, name: &str, key: &[u8]) -> u64 {
        let mut pending = self.lock();
        let number = pending.next;
        pending.next += 1;
        pending.by_key.entry(named(name, key)).or_default().insert(number);
        self.open.fetch_add(1, Ordering::AcqRel);
        number
    }

    /// The release `number` of `name`'s `key` is answered (or failed).
    pub(crate) fn end(&self, name: &str, key: &[u8], number: u64) {
        let key = named(name, key);
        let mut pending = self.lock();
        if let Some(open) = pending.by_key.get_mut(&key) {
            if open.remove(&number) {
                self.open.fetch_sub(1, Ordering::AcqRel);
            }
            if open.is_empty() {
                pending.by_key.remove(&key);
            }
        }
        drop(pending);
        self.answered.notify_waiters();
    }

    /// Waits until every release of `name`'s `key` begun before this call
    /// is answered. Each is one store call, bounded by the store's response
    /// timeout, so this wait is bounded too.
    pub(crate) async fn settled(&self, name: &str, key: &[u8]) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        let key = named(name, key);
        let before = self.lock().next;
        loop {
            // Listening before looking, so an answer between the two is not missed.
            let mut answered = std::pin::pin!(self.answered.notified());
            answered.as_mut().enable();
            let oldest = self.lock().by_key.get(&key).and_then(|open| open.first().copied());
            if oldest.is_none_or(|oldest| oldest >= before) {
                return;
            }
            answered.await;
        }
    }
}

/// A limiter name and key as one map key: the name's length first, so no
/// two pairs make the same bytes.
fn named(name: &str, key: &[u8]) -> Box<[u8]> {
    let mut named = Vec::with_capacity(8 + name.len() + key.len());
    named.extend_from_slice(&(name.len() as u64).to_le_bytes());
    named.extend_from_slice(name.as_bytes());
    named.extend_from_slice(key);
    named.into()
}

#[cfg(test)]
mod tests {
    use crate::store::releasing::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    fn ready(future: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        future.as_mut().poll(&mut Context::from_waker(Waker::noop())) == Poll::Ready(())
    }

    #[test]
    fn an_acquisition_waits_for_the_releases_of_its_name_and_key_begun_before_it() {
        let releasing = Releasing::default();
        let first = releasing.begin("jobs", b"k");
        let second = releasing.begin("jobs", b"k");
        let _elsewhere = releasing.begin("jobs", b"other");
        let _other_name = releasing.begin("reports", b"k");
        let mut waiting = std::pin::pin!(releasing.settled("jobs", b"k"));
        assert!(!ready(&mut waiting), "two releases of jobs/k on their way");
        // Begun after it: not waited for.
        let later = releasing.begin("jobs", b"k");
        releasing.end("jobs", b"k", second);
        assert!(!ready(&mut waiting), "the first is still on its way");
        releasing.end("jobs", b"k", first);
        assert!(ready(&mut waiting), "both answered; the later one and other keys are not waited for");
        releasing.end("jobs", b"k", later);
        let mut none = std::pin::pin!(releasing.settled("jobs", b"k"));
        assert!(ready(&mut none));
    }
}
