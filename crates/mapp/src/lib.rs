//! MApp, the memory affinity preprocessor of Minas (004 §3.2), for libnumaff: rewrites a C
//! file's large static arrays so that `main` allocates them with a NUMA memory policy.
//!
//! [`transform`] parses a C file with tree-sitter-c, finds its *eligible* arrays (file-scope arrays
//! of a basic element type with 1 to 3 constant dimensions, no initializer, not `extern`/`const`,
//! not thread-local, not used in the initializer of a static variable (which must stay a constant),
//! whose size in bytes is at least the largest cache of the machine), chooses one memory policy from
//! the machine ([`choose_policy`]) and rewrites each eligible array into a pointer that `main`
//! allocates with `numaff_alloc_1d/_2d/_3d` and places with the policy, right after `numaff_init()`
//! (`numaff_final()` runs at exit through `atexit`). A 2-D or 3-D array becomes a pointer to its rows
//! (`double (*a)[M]`), so every use `a[i][j]` stays valid and nothing else in the file changes.
//! A file with no eligible array is returned byte-identical. Arrays it cannot judge or rewrite
//! safely (unknown size without initializer, variable length, large or unknown-size `extern`) make
//! it refuse the file with an error naming the line ([`MappError::BadArray`]).

use numaff_machine::Machine;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use tree_sitter::{Node, Parser};

/// The largest input accepted (bytes): a C file larger than this is refused rather than parsed.
pub const MAX_INPUT_BYTES: usize = 16 << 20;

/// NUMA factor (mean remote/local latency) at or below which a machine counts as having a *small*
/// NUMA factor (004 §3.2).
pub const SMALL_NUMA_FACTOR: f64 = 1.5;

/// Mean interconnect links per node at or above which a machine counts as having *many* links.
pub const MANY_LINKS_PER_NODE: f64 = 2.0;

/// Why MApp refuses a file.
#[derive(Debug, thiserror::Error)]
pub enum MappError {
    /// tree-sitter found a syntax error.
    #[error("{line}:{column}: syntax error: {what}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column (bytes).
        column: usize,
        /// What is wrong, with the offending text.
        what: String,
    },
    /// The file is too large.
    #[error("the input is {0} bytes; MApp takes C files up to {MAX_INPUT_BYTES} bytes")]
    TooLarge(usize),
    /// Eligible arrays but nowhere to allocate them.
    #[error("{line}: {what}")]
    NoMain {
        /// 1-based line of the first eligible array.
        line: usize,
        /// The arrays and what to do.
        what: String,
    },
    /// A file-scope array MApp refuses: unknown size, variable length, or `extern` (large or of
    /// unknown size): the file cannot be transformed safely as it is.
    #[error("{line}: array `{name}`: {what}")]
    BadArray {
        /// 1-based line of the declaration.
        line: usize,
        /// The array's name.
        name: String,
        /// What is wrong and what to do.
        what: String,
    },
    /// The parser could not be set up.
    #[error("tree-sitter: {0}")]
    Parser(String),
}

/// The memory policy MApp applies to every eligible array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// `numaff_cyclic`: pages round-robin over the nodes (bandwidth, contention).
    Cyclic,
    /// `numaff_bind_block`: one block per thread on that thread's node (latency).
    BindBlock,
}

impl Policy {
    /// The libnumaff function that applies the policy.
    pub fn function(self) -> &'static str {
        match self {
            Policy::Cyclic => "numaff_cyclic",
            Policy::BindBlock => "numaff_bind_block",
        }
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Cyclic => "cyclic",
            Policy::BindBlock => "bind_block",
        }
    }
}

/// The policy chosen for a machine and why.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    /// The policy.
    pub policy: Policy,
    /// Mean NUMA factor of the machine, where known.
    pub numa_factor: Option<f64>,
    /// Mean interconnect links per node, where known.
    pub links_per_node: Option<f64>,
    /// Nodes of the machine.
    pub nodes: usize,
    /// The reasoning in one sentence.
    pub reason: String,
}

