//! The libnumaff versions and the MApp versions of both examples run in a 4-node QEMU
//! guest (4 nodes x 1 cpu, OMP_NUM_THREADS=4) with their arrays placed as chosen, and print there
//! exactly what the plain versions print here.
//!
//! Each program, run with EXAMPLES_PLACEMENT set, asks the kernel where every page of each of its
//! arrays is (examples/placement.h: move_pages with nodes = NULL) and prints per array the pages per
//! node and an FNV-1a hash of the page -> node sequence. The test recomputes both from the policy's
//! pure page -> node function (numaff::map): cyclic, or bind_block with one block of rows per
//! thread, thread t on node t (in this guest cpu t is node t's only cpu, and libnumaff pins thread t
//! to it; guest_placement.rs checks that pinning). MApp's choices come from its report: cg.c for
//! minas-opteron (cyclic, every large array), stencil.c for kmaf-opteron (bind_block, u and v).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use numaff::map;
use numaff_mapp::Policy;
use numaff_testvm::Guest;

const NODES: u32 = 4;
const PAGE: u64 = 4096;
/// Small problems: the guest is emulated (TCG). The MApp versions still place their full static
/// arrays (cg: 144 MiB, stencil: 72 MiB).
const CG_ARGS: [&str; 2] = ["16384", "5"];
const STENCIL_ARGS: [&str; 2] = ["32", "5"];
/// stencil.c's NMAX: the MApp version's planes are NMAX x NMAX doubles.
const STENCIL_NMAX: u64 = 168;

/// Where a policy puts page `i` of an array of `bytes` bytes (a node id of the guest).
#[derive(Clone, Copy, Debug)]
enum Want {
    Cyclic,
    /// bind_block over rows of this many bytes, NODES threads.
    BindBlock(u64),
}

impl Want {
    fn sequence(self, bytes: u64) -> Vec<u8> {
        let pages = bytes.div_ceil(PAGE);
        (0..pages)
            .map(|i| match self {
                Want::Cyclic => map::cyclic(i, NODES) as u8,
                Want::BindBlock(row_bytes) => {
                    let rows = bytes / row_bytes;
                    let block = map::auto_block_rows(rows, NODES);
                    map::bind_block(i, PAGE, row_bytes, block, NODES) as u8
                }
            })
            .collect()
    }
}

fn fnv(seq: &[u8]) -> u64 {
    seq.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One PLACE line: bytes, pages, absent, pages per node, hash.
#[derive(Debug)]
struct Placed {
    bytes: u64,
    pages: u64,
    absent: u64,
    nodes: BTreeMap<u8, u64>,
    fnv: u64,
}

fn parse_place(line: &str) -> (String, Placed) {
    // PLACE name bytes B pages P absent A nodes N:C ... fnv H
    let w: Vec<&str> = line.split_whitespace().collect();
    let at = |key: &str| w.iter().position(|x| *x == key).unwrap() + 1;
    let fnv_at = at("fnv");
    let nodes = w[at("nodes")..fnv_at - 1]
        .iter()
        .map(|nc| {
            let (n, c) = nc.split_once(':').unwrap();
            (n.parse().unwrap(), c.parse().unwrap())
        })
        .collect();
    (
        w[1].to_string(),
        Placed {
            bytes: w[at("bytes")].parse().unwrap(),
            pages: w[at("pages")].parse().unwrap(),
            absent: w[at("absent")].parse().unwrap(),
            nodes,
            fnv: u64::from_str_radix(w[fnv_at], 16).unwrap(),
        },
    )
}

fn check_placement(program: &str, out: &str, want: &[(&str, Want)]) {
    let placed: BTreeMap<String, Placed> = out
        .lines()
        .filter(|l| l.starts_with("PLACE "))
        .map(parse_place)
        .collect();
    let names: Vec<&str> = placed.keys().map(String::as_str).collect();
    let mut wanted: Vec<&str> = want.iter().map(|(n, _)| *n).collect();
    wanted.sort_unstable();
    assert_eq!(names, wanted, "{program}: arrays shown\n{out}");
    for (name, policy) in want {
        let p = &placed[*name];
        let seq = policy.sequence(p.bytes);
        assert_eq!(p.pages, seq.len() as u64, "{program} {name}: pages\n{out}");
        assert_eq!(p.absent, 0, "{program} {name}: pages not placed\n{out}");
        let mut counts = BTreeMap::new();
        for n in &seq {
            *counts.entry(*n).or_insert(0u64) += 1;
        }
        assert_eq!(
            p.nodes, counts,
            "{program} {name} ({policy:?}): pages per node (left) vs the policy\n{out}"
        );
        assert_eq!(
            p.fnv,
            fnv(&seq),
            "{program} {name} ({policy:?}): page -> node sequence differs from the policy's\n{out}"
        );
    }
}

/// The output of one program in the guest script, and its exit status.
fn section<'a>(out: &'a str, program: &str) -> (&'a str, i32) {
    let begin = format!("@@RUN {program}\n");
    let start = out
        .find(&begin)
        .unwrap_or_else(|| panic!("{program} did not run:\n{out}"))
        + begin.len();
    let end_marker = format!("@@RC {program} ");
    let end = start
        + out[start..]
            .find(&end_marker)
            .unwrap_or_else(|| panic!("{program} did not finish:\n{out}"));
    let rc = out[end + end_marker.len()..]
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (&out[start..end], rc)
}

