//! [`KeyBuf`]: the text of one call's key, written by generated code on the
//! stack, so that a typical key costs no allocation.

use std::borrow::Cow;
use std::fmt;

/// Storage kept in place: a prefix and a number or an id fit, and with the
/// two bytes that say which form it takes and its length, the whole buffer
/// fills one cache line.
const INLINE: usize = 62;

/// A key written piece by piece: in place while it is short, on the heap
/// once it outgrows that, so a key of any length can be written.
///
/// ```
/// use redlimit::__private::{push_key_integer, KeyBuf};
///
/// let mut key = KeyBuf::new();
/// key.push_str("user:");
/// push_key_integer(&mut key, &42u64);
/// assert_eq!(key.as_bytes(), b"user:42");
/// ```
pub struct KeyBuf(Storage);

/// Small, since a generated function's future holds it and every call moves that future.
enum Storage {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    /// The whole key, once it outgrew the inline bytes.
    Spilled(Vec<u8>),
}

impl KeyBuf {
    /// An empty key.
    #[inline]
    pub const fn new() -> KeyBuf {
        KeyBuf(Storage::Inline { len: 0, bytes: [0; INLINE] })
    }

    /// Appends `text`.
    #[inline]
    pub fn push_str(&mut self, text: &str) {
        match &mut self.0 {
            Storage::Inline { len, bytes } => {
                let start = usize::from(*len);
                let end = start + text.len();
                match bytes.get_mut(start..end) {
                    Some(room) => {
                        room.copy_from_slice(text.as_bytes());
                        // `end` fits: it is at most `INLINE`.
                        *len = end as u8;
                    }
                    None => {
                        let mut heap = Vec::with_capacity(end * 2);
                        heap.extend_from_slice(&bytes[..start]);
                        heap.extend_from_slice(text.as_bytes());
                        self.0 = Storage::Spilled(heap);
                    }
                }
            }
            Storage::Spilled(heap) => heap.extend_from_slice(text.as_bytes()),
        }
    }

    /// The key written so far.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Storage::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Storage::Spilled(heap) => heap,
        }
    }

    /// Keeps the first `to` bytes written (all of them, when fewer were).
    fn truncate(&mut self, to: usize) {
        match &mut self.0 {
            Storage::Inline { len, .. } => *len = (*len).min(u8::try_from(to).unwrap_or(u8::MAX)),
            Storage::Spilled(heap) => heap.truncate(to),
        }
    }
}

impl Default for KeyBuf {
    fn default() -> KeyBuf {
        KeyBuf::new()
    }
}

impl fmt::Write for KeyBuf {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push_str(text);
        Ok(())
    }
}

impl fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self.as_bytes()), f)
    }
}

/// A key kept past its call (`refund_on = "err"`, to give back what it took).
impl From<KeyBuf> for Cow<'static, str> {
    fn from(key: KeyBuf) -> Cow<'static, str> {
        // Only text was written, so nothing is lost.
        Cow::Owned(String::from_utf8_lossy(key.as_bytes()).into_owned())
    }
}

/// What a key's text is written into: a [`KeyBuf`] in generated code, a
/// `String` elsewhere.
pub trait KeyWriter: fmt::Write {
    /// Appends `text`.
    fn push_text(&mut self, text: &str);
    /// The bytes written so far.
    fn written(&self) -> &[u8];
    /// Removes and returns what was written from byte `start` on.
    fn take_from(&mut self, start: usize) -> String;
}

impl KeyWriter for String {
    fn push_text(&mut self, text: &str) {
        self.push_str(text);
    }
    fn written(&self) -> &[u8] {
        self.as_bytes()
    }
    fn take_from(&mut self, start: usize) -> String {
        self.split_off(start)
    }
}

impl KeyWriter for KeyBuf {
    #[inline]
    fn push_text(&mut self, text: &str) {
        self.push_str(text);
    }
    #[inline]
    fn written(&self) -> &[u8] {
        self.as_bytes()
    }
    fn take_from(&mut self, start: usize) -> String {
        let taken = String::from_utf8_lossy(&self.as_bytes()[start..]).into_owned();
        self.truncate(start);
        taken
    }
}

#[cfg(test)]
mod tests {
    use crate::key::buf::{KeyBuf, KeyWriter, INLINE};
    use std::borrow::Cow;

    #[test]
    fn a_key_longer_than_the_inline_bytes_is_kept_whole() {
        let mut key = KeyBuf::new();
        let piece = "abcdefg:";
        let mut expected = String::new();
        while expected.len() <= 3 * INLINE {
            key.push_str(piece);
            expected.push_str(piece);
            assert_eq!(key.as_bytes(), expected.as_bytes());
        }
        let taken = key.take_from(5);
        assert_eq!((key.as_bytes(), taken.as_str()), (&expected.as_bytes()[..5], &expected[5..]));
        key.push_str("z");
        assert_eq!(Cow::from(key), "abcdez");
    }

    #[test]
    fn a_key_that_fills_the_inline_bytes_exactly_and_one_past_it_are_kept_whole() {
        for len in [INLINE - 1, INLINE, INLINE + 1] {
            let mut key = KeyBuf::new();
            let text = "k".repeat(len - 3);
            key.push_str(&text);
            key.push_str("end");
            assert_eq!(key.as_bytes(), format!("{text}end").as_bytes(), "{len} bytes");
            assert_eq!(key.take_from(len - 3), "end");
            assert_eq!(key.as_bytes(), text.as_bytes());
        }
    }

    #[test]
    fn the_buffer_fills_one_cache_line() {
        // A generated function's future holds it, and every call moves that future.
        assert_eq!(std::mem::size_of::<KeyBuf>(), 64);
    }

    #[test]
    fn taking_back_inline_bytes_leaves_the_rest() {
        let mut key = KeyBuf::new();
        key.push_str("user:");
        key.push_str("ключ");
        assert_eq!(key.take_from(5), "ключ");
        assert_eq!(format!("{key:?}"), "\"user:\"");
    }
}