/// The platform heuristic of 004 §3.2 (Program 1): many interconnect links and a small NUMA factor
/// mean memory contention is the problem, so pages are spread (`cyclic`); few links or a high NUMA
/// factor mean remote accesses are expensive or the links are a bottleneck, so each thread's block is
/// kept on its node (`bind_block`).
///
/// Thresholds: NUMA factor (mean) <= [`SMALL_NUMA_FACTOR`] (1.5) and links per node (mean) >=
/// [`MANY_LINKS_PER_NODE`] (2) → cyclic, else bind_block. With links unknown, the NUMA factor alone
/// decides; with one node any policy places the same, and cyclic is reported; with several nodes and
/// no NUMA factor, bind_block (what first touch would do, the safe choice). These reproduce 004's
/// own choices: cyclic on its Opteron (factor 1.2-1.5, 2-3 HyperTransport links per node) and on its
/// SGI Altix (factor 1.2-1.3, NUMAlink, 2 links per node).
pub fn choose_policy(machine: &Machine) -> Decision {
    let nodes = machine.nodes.len();
    let numa_factor = machine.numa_factor().map(|f| f.mean);
    let links_per_node = machine.links_per_node().and_then(|l| {
        if l.is_empty() {
            None
        } else {
            Some(l.iter().sum::<usize>() as f64 / l.len() as f64)
        }
    });
    let links_text = match links_per_node {
        Some(l) => format!("{l:.2} interconnect links per node"),
        None => "interconnect links unknown".to_string(),
    };
    let (policy, reason) = if nodes <= 1 {
        (
            Policy::Cyclic,
            "one NUMA node: every policy places the same; cyclic".to_string(),
        )
    } else {
        match numa_factor {
            None => (
                Policy::BindBlock,
                format!(
                    "{nodes} nodes but no NUMA factor known (no latency or distance matrix): \
                     bind_block, which keeps each thread's block local like first touch"
                ),
            ),
            Some(f) if f > SMALL_NUMA_FACTOR => (
                Policy::BindBlock,
                format!(
                    "NUMA factor {f:.2} > {SMALL_NUMA_FACTOR} (high; {links_text}): remote accesses \
                     are expensive, so bind_block keeps each thread's block on its node"
                ),
            ),
            Some(f) => match links_per_node {
                Some(l) if l < MANY_LINKS_PER_NODE => (
                    Policy::BindBlock,
                    format!(
                        "NUMA factor {f:.2} <= {SMALL_NUMA_FACTOR} but {links_text} < \
                         {MANY_LINKS_PER_NODE} (few): spread pages would saturate the links, so \
                         bind_block"
                    ),
                ),
                Some(_) => (
                    Policy::Cyclic,
                    format!(
                        "NUMA factor {f:.2} <= {SMALL_NUMA_FACTOR} (small) and {links_text} >= \
                         {MANY_LINKS_PER_NODE} (many): memory contention is the risk, so cyclic \
                         spreads the pages for bandwidth"
                    ),
                ),
                None => (
                    Policy::Cyclic,
                    format!(
                        "NUMA factor {f:.2} <= {SMALL_NUMA_FACTOR} (small; {links_text}): remote \
                         accesses are cheap, so cyclic spreads the pages for bandwidth"
                    ),
                ),
            },
        }
    };
    Decision {
        policy,
        numa_factor,
        links_per_node,
        nodes,
        reason,
    }
}

/// The size of the largest cache of the machine (bytes), the eligibility threshold; 0 if it has no
/// caches.
pub fn largest_cache_bytes(machine: &Machine) -> u64 {
    machine
        .caches
        .iter()
        .map(|c| c.size_bytes)
        .max()
        .unwrap_or(0)
}

/// One array MApp looked at.
#[derive(Debug, Clone, Serialize)]
pub struct ArrayReport {
    /// The array's name.
    pub name: String,
    /// 1-based line of its declaration.
    pub line: usize,
    /// The declared type, e.g. `double[N][M]`.
    pub declared: String,
    /// Its size in bytes, where MApp could evaluate it.
    pub bytes: Option<u64>,
    /// Whether it was rewritten.
    pub rewritten: bool,
    /// Why (eligible, or why not).
    pub reason: String,
}

/// What [`transform`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The policy and why.
    pub decision: Decision,
    /// Arrays of at least this many bytes are eligible (the largest cache).
    pub threshold_bytes: u64,
    /// Every file-scope array, rewritten or not.
    pub arrays: Vec<ArrayReport>,
    /// Whether the output differs from the input.
    pub changed: bool,
}

/// The transformed source and the report.
#[derive(Debug, Clone)]
pub struct Transformed {
    /// The new C source (the input itself when nothing was eligible).
    pub output: String,
    /// What changed and why.
    pub report: Report,
}

/// An eligible array, ready to rewrite.
struct Plan {
    name: String,
    line: usize,
    elem_type: String,
    dims: Vec<String>,
}

/// Text edits: (start byte, end byte, replacement).
type Edit = (usize, usize, String);

fn text<'a>(node: Node, src: &'a str) -> &'a str {
    &src[node.byte_range()]
}

fn line_of(node: Node) -> usize {
    node.start_position().row + 1
}

