//! A multi-node NUMA guest under QEMU (TCG): its shape, files and kernel arguments, and one run of
//! a command in it, returning the command's output, exit status and the guest's boot+run seconds.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::host::{self, FileLock};
use crate::initramfs::Initramfs;
use crate::kernel::{self, Kernel};

/// The QEMU binary the harness runs.
pub const QEMU: &str = "qemu-system-x86_64";

/// Node distance between two different nodes when no matrix is given (local is 10).
pub const DEFAULT_REMOTE_DISTANCE: u32 = 21;

/// One guest at a time in this process; also remembers the kernel once resolved.
static RUNNING: Mutex<Option<Kernel>> = Mutex::new(None);

/// A guest machine to boot: `nodes` NUMA nodes of `cpus_per_node` cpus each.
#[derive(Clone, Debug)]
pub struct Guest {
    cpus_per_node: usize,
    node_mib: Vec<u64>,
    distances: Option<Vec<Vec<u32>>>,
    files: Vec<(PathBuf, String)>,
    contents: Vec<(String, Vec<u8>, u32)>,
    kernel_args: Vec<String>,
    timeout: Duration,
}

/// What one run of a command in a guest gave.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestRun {
    /// The command's stdout and stderr, as printed on the guest's serial console (text: the
    /// console's tty turns `\n` into `\r\n`, and every `\r` is dropped here).
    pub output: String,
    /// The command's exit status (128 + signal when killed by a signal).
    pub exit_code: i32,
    /// Wall-clock seconds from starting QEMU to its exit (boot + run + power-off).
    pub seconds: f64,
}