/// The results a program printed, without the placement lines and libnumaff's statistics.
fn results(out: &str) -> String {
    out.lines()
        .filter(|l| !l.starts_with("PLACE ") && !l.starts_with("numaff: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn host_output(exe: &Path, args: &[&str]) -> String {
    common::run(
        Command::new(exe)
            .args(args)
            .env("OMP_NUM_THREADS", "2")
            .env_remove("EXAMPLES_PLACEMENT"),
    )
}

#[test]
fn examples_placed_as_chosen_in_a_four_node_guest() {
    // In the target dir, whose path the guest mirrors (the programs' rpath points there).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let prefix = dir.path().join("prefix");
    common::make_install(&prefix);
    let build = dir.path().join("build");
    let cg = common::mapp_example("cg", "minas-opteron", &build);
    assert_eq!(cg.decision.policy, Policy::Cyclic);
    let st = common::mapp_example("stencil", "kmaf-opteron", &build);
    assert_eq!(st.decision.policy, Policy::BindBlock);
    common::make_examples(&prefix, &build, &["all", "mapp"]);

    let programs = [
        ("cg_numaff", &CG_ARGS),
        ("cg_mapp", &CG_ARGS),
        ("stencil_numaff", &STENCIL_ARGS),
        ("stencil_mapp", &STENCIL_ARGS),
    ];
    let mut script = String::from("export OMP_NUM_THREADS=4 EXAMPLES_PLACEMENT=1\n");
    // 256 MiB per node: node 0 also holds the kernel and the unpacked initramfs, and with 160 MiB
    // it could fill up before cg_mapp's cyclic arrays (36 MiB a node) were placed (the kernel
    // then put the rest elsewhere).
    let mut guest = Guest::new(NODES as usize, 1, 256).timeout(120);
    for (program, args) in programs {
        guest = guest.file(build.join(program), &format!("/{program}"));
        script.push_str(&format!(
            "echo '@@RUN {program}'; /{program} {}; echo \"@@RC {program} $?\"\n",
            args.join(" ")
        ));
    }
    let run = guest
        .run(&["sh", "-c", &script])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run.output.as_str();
    assert_eq!(run.exit_code, 0, "{out}");

    // What each program printed in the guest is what the plain version prints here.
    for (program, args) in programs {
        let (text, rc) = section(out, program);
        assert_eq!(rc, 0, "{program}:\n{text}");
        let plain = program.split('_').next().unwrap();
        let want = host_output(&build.join(plain), args);
        assert_eq!(
            results(text),
            want,
            "{program} in the guest vs {plain} here"
        );
    }

    // cg_numaff: p cyclic (gathered by every thread), the others bind_block over their elements.
    let (text, _) = section(out, "cg_numaff");
    check_placement(
        "cg_numaff",
        text,
        &[
            ("val", Want::BindBlock(8)),
            ("col", Want::BindBlock(4)),
            ("rowptr", Want::BindBlock(4)),
            ("x", Want::BindBlock(8)),
            ("r", Want::BindBlock(8)),
            ("p", Want::Cyclic),
            ("q", Want::BindBlock(8)),
        ],
    );
    assert!(text.contains("numaff: nodes in use [0, 1, 2, 3]"), "{text}");

    // cg_mapp: MApp's choice for minas-opteron, cyclic on every rewritten array.
    let (text, _) = section(out, "cg_mapp");
    let want: Vec<(&str, Want)> = common::rewritten(&cg)
        .into_iter()
        .map(|n| (n, Want::Cyclic))
        .collect();
    assert_eq!(want.len(), 7);
    check_placement("cg_mapp", text, &want);

    // stencil_numaff: u and v bind_block over planes of n x n doubles.
    let n: u64 = STENCIL_ARGS[0].parse().unwrap();
    let (text, _) = section(out, "stencil_numaff");
    let planes = Want::BindBlock(n * n * 8);
    check_placement("stencil_numaff", text, &[("u", planes), ("v", planes)]);
    assert!(text.contains("numaff: nodes in use [0, 1, 2, 3]"), "{text}");

    // stencil_mapp: MApp's choice for kmaf-opteron, bind_block over the NMAX planes of NMAX x NMAX.
    let (text, _) = section(out, "stencil_mapp");
    let planes = Want::BindBlock(STENCIL_NMAX * STENCIL_NMAX * 8);
    assert_eq!(common::rewritten(&st), ["u", "v"]);
    check_placement("stencil_mapp", text, &[("u", planes), ("v", planes)]);
}