/// Parses `source` and rewrites its eligible arrays for `machine` (see the crate docs).
pub fn transform(source: &str, machine: &Machine) -> Result<Transformed, MappError> {
    if source.len() > MAX_INPUT_BYTES {
        return Err(MappError::TooLarge(source.len()));
    }
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_c::LANGUAGE.into())
        .map_err(|e| MappError::Parser(e.to_string()))?;
    // tree-sitter-c knows `thread_local` and `__thread` but not C11's `_Thread_local`: parse a
    // copy with it spelled `thread_local` (same length, so every byte offset holds for `source`).
    let parsed = spell_thread_local(source);
    let tree = parser
        .parse(parsed.as_deref().unwrap_or(source), None)
        .ok_or_else(|| MappError::Parser("parsing was cancelled".into()))?;
    let root = tree.root_node();
    if root.has_error() {
        return Err(first_error(root, source));
    }

    let decision = choose_policy(machine);
    let threshold = largest_cache_bytes(machine);
    let macros = collect_macros(root, source);
    let sizes = SizeEvaluator::new(&macros);
    let whole_uses = whole_array_uses(root, source);
    let static_uses = static_initializer_uses(root, source);
    let variables = file_scope_variables(root, source);
    let main = find_main(root, source);
    let main_start = main.map(|m| m.start_byte());

    let mut arrays = Vec::new();
    let mut edits: Vec<Edit> = Vec::new();
    let mut plans: Vec<Plan> = Vec::new();
    let mut last_include_end = None;

    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        if child.kind() == "preproc_include" && main_start.is_none_or(|m| child.start_byte() < m) {
            last_include_end = Some(child.end_byte());
        }
        if child.kind() != "declaration" {
            continue;
        }
        examine_declaration(
            child,
            source,
            &Scope {
                sizes: &sizes,
                variables: &variables,
                threshold,
                main_start,
                whole_uses: &whole_uses,
                static_uses: &static_uses,
            },
            &mut arrays,
            &mut edits,
            &mut plans,
        )?;
    }

    if plans.is_empty() {
        return Ok(Transformed {
            output: source.to_string(),
            report: Report {
                decision,
                threshold_bytes: threshold,
                arrays,
                changed: false,
            },
        });
    }
    let Some(main) = main else {
        return Err(MappError::NoMain {
            line: plans.first().map_or(1, |p| p.line),
            what: format!(
                "no main function with a body: MApp allocates the eligible arrays ({}) at the \
                 start of main; transform the file that defines main",
                plans
                    .iter()
                    .map(|p| format!("`{}` line {}", p.name, p.line))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };

    // The header and the two helpers, after the last #include before main (or at the top).
    let helpers = "#include <numaff.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         /* numaff mapp: allocation and placement of the large static arrays (libnumaff). */\n\
         static void *numaff_mapp_alloc(void *p, const char *name)\n{\n    \
         if (!p) {\n        fprintf(stderr, \"numaff mapp: cannot allocate %s: %s\\n\", name, \
         numaff_last_error());\n        exit(EXIT_FAILURE);\n    }\n    return p;\n}\n\
         static void numaff_mapp_final(void)\n{\n    (void)numaff_final();\n}\n";
    match last_include_end {
        Some(end) => {
            let nl = if source[..end].ends_with('\n') {
                ""
            } else {
                "\n"
            };
            edits.push((end, end, format!("{nl}{helpers}")));
        }
        None => edits.push((0, 0, format!("{helpers}\n"))),
    }

    // The allocation and placement at the start of main.
    if let Some(body) = main.child_by_field_name("body") {
        let indent = body
            .named_child(0)
            .map(|s| {
                let line_start = source[..s.start_byte()].rfind('\n').map_or(0, |i| i + 1);
                let lead = &source[line_start..s.start_byte()];
                if lead.trim().is_empty() {
                    lead.to_string()
                } else {
                    "    ".to_string()
                }
            })
            .unwrap_or_else(|| "    ".to_string());
        let mut code = format!(
            "\n{indent}/* numaff mapp: {} (see `numaff mapp` report) */\n\
             {indent}if (numaff_init() != 0) {{\n\
             {indent}    fprintf(stderr, \"numaff mapp: numaff_init: %s\\n\", numaff_last_error());\n\
             {indent}    exit(EXIT_FAILURE);\n\
             {indent}}}\n\
             {indent}atexit(numaff_mapp_final);\n",
            decision.policy.name()
        );
        for p in &plans {
            let alloc = match p.dims.len() {
                1 => "numaff_alloc_1d",
                2 => "numaff_alloc_2d",
                _ => "numaff_alloc_3d",
            };
            let dims = p
                .dims
                .iter()
                .map(|d| format!("(size_t)({d})"))
                .collect::<Vec<_>>()
                .join(", ");
            code.push_str(&format!(
                "{indent}{name} = numaff_mapp_alloc({alloc}({dims}, sizeof({ty})), \"{name}\");\n\
                 {indent}(void){func}({name});\n",
                name = p.name,
                ty = p.elem_type,
                func = decision.policy.function(),
            ));
        }
        let open = body.start_byte() + 1;
        edits.push((open, open, code));
    }

    edits.sort_by_key(|e| (e.0, e.1));
    let mut output = String::with_capacity(source.len() + 1024);
    let mut at = 0;
    for (start, end, with) in &edits {
        output.push_str(&source[at..*start]);
        output.push_str(with);
        at = *end;
    }
    output.push_str(&source[at..]);

    Ok(Transformed {
        output,
        report: Report {
            decision,
            threshold_bytes: threshold,
            arrays,
            changed: true,
        },
    })
}

/// The first ERROR or MISSING node, as an error with its line and column.
fn first_error(root: Node, source: &str) -> MappError {
    /// Depth first, in source order, through the children that have an error; a loop with its
    /// own stack, as nesting in a C file has no bound (100 000 parentheses overflowed the
    /// thread's stack when this recursed).
    fn find(root: Node) -> Option<Node> {
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            if node.is_error() || node.is_missing() {
                return Some(node);
            }
            let mut cursor = node.walk();
            let with_error: Vec<Node> = node
                .children(&mut cursor)
                .filter(|c| c.has_error() || c.is_missing() || c.is_error())
                .collect();
            stack.extend(with_error.into_iter().rev());
        }
        None
    }
    let node = find(root).unwrap_or(root);
    let pos = node.start_position();
    let what = if node.is_missing() {
        format!("missing {:?}", node.kind())
    } else {
        let t = text(node, source);
        let first_line = t.lines().next().unwrap_or("").trim();
        let snippet: String = first_line.chars().take(40).collect();
        format!("unexpected {snippet:?}")
    };
    MappError::Syntax {
        line: pos.row + 1,
        column: pos.column + 1,
        what,
    }
}

/// `#define NAME value` at file scope, name → value text.
fn collect_macros(root: Node, source: &str) -> HashMap<String, String> {
    let mut macros = HashMap::new();
    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        if child.kind() != "preproc_def" {
            continue;
        }
        if let (Some(name), Some(value)) = (
            child.child_by_field_name("name"),
            child.child_by_field_name("value"),
        ) {
            macros.insert(
                text(name, source).to_string(),
                text(value, source).trim().to_string(),
            );
        }
    }
    macros
}