impl Guest {
    /// A guest of `nodes` nodes x `cpus_per_node` cpus x `mem_mib` MiB per node, 60 s timeout.
    pub fn new(nodes: usize, cpus_per_node: usize, mem_mib: u64) -> Guest {
        Guest {
            cpus_per_node,
            node_mib: vec![mem_mib; nodes],
            distances: None,
            files: Vec::new(),
            contents: Vec::new(),
            kernel_args: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }

    /// Gives node `node` `mib` MiB instead of the default size (ignored for a node that does not exist;
    /// `run` reports it).
    pub fn node_memory(mut self, node: usize, mib: u64) -> Guest {
        if node >= self.node_mib.len() {
            self.node_mib.resize(node + 1, 0);
        }
        self.node_mib[node] = mib;
        self
    }

    /// The node distance matrix (SLIT): `matrix[i][j]` from node i to node j; 10 on the diagonal.
    pub fn distances<R: AsRef<[u32]>>(mut self, matrix: &[R]) -> Guest {
        self.distances = Some(matrix.iter().map(|r| r.as_ref().to_vec()).collect());
        self
    }

    /// Copies the host file `host` to `guest_path` (absolute) in the guest, with the shared
    /// libraries it needs.
    pub fn file(mut self, host: impl AsRef<Path>, guest_path: &str) -> Guest {
        self.files
            .push((host.as_ref().to_path_buf(), guest_path.to_string()));
        self
    }

    /// Puts `bytes` at `guest_path` in the guest with permission bits `mode` (e.g. a script, 0o755).
    pub fn contents(mut self, guest_path: &str, bytes: impl Into<Vec<u8>>, mode: u32) -> Guest {
        self.contents
            .push((guest_path.to_string(), bytes.into(), mode));
        self
    }

    /// Appends `arg` to the guest kernel's command line (e.g. `transparent_hugepage=never`).
    pub fn kernel_arg(mut self, arg: &str) -> Guest {
        self.kernel_args.push(arg.to_string());
        self
    }

    /// Seconds after which QEMU is killed and `run` fails with [`Error::Timeout`].
    pub fn timeout(mut self, secs: u64) -> Guest {
        self.timeout = Duration::from_secs(secs);
        self
    }

    /// The shape in words, e.g. `2 nodes x 2 cpus x 256 MiB` (or `256+64 MiB` when sizes differ).
    pub fn shape(&self) -> String {
        let n = self.node_mib.len();
        let mut sizes: Vec<String> = Vec::new();
        for m in &self.node_mib {
            let s = m.to_string();
            if sizes.last() != Some(&s) {
                sizes.push(s);
            }
        }
        let plural = |k: usize, w: &str| format!("{k} {w}{}", if k == 1 { "" } else { "s" });
        format!(
            "{} x {} x {} MiB",
            plural(n, "node"),
            plural(self.cpus_per_node, "cpu"),
            sizes.join("+")
        )
    }

    fn validate(&self) -> Result<()> {
        let n = self.node_mib.len();
        if n == 0 || self.cpus_per_node == 0 {
            return Err(Error::Invalid(format!(
                "{}: needs at least one node and one cpu per node",
                self.shape()
            )));
        }
        if let Some(node) = self.node_mib.iter().position(|&m| m < 16) {
            return Err(Error::Invalid(format!(
                "{}: node {node} has {} MiB; give every node at least 16 MiB",
                self.shape(),
                self.node_mib[node]
            )));
        }
        if let Some(m) = &self.distances {
            if m.len() != n || m.iter().any(|r| r.len() != n) {
                return Err(Error::Invalid(format!(
                    "distance matrix must be {n} x {n} for {}",
                    self.shape()
                )));
            }
            for (i, row) in m.iter().enumerate() {
                for (j, &d) in row.iter().enumerate() {
                    let ok = if i == j {
                        d == 10
                    } else {
                        (11..=254).contains(&d)
                    };
                    if !ok {
                        return Err(Error::Invalid(format!(
                            "distance {i} -> {j} is {d}; local must be 10 and remote 11..=254"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// QEMU's arguments for this machine (without kernel, initrd and command line).
    pub fn machine_args(&self) -> Vec<String> {
        let n = self.node_mib.len();
        let cpn = self.cpus_per_node;
        let total: u64 = self.node_mib.iter().sum();
        // One host thread for all vCPUs: with multi-threaded TCG (QEMU 7.2, Debian 12) a vCPU can
        // keep running its stale translation of kernel text another vCPU has just patched (the
        // int3 of a jump-label update), and spins there forever ("soft lockup" at a patched NOP),
        // at boot too. Single-threaded TCG does not (test `a_guest_survives_kernel_text_patched_
        // while_other_cpus_run_it`) and boots as fast; whole test runs take a little longer.
        let mut a: Vec<String> = [
            "-accel",
            "tcg,thread=single",
            "-cpu",
            "max",
            "-nodefaults",
            "-display",
            "none",
            "-monitor",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push("-m".into());
        a.push(format!("{total}M"));
        a.push("-smp".into());
        a.push(format!(
            "cpus={},sockets={n},cores={cpn},threads=1",
            n * cpn
        ));
        for (node, mib) in self.node_mib.iter().enumerate() {
            let (lo, hi) = (node * cpn, node * cpn + cpn - 1);
            a.push("-object".into());
            a.push(format!("memory-backend-ram,id=m{node},size={mib}M"));
            a.push("-numa".into());
            a.push(format!("node,nodeid={node},cpus={lo}-{hi},memdev=m{node}"));
        }
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                let d = match &self.distances {
                    Some(m) => m[i][j],
                    None if j < i => continue, // symmetric default: QEMU mirrors it
                    None => DEFAULT_REMOTE_DISTANCE,
                };
                a.push("-numa".into());
                a.push(format!("dist,src={i},dst={j},val={d}"));
            }
        }
        a
    }

    /// Boots the guest, runs `argv` (`argv[0]` found on the guest's PATH, i.e. busybox applets, or
    /// an absolute path of a file given with [`Guest::file`]) and powers off. One guest runs at a
    /// time across this process and other test binaries sharing the target dir. Prints one line
    /// with the guest's seconds to stderr and appends it to `<target>/testvm/guest-times.log`.
    pub fn run<S: AsRef<str>>(&self, argv: &[S]) -> Result<GuestRun> {
        self.validate()?;
        let argv: Vec<&str> = argv.iter().map(|s| s.as_ref()).collect();
        if argv.is_empty() {
            return Err(Error::Invalid("empty command".into()));
        }
        let qemu = host::find_in_path(QEMU).ok_or_else(|| Error::Missing {
            what: QEMU.into(),
            detail: "not on PATH".into(),
        })?;
        let mut image = Initramfs::new()?;
        for (host_path, guest_path) in &self.files {
            image.add_file(host_path, guest_path)?;
        }
        for (guest_path, bytes, mode) in &self.contents {
            image.add_bytes(guest_path, bytes.clone(), *mode);
        }
        let nonce = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let begin = format!("@@TESTVM_BEGIN_{nonce}@@");
        let end = format!("@@TESTVM_EXIT_{nonce}=");
        image.add_bytes(
            "/init",
            init_script(&argv, &begin, &end, &image.library_dirs()).into_bytes(),
            0o755,
        );

        let mut slot = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        let cache = host::cache_dir()?;
        let kernel = match &*slot {
            Some(k) => k.clone(),
            None => {
                let k = kernel::obtain()?;
                *slot = Some(k.clone());
                k
            }
        };
        let _lock = FileLock::acquire(&cache.join("guest.lock"))?;
        let work = cache.join(format!("run-{}", std::process::id()));
        fs::create_dir_all(&work).map_err(|e| Error::io("cannot create", &work, e))?;
        let initrd = work.join("initrd.gz");
        let built = image.write_gz(&initrd);
        let result = built.and_then(|()| self.boot(&qemu, &kernel, &initrd, &argv, &begin, &end));
        let _ = fs::remove_dir_all(&work);
        let command = argv.join(" ");
        let line = match &result {
            Ok(r) => format!(
                "testvm: {}: boot+run {:.1} s, exit {} ({})",
                self.shape(),
                r.seconds,
                r.exit_code,
                short(&command)
            ),
            Err(Error::Timeout { seconds, .. }) => format!(
                "testvm: {}: boot+run timed out after {seconds} s ({})",
                self.shape(),
                short(&command)
            ),
            Err(_) => format!("testvm: {}: failed ({})", self.shape(), short(&command)),
        };
        // Straight to fd 2, not eprintln!: the test harness captures the macro, and CI logs should
        // show every guest's cost as it happens.
        let _ = writeln!(std::io::stderr(), "{line}");
        let log = cache.join("guest-times.log");
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&log) {
            let _ = writeln!(f, "{line}");
        }
        result
    }

    fn boot(
        &self,
        qemu: &Path,
        kernel: &Kernel,
        initrd: &Path,
        argv: &[&str],
        begin: &str,
        end: &str,
    ) -> Result<GuestRun> {
        // nokaslr: the kernel image (~30 MiB reserved) lands at a fixed physical address, so which
        // node loses that memory does not change from one host CPU to another (with KASLR, node 1
        // of a 256+64 MiB guest showed 29 MiB on one host and 60 MiB on another).
        let mut append = String::from("console=ttyS0 quiet panic=-1 nokaslr");
        for a in &self.kernel_args {
            append.push(' ');
            append.push_str(a);
        }
        let mut cmd = Command::new(qemu);
        cmd.args(self.machine_args())
            .arg("-kernel")
            .arg(&kernel.vmlinuz)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(&append)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let t0 = Instant::now();
        let mut child = cmd.spawn().map_err(|e| Error::Command {
            command: qemu.display().to_string(),
            status: "could not start".into(),
            stderr: e.to_string(),
        })?;
        let console = Arc::new(Mutex::new(Vec::<u8>::new()));
        let mut stdout = child.stdout.take();
        let sink = Arc::clone(&console);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Some(out) = stdout.as_mut() {
                match out.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => sink
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&buf[..k]),
                }
            }
        });
        let mut stderr = child.stderr.take();
        let err_reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(e) = stderr.as_mut() {
                let _ = e.read_to_end(&mut s);
            }
            String::from_utf8_lossy(&s).into_owned()
        });
        let end_bytes = end.as_bytes();
        let mut marker_seen: Option<Instant> = None;
        let mut scanned = 0usize;
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) => {}
                Err(_) => break None,
            }
            let now = Instant::now();
            if marker_seen.is_none() {
                let c = console.lock().unwrap_or_else(|e| e.into_inner());
                if c[scanned..]
                    .windows(end_bytes.len())
                    .any(|w| w == end_bytes)
                {
                    marker_seen = Some(now);
                }
                // Only the new bytes next time (keeping a marker's length of overlap).
                scanned = c.len().saturating_sub(end_bytes.len());
            }
            // The payload finished but the guest did not power off: do not wait for the timeout.
            let stuck = marker_seen.is_some_and(|t| now - t > Duration::from_secs(10));
            if now - t0 > self.timeout || stuck {
                timed_out = !stuck;
                let _ = child.kill();
                break child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let seconds = t0.elapsed().as_secs_f64();
        let _ = reader.join();
        let qemu_stderr = err_reader.join().unwrap_or_default();
        let text = {
            let c = console.lock().unwrap_or_else(|e| e.into_inner());
            String::from_utf8_lossy(&c).replace('\r', "")
        };
        let command = argv.join(" ");
        if let Some((output, exit_code)) = parse_console(&text, begin, end) {
            return Ok(GuestRun {
                output,
                exit_code,
                seconds,
            });
        }
        let tail = tail_lines(&text, 30);
        if timed_out {
            return Err(Error::Timeout {
                shape: self.shape(),
                seconds: self.timeout.as_secs(),
                command,
                hint: kernel_stuck_hint(&text),
                console: tail,
            });
        }
        Err(Error::NoResult {
            shape: self.shape(),
            status: status.map_or("unknown status".into(), |s| s.to_string()),
            command,
            stderr: qemu_stderr.trim().to_string(),
            console: tail,
        })
    }
}

