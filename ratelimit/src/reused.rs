//! [`Reused`]: a buffer taken from a pool the thread keeps, and given back
//! to it when dropped.
//!
//! A decision on a remote store builds a storage key and an `EVALSHA`
//! command, and under `#[rate_limit]` the key's text too. Allocating each
//! afresh and freeing it after the reply cost about 150 to 250 client
//! instructions apiece (issue 6); taking and giving back a cleared buffer
//! costs less. A buffer goes back to the pool of the thread that drops it
//! (tasks move between threads; the pools stay small either way).

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::thread::LocalKey;

/// Buffers of one type a thread keeps: more than one task on a thread may
/// have a call in flight.
const KEPT_PER_THREAD: usize = 32;

/// A buffer type with a pool on every thread.
pub trait Recyclable: Default + 'static {
    /// This type's pool on the current thread.
    fn pool() -> &'static LocalKey<RefCell<Vec<Self>>>;

    /// Empties the buffer for its next user; `false` if it should be freed
    /// instead (it grew too large to keep).
    fn recycle(&mut self) -> bool;
}

/// A `T` from this thread's pool, given back when dropped. Dereferences
/// to the `T`.
#[derive(Debug)]
pub struct Reused<T: Recyclable>(T);

impl<T: Recyclable> Reused<T> {
    /// An empty buffer from the pool, or `make()` when the pool is empty.
    pub(crate) fn take_or(make: impl FnOnce() -> T) -> Reused<T> {
        let kept = T::pool().try_with(|free| free.borrow_mut().pop()).ok().flatten();
        Reused(kept.unwrap_or_else(make))
    }
}

impl<T: Recyclable> Deref for Reused<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Recyclable> DerefMut for Reused<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Recyclable> Drop for Reused<T> {
    fn drop(&mut self) {
        let mut buffer = std::mem::take(&mut self.0);
        if !buffer.recycle() {
            return;
        }
        // At thread exit the pool may be gone: then the buffer is just freed.
        let _ = T::pool().try_with(|free| {
            let mut free = free.borrow_mut();
            if free.len() < KEPT_PER_THREAD {
                free.push(buffer);
            }
        });
    }
}

/// Key buffers that grew past this (a very long limiter name) are not kept.
const KEPT_KEY_CAPACITY: usize = 1024;

impl Recyclable for Vec<u8> {
    fn pool() -> &'static LocalKey<RefCell<Vec<Self>>> {
        thread_local!(static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) });
        &FREE
    }

    fn recycle(&mut self) -> bool {
        self.clear();
        self.capacity() <= KEPT_KEY_CAPACITY
    }
}

impl Recyclable for String {
    fn pool() -> &'static LocalKey<RefCell<Vec<Self>>> {
        thread_local!(static FREE: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) });
        &FREE
    }

    fn recycle(&mut self) -> bool {
        self.clear();
        self.capacity() <= KEPT_KEY_CAPACITY
    }
}

impl Recyclable for redis::Cmd {
    fn pool() -> &'static LocalKey<RefCell<Vec<Self>>> {
        thread_local!(static FREE: RefCell<Vec<redis::Cmd>> = const { RefCell::new(Vec::new()) });
        &FREE
    }

    fn recycle(&mut self) -> bool {
        self.clear();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_empty_with_its_allocation() {
        let first = {
            let mut text = Reused::take_or(|| String::with_capacity(64));
            text.push_str("user:7");
            text.as_ptr()
        };
        let again = Reused::<String>::take_or(String::new);
        assert_eq!((again.as_str(), again.as_ptr(), again.capacity()), ("", first, 64));
    }

    #[test]
    fn a_buffer_grown_too_large_is_freed_not_kept() {
        drop(Reused::take_or(|| Vec::<u8>::with_capacity(KEPT_KEY_CAPACITY + 1)));
        assert!(Reused::<Vec<u8>>::take_or(Vec::new).capacity() <= KEPT_KEY_CAPACITY);
    }

    #[test]
    fn a_command_comes_back_empty() {
        {
            let mut cmd = Reused::take_or(redis::Cmd::new);
            cmd.arg("EVALSHA").arg("abc").arg(1).arg("key");
        }
        let again = Reused::take_or(redis::Cmd::new);
        assert_eq!(again.args_iter().count(), 0);
        assert_eq!(again.get_packed_command(), redis::Cmd::new().get_packed_command());
    }
}