/// The definition of `main` at file scope.
fn find_main<'t>(root: Node<'t>, source: &str) -> Option<Node<'t>> {
    let mut cursor = root.walk();
    let found = root.children(&mut cursor).find(|c| {
        c.kind() == "function_definition"
            && c.child_by_field_name("body").is_some()
            && function_name(*c, source).as_deref() == Some("main")
    });
    found
}

fn function_name(def: Node, source: &str) -> Option<String> {
    let mut d = def.child_by_field_name("declarator")?;
    loop {
        match d.kind() {
            "function_declarator" | "pointer_declarator" | "parenthesized_declarator" => {
                d = d
                    .child_by_field_name("declarator")
                    .or_else(|| d.named_child(0))?;
            }
            "identifier" => return Some(text(d, source).to_string()),
            _ => return None,
        }
    }
}

/// Names of the variables declared at file scope (what a dimension naming one of them would make
/// a variable-length array, which C forbids at file scope).
fn file_scope_variables(root: Node, source: &str) -> HashSet<String> {
    let mut vars = HashSet::new();
    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        if child.kind() != "declaration" {
            continue;
        }
        let mut dc = child.walk();
        for d in child.children_by_field_name("declarator", &mut dc) {
            let mut n = d;
            loop {
                match n.kind() {
                    "init_declarator" | "pointer_declarator" | "parenthesized_declarator" => {
                        match n
                            .child_by_field_name("declarator")
                            .or_else(|| n.named_child(0))
                        {
                            Some(inner) => n = inner,
                            None => break,
                        }
                    }
                    "identifier" => {
                        vars.insert(text(n, source).to_string());
                        break;
                    }
                    // Arrays and functions are not values a dimension can hold.
                    _ => break,
                }
            }
        }
    }
    vars
}

/// Why a dimension makes a variable-length array: it reads a file-scope variable or calls a
/// function.
fn variable_length(size: Node, source: &str, variables: &HashSet<String>) -> Option<String> {
    let mut stack = vec![size];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "identifier" if variables.contains(text(n, source)) => {
                return Some(format!("`{}` is a variable", text(n, source)));
            }
            "call_expression" => {
                return Some(format!("`{}` is a function call", text(n, source)));
            }
            _ => {}
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    None
}

/// Bytes of a basic C element type on LP64 (x86-64, aarch64 Linux).
fn elem_size(ty: &str) -> Option<u64> {
    let words: Vec<&str> = ty.split_whitespace().collect();
    let norm: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| *w != "signed" && *w != "unsigned")
        .collect();
    let size = match norm.as_slice() {
        [] => 4, // "unsigned"
        ["char"] | ["_Bool"] | ["bool"] | ["int8_t"] | ["uint8_t"] => 1,
        ["short"] | ["short", "int"] | ["int16_t"] | ["uint16_t"] => 2,
        ["int"] | ["float"] | ["int32_t"] | ["uint32_t"] => 4,
        ["long"] | ["long", "int"] | ["long", "long"] | ["long", "long", "int"] | ["double"] => 8,
        ["int64_t"]
        | ["uint64_t"]
        | ["size_t"]
        | ["ssize_t"]
        | ["ptrdiff_t"]
        | ["intptr_t"]
        | ["uintptr_t"] => 8,
        ["long", "double"] => 16,
        _ => return None,
    };
    Some(size)
}

/// Most macro expansions the array sizes of one file may take. Each is the parse of a short
/// expression (some microseconds); macros that expand exponentially (`#define A2 (A1+A1+A1+A1)`,
/// nested) stop here in well under a second instead of running for hours.
pub const MAX_MACRO_EXPANSIONS: u32 = 100_000;

/// Deepest nesting of parentheses and operators in one expression of an array size (the
/// evaluation recurses; 100 000 parentheses overflowed the thread's stack without this bound).
pub const MAX_EXPRESSION_NESTING: u32 = 256;

/// Deepest nesting of macros in an array size, counting the macros not evaluated before (a
/// macro's value, once known, is not expanded again).
pub const MAX_MACRO_DEPTH: u32 = 16;

/// Why an array size has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoValue {
    /// Not an integer constant expression of literals, macros and + - * / % << >>, or it
    /// overflows 64 bits.
    NotConstant,
    /// Macros nested deeper than [`MAX_MACRO_DEPTH`] (or a macro that refers to itself).
    TooDeep,
    /// More than [`MAX_MACRO_EXPANSIONS`] expansions for the file.
    TooManyExpansions,
    /// Parentheses and operators nested deeper than [`MAX_EXPRESSION_NESTING`].
    TooNested,
}

/// Evaluates the integer constant expressions of the array sizes of one file (literals, `#define`
/// macros, `+ - * / % << >>` and parentheses). A macro's value is computed once and kept
/// unless a limit cut it short (the value of a macro then depends on the macro alone), and the
/// expansions of the whole file are counted against [`MAX_MACRO_EXPANSIONS`].
struct SizeEvaluator<'a> {
    macros: &'a HashMap<String, String>,
    values: RefCell<HashMap<String, Result<u64, NoValue>>>,
    expansions: Cell<u32>,
    parser: RefCell<Option<Parser>>,
}

