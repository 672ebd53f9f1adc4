//! `numaff topo` in a 2-node QEMU guest, on a real Linux kernel, where
//! hwloc and sysfs both see two nodes and `--measure` fills 2 x 2 latency and bandwidth matrices.
#![allow(clippy::unwrap_used)] // helpers of tests

use std::collections::BTreeMap;

use numaff_testvm::Guest;

/// One guest run for all three commands (a boot costs seconds): each command's stdout lands
/// between `@@BEGIN name@@` and `@@END name rc@@`; its stderr is printed after, for failures.
const SCRIPT: &str = r#"
run() {
  name=$1; shift
  "$@" > /tmp/$name.out 2> /tmp/$name.err
  rc=$?
  echo "@@BEGIN $name@@"; cat /tmp/$name.out; echo; echo "@@END $name $rc@@"
  echo "@@STDERR $name@@"; cat /tmp/$name.err
}
run hwloc /numaff topo --json
run sysfs /numaff topo --sysfs / --json
run measure /numaff topo --measure --buffer "16 MiB" --repeats 1 --json
"#;

/// name -> (exit status, stdout) from the guest's output.
fn sections(output: &str) -> BTreeMap<String, (i32, String)> {
    let mut found = BTreeMap::new();
    let mut rest = output;
    while let Some(b) = rest.find("@@BEGIN ") {
        let after = &rest[b + 8..];
        let name_end = after.find("@@\n").unwrap();
        let name = after[..name_end].to_string();
        let body = &after[name_end + 3..];
        let end_tag = format!("@@END {name} ");
        let e = body.find(&end_tag).unwrap();
        let rc: i32 = body[e + end_tag.len()..]
            .split("@@")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        found.insert(name, (rc, body[..e].to_string()));
        rest = &body[e..];
    }
    found
}

fn json(sections: &BTreeMap<String, (i32, String)>, name: &str, all: &str) -> serde_json::Value {
    let (rc, out) = sections
        .get(name)
        .unwrap_or_else(|| panic!("no {name} section in guest output:\n{all}"));
    assert_eq!(*rc, 0, "numaff ({name}) failed in the guest:\n{all}");
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{name}: invalid JSON ({e}):\n{all}"))
}

/// The ids of a kernel cpulist ("0-1", "0,1", "0-2,5").
fn cpulist(text: &str) -> Vec<u32> {
    let mut ids = Vec::new();
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        ids.extend(lo.parse::<u32>().unwrap()..=hi.parse::<u32>().unwrap());
    }
    ids
}

/// The nodes' (id, cpus) of a `topo --json` document.
fn nodes(v: &serde_json::Value) -> Vec<(u64, Vec<u32>)> {
    v["machine"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap(),
                cpulist(n["cpus"].as_str().unwrap()),
            )
        })
        .collect()
}

fn matrix(v: &serde_json::Value, key: &str) -> Vec<Vec<f64>> {
    v["machine"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} matrix: {}", v["machine"]))
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn topo_in_a_two_node_guest_finds_both_nodes_and_their_distances() {
    let guest = Guest::new(2, 2, 256)
        .distances(&[[10, 21], [21, 10]])
        .file(env!("CARGO_BIN_EXE_numaff"), "/numaff")
        .timeout(180);
    let run = guest
        .run(&["sh", "-c", SCRIPT])
        .unwrap_or_else(|e| panic!("{e}"));
    let all = &run.output;
    assert_eq!(run.exit_code, 0, "{all}");
    let s = sections(all);
    let want = vec![(0, vec![0, 1]), (1, vec![2, 3])];

    // hwloc's view (libhwloc and libudev came along through ldd).
    let hwloc = json(&s, "hwloc", all);
    assert_eq!(hwloc["summary"]["nodes"], 2, "{all}");
    assert_eq!(hwloc["summary"]["pus"], 4, "{all}");
    assert_eq!(nodes(&hwloc), want, "{all}");

    // sysfs's view, without hwloc: the same nodes and the distances given to QEMU.
    let sysfs = json(&s, "sysfs", all);
    assert_eq!(sysfs["summary"]["nodes"], 2, "{all}");
    assert_eq!(nodes(&sysfs), want, "{all}");
    assert_eq!(
        sysfs["machine"]["distances"],
        serde_json::json!([[10, 21], [21, 10]]),
        "{all}"
    );

    // Measured matrices: 2 x 2 and all positive. TCG emulates every guest memory access in
    // software on the host's one memory, so local and remote are equally fast: no NUMA factor
    // can be asserted here (real multi-node hardware is the place for that).
    let measured = json(&s, "measure", all);
    for key in ["latency_ns", "bandwidth_mbps"] {
        let m = matrix(&measured, key);
        assert_eq!(m.len(), 2, "{key}: {m:?}");
        for row in &m {
            assert_eq!(row.len(), 2, "{key}: {m:?}");
            assert!(row.iter().all(|&x| x > 0.0), "{key}: {m:?}");
        }
    }
}
