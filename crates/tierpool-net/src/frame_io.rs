//! Frames in and out of a byte stream, under time and memory bounds.
//!
//! A body is never allocated at the length its header claims before its
//! peer sent the first [`FIRST_STEP`] of it: a claim that is never sent
//! costs nothing but that first step (or holds a spare kept buffer, see
//! below, which it did not make the process allocate). Each part is
//! charged to the frame's [`Charge`] before it is allocated (the first part
//! is cut to what is left of the connection's allowance), so the budget
//! bounds what all peers hold. The rest is read into a buffer sized to the body at once (growing
//! it step by step would copy a chunk several times over, and small reads
//! would go through the connection's read buffer); its pages are touched
//! only as bytes arrive. The buffer ends exactly as long as the body, so a
//! payload kept by a handler (a chunk stored in memory) holds no slack. On
//! a server that keeps chunk buffers, a body of exactly a chunk goes on
//! into one of those (as long as it too), and on one that keeps shorter
//! ones too (a worker), a shorter body goes into one of its size class:
//! either is given back if the read fails. A body for which such a
//! buffer is spare is read into it from its first byte (the buffer is
//! already held: nothing is allocated). Such a body is charged its
//! length, and holds at most an eighth more (or 63 bytes).
//!
//! Time bounds are optional (a client relies on its request timeout):
//! `stall` bounds each read, each write and each wait for the budget, so a
//! peer that sends or takes bytes slowly but steadily is not cut off.

use crate::budget::Charge;
use crate::buffers::ChunkBuffers;
use crate::stats::DropReason;
use bytes::Bytes;
use std::future::Future;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::Duration;
use tierpool_proto::frame::{FrameHeader, FRAME_HEADER_LEN};
use tierpool_types::{ByteSize, Error, ErrorKind};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The first allocation of a body (all of it, if it is shorter).
pub(crate) const FIRST_STEP: usize = 64 << 10;

/// Why a frame could not be read or written.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The peer closed the connection inside a frame.
    Truncated,
    Io(std::io::Error),
    /// Not a frame of this protocol version (bad magic, version, kind, or
    /// a length beyond the protocol maxima).
    Malformed(Error),
    /// A time or size bound of this end ran out.
    Refused(DropReason, String),
}

impl FrameError {
    /// The error a caller sees, for a connection to `peer`.
    pub(crate) fn into_error(self, peer: &str) -> Error {
        match self {
            FrameError::Truncated => {
                Error::new(ErrorKind::Unavailable, format!("connection to {peer} closed mid-frame"))
            }
            FrameError::Io(e) => Error::from(e).context(format!("connection to {peer}")),
            FrameError::Malformed(e) => e,
            FrameError::Refused(reason, detail) => {
                Error::new(ErrorKind::Unavailable, format!("connection to {peer}: {reason}: {detail}"))
            }
        }
    }
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
            _ => FrameError::Io(e),
        }
    }
}

/// `f`, unless `limit` passes first (`None`).
async fn within<F: Future>(limit: Option<Duration>, f: F) -> Option<F::Output> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.ok(),
        None => Some(f.await),
    }
}

fn stalled(limit: Option<Duration>, what: &str) -> FrameError {
    let d = limit.unwrap_or_default();
    FrameError::Refused(DropReason::Stalled, format!("{what} for {d:?}"))
}

/// Reads a frame header. `Ok(None)` if the stream ends before a frame
/// starts. `wait` bounds the wait for its first byte (and names the
/// reason if it runs out), `stall` the rest.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    r: &mut R,
    wait: Option<(Duration, DropReason)>,
    stall: Option<Duration>,
) -> Result<Option<FrameHeader>, FrameError> {
    let mut fh = [0u8; FRAME_HEADER_LEN];
    let first = match wait {
        Some((d, reason)) => tokio::time::timeout(d, r.read_exact(&mut fh[..1]))
            .await
            .map_err(|_| FrameError::Refused(reason, format!("no frame for {d:?}")))?,
        None => r.read_exact(&mut fh[..1]).await,
    };
    match first {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(FrameError::Io(e)),
    }
    within(stall, r.read_exact(&mut fh[1..])).await.ok_or_else(|| stalled(stall, "no frame header bytes"))??;
    FrameHeader::decode(&fh).map(Some).map_err(FrameError::Malformed)
}

