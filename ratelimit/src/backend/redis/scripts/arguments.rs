//! What a script call sends after its key: a single call's ARGV, or a
//! batch's words. The format: `lua/README.md` ("KEYS and ARGV").

use crate::backend::{CallKind, PermitId, Refunded, CLIENT_CLOCK_SLACK_US};
use redis::Cmd;

/// What one call sends after its key: its cost, its kind, and the time it
/// is judged at (`None`: Redis's own clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sent {
    pub(crate) cost: u64,
    pub(crate) kind: CallKind,
    pub(crate) now_us: Option<u64>,
}

/// The call's kind as the scripts read it, and the 16 bytes after it
/// (`lua/README.md`, "A call's values").
fn kind_number(kind: CallKind) -> (u8, Option<[u8; 16]>) {
    match kind {
        CallKind::Check => (0, None),
        CallKind::Peek => (1, None),
        CallKind::Refund(of) => (2, Some(Refunded::to_bytes(of))),
        CallKind::Acquire(PermitId(id)) => (3, Some(id)),
        CallKind::Release(PermitId(id)) => (4, Some(id)),
        CallKind::Renew(PermitId(id)) => (5, Some(id)),
        CallKind::Charge => (6, None),
    }
}

/// A single call's kind as text: its digit, then its 16 bytes, if any.
struct KindText {
    bytes: [u8; 17],
    len: usize,
}

impl KindText {
    fn of(kind: CallKind) -> KindText {
        let (number, permit) = kind_number(kind);
        let mut bytes = [b'0' + number; 17];
        let len = match permit {
            Some(id) => {
                bytes[1..].copy_from_slice(&id);
                17
            }
            None => 1,
        };
        KindText { bytes, len }
    }
}

impl redis::ToRedisArgs for KindText {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg(&self.bytes[..self.len]);
    }
}

/// A single call's ARGV, the trailing common ones left out (`lua/README.md`).
pub(crate) fn arguments(cmd: &mut Cmd, policy: &[u8], call: Sent) {
    cmd.arg(policy);
    if let Some(now) = call.now_us {
        cmd.arg(call.cost)
            .arg(KindText::of(call.kind))
            .arg(crate::clock::bounded(now))
            .arg(CLIENT_CLOCK_SLACK_US / 1000);
    } else if call.kind != CallKind::Check {
        cmd.arg(call.cost).arg(KindText::of(call.kind));
    } else if call.cost != 1 {
        cmd.arg(call.cost);
    }
}

/// The width of a batched call's word, without and with its 16 bytes
/// (`lua/README.md`).
const WORD: usize = 32;
const PERMIT_WORD: usize = WORD + 16;

