//! The userfaultfd interface of Linux (since 5.7 for write-protection of
//! anonymous memory): the handful of ioctls a region needs, declared from the
//! kernel's stable user ABI (`linux/userfaultfd.h`). Declared here rather
//! than generated, so building needs no C toolchain or libclang.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const UFFD_API: u64 = 0xAA;
const PAGE: usize = 4096;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;

/// The kernel reports whether a fault was a write to a write-protected page.
const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
/// Missing-page faults of shared memory (tmpfs files), for shared read-only regions.
const UFFD_FEATURE_MISSING_SHMEM: u64 = 1 << 5;

pub const REGISTER_MODE_MISSING: u64 = 1;
pub const REGISTER_MODE_WP: u64 = 2;
const COPY_MODE_WP: u64 = 2;
const WRITEPROTECT_MODE_WP: u64 = 1;

pub const EVENT_PAGEFAULT: u8 = 0x12;
pub const PAGEFAULT_FLAG_WRITE: u64 = 1;
pub const PAGEFAULT_FLAG_WP: u64 = 2;

const fn iowr(nr: u64, size: usize) -> u64 {
    (3 << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr
}

#[repr(C)]
#[derive(Default)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct Copy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct WriteProtect {
    range: Range,
    mode: u64,
}

const UFFDIO_API: u64 = iowr(0x3F, size_of::<Api>());
const UFFDIO_REGISTER: u64 = iowr(0x00, size_of::<Register>());
const UFFDIO_COPY: u64 = iowr(0x03, size_of::<Copy>());
const UFFDIO_WRITEPROTECT: u64 = iowr(0x06, size_of::<WriteProtect>());
/// `_IOR(0xAA, 0x02, struct uffdio_range)`.
const UFFDIO_WAKE: u64 = (2 << 30) | ((size_of::<Range>() as u64) << 16) | (UFFD_API << 8) | 0x02;

/// One fault as the kernel reports it (`struct uffd_msg`, 32 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct Msg {
    pub event: u8,
    _reserved: [u8; 7],
    pub flags: u64,
    pub address: u64,
    pub ptid: u32,
    _pad: u32,
}

const _: () = assert!(size_of::<Msg>() == 32);

/// An open userfaultfd.
pub struct Uffd {
    fd: OwnedFd,
}

fn check(r: libc::c_long) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Uffd {
    /// Opens a userfaultfd with write-protect faults reported. Falls back to
    /// user-mode-only faults where the system allows only those to
    /// unprivileged users (then the kernel itself cannot fault on the region,
    /// e.g. `read(2)` into it fails with EFAULT).
    pub fn open() -> io::Result<Uffd> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: plain syscall; the result is a new descriptor or -1.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
        }
        check(fd)?;
        // SAFETY: `fd` is a descriptor we own from here on.
        let u = Uffd { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) } };
        let mut api = Api {
            api: UFFD_API,
            features: UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_MISSING_SHMEM,
            ioctls: 0,
        };
        u.ioctl(UFFDIO_API, &mut api)?;
        Ok(u)
    }

    fn ioctl<T>(&self, req: u64, arg: &mut T) -> io::Result<()> {
        // SAFETY: `arg` is the `#[repr(C)]` struct this request expects.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, arg as *mut T) } as libc::c_long)
    }

    pub fn register(&self, start: usize, len: usize, mode: u64) -> io::Result<()> {
        let mut r = Register { range: Range { start: start as u64, len: len as u64 }, mode, ioctls: 0 };
        self.ioctl(UFFDIO_REGISTER, &mut r)
    }

    /// Fills the missing pages at `dst` with `src` (whole pages) and wakes the
    /// threads waiting on them; with `protect` the pages stay write-protected
    /// so that the first write to each is reported. Pages already there (put
    /// by another process sharing the memory, say) are left as they are.
    pub fn copy(&self, dst: usize, src: &[u8], protect: bool) -> io::Result<()> {
        match self.copy_once(dst, src, protect) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                // Some page exists: place the others one by one, then wake
                // every thread waiting anywhere in the range.
                for (i, page) in src.chunks(PAGE).enumerate() {
                    match self.copy_once(dst + i * PAGE, page, protect) {
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                        r => r?,
                    }
                }
                let mut r = Range { start: dst as u64, len: src.len() as u64 };
                self.ioctl(UFFDIO_WAKE, &mut r)
            }
            r => r,
        }
    }

    fn copy_once(&self, dst: usize, src: &[u8], protect: bool) -> io::Result<()> {
        let mut c = Copy {
            dst: dst as u64,
            src: src.as_ptr() as u64,
            len: src.len() as u64,
            mode: if protect { COPY_MODE_WP } else { 0 },
            copy: 0,
        };
        self.ioctl(UFFDIO_COPY, &mut c)
    }

    /// Write-protects (or unprotects, waking waiters) `len` bytes at `start`.
    pub fn write_protect(&self, start: usize, len: usize, protect: bool) -> io::Result<()> {
        let mut w = WriteProtect {
            range: Range { start: start as u64, len: len as u64 },
            mode: if protect { WRITEPROTECT_MODE_WP } else { 0 },
        };
        self.ioctl(UFFDIO_WRITEPROTECT, &mut w)
    }

    /// The next fault, or `None` if none is pending.
    pub fn read(&self) -> io::Result<Option<Msg>> {
        let mut m = Msg::default();
        // SAFETY: reads at most one 32-byte message into `m`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut m as *mut Msg).cast(), size_of::<Msg>()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        Ok(Some(m))
    }

    pub fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}