/// What a timed-out guest's console says of the kernel itself: a soft lockup or an RCU stall means
/// the guest kernel stopped scheduling, whatever the payload did (the TCG note in `machine_args`).
fn kernel_stuck_hint(console: &str) -> String {
    let stuck = [
        "soft lockup",
        "rcu_sched detected stalls",
        "rcu_preempt detected stalls",
    ];
    match stuck.iter().find(|s| console.contains(*s)) {
        Some(s) => format!(
            ": the guest kernel itself hung ({s} on its console), not only the payload; \
             a problem of the emulation if the payload cannot cause it"
        ),
        None => String::new(),
    }
}

fn short(s: &str) -> String {
    let s = &s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s.to_string()
    }
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The guest's /init: mounts, runs the command between two markers, prints its status, powers off.
fn init_script(argv: &[&str], begin: &str, end: &str, lib_dirs: &[String]) -> String {
    let command: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
    let ld_path = if lib_dirs.is_empty() {
        String::new()
    } else {
        format!(
            "export LD_LIBRARY_PATH={}\n",
            shell_quote(&lib_dirs.join(":"))
        )
    };
    format!(
        r#"#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
{ld_path}mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# The initramfs root is already in RAM and writable: /tmp needs no tmpfs of its own, and a tmpfs
# there would hide the files a test put under /tmp (a checkout under /tmp, as CI's may be).
mkdir -p /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Only emergencies on the console while the command runs: its output stays whole.
echo 1 > /proc/sys/kernel/printk
cd /
echo "{begin}"
{command}
rc=$?
echo
echo "{end}$rc@@"
sync
poweroff -f
"#,
        command = command.join(" ")
    )
}