/// Reads a body of exactly `len` bytes: its first [`FIRST_STEP`] (or all
/// of it, if shorter), then, once the peer has sent that, the rest into a
/// buffer sized to the body at once. Each part is charged to `charge`
/// before it is allocated (beyond the connection's allowance the charge
/// reserves the rest of the frame, so the second part waits for the budget
/// at most once). A body that `buffers` fits goes on into one of its
/// buffers, and gives it back when dropped.
pub(crate) async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
    charge: &mut Charge,
    stall: Option<Duration>,
    buffers: Option<&Arc<ChunkBuffers>>,
) -> Result<Bytes, FrameError> {
    let mut body = Body { buf: Vec::new(), home: None };
    read_parts(r, len, charge, stall, buffers.filter(|b| b.fits(len)), &mut body).await?;
    let buf = std::mem::take(&mut body.buf);
    Ok(match body.home.take() {
        Some(b) => b.lend(buf),
        None => Bytes::from(buf),
    })
}

/// Reads a body of exactly `dst.len()` bytes into `dst`, the caller's
/// own room for it: nothing allocated. What the connection's read buffer
/// already holds is copied from it; past that, a read as long as that
/// buffer or longer goes from the socket straight into `dst`, a shorter
/// one through the buffer. With `stall`, each read must bring a byte in time.
pub(crate) async fn read_body_into<R: AsyncRead + Unpin>(
    r: &mut R,
    dst: &mut [u8],
    stall: Option<Duration>,
) -> Result<(), FrameError> {
    let mut at = 0;
    while at < dst.len() {
        let n = within(stall, r.read(&mut dst[at..])).await.ok_or_else(|| stalled(stall, "no bytes"))??;
        if n == 0 {
            return Err(FrameError::Truncated);
        }
        at += n;
    }
    Ok(())
}

/// A body being read, and the buffers its buffer came from, if it did:
/// given back there if the read fails.
struct Body<'a> {
    buf: Vec<u8>,
    home: Option<&'a Arc<ChunkBuffers>>,
}

impl Drop for Body<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.home {
            b.give_back(std::mem::take(&mut self.buf));
        }
    }
}

async fn read_parts<'a, R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
    charge: &mut Charge,
    stall: Option<Duration>,
    buffers: Option<&'a Arc<ChunkBuffers>>,
    body: &mut Body<'a>,
) -> Result<(), FrameError> {
    let first = charge.fit(len.min(FIRST_STEP));
    // A spare buffer for the body takes it from its first byte: nothing
    // is allocated (it is already held, among the spare ones), and nothing
    // read is copied again.
    if let Some(b) = buffers {
        if let Some(spare) = b.take_spare_for(len) {
            body.buf = spare;
            body.home = Some(b);
        }
    }
    for (i, part) in [first, len - first].into_iter().enumerate() {
        if part == 0 {
            continue;
        }
        match within(stall, charge.grow(part as u64)).await {
            None => return Err(stalled(stall, "waited for memory")),
            Some(Err(e)) => {
                let detail = format!("needs {} more but the budget holds {}", ByteSize(e.asked), ByteSize(e.total));
                return Err(FrameError::Refused(DropReason::FrameTooLarge, detail));
            }
            Some(Ok(())) => {}
        }
        let buf = &mut body.buf;
        match buffers {
            Some(_) if body.home.is_some() => {}
            // The whole body in the first part (a short one), or its second.
            Some(b) if i == 1 || part == len => {
                let mut kept = b.take_for(len);
                kept.extend_from_slice(buf);
                *buf = kept;
                body.home = Some(b);
            }
            _ => buf.reserve_exact(part),
        }
        let buf = &mut body.buf;
        let end = buf.len() + part;
        while buf.len() < end {
            let mut limited = (&mut *r).take((end - buf.len()) as u64);
            let n = within(stall, limited.read_buf(buf)).await.ok_or_else(|| stalled(stall, "no bytes"))??;
            if n == 0 {
                return Err(FrameError::Truncated);
            }
        }
    }
    Ok(())
}

/// Writes all of `buf`; with `stall`, each write must move a byte in time.
pub(crate) async fn write_all<W: AsyncWrite + Unpin>(
    w: &mut W,
    buf: &[u8],
    stall: Option<Duration>,
) -> Result<(), FrameError> {
    let Some(limit) = stall else { return Ok(w.write_all(buf).await?) };
    let mut at = 0;
    while at < buf.len() {
        let n = (tokio::time::timeout(limit, w.write(&buf[at..])).await)
            .map_err(|_| stalled(stall, "the answer was not taken"))??;
        if n == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::WriteZero.into()));
        }
        at += n;
    }
    Ok(())
}

