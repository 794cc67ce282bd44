//! The byte streams a connection runs over: TCP, or a Unix socket to a
//! server on the same machine and network namespace (`local.rs`). Both
//! halves of either read and write the same way; only a connection's
//! figures and its peer's name tell them apart.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

pub(crate) enum Stream {
    Tcp(TcpStream),
    Local(UnixStream),
}

pub(crate) enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Local(unix::OwnedReadHalf),
}

pub(crate) enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Local(unix::OwnedWriteHalf),
}

impl Stream {
    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Stream::Local(_))
    }

    pub(crate) fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Local(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Local(r), WriteHalf::Local(w))
            }
        }
    }
}

impl ReadHalf {
    /// Peeks at what the socket holds without taking it or waiting:
    /// `WouldBlock` if nothing, `Ok(0)` if the peer closed it. Asks the
    /// kernel itself rather than the readiness the runtime last saw: a
    /// runtime that has not polled since (one a thread runs only while it
    /// waits for a call) may not know yet of a close.
    pub(crate) fn peek_now(&self) -> io::Result<usize> {
        let sock = match self {
            ReadHalf::Tcp(r) => socket2::SockRef::from(AsRef::<TcpStream>::as_ref(r)),
            ReadHalf::Local(r) => socket2::SockRef::from(AsRef::<UnixStream>::as_ref(r)),
        };
        // The runtime's sockets do not block: nothing there is `WouldBlock`.
        sock.peek(&mut [std::mem::MaybeUninit::uninit(); 1])
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Local(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Local(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteHalf::Local(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteHalf::Tcp(w) => w.is_write_vectored(),
            WriteHalf::Local(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Local(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Local(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
