//! What follows a message in its frame, and the answers whose bytes travel
//! there rather than in the message.
//!
//! A [`Payload`] is a list of shared buffers handed to the socket as they
//! are (vectored writes): a chunk read from MEM, the chunks of a
//! `GetChunks`, or the bytes of small files. Nothing is copied together
//! before the kernel copies it (but a payload of one part shorter than
//! 64 KiB, which goes into its frame's head).
//!
//! The coordinator's answers that carry small files' bytes (`Info`,
//! `Infos`, `MetaStat`, `Entries`: `InodeInfo::inline`) are sent as
//! `CoordResponse::InlineAfter`: the same answer with those bytes taken
//! out, their lengths in order, and the bytes themselves as the payload
//! ([`detach_inline`]). The reader puts them back as slices of the one
//! payload it read ([`attach_inline`]), so a batch of small gets is copied
//! neither into the message on one side nor out of it on the other.
//!
//! The bytes of a file are then a slice of the payload they came in:
//! holding one holds that buffer, as the chunks of a `GetChunks` answer do.
//! An answer with more bytes than a payload may carry (`MAX_PAYLOAD_LEN`)
//! keeps them in the message.
//!
//! Invariant: `attach_inline(detach_inline(r))` is `r`, byte for byte; an
//! answer whose lengths do not add up to its payload is a `Protocol` error.
//! Nothing nests: an `InlineAfter` holds a [`WithInline`], never itself.

use crate::coord::{CoordResponse, WithInline};
use bytes::Bytes;
use tierpool_meta::InodeInfo;
use tierpool_types::{Error, ErrorKind, Result};

/// Bytes that follow a message in its frame, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    parts: Vec<Bytes>,
}

impl Payload {
    /// No bytes.
    pub fn empty() -> Payload {
        Payload::default()
    }

    /// The buffers, in order; none of them empty.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Adds `b` after what it has (nothing, if `b` is empty).
    pub fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.parts.push(b);
        }
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Payload {
        let mut p = Payload::empty();
        p.push(b);
        p
    }
}

impl WithInline {
    /// The infos it carries, in a fixed order (the one both ends walk).
    fn infos_mut(&mut self) -> Vec<&mut InodeInfo> {
        match self {
            WithInline::Info(i) => vec![i],
            WithInline::Infos(v) | WithInline::MetaStat { stats: v, .. } => {
                v.iter_mut().filter_map(|r| r.as_mut().ok()).collect()
            }
            WithInline::Entries(v) => v.iter_mut().map(|e| &mut e.info).collect(),
        }
    }
}

impl From<WithInline> for CoordResponse {
    fn from(a: WithInline) -> CoordResponse {
        match a {
            WithInline::Info(i) => CoordResponse::Info(i),
            WithInline::Infos(v) => CoordResponse::Infos(v),
            WithInline::MetaStat { reply, stats } => CoordResponse::MetaStat { reply, stats },
            WithInline::Entries(v) => CoordResponse::Entries(v),
        }
    }
}

/// An answer as sent: the small files' bytes it holds become the payload,
/// and their lengths go into an `InlineAfter` around it. An answer without
/// them, with more than a payload may carry, or with a payload of its own,
/// is sent as it is.
pub fn detach_inline(resp: Result<CoordResponse>, payload: Payload) -> (Result<CoordResponse>, Payload) {
    let Ok(answer) = resp else { return (resp, payload) };
    if !payload.is_empty() {
        return (Ok(answer), payload);
    }
    let mut answer = match answer {
        CoordResponse::Info(i) => WithInline::Info(i),
        CoordResponse::Infos(v) => WithInline::Infos(v),
        CoordResponse::MetaStat { reply, stats } => WithInline::MetaStat { reply, stats },
        CoordResponse::Entries(v) => WithInline::Entries(v),
        other => return (Ok(other), payload),
    };
    let mut infos = answer.infos_mut();
    let bytes: usize = infos.iter().filter_map(|i| i.inline.as_ref()).map(Bytes::len).sum();
    if bytes == 0 || bytes > crate::MAX_PAYLOAD_LEN as usize {
        return (Ok(answer.into()), payload);
    }
    let mut moved = Payload::empty();
    let lens = infos
        .iter_mut()
        .map(|i| {
            let b = i.inline.take()?;
            let len = b.len() as u32;
            moved.push(b);
            Some(len)
        })
        .collect();
    (Ok(CoordResponse::InlineAfter { answer, lens }), moved)
}