impl<'a> SizeEvaluator<'a> {
    fn new(macros: &'a HashMap<String, String>) -> Self {
        let mut parser = Parser::new();
        let parser = parser
            .set_language(&tree_sitter_c::LANGUAGE.into())
            .ok()
            .map(|()| parser);
        SizeEvaluator {
            macros,
            values: RefCell::new(HashMap::new()),
            expansions: Cell::new(0),
            parser: RefCell::new(parser),
        }
    }

    /// The value of the size expression `expr`.
    fn eval(&self, expr: &str) -> Result<u64, NoValue> {
        self.eval_at(expr, 0)
    }

    fn eval_at(&self, expr: &str, depth: u32) -> Result<u64, NoValue> {
        if depth > MAX_MACRO_DEPTH {
            return Err(NoValue::TooDeep);
        }
        let wrapped = format!("int x = {expr};");
        let tree = {
            let mut parser = self.parser.borrow_mut();
            let parser = parser.as_mut().ok_or(NoValue::NotConstant)?;
            parser.parse(&wrapped, None).ok_or(NoValue::NotConstant)?
        };
        if tree.root_node().has_error() {
            return Err(NoValue::NotConstant);
        }
        let value = tree
            .root_node()
            .named_child(0)
            .and_then(|decl| decl.child_by_field_name("declarator"))
            .and_then(|init| init.child_by_field_name("value"))
            .ok_or(NoValue::NotConstant)?;
        self.eval_node(value, &wrapped, depth, 0)
    }

    fn eval_node(&self, node: Node, src: &str, depth: u32, nest: u32) -> Result<u64, NoValue> {
        use NoValue::NotConstant;
        if nest > MAX_EXPRESSION_NESTING {
            return Err(NoValue::TooNested);
        }
        match node.kind() {
            "number_literal" => {
                let t = text(node, src).trim_end_matches(['u', 'U', 'l', 'L']);
                let v = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    u64::from_str_radix(hex, 16).ok()
                } else if t.len() > 1 && t.starts_with('0') {
                    u64::from_str_radix(&t[1..], 8).ok()
                } else {
                    t.parse().ok()
                };
                v.ok_or(NotConstant)
            }
            "parenthesized_expression" => self.eval_node(
                node.named_child(0).ok_or(NotConstant)?,
                src,
                depth,
                nest + 1,
            ),
            "identifier" => self.macro_value(text(node, src), depth),
            "binary_expression" => {
                let side = |f: &str| node.child_by_field_name(f).ok_or(NotConstant);
                let l = self.eval_node(side("left")?, src, depth, nest + 1)?;
                let r = self.eval_node(side("right")?, src, depth, nest + 1)?;
                let v = match text(side("operator")?, src) {
                    "+" => l.checked_add(r),
                    "-" => l.checked_sub(r),
                    "*" => l.checked_mul(r),
                    "/" => l.checked_div(r),
                    "%" => l.checked_rem(r),
                    "<<" => u32::try_from(r).ok().and_then(|r| l.checked_shl(r)),
                    ">>" => u32::try_from(r).ok().and_then(|r| l.checked_shr(r)),
                    _ => None,
                };
                v.ok_or(NotConstant)
            }
            _ => Err(NotConstant),
        }
    }

    /// The value of macro `name`, from the ones already computed or by expanding it.
    fn macro_value(&self, name: &str, depth: u32) -> Result<u64, NoValue> {
        if let Some(v) = self.values.borrow().get(name) {
            return *v;
        }
        let body = self.macros.get(name).ok_or(NoValue::NotConstant)?;
        let n = self.expansions.get();
        if n >= MAX_MACRO_EXPANSIONS {
            return Err(NoValue::TooManyExpansions);
        }
        self.expansions.set(n + 1);
        let v = self.eval_at(body, depth + 1);
        if !matches!(
            v,
            Err(NoValue::TooDeep | NoValue::TooManyExpansions | NoValue::TooNested)
        ) {
            self.values.borrow_mut().insert(name.to_string(), v);
        }
        v
    }
}

/// Where the file takes `sizeof NAME` or `&NAME` of an array itself, whose meaning would change
/// if it became a pointer: operand name → (first line, `sizeof` or `&`). One walk of the tree for
/// the whole file (a walk per array made a file of 1 000 large arrays take 2 s, 20 000 hours).
fn whole_array_uses(root: Node, source: &str) -> HashMap<String, (usize, &'static str)> {
    fn strip(t: &str) -> &str {
        let mut t = t.trim();
        while t.starts_with('(') && t.ends_with(')') {
            t = t[1..t.len() - 1].trim();
        }
        t
    }
    let mut uses: HashMap<String, (usize, &'static str)> = HashMap::new();
    let mut note = |operand: &str, line: usize, what: &'static str| {
        let e = uses.entry(operand.to_string()).or_insert((line, what));
        if line < e.0 {
            *e = (line, what);
        }
    };
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "sizeof_expression" | "alignof_expression" => {
                let operand = n
                    .child_by_field_name("value")
                    .or_else(|| n.child_by_field_name("type"));
                if let Some(o) = operand {
                    note(strip(text(o, source)), line_of(n), "sizeof");
                }
            }
            "pointer_expression" => {
                let op = n.child_by_field_name("operator").map(|o| text(o, source));
                if let (Some("&"), Some(a)) = (op, n.child_by_field_name("argument")) {
                    note(strip(text(a, source)), line_of(n), "&");
                }
            }
            _ => {}
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    uses
}

