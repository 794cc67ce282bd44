//! A Unix stream socket as a connection's byte stream, registered with the
//! runtime for reading only.
//!
//! Each time a peer takes bytes from a Unix stream socket, the kernel
//! tells the sending socket that it may write again (`unix_write_space`),
//! whether or not a write was waiting, and the runtime thread that sleeps
//! on a socket registered for writability wakes for it. tokio registers
//! every `UnixStream` so, for the life of the socket: each request cost
//! its client one such wakeup (the server read the request) and the
//! server another (the client read the answer), for nothing. (TCP wakes
//! a writer only once a write found its buffer full.) So a local socket is
//! registered for readability alone, and a write that finds the send
//! buffer full registers a duplicate of the descriptor for writability
//! ([`LocalWrite`]'s waiter), kept while writes leave bytes behind.
//!
//! Invariants:
//! - a write waits for writability only through a registration made after
//!   a write found the buffer full, so no wakeup is lost (epoll reports the
//!   state of what it registers at once);
//! - the duplicate is deregistered before it is closed (a descriptor closed
//!   while still registered would stay registered through the other);
//! - sends never raise `SIGPIPE` (`MSG_NOSIGNAL`): a peer gone is an error;
//! - dropping the write half shuts the socket down for writing, as tokio's
//!   halves do, so the peer reads the end of the stream.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A connected local socket, registered with the current runtime for reading.
pub(crate) struct LocalStream(AsyncFd<UnixStream>);

pub(crate) struct LocalRead(Arc<AsyncFd<UnixStream>>);

pub(crate) struct LocalWrite {
    socket: Arc<AsyncFd<UnixStream>>,
    /// A duplicate registered for writability, while the send buffer is
    /// full or was at the last write.
    waiter: Option<AsyncFd<OwnedFd>>,
}

impl LocalStream {
    /// Takes `s` over from the runtime's own registration (it must run on
    /// the runtime current here).
    pub(crate) fn new(s: tokio::net::UnixStream) -> io::Result<LocalStream> {
        Ok(LocalStream(register(s.into_std()?, Interest::READABLE)?))
    }

    pub(crate) fn socket(&self) -> &UnixStream {
        self.0.get_ref()
    }

    pub(crate) fn into_split(self) -> (LocalRead, LocalWrite) {
        let s = Arc::new(self.0);
        (LocalRead(s.clone()), LocalWrite { socket: s, waiter: None })
    }
}

/// Registers `fd` with the current runtime for `interest`.
fn register<T: AsRawFd>(fd: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `T` (a `UnixStream`, an `OwnedFd`) owns its descriptor, keeps
    // it open until it drops, and always names that one.
    Ok(unsafe { AsyncFd::register_with_interest(fd, interest) }?)
}

impl LocalRead {
    pub(crate) fn socket(&self) -> &UnixStream {
        self.0.get_ref()
    }
}

impl AsyncRead for LocalRead {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            // SAFETY: `recv` writes bytes only, and only the `n` it reports
            // are marked filled.
            let unfilled: &mut [MaybeUninit<u8>] = unsafe { buf.unfilled_mut() };
            match ready.try_io(|s| socket2::SockRef::from(s.get_ref()).recv(unfilled)) {
                Ok(Ok(n)) => {
                    // SAFETY: `recv` initialised the first `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: the readiness is cleared; wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

impl LocalWrite {
    /// Sends with `send`, waiting for room through the waiter when the
    /// buffer is full. `whole` is how much `send` was given: a send that
    /// takes it all lets the waiter go.
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        whole: usize,
        send: impl Fn(socket2::SockRef<'_>) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            match send(socket2::SockRef::from(self.socket.get_ref())) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Ok(n) if n < whole => return Poll::Ready(Ok(n)),
                sent => {
                    self.waiter = None;
                    return Poll::Ready(sent);
                }
            }
            let waiter = match &self.waiter {
                Some(w) => w,
                None => {
                    let dup = self.socket.get_ref().as_fd().try_clone_to_owned()?;
                    self.waiter.insert(register(dup, Interest::WRITABLE)?)
                }
            };
            ready!(waiter.poll_write_ready(cx))?.clear_ready();
        }
    }
}

impl AsyncWrite for LocalWrite {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, buf.len(), |s| s.send_with_flags(buf, libc::MSG_NOSIGNAL))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let whole = bufs.iter().map(|b| b.len()).sum();
        self.get_mut().poll_send(cx, whole, |s| s.send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.get_ref().shutdown(Shutdown::Write))
    }
}

impl Drop for LocalWrite {
    fn drop(&mut self) {
        let _ = self.socket.get_ref().shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn pair() -> (LocalStream, LocalStream) {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        (LocalStream::new(a).unwrap(), LocalStream::new(b).unwrap())
    }

    #[tokio::test]
    async fn bytes_cross_both_ways_and_a_dropped_writer_ends_the_stream() {
        let (a, b) = pair();
        let (mut ar, mut aw) = a.into_split();
        let (mut br, mut bw) = b.into_split();
        aw.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        br.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        bw.write_all(b"pong").await.unwrap();
        ar.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        drop(aw);
        assert_eq!(br.read(&mut got).await.unwrap(), 0, "end of stream");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_larger_than_the_buffer_waits_for_room_and_arrives_whole() {
        let (a, b) = pair();
        let (_ar, mut aw) = a.into_split();
        let (mut br, _bw) = b.into_split();
        // Far past a socket's send buffer: the writer waits for room many times.
        let data: Vec<u8> = (0..32u32 << 20).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            let (head, tail) = sent.split_at(5 << 20);
            let mut bufs = [IoSlice::new(head), IoSlice::new(tail)];
            crate::frame_io::write_all_vectored(&mut aw, &mut bufs, None).await.unwrap();
            aw
        });
        let mut got = vec![0u8; data.len()];
        // Slow at first, so the buffer fills.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        br.read_exact(&mut got).await.unwrap();
        let aw = writer.await.unwrap();
        assert!(got == data, "bytes differ");
        assert!(aw.waiter.is_none(), "a write that took everything let the waiter go");
    }

    #[tokio::test]
    async fn a_write_to_a_closed_peer_fails_with_a_broken_pipe() {
        let (a, b) = pair();
        let (_ar, mut aw) = a.into_split();
        drop(b);
        let err = aw.write_all(&[1u8; 1 << 20]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe, "{err}");
    }
}
