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
extern double ext[64];
static double init[1 << 20] = {1.0};
static const double c[1 << 20];
static double tbl[] = {1.0, 2.0};
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
    assert!(reason("tbl").contains("initializer"));
    assert!(reason("st").contains("struct s"));
    assert!(reason("q").contains("4 dimensions"));
    assert!(reason("sz").contains("sizeof"), "{}", reason("sz"));
    assert!(reason("addr").contains("&"), "{}", reason("addr"));
}

#[test]
fn eligible_arrays_without_main_is_an_error() {
    let m = resolve("minas-opteron").unwrap();
    let e = transform("double big[1 << 20];\nvoid f(void) { big[0] = 1; }\n", &m).unwrap_err();
    assert!(matches!(e, MappError::NoMain { line: 1, .. }), "{e}");
    assert!(e.to_string().starts_with("1: "), "{e}");
    assert!(e.to_string().contains("`big` line 1"), "{e}");
}

/// Unknown-size arrays, variable-length arrays and extern arrays are refused with the line of the
/// declaration and what to do, whatever else the file holds.
#[test]
fn unknown_size_vla_and_extern_arrays_are_refused_with_their_line() {
    let m = resolve("minas-opteron").unwrap();
    let head = "#include <stdio.h>\nstatic double ok[1 << 20];\n";
    let main = "int main(void) { ok[0] = 1; return 0; }\n";
    for (decl, name, says) in [
        (
            "static double unk[];\n",
            "unk",
            "unknown size ([]) and no initializer",
        ),
        (
            "double grid[][512];\n",
            "grid",
            "unknown size ([]) and no initializer",
        ),
        ("int n = 100;\ndouble v[n];\n", "v", "`n` is a variable"),
        (
            "static int n;\nstatic float w[8][n * 2];\n",
            "w",
            "variable-length array",
        ),
        (
            "double f(void);\ndouble g[(int)f()];\n",
            "g",
            "function call",
        ),
        (
            "extern double e[1 << 20];\n",
            "e",
            "extern array of 8388608 bytes",
        ),
        (
            "extern double eu[];\n",
            "eu",
            "extern array of unknown size",
        ),
    ] {
        let src = format!("{head}{decl}{main}");
        let line = 2 + decl.lines().count();
        let e = transform(&src, &m).unwrap_err();
        match &e {
            MappError::BadArray {
                line: l,
                name: n,
                what,
            } => {
                assert_eq!((*l, n.as_str()), (line, name), "{e}\n{src}");
                assert!(what.contains(says), "{e}");
            }
            other => panic!("{decl}: {other}"),
        }
        assert!(
            e.to_string()
                .starts_with(&format!("{line}: array `{name}`: ")),
            "{e}"
        );
    }
    // What stays allowed: a small extern array, an unknown size given by an initializer, a
    // variable-length array inside a function (automatic, not static: not MApp's business).
    let src = format!(
        "{head}extern int small[16];\nstatic const int t[] = {{1, 2}};\n\
         int main(int argc, char **argv) {{ double loc[argc]; loc[0] = ok[0] + small[0] + t[0]; \
         (void)argv; return (int)loc[0]; }}\n"
    );
    let t = transform(&src, &m).unwrap();
    assert!(t.report.changed);
    assert!(t.output.contains("double loc[argc];"));
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

/// A file of 20 000 large arrays (430 KB) is transformed in linear time (a bug walked the whole
/// tree for each array, to find `sizeof` and `&` of it: quadratic, over 10 minutes); the bound
/// here only tells linear from quadratic.
#[test]
fn a_file_of_many_large_arrays_is_transformed_in_linear_time() {
    let n = 20_000;
    let mut src = String::from("#include <stdio.h>\n");
    for i in 0..n {
        src.push_str(&format!("double a{i}[1 << 24];\n"));
    }
    src.push_str("int main(void) { a0[0] = sizeof a7; return 0; }\n");
    let m = resolve("kmaf-sim-4x2").unwrap();
    let start = std::time::Instant::now();
    let t = transform(&src, &m).unwrap();
    let took = start.elapsed();
    assert!(took.as_secs() < 60, "{n} arrays took {took:?}");
    let rewritten = t.report.arrays.iter().filter(|a| a.rewritten).count();
    assert_eq!(rewritten, n - 1, "all but a7, whose sizeof is taken");
    let a7 = t.report.arrays.iter().find(|a| a.name == "a7").unwrap();
    assert!(a7.reason.contains("sizeof"), "{}", a7.reason);
}

/// Macros that expand exponentially (13 levels of `(A+A+A+A)`, 4^13 uses in one size) are
/// evaluated once each (a bug expanded every use, for hours).
#[test]
fn exponentially_expanding_macros_are_evaluated_once_each() {
    let mut src = String::from("#define A0 1\n");
    for i in 1..=13 {
        let a = format!("A{}", i - 1);
        src.push_str(&format!("#define A{i} ({a}+{a}+{a}+{a})\n"));
    }
    src.push_str("double big[A13];\nint main(void) { big[0] = 1; return 0; }\n");
    let m = resolve("kmaf-sim-4x2").unwrap();
    let t = transform(&src, &m).unwrap();
    let big = &t.report.arrays[0];
    assert_eq!(big.bytes, Some(8 << 26));
    assert!(big.rewritten, "{}", big.reason);
}

/// 100 000 nested parentheses in a size: a size nested too deep is kept with its reason, and a
/// syntax error at the bottom is found (a bug overflowed the stack: the evaluation and the
/// search for the first syntax error recursed).
#[test]
fn deeply_nested_sizes_do_not_overflow_the_stack() {
    let n = 100_000;
    let deep = |inner: &str| format!("{}{inner}{}", "(".repeat(n), ")".repeat(n));
    let m = resolve("kmaf-sim-4x2").unwrap();
    let src = format!(
        "double a[{}];\nint main(void) {{ a[0] = 1; return 0; }}\n",
        deep("1 << 24")
    );
    let t = transform(&src, &m).unwrap();
    assert!(!t.report.changed);
    let a = &t.report.arrays[0];
    assert!(a.reason.contains("nests parentheses"), "{}", a.reason);
    // Not too deep to evaluate: 256 levels.
    let src = format!(
        "double a[{}{}{}];\nint main(void) {{ a[0] = 1; return 0; }}\n",
        "(".repeat(200),
        "1 << 24",
        ")".repeat(200)
    );
    assert!(transform(&src, &m).unwrap().report.changed);
    let src = format!("double a[{}];\n", deep("1 <<"));
    match transform(&src, &m) {
        Err(MappError::Syntax {
            line: 1, column, ..
        }) => assert!(column > n, "{column}"),
        other => panic!("{other:?}"),
    }
}

/// An array named in the initializer of a static (file scope, or `static` in a function) stays
/// an array: that initializer must be a constant, which an array's address is and a pointer
/// allocated in main is not. Arrays used only at run time are still rewritten.
#[test]
fn an_array_used_in_a_static_initializer_is_left_alone_with_its_reason() {
    let src = "\
#define N (1 << 20)
static double q[N];
static double *p = q;
static double r[N];
static double *pr[2] = {&r[4], 0};
static double s[N];
static double w[N];
int main(void) {
    static double *ps = s;
    double *pw = w;
    q[0] = 1.0;
    return (int)(p[0] + pr[0][0] + ps[0] + pw[0]);
}
";
    let m = resolve("minas-opteron").unwrap();
    let t = transform(src, &m).unwrap();
    let report = |n: &str| {
        t.report
            .arrays
            .iter()
            .find(|a| a.name == n)
            .unwrap()
            .clone()
    };
    for (name, line) in [("q", 3), ("r", 5), ("s", 9)] {
        let a = report(name);
        assert!(!a.rewritten, "{name} rewritten");
        assert!(
            a.reason.contains(&format!("line {line}")) && a.reason.contains("static"),
            "{name}: {}",
            a.reason
        );
    }
    assert!(report("w").rewritten, "{}", report("w").reason);
    assert!(t.output.contains("static double q[N];"), "{}", t.output);
    assert!(t.output.contains("static double *p = q;"));
    assert!(t.output.contains("static double *w;"));
}

/// `_Thread_local`, `thread_local` and `__thread` declarations parse; a thread-local array is
/// not eligible (one allocation in main cannot give each thread its copy) and stays as written,
/// as does an `extern` thread-local one.
#[test]
fn thread_local_declarations_parse_and_are_left_alone() {
    let src = "\
#define N (1 << 20)
_Thread_local double t1[N];
static _Thread_local double t2[N];
thread_local double t3[N];
static __thread double t4[N];
extern _Thread_local double t5[N];
_Thread_local int counter;
static double plain[N];
int main(void) { static _Thread_local int calls; calls++; return (int)(t1[0] + plain[0]); }
";
    let m = resolve("minas-opteron").unwrap();
    let t = transform(src, &m).unwrap();
    for name in ["t1", "t2", "t3", "t4", "t5"] {
        let a = t.report.arrays.iter().find(|a| a.name == name).unwrap();
        assert!(!a.rewritten, "{name} rewritten");
        assert!(a.reason.contains("thread-local"), "{name}: {}", a.reason);
    }
    let plain = t.report.arrays.iter().find(|a| a.name == "plain").unwrap();
    assert!(plain.rewritten, "{}", plain.reason);
    assert!(t.output.contains("_Thread_local double t1[N];"));
    assert!(t.output.contains("static __thread double t4[N];"));
    assert!(t.output.contains("static double *plain;"));
}