/// The command's output and status from the console text, or None without both markers.
pub fn parse_console(text: &str, begin: &str, end: &str) -> Option<(String, i32)> {
    let start = text.find(&format!("{begin}\n"))? + begin.len() + 1;
    let stop = start + text[start..].find(end)?;
    let code: String = text[stop + end.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let code = code.parse().ok()?;
    let mut output = text[start..stop].to_string();
    // The init script prints one newline before the exit marker.
    if output.ends_with('\n') {
        output.pop();
    }
    Some((output, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_args_have_one_backend_and_node_per_node_and_distances() {
        let g = Guest::new(2, 2, 256).node_memory(1, 64);
        let a = g.machine_args().join(" ");
        assert!(a.contains("-m 320M"), "{a}");
        assert!(a.contains("cpus=4,sockets=2,cores=2,threads=1"), "{a}");
        assert!(a.contains("memory-backend-ram,id=m1,size=64M"), "{a}");
        assert!(a.contains("node,nodeid=1,cpus=2-3,memdev=m1"), "{a}");
        assert!(a.contains("dist,src=0,dst=1,val=21"), "{a}");
        assert_eq!(g.shape(), "2 nodes x 2 cpus x 256+64 MiB");
        let g = Guest::new(2, 1, 128).distances(&[[10, 30], [40, 10]]);
        let a = g.machine_args().join(" ");
        assert!(a.contains("dist,src=0,dst=1,val=30") && a.contains("dist,src=1,dst=0,val=40"));
        assert_eq!(g.shape(), "2 nodes x 1 cpu x 128 MiB");
    }

    #[test]
    fn a_timeout_says_when_the_guest_kernel_itself_hung() {
        // The console of a guest that hung at boot under multi-threaded TCG.
        let lockup =
            "[   28.550972] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [kworker/0:1:18]";
        assert!(kernel_stuck_hint(lockup).contains("kernel itself hung (soft lockup"));
        let rcu = "[   21.0] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:";
        assert!(kernel_stuck_hint(rcu).contains("rcu_sched detected stalls"));
        assert_eq!(kernel_stuck_hint("@@TESTVM_BEGIN_1@@\nstarted\n"), "");
        let e = Error::Timeout {
            shape: "2 nodes".into(),
            seconds: 60,
            command: "true".into(),
            hint: kernel_stuck_hint(lockup),
            console: lockup.into(),
        };
        assert!(
            e.to_string()
                .contains("(QEMU killed): the guest kernel itself hung"),
            "{e}"
        );
    }

    #[test]
    fn bad_shapes_are_refused_before_booting() {
        let bad = Guest::new(2, 1, 128).distances(&[[10, 21, 21], [21, 10, 21]]);
        assert!(matches!(bad.run(&["true"]), Err(Error::Invalid(_))));
        let bad = Guest::new(2, 1, 128).distances(&[[10, 5], [5, 10]]);
        assert!(matches!(bad.run(&["true"]), Err(Error::Invalid(_))));
        assert!(matches!(
            Guest::new(0, 1, 128).run(&["true"]),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn console_parsing_keeps_output_whole() {
        let text = "boot noise\n@@B@@\nline 1\nline 2\n\n@@E=3@@\npower off\n";
        assert_eq!(
            parse_console(text, "@@B@@", "@@E="),
            Some(("line 1\nline 2\n".to_string(), 3))
        );
        let text = "@@B@@\nno newline\n@@E=0@@\n";
        assert_eq!(
            parse_console(text, "@@B@@", "@@E="),
            Some(("no newline".to_string(), 0))
        );
        assert_eq!(parse_console("@@B@@\nhalf", "@@B@@", "@@E="), None);
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
