//! MApp on C sources: which arrays it rewrites, the policy per machine, errors.
#![allow(clippy::unwrap_used)]

use numaff_machine::spec::resolve;
use numaff_mapp::{choose_policy, transform, MappError, Policy};

const FIG32: &str = include_str!("c/fig32.c");

#[test]
fn fig32_rewrites_the_three_large_arrays_and_not_the_small_one() {
    let m = resolve("minas-opteron").unwrap();
    let t = transform(FIG32, &m).unwrap();
    let r = &t.report;
    assert!(r.changed);
    assert_eq!(r.decision.policy, Policy::Cyclic);
    let rewritten: Vec<&str> = r
        .arrays
        .iter()
        .filter(|a| a.rewritten)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(rewritten, ["vel", "vxy", "tem"]);
    let xux = r.arrays.iter().find(|a| a.name == "xux").unwrap();
    assert!(!xux.rewritten);
    assert_eq!(xux.bytes, Some(512));
    assert!(xux.reason.contains("small"), "{}", xux.reason);
    let out = &t.output;
    assert!(out.contains("static double (*vel)[NY];"), "{out}");
    assert!(out.contains("double *vxy;"), "{out}");
    assert!(out.contains("double xux[64];"), "{out}");
    assert!(out.contains("static float (*tem)[NX][NY];"), "{out}");
    assert!(out.contains("#include <numaff.h>"));
    assert!(out.contains("numaff_alloc_2d((size_t)(NX), (size_t)(NY), sizeof(double))"));
    assert!(
        out.contains("numaff_alloc_3d((size_t)(NZ), (size_t)(NX), (size_t)(NY), sizeof(float))")
    );
    assert!(out.contains("(void)numaff_cyclic(tem);"));
    assert!(out.contains("atexit(numaff_mapp_final);"));
    // Everything from the first statement of main on is as it was.
    let body = FIG32.split("    int i, j, k;").nth(1).unwrap();
    assert!(out.ends_with(body));
}

#[test]
fn policy_follows_the_platform() {
    let opteron = choose_policy(&resolve("minas-opteron").unwrap());
    assert_eq!(opteron.policy, Policy::Cyclic, "{}", opteron.reason);
    let altix = choose_policy(&resolve("minas-altix").unwrap());
    assert_eq!(altix.policy, Policy::Cyclic, "{}", altix.reason);
    let hpl = choose_policy(&resolve("laso-hpl").unwrap());
    assert_eq!(hpl.policy, Policy::BindBlock, "{}", hpl.reason);
    assert!(
        hpl.reason.contains("NUMA factor 3.03 > 1.5"),
        "{}",
        hpl.reason
    );
    // kmaf-opteron: NUMA factor 2.29 (high), largest cache 6 MiB: only tem (16 MiB) is eligible.
    let kmaf = resolve("kmaf-opteron").unwrap();
    let t = transform(FIG32, &kmaf).unwrap();
    assert_eq!(t.report.decision.policy, Policy::BindBlock);
    let rewritten: Vec<&str> = t
        .report
        .arrays
        .iter()
        .filter(|a| a.rewritten)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(rewritten, ["tem"]);
    assert!(t.output.contains("(void)numaff_bind_block(tem);"));
    assert!(!t.output.contains("numaff_cyclic"));
    let t = transform(FIG32, &resolve("laso-hpl").unwrap()).unwrap();
    // laso-hpl's largest cache is 25 MiB: only tem (16 MiB) ... is below it too.
    assert!(t.report.arrays.iter().all(|a| !a.rewritten));
    assert_eq!(t.output, FIG32);
}

#[test]
fn syntax_error_names_line_and_column() {
    let src = "#include <stdio.h>\nstatic double a[1 << 20];\nint main(void) {\n  a[0] = 1.0\n  return 0;\n}\n";
    let m = resolve("minas-opteron").unwrap();
    let e = transform(src, &m).unwrap_err();
    match &e {
        MappError::Syntax { line, .. } => assert_eq!(*line, 4, "{e}"),
        other => panic!("{other}"),
    }
}

#[test]
fn ineligible_arrays_are_reported_and_left_alone() {
    let src = "\
extern double ext[1 << 20];
static double init[1 << 20] = {1.0};
static const double c[1 << 20];
static double unk[];
struct s { int x; };
static struct s st[1 << 20];
static double q[2][2][2][1 << 20];
static double sz[1 << 20];
static double addr[1 << 20];
int main(void) { double *p = &addr[0]; (void)p; return (int)sizeof sz + (int)sizeof(&addr); }
";
    let m = resolve("minas-opteron").unwrap();
    let t = transform(src, &m).unwrap();
    assert_eq!(t.output, src);
    assert!(!t.report.changed);
    let reason = |n: &str| {
        t.report
            .arrays
            .iter()
            .find(|a| a.name == n)
            .unwrap()
            .reason
            .clone()
    };
    assert!(reason("ext").contains("extern"));
    assert!(reason("init").contains("initializer"));
    assert!(reason("c").contains("const"));
    assert!(reason("unk").contains("unknown size"));
    assert!(reason("st").contains("struct s"));
    assert!(reason("q").contains("4 dimensions"));
    assert!(reason("sz").contains("sizeof"), "{}", reason("sz"));
    assert!(reason("addr").contains("&"), "{}", reason("addr"));
}

#[test]
fn eligible_arrays_without_main_is_an_error() {
    let m = resolve("minas-opteron").unwrap();
    let e = transform("double big[1 << 20];\nvoid f(void) { big[0] = 1; }\n", &m).unwrap_err();
    assert!(matches!(e, MappError::NoMain(_)), "{e}");
    assert!(e.to_string().contains("big"));
}

#[test]
fn a_file_over_the_limit_is_refused() {
    let m = resolve("minas-opteron").unwrap();
    let big = format!(
        "int main(void) {{ return 0; }}\n{}",
        " ".repeat(numaff_mapp::MAX_INPUT_BYTES)
    );
    let e = transform(&big, &m).unwrap_err();
    assert!(matches!(e, MappError::TooLarge(_)), "{e}");
}
