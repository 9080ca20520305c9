//! `Threads`: one emulated device's connection threads, kept once their connection ends and given the next
//! one. A thread costs its start and its exit (stack and signal-stack mappings, `clone`, page faults): with a
//! thread per WebSocket connection, a client that connects 1,000 devices, reads them and leaves (`sdctl
//! status`) made the emulator start and end 1,000 threads every time. A real device serves its connections
//! from slots it keeps, too. Kept threads wait on a condition variable; they end when the device stops.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::lock::lock;

type Job = Box<dyn FnOnce() + Send>;

/// The threads, those waiting for a job counted.
pub(crate) struct Threads {
    shared: Arc<Shared>,
    all: Mutex<Vec<JoinHandle<()>>>,
    stack: usize,
}

/// What the threads wait on. A mutex and a condition variable, not a channel: a crossbeam receiver spins and
/// yields about eight times before it sleeps, and 1,000 connections ending at once made `sched_yield` a fifth
/// of the emulator's CPU.
#[derive(Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    ready: Condvar,
    /// Threads waiting (or about to wait) for a job: a job is queued only for a counted one.
    idle: AtomicUsize,
}

#[derive(Default)]
struct Waiting {
    jobs: VecDeque<Job>,
    /// No job is taken any more; waiting threads end.
    stopping: bool,
}

/// A connection's thread only parses small frames and builds small answers.
const STACK: usize = 256 * 1024;

impl Default for Threads {
    fn default() -> Self {
        Threads::new(STACK)
    }
}

impl Threads {
    /// Threads with `stack` bytes of stack each.
    pub(crate) fn new(stack: usize) -> Threads {
        Threads {
            shared: Arc::default(),
            all: Mutex::default(),
            stack,
        }
    }

    /// Runs `job` on a waiting thread, else on a new one named `name()`; an error when no thread can start
    /// or the device is stopping (the job is dropped then).
    pub(crate) fn run(
        &self,
        name: impl FnOnce() -> String,
        job: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        let job: Job = Box::new(job);
        // Held until the new thread is listed, so `stop` joins it.
        let mut waiting = lock(&self.shared.waiting);
        if waiting.stopping {
            return Err(io::Error::other("the device is stopping"));
        }
        let claimed = self
            .shared
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if claimed {
            waiting.jobs.push_back(job);
            drop(waiting);
            self.shared.ready.notify_one();
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name(name())
            .stack_size(self.stack)
            .spawn(move || serve(job, &shared))?;
        lock(&self.all).push(handle);
        Ok(())
    }

    /// Takes no more jobs and joins every thread once the jobs running now have ended.
    pub(crate) fn stop(&self) {
        lock(&self.shared.waiting).stopping = true;
        self.shared.ready.notify_all();
        let all = std::mem::take(&mut *lock(&self.all));
        for t in all {
            let _ = t.join();
        }
    }

    /// Threads started so far and not ended (running a job or waiting for one).
    #[cfg(test)]
    fn count(&self) -> usize {
        lock(&self.all).len()
    }
}

/// A thread's life: its first job, then each job it is given, until the device stops.
fn serve(first: Job, shared: &Shared) {
    let mut job = first;
    loop {
        job();
        shared.idle.fetch_add(1, Ordering::SeqCst);
        let mut waiting = lock(&shared.waiting);
        job = loop {
            if let Some(next) = waiting.jobs.pop_front() {
                break next;
            }
            if waiting.stopping {
                return;
            }
            waiting = shared
                .ready
                .wait(waiting)
                .unwrap_or_else(|e| e.into_inner());
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `n` threads wait for a job.
    fn wait_idle(threads: &Threads, n: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while threads.shared.idle.load(Ordering::SeqCst) != n {
            assert!(std::time::Instant::now() < deadline, "never waited");
            std::thread::yield_now();
        }
    }

    /// Runs a job that tells which thread ran it, and waits for the answer.
    fn which_thread(threads: &Threads) -> std::thread::ThreadId {
        let (tx, rx) = crossbeam_channel::bounded(1);
        threads
            .run(
                || "t".into(),
                move || tx.send(std::thread::current().id()).unwrap(),
            )
            .unwrap();
        rx.recv().unwrap()
    }

    #[test]
    fn a_thread_whose_job_ended_takes_the_next_and_stop_joins_them_all() {
        let threads = Threads::new(64 * 1024);
        let who = which_thread(&threads);
        // The first thread now waits (counted once its job returned): the next job goes to it.
        wait_idle(&threads, 1);
        assert_eq!(which_thread(&threads), who, "the kept thread ran it");
        assert_eq!(threads.count(), 1);

        // Two at once: a second thread starts while the first is busy.
        wait_idle(&threads, 1);
        let (release, hold) = crossbeam_channel::bounded::<()>(0);
        let (started, busy) = crossbeam_channel::bounded(1);
        threads
            .run(
                || "t".into(),
                move || {
                    started.send(std::thread::current().id()).unwrap();
                    let _ = hold.recv();
                },
            )
            .unwrap();
        assert_eq!(busy.recv().unwrap(), who, "the waiting thread took it");
        assert_ne!(
            which_thread(&threads),
            who,
            "the busy thread was not given it"
        );
        assert_eq!(threads.count(), 2);
        drop(release);

        // Joins both, the busy one once its job has ended.
        threads.stop();
        assert_eq!(threads.count(), 0);
        assert!(
            threads.run(|| "t".into(), || {}).is_err(),
            "a stopped device takes no job"
        );
    }

    #[test]
    fn a_job_that_panics_ends_its_thread_and_the_next_job_gets_another() {
        let threads = Threads::new(64 * 1024);
        let (tx, rx) = crossbeam_channel::bounded(1);
        threads
            .run(
                || "t".into(),
                move || {
                    tx.send(std::thread::current().id()).unwrap();
                    panic!("the job failed");
                },
            )
            .unwrap();
        let failed = rx.recv().unwrap();
        assert_ne!(which_thread(&threads), failed);
        threads.stop();
        assert_eq!(threads.count(), 0);
    }
}
