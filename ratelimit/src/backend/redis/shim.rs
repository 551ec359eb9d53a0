//! TEMPORARY shim until Backend::bind lands: `Backend::decide` finds the
//! limiter bound for its request's policy and clock, binding it on the
//! first decision. The lead's `Backend::bind` replaces this file.

use super::{RedisBackend, RedisBound};
use crate::Policy;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

/// Slots filled once, in order: a decision borrows its bound from one
/// without a lock or a reference count, as a limiter holding its bound will.
const SLOTS: usize = 64;

/// A policy, whether it is decided on Redis's clock, and its bound limiter.
type Entry<B> = (Policy, bool, B);

pub(super) struct Shim {
    slots: [OnceLock<Entry<RedisBound>>; SLOTS],
    /// Held while a slot is filled, so slots fill in order.
    filling: Mutex<()>,
    /// Policies beyond the slots.
    overflow: RwLock<Vec<Entry<Arc<RedisBound>>>>,
}

impl Default for Shim {
    fn default() -> Shim {
        Shim { slots: std::array::from_fn(|_| OnceLock::new()), filling: Mutex::default(), overflow: RwLock::default() }
    }
}

/// A bound limiter, borrowed from its slot or shared from the overflow.
pub(super) enum Found<'a> {
    Slot(&'a RedisBound),
    Overflow(Arc<RedisBound>),
}

impl Shim {
    /// The limiter bound for `policy` on this clock, bound now if it is new.
    pub(super) fn bound<'a>(&'a self, backend: &RedisBackend, policy: &Policy, server_clock: bool) -> Found<'a> {
        if let Some(found) = self.find(policy, server_clock) {
            return found;
        }
        let _filling = self.filling.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = self.find(policy, server_clock) {
            return found;
        }
        let bound = backend.bind_limiter("", "", policy, server_clock);
        if let Some(slot) = self.slots.iter().find(|slot| slot.get().is_none()) {
            let (_, _, bound) = slot.get_or_init(|| (policy.clone(), server_clock, bound));
            return Found::Slot(bound);
        }
        let bound = Arc::new(bound);
        let mut overflow = self.overflow.write().unwrap_or_else(PoisonError::into_inner);
        overflow.push((policy.clone(), server_clock, bound.clone()));
        Found::Overflow(bound)
    }

    fn find<'a>(&'a self, policy: &Policy, server_clock: bool) -> Option<Found<'a>> {
        for slot in &self.slots {
            match slot.get() {
                Some((p, clock, bound)) if p == policy && *clock == server_clock => return Some(Found::Slot(bound)),
                Some(_) => continue,
                None => return None,
            }
        }
        let overflow = self.overflow.read().unwrap_or_else(PoisonError::into_inner);
        let found = overflow.iter().find(|(p, clock, _)| p == policy && *clock == server_clock);
        found.map(|(_, _, bound)| Found::Overflow(bound.clone()))
    }
}
