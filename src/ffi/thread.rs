//! Device workers started with pthread, not `std::thread`. In a Rust program (not in a C, Go or Python host)
//! std gives every thread it starts an alternate signal stack for its stack-overflow message: `mmap`,
//! `mprotect` and `sigaltstack` at the start, `munmap` at the exit, which interrupts every other core to flush
//! its TLB. With a worker per device that was about 50 µs of CPU per thread, a quarter of what a thread costs
//! here (`examples/bench_threads.rs`, BENCHMARKS "Issue 30"). A worker's stack overflow then ends the process with SIGSEGV without std's
//! message, as it always did in those hosts. Its name is the kernel's (`ps`, `/proc`, debuggers, panic
//! messages say `<unnamed>`). Elsewhere than Linux, std starts it.

use std::io;

/// A started thread: joined, or detached when dropped.
pub(crate) struct OsThread(imp::Handle);

impl OsThread {
    /// Waits for the thread to end: `Err` with the panic's payload when its function panicked.
    pub(crate) fn join(self) -> std::thread::Result<()> {
        imp::join(self.0)
    }
}

/// Starts `main` on a thread named `name` (cut to the kernel's 15 bytes) with `stack` bytes of stack (at
/// least the system's minimum, rounded up to a page).
pub(crate) fn spawn(
    name: String,
    stack: usize,
    main: impl FnOnce() + Send + 'static,
) -> io::Result<OsThread> {
    imp::spawn(name, stack, Box::new(main)).map(OsThread)
}

/// The lowest address of the calling thread's stack, for [`release_stack_below`] (`None` where not known:
/// elsewhere than Linux, or when the system does not say).
pub(crate) fn stack_bottom() -> Option<usize> {
    imp::stack_bottom()
}

/// Gives the calling thread's stack pages back to the system from `keep` bytes below its current frame down
/// to `bottom` (at most [`RELEASE_WINDOW`]): a thread keeps every stack page it touched, so one deep call (a
/// command through the generic RPC path) would keep a worker a page larger for good. The pages are all below
/// the stack pointer, so nothing lives there; a later call that reaches them again finds them zeroed, as
/// fresh pages.
#[inline(never)]
pub(crate) fn release_stack_below(bottom: usize, keep: usize) {
    imp::release_stack_below(bottom, keep);
}

/// How far below the current frame [`release_stack_below`] reaches: deeper than any worker call goes but the
/// HTTP client's parser.
pub(crate) const RELEASE_WINDOW: usize = 64 * 1024;

#[cfg(target_os = "linux")]
mod imp {
    use std::any::Any;
    use std::ffi::{CString, c_void};
    use std::io;
    use std::mem::MaybeUninit;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    type Main = Box<dyn FnOnce() + Send>;
    type Payload = Box<dyn Any + Send>;

    pub(super) struct Handle {
        id: libc::pthread_t,
        joined: bool,
    }

    impl Drop for Handle {
        fn drop(&mut self) {
            if !self.joined {
                // SAFETY: a thread this module started, neither joined nor detached before (`joined`).
                unsafe { libc::pthread_detach(self.id) };
            }
        }
    }

    pub(super) fn spawn(name: String, stack: usize, main: Main) -> io::Result<Handle> {
        let main: Main = Box::new(move || {
            name_self(&name);
            main();
        });
        let arg = Box::into_raw(Box::new(main));
        let mut attr = MaybeUninit::<libc::pthread_attr_t>::uninit();
        // SAFETY: `attr` is initialised before use and destroyed once; `start` takes back the box behind `arg`
        // exactly once, and here it is taken back only when no thread was started.
        unsafe {
            let r = libc::pthread_attr_init(attr.as_mut_ptr());
            if r != 0 {
                drop(Box::from_raw(arg));
                return Err(io::Error::from_raw_os_error(r));
            }
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
            let size = stack.max(libc::PTHREAD_STACK_MIN).div_ceil(page) * page;
            let mut r = libc::pthread_attr_setstacksize(attr.as_mut_ptr(), size);
            let mut id: libc::pthread_t = 0;
            if r == 0 {
                r = libc::pthread_create(&mut id, attr.as_ptr(), start, arg.cast());
            }
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            if r != 0 {
                drop(Box::from_raw(arg));
                return Err(io::Error::from_raw_os_error(r));
            }
            Ok(Handle { id, joined: false })
        }
    }