/// Most buffers handed to one `writev` (Linux's `IOV_MAX`).
const MAX_SLICES: usize = 1024;

/// Writes all of `bufs`, in order, as few vectored writes as the socket
/// takes; with `stall`, each write must move a byte in time.
pub(crate) async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut bufs: &mut [IoSlice<'_>],
    stall: Option<Duration>,
) -> Result<(), FrameError> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        let write = w.write_vectored(&bufs[..bufs.len().min(MAX_SLICES)]);
        let n = match stall {
            Some(limit) => {
                tokio::time::timeout(limit, write).await.map_err(|_| stalled(stall, "the answer was not taken"))??
            }
            None => write.await?,
        };
        if n == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::WriteZero.into()));
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_that_stops_arriving_stalls_and_one_cut_short_is_truncated() {
        let (mut client, mut server) = tokio::io::duplex(1 << 20);
        client.write_all(&vec![7u8; 1000]).await.unwrap();
        let mut charge = Charge::unbounded();
        let read = read_body(&mut server, 64 << 20, &mut charge, Some(Duration::from_millis(100)), None);
        match read.await {
            Err(FrameError::Refused(DropReason::Stalled, d)) => assert_eq!(d, "no bytes for 100ms"),
            other => panic!("{other:?}"),
        }
        drop(client);
        let e = read_body(&mut server, 10, &mut charge, None, None).await.unwrap_err();
        assert!(matches!(e, FrameError::Truncated), "{e:?}");
    }

    #[tokio::test]
    async fn a_body_is_read_whole_across_steps() {
        let (mut client, mut server) = tokio::io::duplex(64 << 10);
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move { client.write_all(&sent).await.unwrap() });
        let mut charge = Charge::unbounded();
        let body = read_body(&mut server, data.len(), &mut charge, None, None).await.unwrap();
        writer.await.unwrap();
        assert_eq!(&body[..], &data[..]);
    }

    #[tokio::test]
    async fn a_body_that_fits_a_kept_buffer_is_read_into_it_and_gives_it_back() {
        let buffers = ChunkBuffers::new(4 << 20, 1);
        buffers.prefault();
        let (mut client, mut server) = tokio::io::duplex(64 << 10);
        let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 253) as u8).collect();
        let small = vec![9u8; 1000];
        let sent = [data.clone(), small.clone()].concat();
        let writer = tokio::spawn(async move { client.write_all(&sent).await.unwrap() });
        let mut charge = Charge::unbounded();
        let body = read_body(&mut server, data.len(), &mut charge, None, Some(&buffers)).await.unwrap();
        let other = read_body(&mut server, small.len(), &mut charge, None, Some(&buffers)).await.unwrap();
        writer.await.unwrap();
        assert_eq!((&body[..], &other[..]), (&data[..], &small[..]));
        assert_eq!((buffers.stats().spare, buffers.stats().reused), (0, 1));
        drop(body);
        assert_eq!(buffers.stats().spare, 1);
    }

    #[tokio::test]
    async fn shorter_bodies_go_into_buffers_of_their_class_and_come_back_for_the_next() {
        let buffers = ChunkBuffers::with_small(4 << 20, 1, 1 << 20);
        let (mut client, mut server) = tokio::io::duplex(64 << 10);
        let short: Vec<u8> = (0..5000u32).map(|i| (i % 241) as u8).collect();
        let longer: Vec<u8> = (0..300_000u32).map(|i| (i % 239) as u8).collect();
        let sent = [short.clone(), longer.clone(), short.clone(), longer.clone(), vec![1u8; 100]].concat();
        let writer = tokio::spawn(async move { client.write_all(&sent).await.unwrap() });
        let mut charge = Charge::unbounded();
        let a = read_body(&mut server, 5000, &mut charge, None, Some(&buffers)).await.unwrap();
        let long = read_body(&mut server, longer.len(), &mut charge, None, Some(&buffers)).await.unwrap();
        assert_eq!((&a[..], &long[..]), (&short[..], &longer[..]));
        let s = buffers.stats();
        assert_eq!((s.small_lent, s.small_fresh, s.small_reused), (5120 + 327_680, 2, 0));
        let (at, long_at) = (a.as_ptr(), long.as_ptr());
        drop((a, long));
        assert_eq!((buffers.stats().small_spare, buffers.stats().small_lent), (5120 + 327_680, 0));
        let again = read_body(&mut server, 5000, &mut charge, None, Some(&buffers)).await.unwrap();
        assert_eq!((&again[..], again.as_ptr()), (&short[..], at), "the same pages");
        // A body longer than the first step, with a spare buffer of its
        // class, is read into it from its first byte: the buffer is taken
        // before the first step ends.
        let long = read_body(&mut server, longer.len(), &mut charge, None, Some(&buffers)).await.unwrap();
        assert_eq!((&long[..], long.as_ptr()), (&longer[..], long_at), "the same pages");
        drop((long, again));
        let (mut peer, mut cut) = tokio::io::duplex(1 << 10);
        peer.write_all(&[9u8; 100]).await.unwrap();
        drop(peer);
        let reused = buffers.stats().small_reused;
        let e = read_body(&mut cut, longer.len(), &mut charge, None, Some(&buffers)).await.unwrap_err();
        assert!(matches!(e, FrameError::Truncated), "{e:?}");
        let s = buffers.stats();
        assert_eq!((s.small_reused - reused, s.small_lent, s.small_spare), (1, 0, 5120 + 327_680), "and given back");
        let tiny = read_body(&mut server, 100, &mut charge, None, Some(&buffers)).await.unwrap();
        writer.await.unwrap();
        assert_eq!(&tiny[..], &[1u8; 100]);
        let s = buffers.stats();
        assert_eq!((s.small_reused, s.small_fresh, s.spare, s.lent), (3, 3, 0, 0), "no chunk buffer taken");
    }

    #[tokio::test]
    async fn a_body_cut_short_gives_its_kept_buffer_back() {
        let buffers = ChunkBuffers::new(4 << 20, 1);
        buffers.prefault();
        let (mut client, mut server) = tokio::io::duplex(64 << 10);
        let writer = tokio::spawn(async move { client.write_all(&vec![5u8; 1 << 20]).await.unwrap() });
        let mut charge = Charge::unbounded();
        let e = read_body(&mut server, 4 << 20, &mut charge, None, Some(&buffers)).await.unwrap_err();
        writer.await.unwrap();
        assert!(matches!(e, FrameError::Truncated), "{e:?}");
        assert_eq!((buffers.stats().spare, buffers.stats().reused), (1, 1));
    }

    #[tokio::test]
    async fn many_parts_arrive_whole_and_in_order_through_short_writes() {
        // More parts than one writev takes, through a pipe of 1,000 bytes.
        let parts: Vec<Vec<u8>> = (0..1500u32).map(|i| vec![(i % 251) as u8; (i % 7) as usize * 3]).collect();
        let want: Vec<u8> = parts.concat();
        let (mut w, mut r) = tokio::io::duplex(1000);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        write_all_vectored(&mut w, &mut slices, Some(Duration::from_secs(5))).await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), want);
        // A socket that takes everything is handed at most `MAX_SLICES` a call.
        let mut all = Taker::default();
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        write_all_vectored(&mut all, &mut slices, None).await.unwrap();
        assert_eq!((all.bytes, all.most_slices, all.calls), (want, MAX_SLICES, 2));
        // A peer that takes nothing stalls the write.
        let (mut w, _r) = tokio::io::duplex(10);
        let (a, b) = (vec![1u8; 8], vec![2u8; 8]);
        let mut slices = [IoSlice::new(&a), IoSlice::new(&b)];
        match write_all_vectored(&mut w, &mut slices, Some(Duration::from_millis(50))).await {
            Err(FrameError::Refused(DropReason::Stalled, d)) => assert_eq!(d, "the answer was not taken for 50ms"),
            other => panic!("{other:?}"),
        }
    }

    /// A writer that takes all it is given, counting the slices of each call.
    #[derive(Default)]
    struct Taker {
        bytes: Vec<u8>,
        most_slices: usize,
        calls: usize,
    }

    impl AsyncWrite for Taker {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.get_mut().bytes.extend_from_slice(buf);
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let me = self.get_mut();
            (me.most_slices, me.calls) = (me.most_slices.max(bufs.len()), me.calls + 1);
            let before = me.bytes.len();
            bufs.iter().for_each(|b| me.bytes.extend_from_slice(b));
            std::task::Poll::Ready(Ok(me.bytes.len() - before))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }
}