/// A batch's words: none when every call is the common call, else one per
/// call, all of one width (`lua/README.md`).
pub(crate) fn words(calls: impl ExactSizeIterator<Item = Sent> + Clone) -> Vec<u8> {
    let common = |c: Sent| c.cost == 1 && c.kind == CallKind::Check && c.now_us.is_none();
    if calls.clone().all(common) {
        return Vec::new();
    }
    let width = if calls.clone().any(|c| kind_number(c.kind).1.is_some()) { PERMIT_WORD } else { WORD };
    let mut words = vec![0u8; width * calls.len()];
    for (word, call) in words.chunks_exact_mut(width).zip(calls) {
        let (now, slack) = match call.now_us {
            Some(now) => (crate::clock::bounded(now) as f64, (CLIENT_CLOCK_SLACK_US / 1000) as f64),
            None => (-1.0, 0.0),
        };
        let (kind, permit) = kind_number(call.kind);
        // A cost past 2^53 rounds as the script's own parsing of its text would.
        for (slot, v) in word.chunks_exact_mut(8).zip([call.cost as f64, f64::from(kind), now, slack]) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
        if let Some(id) = permit {
            word[WORD..].copy_from_slice(&id);
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's calls: (cost, kind, client clock).
    fn batched(calls: &[(u64, CallKind, Option<u64>)]) -> std::vec::IntoIter<Sent> {
        calls.iter().map(|&(cost, kind, now_us)| Sent { cost, kind, now_us }).collect::<Vec<_>>().into_iter()
    }

    fn sent(write: fn(&mut Cmd, &[u8], Sent), cost: u64, kind: CallKind, now_us: Option<u64>) -> Vec<Vec<u8>> {
        let mut cmd = Cmd::new();
        write(&mut cmd, b"P", Sent { cost, kind, now_us });
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => bytes.to_vec(),
                _ => unreachable!("no cursor"),
            })
            .collect()
    }

    #[test]
    fn a_call_sends_only_the_argv_that_differ_from_the_common_call() {
        use CallKind::*;
        assert_eq!(sent(arguments, 1, Check, None), [b"P".to_vec()], "the policy always");
        assert_eq!(sent(arguments, 3, Check, None), [b"P".to_vec(), b"3".to_vec()]);
        assert_eq!(sent(arguments, 1, Peek, None), [&b"P"[..], b"1", b"1"].map(<[u8]>::to_vec));
        assert_eq!(sent(arguments, 2, Check, Some(7)), [&b"P"[..], b"2", b"0", b"7", b"60000"].map(<[u8]>::to_vec));
    }

    fn word(values: [f64; 4]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn a_batch_of_common_calls_sends_no_words_else_one_per_call() {
        use CallKind::*;
        assert_eq!(words(batched(&[(1, Check, None), (1, Check, None)])), Vec::<u8>::new());
        let mixed = batched(&[(1, Check, None), (5, Peek, Some(9)), (2, Check, None)]);
        let expected = [word([1.0, 0.0, -1.0, 0.0]), word([5.0, 1.0, 9.0, 60.0 * 1000.0]), word([2.0, 0.0, -1.0, 0.0])];
        assert_eq!(words(mixed), expected.concat());
    }

    #[test]
    fn a_permit_call_carries_its_id_after_its_kind() {
        let id = PermitId([7; 16]);
        let text = |digit: u8| [&[digit][..], &id.0].concat();
        assert_eq!(sent(arguments, 1, CallKind::Acquire(id), None), [b"P".to_vec(), b"1".to_vec(), text(b'3')]);
        assert_eq!(sent(arguments, 2, CallKind::Release(id), None), [b"P".to_vec(), b"2".to_vec(), text(b'4')]);
        let calls = batched(&[(1, CallKind::Renew(id), None), (1, CallKind::Peek, None)]);
        let expected = [word([1.0, 5.0, -1.0, 0.0]), id.0.to_vec(), word([1.0, 1.0, -1.0, 0.0]), vec![0; 16]];
        assert_eq!(words(calls), expected.concat(), "every word as wide as a permit's");
    }

    #[test]
    fn a_refund_carries_its_calls_times_where_a_permit_id_goes() {
        let of = Refunded { taken_us: 7, window_end_us: 1_000_007 };
        let times = [7.0f64.to_le_bytes(), 1_000_007.0f64.to_le_bytes()].concat();
        let text = [&b"2"[..], &times].concat();
        assert_eq!(sent(arguments, 3, CallKind::Refund(of), None), [b"P".to_vec(), b"3".to_vec(), text.clone()]);
        let expected = [&b"P"[..], b"3", &text, b"9", b"60000"].map(<[u8]>::to_vec);
        assert_eq!(sent(arguments, 3, CallKind::Refund(of), Some(9)), expected);
        let calls = batched(&[(1, CallKind::Check, None), (3, CallKind::Refund(of), None)]);
        let expected = [word([1.0, 0.0, -1.0, 0.0]), vec![0; 16], word([3.0, 2.0, -1.0, 0.0]), times];
        assert_eq!(words(calls), expected.concat(), "every word as wide as a refund's");
    }
}
