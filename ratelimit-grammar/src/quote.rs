//! Echoing an input in a message: bounded and escaped, so an error can
//! neither grow with its input nor carry raw control bytes into a log.

use std::fmt::{self, Write};

/// The most bytes of one input a message quotes; a longer input is cut
/// there and its length given instead of the rest.
pub const MAX_QUOTED: usize = 128;

/// An input as a message may show it: [`quote`] builds one.
#[derive(Clone, Copy)]
pub struct Quoted<'a> {
    bytes: &'a [u8],
}

/// An input, for a message: at most [`MAX_QUOTED`] bytes of it, then `…`
/// and its length in bytes; a backslash, a control or other unprintable
/// character written as Rust escapes it (`\\`, `\n`, `\u{1b}`), and a byte
/// that is not UTF-8 as `\xNN`. Distinct inputs up to the bound show
/// distinctly.
///
/// ```
/// use redlimit_grammar::quote;
///
/// assert_eq!(quote("10/1s").to_string(), "10/1s");
/// assert_eq!(quote("a\nb\\").to_string(), r"a\nb\\");
/// assert_eq!(quote(&b"k\xff\x1b"[..]).to_string(), r"k\xff\u{1b}");
/// let long = quote(&"x".repeat(500_000)).to_string();
/// assert_eq!(long, format!("{}…(500000 bytes)", "x".repeat(128)));
/// ```
pub fn quote<T: AsRef<[u8]> + ?Sized>(input: &T) -> Quoted<'_> {
    Quoted { bytes: input.as_ref() }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.bytes;
        let shown = if bytes.len() <= MAX_QUOTED {
            bytes
        } else {
            // Cut before a character the bound would split, not through it.
            let mut end = MAX_QUOTED;
            while end > MAX_QUOTED - 3 && bytes[end] & 0xC0 == 0x80 {
                end -= 1;
            }
            &bytes[..end]
        };
        for chunk in shown.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    // Quotes are left as they are: messages quote with backticks.
                    '"' | '\'' => f.write_char(c)?,
                    c => write!(f, "{}", c.escape_debug())?,
                }
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        if shown.len() < bytes.len() {
            write!(f, "…({} bytes)", bytes.len())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_long_inputs_on_a_character_boundary() {
        let text = format!("{}é", "x".repeat(MAX_QUOTED - 1));
        assert_eq!(quote(&text).to_string(), format!("{}…({} bytes)", "x".repeat(MAX_QUOTED - 1), text.len()));
        let exact = "y".repeat(MAX_QUOTED);
        assert_eq!(quote(&exact).to_string(), exact);
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        assert_eq!(quote("\u{202e}evil\r\0").to_string(), r"\u{202e}evil\r\0");
        assert_eq!(quote("ключ 🔑 \"x\"").to_string(), "ключ 🔑 \"x\"");
        assert_eq!(quote(&[0x80u8, b'\\', b'x', b'8', b'0'][..]).to_string(), r"\x80\\x80");
    }

    #[test]
    fn the_output_is_bounded_whatever_the_input() {
        let worst = vec![0x1bu8; 1 << 20];
        assert!(quote(&worst).to_string().len() < MAX_QUOTED * 7 + 32);
    }
}