    /// The thread's function: nothing unwinds out of it; a panic's payload is its return value.
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        // SAFETY: `spawn` gave up this box for this thread alone.
        let main = unsafe { Box::from_raw(arg.cast::<Main>()) };
        match catch_unwind(AssertUnwindSafe(main)) {
            Ok(()) => std::ptr::null_mut(),
            Err(payload) => Box::into_raw(Box::new(payload)).cast(),
        }
    }

    fn name_self(name: &str) {
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        if let Ok(c) = CString::new(&name[..end]) {
            // SAFETY: a NUL-terminated name of at most 15 bytes for the calling thread.
            unsafe { libc::pthread_setname_np(libc::pthread_self(), c.as_ptr()) };
        }
    }

    pub(super) fn stack_bottom() -> Option<usize> {
        let mut attr = MaybeUninit::<libc::pthread_attr_t>::uninit();
        // SAFETY: `attr` is filled by `pthread_getattr_np` for the calling thread before it is read, and
        // destroyed once; the out-pointers are valid locals.
        unsafe {
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                return None;
            }
            let (mut addr, mut size) = (std::ptr::null_mut::<c_void>(), 0usize);
            let r = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
            libc::pthread_attr_destroy(attr.as_mut_ptr());
            (r == 0 && !addr.is_null()).then_some(addr as usize)
        }
    }

    pub(super) fn release_stack_below(bottom: usize, keep: usize) {
        let here = 0u8;
        let sp = std::ptr::addr_of!(here) as usize;
        let page = usize::try_from(
            // SAFETY: `sysconf` only reads a system setting.
            unsafe { libc::sysconf(libc::_SC_PAGESIZE) },
        )
        .unwrap_or(4096);
        let end = sp.saturating_sub(keep) / page * page;
        let start = end
            .saturating_sub(super::RELEASE_WINDOW)
            .max(bottom.div_ceil(page) * page);
        if start >= end {
            return;
        }
        // SAFETY: [start, end) lies within the calling thread's own stack (at or above its bottom) and below
        // `keep` bytes under this frame: no live data is there, and discarding it leaves the pages mapped, to
        // be refilled with zeros on their next touch.
        unsafe { libc::madvise(start as *mut c_void, end - start, libc::MADV_DONTNEED) };
    }

    pub(super) fn join(mut h: Handle) -> std::thread::Result<()> {
        h.joined = true;
        let mut ret: *mut c_void = std::ptr::null_mut();
        // SAFETY: a thread this module started and nobody joined or detached (`joined` was false).
        let r = unsafe { libc::pthread_join(h.id, &mut ret) };
        if r != 0 {
            return Err(Box::new(io::Error::from_raw_os_error(r).to_string()));
        }
        if ret.is_null() {
            Ok(())
        } else {
            // SAFETY: `start` returned a boxed payload it gave up.
            Err(*unsafe { Box::from_raw(ret.cast::<Payload>()) })
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    pub(super) type Handle = std::thread::JoinHandle<()>;

    pub(super) fn spawn(
        name: String,
        stack: usize,
        main: Box<dyn FnOnce() + Send>,
    ) -> io::Result<Handle> {
        std::thread::Builder::new()
            .name(name)
            .stack_size(stack)
            .spawn(main)
    }

    pub(super) fn join(h: Handle) -> std::thread::Result<()> {
        h.join()
    }

    pub(super) fn stack_bottom() -> Option<usize> {
        None
    }

    pub(super) fn release_stack_below(_bottom: usize, _keep: usize) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_runs_its_function_under_its_name_and_join_waits_for_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = spawn("sd-dev-kitchen-light-1".into(), 64 * 1024, move || {
            let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
            tx.send(comm).unwrap();
        })
        .unwrap();
        t.join().unwrap();
        assert_eq!(rx.recv().unwrap().trim_end(), "sd-dev-kitchen-");
    }

    #[test]
    fn join_returns_a_panics_payload() {
        let t = spawn("sd-dev-x".into(), 64 * 1024, || panic!("driver bug")).unwrap();
        let payload = t.join().unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"driver bug"));
    }

    /// Whether the calling thread has no alternate signal stack.
    fn no_altstack() -> bool {
        let mut ss = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: 0,
            ss_size: 0,
        };
        // SAFETY: only reads the calling thread's setting into a valid `stack_t`.
        assert_eq!(unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) }, 0);
        ss.ss_flags & libc::SS_DISABLE != 0
    }

    /// The point of the module. This test binary's `main` is Rust's, so std gives its own threads one.
    #[test]
    fn the_thread_has_no_alternate_signal_stack_where_std_gives_one() {
        let by_std = std::thread::spawn(no_altstack).join().unwrap();
        assert!(!by_std, "std set none up here: the comparison says nothing");
        let (tx, rx) = std::sync::mpsc::channel();
        spawn("sd-dev-y".into(), 64 * 1024, move || {
            tx.send(no_altstack()).unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
        assert!(rx.recv().unwrap(), "an alternate signal stack was set up");
    }

    #[test]
    fn the_stack_is_at_least_the_size_asked_rounded_to_a_page() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn("sd-dev-z".into(), 100 * 1024 + 1, move || {
            let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
            let mut size = 0usize;
            // SAFETY: the calling thread's attributes, read into initialised memory and destroyed once.
            unsafe {
                assert_eq!(
                    libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()),
                    0
                );
                libc::pthread_attr_getstacksize(attr.as_ptr(), &mut size);
                libc::pthread_attr_destroy(attr.as_mut_ptr());
            }
            tx.send(size).unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
        // glibc may hand over a larger stack it kept from an ended thread, never its default (8 MiB here).
        let size = rx.recv().unwrap();
        assert!(
            (104 * 1024..1024 * 1024).contains(&size) && size % 4096 == 0,
            "{size}"
        );
    }

    /// Writes `N` bytes in a frame of their own; their address.
    #[inline(never)]
    fn deep_frame<const N: usize>(fill: u8) -> usize {
        let mut buf = [fill; N];
        std::hint::black_box(&mut buf);
        buf.as_ptr() as usize
    }

    /// Whether the page at `addr` is resident.
    fn resident(addr: usize) -> bool {
        let page = addr / 4096 * 4096;
        let mut v = 0u8;
        // SAFETY: one page of the calling thread's own stack mapping; `v` takes its one status byte.
        assert_eq!(
            unsafe { libc::mincore(page as *mut libc::c_void, 4096, &mut v) },
            0
        );
        v & 1 == 1
    }

    #[test]
    fn stack_pages_below_the_frame_go_back_and_come_again_zeroed() {
        let (tx, rx) = std::sync::mpsc::channel();
        spawn("sd-dev-s".into(), 256 * 1024, move || {
            let bottom = stack_bottom().expect("the worker's stack is known");
            let deep = deep_frame::<24576>(7);
            let touched = resident(deep);
            release_stack_below(bottom, 2048);
            let released = !resident(deep);
            // Used again as any fresh page: the call works, and its page is back.
            let again = deep_frame::<24576>(9) == deep && resident(deep);
            tx.send((touched, released, again, deep > bottom)).unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(rx.recv().unwrap(), (true, true, true, true));
    }
}
