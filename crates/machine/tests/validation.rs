//! Machine file validation: every validation error of a machine file names the file, the field and the problem.

use numaff_machine::file::{from_toml_str, load};
use numaff_machine::MachineError;

const BASE: &str = r#"
name = "two"
distances = [[10, 21], [21, 10]]
bandwidth_mbps = [[10000.0, 5000.0], [5000.0, 10000.0]]

[[node]]
id = 0
memory = "1 GiB"
cpus = "0-1"

[[node]]
id = 1
memory = "1 GiB"
cpus = "2-3"

[[package]]
id = 0
cores = ["0", "1", "2", "3"]
"#;

/// Loads `text` as "bad.toml" and returns the full error message.
fn error_of(text: &str) -> String {
    match from_toml_str(text, "bad.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn base_machine_file_is_valid() {
    let m = from_toml_str(BASE, "base.toml").unwrap();
    assert_eq!(m.pu_count(), 4);
}

#[test]
fn cpu_in_two_nodes_names_the_node_field() {
    let text = BASE.replace("cpus = \"2-3\"", "cpus = \"1-3\"");
    let msg = error_of(&text);
    assert!(msg.starts_with("bad.toml: "), "{msg}");
    assert!(
        msg.contains("node[1].cpus: cpu 1 is also in node[0]"),
        "{msg}"
    );
}

#[test]
fn distance_matrix_not_square_names_the_row() {
    let text = BASE.replace("[[10, 21], [21, 10]]", "[[10, 21], [21]]");
    let msg = error_of(&text);
    assert!(msg.contains("bad.toml"), "{msg}");
    assert!(
        msg.contains("distances[1]: 1 columns for 2 nodes; the matrix is not square"),
        "{msg}"
    );
    let text = BASE.replace(
        "[[10, 21], [21, 10]]",
        "[[10, 21, 21], [21, 10, 21], [21, 21, 10]]",
    );
    let msg = error_of(&text);
    assert!(msg.contains("distances: 3 rows for 2 nodes"), "{msg}");
}

#[test]
fn zero_distance_off_diagonal_names_the_cell() {
    let text = BASE.replace("[[10, 21], [21, 10]]", "[[10, 0], [21, 10]]");
    let msg = error_of(&text);
    assert!(
        msg.contains("distances[0][1]: zero off the diagonal"),
        "{msg}"
    );
}

#[test]
fn node_without_memory_names_the_node() {
    let text = BASE.replacen("memory = \"1 GiB\"\ncpus = \"2-3\"", "cpus = \"2-3\"", 1);
    let msg = error_of(&text);
    assert!(msg.contains("node[1]: no memory size"), "{msg}");
}

#[test]
fn negative_bandwidth_names_the_cell() {
    let text = BASE.replace("[10000.0, 5000.0], [5000.0", "[10000.0, -5000.0], [5000.0");
    let msg = error_of(&text);
    assert!(
        msg.contains("bandwidth_mbps[0][1]: -5000 is negative"),
        "{msg}"
    );
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let text = BASE.replace("[[node]]\nid = 0", "[[node]]\nid = 0\nspeed = 3");
    let msg = error_of(&text);
    assert!(msg.starts_with("bad.toml: "), "{msg}");
    assert!(msg.contains("unknown field `speed`"), "{msg}");
    assert!(msg.contains("line"), "{msg}");
    let text = format!("colour = \"blue\"\n{BASE}");
    assert!(error_of(&text).contains("unknown field `colour`"));
}

#[test]
fn all_problems_are_reported_at_once() {
    let text = BASE
        .replace("cpus = \"2-3\"", "cpus = \"1-3\"")
        .replace("[[10, 21], [21, 10]]", "[[10, 0], [21, 10]]");
    let err = from_toml_str(&text, "bad.toml").unwrap_err();
    let fields: Vec<&str> = err.problems().iter().map(|p| p.field.as_str()).collect();
    assert!(fields.contains(&"node[1].cpus"), "{fields:?}");
    assert!(fields.contains(&"distances[0][1]"), "{fields:?}");
}

#[test]
fn cpu_without_core_and_core_without_node_are_named() {
    let text = BASE.replace(
        "cores = [\"0\", \"1\", \"2\", \"3\"]",
        "cores = [\"0\", \"1\", \"2\", \"4\"]",
    );
    let msg = error_of(&text);
    assert!(
        msg.contains("package[0].cores[3]: cpu 4 is in no node"),
        "{msg}"
    );
    assert!(
        msg.contains("node[1].cpus: cpu 3 belongs to no core"),
        "{msg}"
    );
}

#[test]
fn missing_file_says_which() {
    let err = load(std::path::Path::new("/nonexistent/m.toml")).unwrap_err();
    assert!(matches!(err, MachineError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/m.toml"), "{err}");
}

#[test]
fn bad_values_never_panic() {
    for text in [
        "",
        "name = 3",
        "name = \"x\"\n[[node]]\nid = -1\nmemory = 1\n",
        "name = \"x\"\n[[node]]\nid = 0\nmemory = \"12 parsecs\"\n",
        "name = \"x\"\n[[node]]\nid = 0\nmemory = 1\ncpus = \"5-2\"\n",
        "name = \"x\"\ndistances = [[-1]]\n[[node]]\nid = 0\nmemory = 1\ncpus = \"0\"\n[[package]]\nid = 0\ncores = [\"0\"]\n",
    ] {
        assert!(from_toml_str(text, "bad.toml").is_err(), "{text}");
    }
}

/// Fuzzing (machine_file target): a matrix with a missing row in a file whose nodes are not in id
/// order made loading panic (the nodes' reordering indexed the short matrix); now it is the shape
/// error every other ragged matrix gets.
#[test]
fn ragged_matrix_with_nodes_out_of_order_is_an_error() {
    let text = BASE
        .replace("id = 0\nmemory", "id = 9\nmemory")
        .replace("distances = [[10, 21], [21, 10]]", "distances = [[10, 21]]");
    let msg = error_of(&text);
    assert!(msg.contains("distances"), "{msg}");
    assert!(msg.contains("1 rows for 2 nodes"), "{msg}");
}

/// Machine files that claim more PUs or nodes than the caps (or ids beyond them) are refused
/// before anything is sized by them, naming the value, the cap and what to do.
#[test]
fn machine_files_beyond_the_caps_are_refused_at_once() {
    let start = std::time::Instant::now();
    let pus = BASE.replace(
        r#"cores = ["0", "1", "2", "3"]"#,
        r#"cores = ["0-3", "4-100003"]"#,
    );
    let e = error_of(&pus);
    assert!(
        e.contains("100004 PUs; numaff takes at most 8192") && e.contains("describe a real"),
        "{e}"
    );
    let id = BASE.replace(
        r#"cores = ["0", "1", "2", "3"]"#,
        r#"cores = ["0", "1", "2", "4000000000"]"#,
    );
    assert!(error_of(&id).contains("PU id 4000000000; PU ids must be below 8192"));
    let node_id = BASE.replace("id = 1\n", "id = 4000000000\n");
    let e = error_of(&node_id);
    assert!(
        e.contains("node id 4000000000; node ids must be below 1024"),
        "{e}"
    );
    let mut many = String::from("name = \"many\"\n");
    for i in 0..2000 {
        many.push_str(&format!("[[node]]\nid = {i}\nmemory = \"1 GiB\"\n"));
    }
    assert!(error_of(&many).contains("2000 NUMA nodes; numaff takes at most 1024"));
    let empty_cores = BASE.replace(
        r#"cores = ["0", "1", "2", "3"]"#,
        &format!("cores = [{}]", vec!["\"\""; 9000].join(",")),
    );
    let e = error_of(&empty_cores);
    assert!(
        e.contains("1 packages of 9000 cores; numaff takes at most 8192"),
        "{e}"
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}
