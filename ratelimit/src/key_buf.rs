//! [`KeyBuf`]: the text of one call's key, written by generated code on the
//! stack, so that a typical key costs no allocation.

use std::borrow::Cow;
use std::fmt;

/// Bytes kept in place: a prefix and a number or an id fit.
const INLINE: usize = 64;

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
pub struct KeyBuf {
    len: usize,
    inline: [u8; INLINE],
    /// The whole key, once it outgrew `inline`.
    spilled: Option<Vec<u8>>,
}

impl KeyBuf {
    /// An empty key.
    #[inline]
    pub const fn new() -> KeyBuf {
        KeyBuf { len: 0, inline: [0; INLINE], spilled: None }
    }

    /// Appends `text`.
    #[inline]
    pub fn push_str(&mut self, text: &str) {
        let end = self.len + text.len();
        match &mut self.spilled {
            None if end <= INLINE => self.inline[self.len..end].copy_from_slice(text.as_bytes()),
            None => {
                let mut heap = Vec::with_capacity(end * 2);
                heap.extend_from_slice(&self.inline[..self.len]);
                heap.extend_from_slice(text.as_bytes());
                self.spilled = Some(heap);
            }
            Some(heap) => heap.extend_from_slice(text.as_bytes()),
        }
        self.len = end;
    }

    /// The key written so far.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.spilled {
            None => &self.inline[..self.len],
            Some(heap) => heap,
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
        if let Some(heap) = &mut self.spilled {
            heap.truncate(start);
        }
        self.len = start;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyBuf, KeyWriter, INLINE};
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
    fn taking_back_inline_bytes_leaves_the_rest() {
        let mut key = KeyBuf::new();
        key.push_str("user:");
        key.push_str("ключ");
        assert_eq!(key.take_from(5), "ключ");
        assert_eq!(format!("{key:?}"), "\"user:\"");
    }
}