/// An answer as read: an `InlineAfter`'s bytes put back into its infos, as
/// slices of `payload` (holding one holds the payload's buffer, as the
/// chunks of a `GetChunks` answer do), nothing left over; any other answer
/// and its payload as they are.
pub fn attach_inline(resp: CoordResponse, payload: Bytes) -> Result<(CoordResponse, Bytes)> {
    let CoordResponse::InlineAfter { mut answer, lens } = resp else { return Ok((resp, payload)) };
    let bad = |m: String| Error::new(ErrorKind::Protocol, m);
    let mut infos = answer.infos_mut();
    if infos.len() != lens.len() {
        return Err(bad(format!("an answer of {} files gave the lengths of {}", infos.len(), lens.len())));
    }
    let mut at = 0usize;
    for (info, len) in infos.iter_mut().zip(lens) {
        if let Some(len) = len {
            let end = at.checked_add(len as usize).filter(|&e| e <= payload.len());
            let end = end.ok_or_else(|| bad(format!("small files' bytes past the {} sent", payload.len())))?;
            info.inline = Some(payload.slice(at..end));
            at = end;
        }
    }
    if at != payload.len() {
        return Err(bad(format!("{} bytes sent after the answer, {at} of them small files'", payload.len())));
    }
    Ok((answer.into(), Bytes::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::CoordResponse as R;
    use tierpool_meta::{DirEntry, MetaReply};
    use tierpool_types::{ChunkAttrs, InodeId};

    fn info(id: u64, inline: Option<&[u8]>) -> InodeInfo {
        InodeInfo {
            id: InodeId(id),
            kind: tierpool_meta::InodeKind::File,
            size: inline.map_or(9, |b| b.len() as u64),
            chunk_size: 4 << 20,
            mode: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            atime: 1,
            mtime: 2,
            ctime: 3,
            attrs: ChunkAttrs::default(),
            replicas: 2,
            placement: Default::default(),
            chunks: Vec::new(),
            target: String::new(),
            rdev: 0,
            origin: None,
            inline: inline.map(Bytes::copy_from_slice),
            restoring: None,
        }
    }

    /// Through the wire and back: the message encoded and decoded, the
    /// payload's parts joined as the reader gets them.
    fn round_trip(resp: CoordResponse) -> (CoordResponse, usize) {
        let (sent, payload) = detach_inline(Ok(resp), Payload::empty());
        let sent = sent.unwrap();
        let wire = crate::encode(&sent);
        let joined: Vec<u8> = payload.parts().iter().flat_map(|b| b.iter().copied()).collect();
        let (read, rest) = attach_inline(crate::decode(&wire).unwrap(), Bytes::from(joined)).unwrap();
        assert!(rest.is_empty());
        (read, payload.parts().len())
    }

    #[test]
    fn small_files_bytes_travel_after_the_answer_and_come_back_in_place() {
        let infos = vec![
            Ok(info(1, Some(b"first"))),
            Err(Error::not_found("/b")),
            Ok(info(3, None)),
            Ok(info(4, Some(b""))),
            Ok(info(5, Some(&[7u8; 5000]))),
        ];
        let cases = [
            R::Infos(infos.clone()),
            R::Info(info(9, Some(b"alone"))),
            R::MetaStat { reply: MetaReply::Done, stats: infos },
            R::Entries(vec![DirEntry { name: "x".into(), info: info(2, Some(b"entry")) }]),
        ];
        for resp in cases {
            let (sent, _) = detach_inline(Ok(resp.clone()), Payload::empty());
            assert!(matches!(sent, Ok(R::InlineAfter { .. })), "{sent:?}");
            assert_eq!(round_trip(resp.clone()).0, resp);
        }
        // Empty bytes take no part of the payload but keep their place.
        let (_, parts) = round_trip(R::Infos(vec![Ok(info(1, Some(b""))), Ok(info(2, Some(b"x")))]));
        assert_eq!(parts, 1);
    }

    #[test]
    fn answers_without_small_files_bytes_are_sent_as_they_are() {
        for resp in [R::Infos(vec![Ok(info(1, None))]), R::Done, R::Info(info(2, None))] {
            let (sent, payload) = detach_inline(Ok(resp.clone()), Payload::empty());
            assert_eq!((sent.unwrap(), payload.len()), (resp.clone(), 0));
            assert_eq!(attach_inline(resp.clone(), Bytes::new()).unwrap(), (resp, Bytes::new()));
        }
        let err: Result<CoordResponse> = Err(Error::not_found("/x"));
        assert_eq!(detach_inline(err.clone(), Payload::empty()).0, err);
        // So is one with a payload of its own.
        let own = Payload::from(Bytes::from_static(b"own"));
        let small = R::Info(info(2, Some(b"x")));
        let (sent, payload) = detach_inline(Ok(small.clone()), own.clone());
        assert_eq!((sent.unwrap(), payload), (small, own));
        // More bytes than a payload may carry stay in the message.
        let mut big = info(1, None);
        big.inline = Some(Bytes::from(vec![0u8; crate::MAX_PAYLOAD_LEN as usize + 1]));
        let (sent, payload) = detach_inline(Ok(R::Info(big.clone())), Payload::empty());
        assert_eq!((sent.unwrap(), payload.len()), (R::Info(big), 0));
    }

    #[test]
    fn lengths_that_do_not_match_the_payload_are_a_protocol_error() {
        let (sent, _) = detach_inline(Ok(R::Infos(vec![Ok(info(1, Some(b"abc")))])), Payload::empty());
        let sent = sent.unwrap();
        for (payload, want) in [
            (&b"ab"[..], "small files' bytes past the 2 sent"),
            (&b"abcd"[..], "4 bytes sent after the answer, 3 of them small files'"),
        ] {
            let e = attach_inline(sent.clone(), Bytes::from_static(payload)).unwrap_err();
            assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Protocol, want));
        }
        let two = R::InlineAfter { answer: WithInline::Infos(vec![Ok(info(1, None))]), lens: vec![None, Some(1)] };
        let e = attach_inline(two, Bytes::from_static(b"a")).unwrap_err();
        assert_eq!(e.message, "an answer of 1 files gave the lengths of 2");
    }
}
