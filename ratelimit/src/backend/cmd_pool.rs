//! [`PooledCmd`]: a `redis::Cmd` whose buffers the thread reuses.
//!
//! Every decision builds one `EVALSHA`; a fresh `Cmd` allocates its two
//! buffers and frees them after the reply, about 250 client instructions of
//! a decision (issue 6). Each thread keeps a few cleared commands instead.
//! A command goes back to the pool of the thread that drops it (tasks move
//! between threads; the pools stay small either way).

use redis::Cmd;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

/// Commands a thread keeps: more than one task on a thread may have its
/// `EVALSHA` in flight.
const KEPT_PER_THREAD: usize = 32;

thread_local! {
    static FREE: RefCell<Vec<Cmd>> = const { RefCell::new(Vec::new()) };
}

/// An empty command from this thread's pool, given back when dropped.
pub(crate) struct PooledCmd(Cmd);

impl PooledCmd {
    /// An empty command; a new one holds `args` arguments and `bytes` bytes
    /// before it grows.
    pub(crate) fn take(args: usize, bytes: usize) -> PooledCmd {
        let reused = FREE.try_with(|free| free.borrow_mut().pop()).ok().flatten();
        PooledCmd(reused.unwrap_or_else(|| Cmd::with_capacity(args, bytes)))
    }
}

impl Deref for PooledCmd {
    type Target = Cmd;
    fn deref(&self) -> &Cmd {
        &self.0
    }
}

impl DerefMut for PooledCmd {
    fn deref_mut(&mut self) -> &mut Cmd {
        &mut self.0
    }
}

impl Drop for PooledCmd {
    fn drop(&mut self) {
        let mut cmd = std::mem::take(&mut self.0);
        cmd.clear();
        // At thread exit the pool may be gone: then the command is just freed.
        let _ = FREE.try_with(|free| {
            let mut free = free.borrow_mut();
            if free.len() < KEPT_PER_THREAD {
                free.push(cmd);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_comes_back_empty() {
        {
            let mut cmd = PooledCmd::take(4, 64);
            cmd.arg("EVALSHA").arg("abc").arg(1).arg("key");
        }
        let again = PooledCmd::take(4, 64);
        assert_eq!(again.args_iter().count(), 0);
        assert_eq!(again.get_packed_command(), redis::Cmd::new().get_packed_command());
    }
}