/// The storage-class keywords of thread storage duration (C11, C23 and GNU spellings).
const THREAD_LOCAL: [&str; 3] = ["_Thread_local", "thread_local", "__thread"];

/// `source` with each `_Thread_local` token spelled `thread_local ` (the same length), or None
/// when it has none.
fn spell_thread_local(source: &str) -> Option<String> {
    const KEYWORD: &str = "_Thread_local";
    if !source.contains(KEYWORD) {
        return None;
    }
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut at = 0;
    for (i, _) in source.match_indices(KEYWORD) {
        let end = i + KEYWORD.len();
        let alone = (i == 0 || !ident(bytes[i - 1])) && bytes.get(end).is_none_or(|b| !ident(*b));
        if alone {
            out.push_str(&source[at..i]);
            out.push_str("thread_local ");
            at = end;
        }
    }
    out.push_str(&source[at..]);
    Some(out)
}

/// The keyword of a storage-class specifier as the source spells it: the whole word from the
/// node's start (a `_Thread_local` parsed as `thread_local` covers one byte less of it).
fn storage_keyword<'a>(node: Node, source: &'a str) -> &'a str {
    let rest = &source[node.start_byte()..];
    let len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    &rest[..len]
}

/// Names used in the initializer of a variable of static or thread storage duration (file scope,
/// or `static`/thread-local in a function): name → first line. Such an initializer must be a
/// constant, and an array's address is one while a pointer MApp allocates is not, so these
/// arrays are left as they are (`static double *p = q;` would not compile any more).
fn static_initializer_uses(root: Node, source: &str) -> HashMap<String, usize> {
    let mut uses: HashMap<String, usize> = HashMap::new();
    let mut stack = vec![(root, false)];
    while let Some((n, in_function)) = stack.pop() {
        if n.kind() == "declaration" {
            let mut cursor = n.walk();
            let lasting = !in_function
                || n.children(&mut cursor).any(|c| {
                    c.kind() == "storage_class_specifier" && {
                        let t = storage_keyword(c, source);
                        t == "static" || THREAD_LOCAL.contains(&t)
                    }
                });
            if lasting {
                let mut cursor = n.walk();
                let values: Vec<Node> = n
                    .children_by_field_name("declarator", &mut cursor)
                    .filter(|d| d.kind() == "init_declarator")
                    .filter_map(|d| d.child_by_field_name("value"))
                    .collect();
                let mut inner = values;
                while let Some(v) = inner.pop() {
                    if v.kind() == "identifier" {
                        let line = line_of(v);
                        let e = uses.entry(text(v, source).to_string()).or_insert(line);
                        *e = (*e).min(line);
                    }
                    let mut cursor = v.walk();
                    inner.extend(v.children(&mut cursor));
                }
            }
        }
        let inside = in_function || n.kind() == "function_definition";
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor).map(|c| (c, inside)));
    }
    uses
}

/// What [`examine_declaration`] needs to know about the whole file.
struct Scope<'a> {
    sizes: &'a SizeEvaluator<'a>,
    variables: &'a HashSet<String>,
    threshold: u64,
    main_start: Option<usize>,
    whole_uses: &'a HashMap<String, (usize, &'static str)>,
    static_uses: &'a HashMap<String, usize>,
}

