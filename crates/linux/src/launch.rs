//! Launching a program held before its exec: a forked child waits on a pipe until [`WaitingChild::go`],
//! so that per-task events (the samplers of `numaff profile`) can be opened on it before it runs.
//!
//! The program is not traced (no ptrace): the child blocks in `read` on a pipe, then execs. If the
//! parent dies before saying go, the pipe's end-of-file lets the program run on, unobserved.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// Why a program could not be launched, or waited for.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// An argument of the command contains a NUL byte (exec takes C strings).
    #[error("an argument contains a NUL byte")]
    NulInArgument,
    /// An extra environment variable contains a NUL byte; the variable's name.
    #[error("environment variable {0} contains a NUL byte")]
    NulInEnv(String),
    /// pipe2 failed (usually EMFILE or ENFILE: too many open files).
    #[error("cannot create a pipe: {0}")]
    Pipe(io::Error),
    /// fork failed (EAGAIN: the process limit; ENOMEM).
    #[error("cannot fork: {0}")]
    Fork(io::Error),
    /// The child's exec failed (ENOENT: no such program; EACCES: not executable).
    #[error("exec failed: {0}")]
    Exec(io::Error),
    /// waitpid failed on the child.
    #[error("cannot wait for the program: {0}")]
    Wait(io::Error),
}

/// A forked child that waits for [`WaitingChild::go`] before it execs the program.
pub struct WaitingChild {
    pid: i32,
    go_fd: i32,
    err_fd: i32,
}

impl WaitingChild {
    /// Forks a child that will exec `command` (looked up in `PATH`, as execvp does) with this
    /// process's environment and `extra_env` set over it, once [`Self::go`] is called.
    ///
    /// Call it while the calling process has one thread: between fork and exec the child only makes
    /// async-signal-safe calls on buffers prepared before the fork.
    ///
    /// # Errors
    ///
    /// [`LaunchError::NulInArgument`] or [`LaunchError::NulInEnv`] when a string cannot be passed
    /// to exec, [`LaunchError::Pipe`] or [`LaunchError::Fork`] when the kernel refuses the pipes or
    /// the fork. A program that does not exist is reported by [`Self::go`], not here.
    pub fn fork(command: &[OsString], extra_env: &[(String, String)]) -> Result<Self, LaunchError> {
        let args: Vec<CString> = command
            .iter()
            .map(|a| CString::new(a.as_bytes()).map_err(|_| LaunchError::NulInArgument))
            .collect::<Result<_, _>>()?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // The program's environment: this process's, with `extra_env` set over it (built before
        // the fork).
        let mut env: Vec<CString> = Vec::new();
        for (k, v) in std::env::vars_os() {
            if extra_env
                .iter()
                .any(|(ek, _)| k.as_bytes() == ek.as_bytes())
            {
                continue;
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            if let Ok(c) = CString::new(kv) {
                env.push(c);
            }
        }
        for (k, v) in extra_env {
            env.push(
                CString::new(format!("{k}={v}")).map_err(|_| LaunchError::NulInEnv(k.clone()))?,
            );
        }
        let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let mut go = [0i32; 2];
        let mut err = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the arrays, which live across the calls.
        unsafe {
            if libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) != 0
                || libc::pipe2(err.as_mut_ptr(), libc::O_CLOEXEC) != 0
            {
                return Err(LaunchError::Pipe(io::Error::last_os_error()));
            }
        }
        // SAFETY: between fork and exec the child only makes async-signal-safe calls (read, close,
        // execvpe on buffers prepared before the fork, write, _exit); the caller has no other
        // threads.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LaunchError::Fork(io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                libc::close(go[1]);
                libc::close(err[0]);
                let mut b = 0u8;
                // Go on EOF too: if the parent dies, the program runs unobserved.
                while libc::read(go[0], (&mut b as *mut u8).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::close(go[0]);
                libc::execvpe(argv[0], argv.as_ptr(), envp.as_ptr());
                let e = *libc::__errno_location();
                libc::write(err[1], (&e as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        // SAFETY: closing our copies of the child's ends.
        unsafe {
            libc::close(go[0]);
            libc::close(err[1]);
        }
        Ok(WaitingChild {
            pid,
            go_fd: go[1],
            err_fd: err[0],
        })
    }

    /// The child's pid (the program's, once it has exec'd).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lets the child exec, and waits until the exec has succeeded or failed.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Exec`] with the exec's errno when the program could not be started; the
    /// child has then exited (it is reaped here if it already has).
    pub fn go(&mut self) -> Result<(), LaunchError> {
        let mut e = 0i32;
        // SAFETY: writes one byte from and reads 4 bytes into live locals; the fds are ours.
        let n = unsafe {
            libc::write(self.go_fd, [1u8].as_ptr().cast(), 1);
            libc::close(self.go_fd);
            self.go_fd = -1;
            let n = libc::read(self.err_fd, (&mut e as *mut i32).cast(), 4);
            libc::close(self.err_fd);
            self.err_fd = -1;
            n
        };
        if n == 4 {
            let _ = self.try_wait();
            return Err(LaunchError::Exec(io::Error::from_raw_os_error(e)));
        }
        Ok(())
    }

    /// The wait status (as waitpid gives it), once the child has exited; `None` while it runs.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Wait`] when waitpid fails (ECHILD: the child was already reaped).
    pub fn try_wait(&self) -> Result<Option<i32>, LaunchError> {
        let mut st = 0;
        // SAFETY: waitpid writes the status into a live local.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        match r {
            0 => Ok(None),
            r if r == self.pid => Ok(Some(st)),
            _ => Err(LaunchError::Wait(io::Error::last_os_error())),
        }
    }

    /// Kills a child that has not exec'd yet (e.g. the events could not be opened on it) and reaps
    /// it. Dropping a child that was never told to go does the same.
    pub fn kill(self) {
        drop(self);
    }
}

impl Drop for WaitingChild {
    /// A child never told to go is killed and reaped: an error in the parent before [`Self::go`]
    /// must not leave the program running on, unobserved.
    fn drop(&mut self) {
        if self.go_fd < 0 {
            return;
        }
        // SAFETY: plain syscalls on our own child and fds.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
            libc::close(self.go_fd);
            libc::close(self.err_fd);
        }
        self.go_fd = -1;
        self.err_fd = -1;
    }
}