/// Reports the arrays of one file-scope declaration and plans the rewrite of its eligible ones;
/// refuses (an error naming the line) unknown-size arrays without an initializer, variable-length
/// arrays and `extern` arrays of unknown size or at least the threshold.
fn examine_declaration(
    decl: Node,
    source: &str,
    scope: &Scope,
    arrays: &mut Vec<ArrayReport>,
    edits: &mut Vec<Edit>,
    plans: &mut Vec<Plan>,
) -> Result<(), MappError> {
    let Scope {
        sizes: evaluator,
        variables,
        threshold,
        main_start,
        whole_uses,
        static_uses,
    } = *scope;
    let Some(ty) = decl.child_by_field_name("type") else {
        return Ok(());
    };
    let ty_text = text(ty, source).to_string();
    let mut storage = Vec::new();
    let mut qualifiers = Vec::new();
    let mut cursor = decl.walk();
    for c in decl.children(&mut cursor) {
        match c.kind() {
            "storage_class_specifier" => storage.push(storage_keyword(c, source).to_string()),
            "type_qualifier" => qualifiers.push(text(c, source).to_string()),
            _ => {}
        }
    }
    let mut cursor = decl.walk();
    let declarators: Vec<Node> = decl
        .children_by_field_name("declarator", &mut cursor)
        .collect();
    if !declarators
        .iter()
        .any(|d| d.kind() == "array_declarator" || d.kind() == "init_declarator")
    {
        return Ok(());
    }

    // Each declarator: Some((name, dims)) when rewritten, None when kept as it was.
    let mut outcome: Vec<Option<(String, Vec<String>)>> = Vec::new();
    for d in &declarators {
        let (arr, init) = if d.kind() == "init_declarator" {
            match d.child_by_field_name("declarator") {
                Some(inner) => (inner, true),
                None => {
                    outcome.push(None);
                    continue;
                }
            }
        } else {
            (*d, false)
        };
        if arr.kind() != "array_declarator" {
            outcome.push(None);
            continue;
        }
        // Dimensions from the outside in: a[N][M] is array(array(a, N), M).
        let mut dims_rev = Vec::new();
        let mut vla = None;
        let mut n = arr;
        let mut bad_shape = false;
        while n.kind() == "array_declarator" {
            let size = n.child_by_field_name("size");
            if let Some(why) = size.and_then(|s| variable_length(s, source, variables)) {
                vla = Some(why);
            }
            dims_rev.push(size.map(|s| text(s, source).to_string()));
            match n.child_by_field_name("declarator") {
                Some(inner) => n = inner,
                None => {
                    bad_shape = true;
                    break;
                }
            }
        }
        let name_ok = n.kind() == "identifier";
        let name = if name_ok {
            text(n, source).to_string()
        } else {
            text(arr, source).to_string()
        };
        dims_rev.reverse();
        let dims = dims_rev;
        let declared = format!(
            "{ty_text}{}",
            dims.iter()
                .map(|d| format!("[{}]", d.as_deref().unwrap_or("")))
                .collect::<String>()
        );
        let mut report = ArrayReport {
            name: name.clone(),
            line: line_of(*d),
            declared,
            bytes: None,
            rewritten: false,
            reason: String::new(),
        };
        // A missing dimension (`[]`) is reported as unknown size below, before the values.
        let sizes: Result<Vec<u64>, NoValue> = dims
            .iter()
            .map(|d| {
                d.as_deref()
                    .map_or(Err(NoValue::NotConstant), |e| evaluator.eval(e))
            })
            .collect();
        let esize = elem_size(&ty_text);
        if let (Ok(s), Some(e)) = (&sizes, esize) {
            report.bytes = s.iter().try_fold(e, |acc, x| acc.checked_mul(*x));
        }
        let is_extern = storage.iter().any(|s| s == "extern");
        let thread_local = storage.iter().find(|s| THREAD_LOCAL.contains(&s.as_str()));
        let unknown_size = dims.iter().any(Option::is_none);
        let refuse = |what: String| MappError::BadArray {
            line: report.line,
            name: name.clone(),
            what,
        };
        if !bad_shape && name_ok {
            if let Some(why) = &vla {
                return Err(refuse(format!(
                    "variable-length array ({why}): C allows no variable-length array at file \
                     scope; give it a constant size (a literal or a #define)"
                )));
            }
            if unknown_size && is_extern && thread_local.is_none() {
                return Err(refuse(
                    "extern array of unknown size ([]): it is defined in another file, and MApp \
                     cannot tell whether that definition becomes a pointer; transform the \
                     program's files together by hand, or give the size"
                        .to_string(),
                ));
            }
            if unknown_size && !init {
                return Err(refuse(
                    "unknown size ([]) and no initializer: MApp cannot tell its size; give the \
                     size"
                        .to_string(),
                ));
            }
            if is_extern && thread_local.is_none() && report.bytes.is_some_and(|b| b >= threshold) {
                return Err(refuse(format!(
                    "extern array of {} bytes >= {threshold} bytes (largest cache): it is \
                     defined in another file, whose rewrite by MApp would make it a pointer that \
                     this declaration no longer matches; MApp transforms one file at a time",
                    report.bytes.unwrap_or(0)
                )));
            }
        }
        let why_not = if bad_shape || !name_ok {
            Some("not a plain array of a basic type (pointers, functions)".to_string())
        } else if let Some(keyword) = thread_local {
            Some(format!(
                "thread-local ({keyword}): each thread has its own copy, which one allocation in \
                 main cannot give: left as it is"
            ))
        } else if is_extern {
            Some("extern: defined in another file, which MApp must transform instead".to_string())
        } else if !qualifiers.is_empty() {
            Some(format!(
                "qualified ({}): left as it is",
                qualifiers.join(" ")
            ))
        } else if init {
            Some("has an initializer: left as it is".to_string())
        } else if dims.len() > 3 {
            Some(format!(
                "{} dimensions: libnumaff allocates 1-D to 3-D arrays",
                dims.len()
            ))
        } else if dims.iter().any(Option::is_none) {
            Some("unknown size ([]): not a fixed-size array".to_string())
        } else if esize.is_none() {
            Some(format!(
                "element type `{ty_text}` is not a basic type MApp knows the size of"
            ))
        } else if let Err(why) = sizes {
            Some(match why {
                NoValue::NotConstant => "a dimension is not a constant MApp can evaluate \
                     (literals, #define macros, + - * / % << >>)"
                    .to_string(),
                NoValue::TooDeep => format!(
                    "a dimension nests macros more than {MAX_MACRO_DEPTH} deep (or a macro \
                     refers to itself): left as it is"
                ),
                NoValue::TooNested => format!(
                    "a dimension nests parentheses and operators more than \
                     {MAX_EXPRESSION_NESTING} deep: left as it is"
                ),
                NoValue::TooManyExpansions => format!(
                    "the file's array sizes take more than {MAX_MACRO_EXPANSIONS} macro \
                     expansions: left as it is; give this dimension a simpler constant"
                ),
            })
        } else if report.bytes.is_none() {
            Some("size overflows 64 bits".to_string())
        } else if report.bytes.is_some_and(|b| b < threshold) {
            Some(format!(
                "{} bytes < {threshold} bytes (largest cache): small, left to the compiler",
                report.bytes.unwrap_or(0)
            ))
        } else if main_start.is_some_and(|m| decl.start_byte() > m) {
            Some("declared after main, which allocates the arrays: left as it is".to_string())
        } else if let Some(&(line, what)) = whole_uses.get(&name) {
            Some(format!(
                "line {line} takes `{what}` of the whole array, which a pointer would change: \
                 left as it is"
            ))
        } else {
            static_uses.get(&name).map(|line| {
                format!(
                    "line {line} uses it in the initializer of a static or thread-local \
                     variable, which must be a constant (an array's address is, a pointer \
                     allocated in main is not): left as it is"
                )
            })
        };
        match why_not {
            Some(reason) => {
                report.reason = reason;
                outcome.push(None);
            }
            None => {
                report.rewritten = true;
                report.reason = format!(
                    "{} bytes >= {threshold} bytes (largest cache): eligible",
                    report.bytes.unwrap_or(0)
                );
                outcome.push(Some((name.clone(), dims.into_iter().flatten().collect())));
            }
        }
        arrays.push(report);
    }
    if outcome.iter().all(Option::is_none) {
        return Ok(());
    }

    // Rewrite the declaration: one declaration per declarator, kept or turned into a pointer.
    let prefix = {
        let first_decl = declarators[0].start_byte();
        source[decl.start_byte()..first_decl].trim_end().to_string()
    };
    let mut pieces = Vec::new();
    for (d, o) in declarators.iter().zip(&outcome) {
        match o {
            None => pieces.push(format!("{prefix} {};", text(*d, source))),
            Some((name, dims)) => {
                let rest: String = dims[1..].iter().map(|x| format!("[{x}]")).collect();
                let ptr = if rest.is_empty() {
                    format!("*{name}")
                } else {
                    format!("(*{name}){rest}")
                };
                plans.push(Plan {
                    name: name.clone(),
                    line: line_of(*d),
                    elem_type: ty_text.clone(),
                    dims: dims.clone(),
                });
                pieces.push(format!(
                    "{prefix} {ptr}; /* numaff mapp: was {name}{} */",
                    dims.iter().map(|x| format!("[{x}]")).collect::<String>()
                ));
            }
        }
    }
    edits.push((decl.start_byte(), decl.end_byte(), pieces.join("\n")));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_sizes() {
        let mut m = HashMap::new();
        m.insert("N".to_string(), "(1 << 10)".to_string());
        m.insert("M".to_string(), "N * 2".to_string());
        let e = SizeEvaluator::new(&m);
        assert_eq!(e.eval("N"), Ok(1024));
        assert_eq!(e.eval("M + 1"), Ok(2049));
        assert_eq!(e.eval("0x10UL"), Ok(16));
        assert_eq!(e.eval("K"), Err(NoValue::NotConstant));
        assert_eq!(e.eval("N << 64"), Err(NoValue::NotConstant));
        assert_eq!(elem_size("unsigned long long"), Some(8));
        assert_eq!(elem_size("struct s"), None);
    }

    /// A macro is expanded once, however often the sizes use it: 13 levels of `(A+A+A+A)` are
    /// 4^13 uses but 14 expansions.
    #[test]
    fn each_macro_is_expanded_once() {
        let mut m = HashMap::new();
        m.insert("A0".to_string(), "1".to_string());
        for i in 1..=13 {
            let a = format!("A{}", i - 1);
            m.insert(format!("A{i}"), format!("({a}+{a}+{a}+{a})"));
        }
        let e = SizeEvaluator::new(&m);
        assert_eq!(e.eval("A13"), Ok(1 << 26));
        assert_eq!(e.expansions.get(), 14);
    }

    /// Chains deeper than the limit, macros that refer to themselves, and files past the
    /// expansion budget end with their own reason, and a cut-short value is not kept.
    #[test]
    fn macro_limits_give_their_reason() {
        let mut m = HashMap::new();
        m.insert("SELF".to_string(), "SELF + 1".to_string());
        m.insert("B0".to_string(), "8".to_string());
        for i in 1..=20 {
            m.insert(format!("B{i}"), format!("B{}", i - 1));
        }
        let e = SizeEvaluator::new(&m);
        assert_eq!(e.eval("SELF"), Err(NoValue::TooDeep));
        assert_eq!(e.eval("B20"), Err(NoValue::TooDeep));
        // B4 was reached 16 deep from B20 and cut short there: from the top it has a value.
        assert_eq!(e.eval("B4"), Ok(8));
        // Alone B16 would be cut (17 deep), but B4..B0 are known now: 12 new expansions.
        assert_eq!(e.eval("B16"), Ok(8));

        // Distinct macros past the budget (each expanded once, none failing).
        let mut m = HashMap::new();
        for i in 0..MAX_MACRO_EXPANSIONS + 10 {
            m.insert(format!("C{i}"), "2".to_string());
        }
        let e = SizeEvaluator::new(&m);
        for i in 0..MAX_MACRO_EXPANSIONS {
            assert_eq!(e.eval(&format!("C{i}")), Ok(2));
        }
        let last = format!("C{}", MAX_MACRO_EXPANSIONS);
        assert_eq!(e.eval(&last), Err(NoValue::TooManyExpansions));
        assert_eq!(e.eval("C0"), Ok(2), "values already computed stay");
    }
}
