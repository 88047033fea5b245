//! Topology: machine facts from hwloc (synthetic, XML, this machine), the placement policy on
//! hand-computed cases, SQPOLL on idle CPUs only, and `topology.toml` round trips and checks.
//!
//! hwloc numbers a synthetic machine's PUs 0, 1, 2, ... in nesting order. For
//! "pack:2 numa:2 core:4 pu:2" (32 PUs, 16 cores) that means:
//!
//! | package | NUMA node | cores  | PUs   |
//! |---------|-----------|--------|-------|
//! | 0       | 0         | 0-3    | 0-7   |
//! | 0       | 1         | 4-7    | 8-15  |
//! | 1       | 2         | 8-11   | 16-23 |
//! | 1       | 3         | 12-15  | 24-31 |
//!
//! core `c` holds PUs `2c` (rank 0) and `2c + 1` (its SMT sibling). The policy visits NUMA
//! nodes in package-interleaved order 0, 2, 1, 3 (first node of each package, then the second)
//! and takes each node's cores in order, rank 0 PUs of all cores before any sibling.

use std::path::Path;

use partitioner::topology::{
    plan_executors, IoMode, Machine, MachineSource, Placement, Problem, ScanSettings, SqpollPolicy,
    Topology, TopologyError,
};

const BIG: &str = "pack:2 numa:2 core:4 pu:2";

fn machine(desc: &str) -> Machine {
    Machine::from_synthetic(desc).unwrap()
}

fn plan(desc: &str, n: usize, cpus: Option<&[usize]>, sqpoll: SqpollPolicy) -> Placement {
    plan_executors(&machine(desc), n, cpus, sqpoll).unwrap()
}

fn weights(p: &Placement) -> Vec<u32> {
    p.executors.iter().map(|e| e.weight).collect()
}

fn polls(p: &Placement) -> Vec<Option<usize>> {
    p.executors.iter().map(|e| e.sqpoll_cpu).collect()
}

#[test]
fn synthetic_machine_facts_follow_hwloc_numbering() {
    let m = machine(BIG);
    assert_eq!(
        (m.packages, m.numa_nodes, m.cores, m.pus.len()),
        (2, 4, 16, 32)
    );
    assert_eq!(m.source, "hwloc synthetic: pack:2 numa:2 core:4 pu:2");
    assert_eq!(m.cpus(), (0..32).collect::<Vec<_>>());
    for pu in &m.pus {
        assert_eq!(pu.core, pu.cpu / 2, "{pu:?}");
        assert_eq!(pu.numa_node, pu.cpu / 8, "{pu:?}");
        assert_eq!(pu.package, pu.cpu / 16, "{pu:?}");
    }
    assert!(m
        .describe()
        .contains("2 packages, 4 NUMA nodes, 16 cores, 32 PUs (CPUs 0-31)"));
}

#[test]
fn eight_executors_one_per_core_round_robin_over_nodes() {
    let p = plan(BIG, 8, None, SqpollPolicy::Off);
    // Nodes 0, 2, 1, 3 take their first core (PUs 0, 16, 8, 24), then their second (2, 18,
    // 10, 26).
    assert_eq!(p.cpus(), [0, 16, 8, 24, 2, 18, 10, 26]);
    let nodes: Vec<_> = p.executors.iter().map(|e| e.numa_node).collect();
    assert_eq!(nodes, [0, 2, 1, 3, 0, 2, 1, 3]);
    let packages: Vec<_> = p.executors.iter().map(|e| e.package).collect();
    assert_eq!(packages, [0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(weights(&p), [100; 8]);
    assert!(!p.oversubscribed);
    assert_eq!(polls(&p), [None; 8]);
}

#[test]
fn sixteen_executors_fill_every_core_before_any_sibling() {
    let p = plan(BIG, 16, None, SqpollPolicy::Off);
    // Rounds 3 and 4 of the node rotation: cores 2, 10, 6, 14 then 3, 11, 7, 15. No odd CPU
    // (sibling) is used.
    assert_eq!(
        p.cpus(),
        [0, 16, 8, 24, 2, 18, 10, 26, 4, 20, 12, 28, 6, 22, 14, 30]
    );
    assert_eq!(weights(&p), [100; 16]);
    assert!(!p.oversubscribed);
}

#[test]
fn siblings_come_after_all_cores_and_halve_their_core_weight() {
    let p = plan(BIG, 24, None, SqpollPolicy::Off);
    let mut expected = vec![0, 16, 8, 24, 2, 18, 10, 26, 4, 20, 12, 28, 6, 22, 14, 30];
    // The siblings (PU 2c + 1) in the same node rotation: cores 0, 8, 4, 12, 1, 9, 5, 13.
    expected.extend([1, 17, 9, 25, 3, 19, 11, 27]);
    assert_eq!(p.cpus(), expected);
    // Executors on those eight cores share them (50 each); the other eight cores are whole.
    let mut w = vec![50; 8];
    w.extend([100; 8]);
    w.extend([50; 8]);
    assert_eq!(weights(&p), w);
    // Every NUMA node gets the same share: 50 + 50 + 100 + 100 + 50 + 50.
    for node in 0..4 {
        let share: u32 = p
            .executors
            .iter()
            .filter(|e| e.numa_node == node)
            .map(|e| e.weight)
            .sum();
        assert_eq!(share, 400, "node {node}");
    }
}

#[test]
fn more_executors_than_cpus_wrap_around_and_are_flagged() {
    let p = plan(BIG, 40, None, SqpollPolicy::Off);
    assert!(p.oversubscribed);
    let cpus = p.cpus();
    assert_eq!(cpus[32..], [0, 16, 8, 24, 2, 18, 10, 26]);
    // Cores 0, 8, 4, 12, 1, 9, 5, 13 now run three executors (33 each), the rest two (50).
    assert_eq!(weights(&p)[..8], [33; 8]);
    assert_eq!(weights(&p)[8..16], [50; 8]);
    assert!(p.idle_cpus().is_empty());
}

#[test]
fn one_cpu_machines() {
    for desc in ["pu:1", "core:1 pu:1"] {
        let m = machine(desc);
        assert_eq!(
            (m.packages, m.numa_nodes, m.cores, m.pus.len()),
            (1, 1, 1, 1),
            "{desc}"
        );
        let p = plan(desc, 1, None, SqpollPolicy::Auto);
        assert_eq!(p.cpus(), [0]);
        assert_eq!(weights(&p), [100]);
        assert_eq!(polls(&p), [None], "no idle CPU for a poll thread");
        assert!(!p.oversubscribed);
        let p = plan(desc, 3, None, SqpollPolicy::Off);
        assert_eq!(p.cpus(), [0, 0, 0]);
        assert_eq!(weights(&p), [33, 33, 33]);
        assert!(p.oversubscribed);
        let e = plan_executors(&m, 1, None, SqpollPolicy::On).unwrap_err();
        assert!(matches!(e, TopologyError::SqpollRefused { .. }), "{e}");
    }
}

#[test]
fn restricted_cpu_sets() {
    // CPUs 0-7: node 0 only, cores 0-3. Cores first (0, 2, 4, 6), then siblings of cores 0, 1.
    let p = plan(BIG, 6, Some(&[0, 1, 2, 3, 4, 5, 6, 7]), SqpollPolicy::Off);
    assert_eq!(p.cpus(), [0, 2, 4, 6, 1, 3]);
    assert_eq!(weights(&p), [50, 50, 100, 100, 50, 50]);
    assert_eq!(p.allowed_cpus, (0..8).collect::<Vec<_>>());
    // CPUs 1, 3, 8, 9, 16: core 0 (via 1) and core 1 (via 3) on node 0, core 4 (8 and its
    // sibling 9) on node 1, core 8 (16) on node 2. Node order 0, 2, 1: 1, 16, 8, then node 0's
    // second core 3, then the only sibling 9. The default count is one per core: 4.
    let allowed = [16, 9, 8, 3, 1];
    assert_eq!(machine(BIG).cores_in(Some(&allowed)), 4);
    let p = plan(BIG, 5, Some(&allowed), SqpollPolicy::Off);
    assert_eq!(p.cpus(), [1, 16, 8, 3, 9]);
    assert_eq!(weights(&p), [100, 100, 50, 100, 50]);
    // SQPOLL auto with 3 executors (1, 16, 8) and idle 3, 9: executor 2 gets its sibling 9,
    // executor 0 a CPU on its node (3), executor 1 (node 2, package 1) nothing is left.
    let p = plan(BIG, 3, Some(&allowed), SqpollPolicy::Auto);
    assert_eq!(p.cpus(), [1, 16, 8]);
    assert_eq!(polls(&p), [Some(3), None, Some(9)]);
    let e = plan_executors(&machine(BIG), 3, Some(&allowed), SqpollPolicy::On).unwrap_err();
    assert!(e.to_string().contains("executor 1 (cpu 16)"), "{e}");
    // A CPU the machine lacks, and an empty set, are errors.
    let e = plan_executors(&machine(BIG), 1, Some(&[3, 32, 40]), SqpollPolicy::Off).unwrap_err();
    assert!(
        e.to_string().contains("CPUs 32,40 are not on the machine"),
        "{e}"
    );
    assert!(plan_executors(&machine(BIG), 1, Some(&[]), SqpollPolicy::Off).is_err());
}

#[test]
fn sqpoll_only_on_idle_cpus_of_a_two_cpu_machine() {
    // Two cores without SMT, like the reference VM.
    let two = "core:2 pu:1";
    let p = plan(two, 1, None, SqpollPolicy::Auto);
    assert_eq!(p.cpus(), [0]);
    assert_eq!(
        polls(&p),
        [Some(1)],
        "the poll thread goes to the other CPU"
    );
    let p = plan(two, 2, None, SqpollPolicy::Auto);
    assert_eq!(polls(&p), [None, None], "no idle CPU: SQPOLL stays off");
    let e = plan_executors(&machine(two), 2, None, SqpollPolicy::On).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TopologyError::SqpollRefused { .. }), "{msg}");
    assert!(
        msg.contains("--sqpoll on") && msg.contains("0 idle"),
        "{msg}"
    );
    assert_eq!(polls(&plan(two, 1, None, SqpollPolicy::On)), [Some(1)]);
    assert_eq!(polls(&plan(two, 1, None, SqpollPolicy::Off)), [None]);
    // With SMT the sibling hosts the poll thread: 2 executors on cores 0, 1 get PUs 1, 3.
    let p = plan("core:2 pu:2", 2, None, SqpollPolicy::On);
    assert_eq!(p.cpus(), [0, 2]);
    assert_eq!(polls(&p), [Some(1), Some(3)]);
}

#[test]
fn detect_write_load_check_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let this = Machine::detect().unwrap();
    assert!(!this.pus.is_empty());
    assert_eq!(this.source, "hwloc: this machine");
    let cases = [
        (this, None, SqpollPolicy::Off, ScanSettings::default()),
        (
            machine(BIG),
            Some(24),
            SqpollPolicy::Auto,
            ScanSettings {
                io: IoMode::Uring,
                readahead: 0,
                coalesce_kib: 0,
                sqpoll: SqpollPolicy::Auto,
            },
        ),
        (
            machine("core:2 pu:1"),
            Some(1),
            SqpollPolicy::On,
            ScanSettings {
                io: IoMode::Uring,
                sqpoll: SqpollPolicy::On,
                ..ScanSettings::default()
            },
        ),
    ];
    for (i, (m, n, sqpoll, scan)) in cases.into_iter().enumerate() {
        let n = n.unwrap_or_else(|| m.cores_in(None));
        let placement = plan_executors(&m, n, None, sqpoll).unwrap();
        let t = Topology::new(&m, &placement, scan);
        let path = dir.path().join(format!("t{i}.toml"));
        t.write(&path).unwrap();
        let loaded = Topology::load(&path).unwrap();
        assert_eq!(loaded, t, "{}", t.render());
        assert_eq!(loaded.check(Some(&m)), [], "{}", t.render());
        Topology::load_checked(&path, Some(&m)).unwrap();
        // Every field has a comment above it in the first executor and the other tables.
        let text = std::fs::read_to_string(&path).unwrap();
        for field in [
            "packages",
            "numa_nodes",
            "cores",
            "pus",
            "source",
            "cpu",
            "weight",
            "io",
        ] {
            let at = text.find(&format!("\n{field} = ")).unwrap();
            let above = text[..at].lines().last().unwrap_or_default();
            assert!(above.starts_with('#'), "{field}: {above}");
        }
    }
}

#[test]
fn hwloc_xml_export_plans_like_the_machine_it_describes() {
    let dir = tempfile::tempdir().unwrap();
    let xml = MachineSource::Synthetic(BIG.into()).export_xml().unwrap();
    let path = dir.path().join("big.xml");
    std::fs::write(&path, &xml).unwrap();
    let from_xml = Machine::from_xml_file(&path).unwrap();
    assert_eq!(from_xml.pus, machine(BIG).pus);
    assert_eq!(from_xml.source, format!("hwloc xml: {}", path.display()));
    let p = plan_executors(&from_xml, 8, None, SqpollPolicy::Off).unwrap();
    assert_eq!(p.cpus(), [0, 16, 8, 24, 2, 18, 10, 26]);
    // This machine's export reads back to the same PUs.
    let this = dir.path().join("this.xml");
    std::fs::write(&this, MachineSource::ThisMachine.export_xml().unwrap()).unwrap();
    assert_eq!(
        Machine::from_xml_file(&this).unwrap().pus,
        Machine::detect().unwrap().pus
    );
    // Missing, empty and non-XML files are errors naming the file.
    let junk = dir.path().join("junk.xml");
    std::fs::write(&junk, "pack:2 core:2").unwrap();
    let bad_xml = dir.path().join("bad.xml");
    std::fs::write(&bad_xml, "<topology><object type=\"Nonsense\"/></topology>").unwrap();
    for bad in [dir.path().join("missing.xml"), junk, bad_xml] {
        let e = Machine::from_xml_file(&bad).unwrap_err().to_string();
        assert!(e.contains(&bad.display().to_string()), "{e}");
    }
}

/// An export by hwloc's own tool reads back to this machine's PUs. `lstopo` is in Debian's
/// `hwloc` package, which `scripts/setup` does not install (the library alone is needed), so
/// this runs only when asked for: `cargo test -p partitioner -- --ignored lstopo`.
#[test]
#[ignore = "needs hwloc's lstopo (Debian package hwloc), which scripts/setup does not install"]
fn lstopo_xml_export_reads_back_to_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let lstopo = dir.path().join("lstopo.xml");
    let status = std::process::Command::new("lstopo")
        .args(["--of", "xml"])
        .arg(&lstopo)
        .status()
        .expect("run lstopo (install the hwloc package)");
    assert!(status.success(), "lstopo --of xml failed: {status}");
    let m = Machine::from_xml_file(&lstopo).unwrap();
    assert_eq!(m.pus, Machine::detect().unwrap().pus);
}

#[test]
fn bad_synthetic_descriptions_are_errors() {
    for bad in [
        "",
        "bogus:2",
        "pack:0",
        "pack:2 core:x",
        "pack:100000 pu:100000",
    ] {
        let e = Machine::from_synthetic(bad).unwrap_err();
        assert!(matches!(e, TopologyError::Synthetic { .. }), "{bad:?}: {e}");
    }
}

/// A valid file for "pack:2 numa:2 core:4 pu:2": 2 executors on CPUs 0 and 16 with SQPOLL
/// threads on their siblings 1 and 17.
fn valid_file() -> String {
    let m = machine(BIG);
    let p = plan_executors(&m, 2, None, SqpollPolicy::Auto).unwrap();
    assert_eq!(p.cpus(), [0, 16]);
    assert_eq!(polls(&p), [Some(1), Some(17)]);
    let scan = ScanSettings {
        io: IoMode::Uring,
        sqpoll: SqpollPolicy::Auto,
        ..ScanSettings::default()
    };
    Topology::new(&m, &p, scan).render()
}

fn problems_in(text: &str) -> Vec<Problem> {
    Topology::parse(text, Path::new("t.toml"))
        .unwrap()
        .check(Some(&machine(BIG)))
}

#[test]
fn check_reports_each_bad_file_class_once() {
    let good = valid_file();
    assert_eq!(problems_in(&good), []);
    let cases: [(&str, &str, &str); 13] = [
        (
            "cpu = 16\n",
            "cpu = 99\n",
            "cpu 99 is not a CPU of the machine",
        ),
        (
            "cpu = 16\ncore = 8\npackage = 1\nnuma_node = 2\n",
            "cpu = 0\ncore = 0\npackage = 0\nnuma_node = 0\n",
            "executors 0 and 1 share cpu 0",
        ),
        (
            "sqpoll_cpu = 17\n",
            "sqpoll_cpu = 0\n",
            "sqpoll_cpu 0 runs executor 0",
        ),
        (
            "sqpoll_cpu = 17\n",
            "sqpoll_cpu = 64\n",
            "sqpoll_cpu 64 is not a CPU",
        ),
        (
            "sqpoll_cpu = 17\n",
            "sqpoll_cpu = 1\n",
            "put their SQPOLL threads on the same cpu 1",
        ),
        (
            "readahead = 1024\n",
            "readahead = 16385\n",
            "readahead = 16385 pages exceeds",
        ),
        (
            "coalesce_kib = 128\n",
            "coalesce_kib = 20000\n",
            "coalesce_kib = 20000 exceeds",
        ),
        (
            "io = \"uring\"\n",
            "io = \"dmaa\"\n",
            "io = \"dmaa\" is not an I/O mode",
        ),
        (
            "sqpoll = \"auto\"\n",
            "sqpoll = \"sometimes\"\n",
            "sqpoll = \"sometimes\" is not",
        ),
        (
            "weight = 100\n",
            "weight = 0\n",
            "every executor has weight 0",
        ),
        (
            "core = 8\n",
            "core = 9\n",
            "executor 1: core = 9, but cpu 16 is on core 8",
        ),
        (
            "pus = 32\n",
            "pus = 2\n",
            "[machine] pus = 2, but the machine checked against",
        ),
        (
            "sqpoll = \"auto\"\n",
            "sqpoll = \"off\"\n",
            "sqpoll = \"off\", but executors 0 and 1",
        ),
    ];
    for (from, to, message) in cases {
        assert!(good.contains(from), "{from}");
        let text = if from == "weight = 100\n" {
            good.replace(from, to)
        } else {
            good.replacen(from, to, 1)
        };
        let problems = problems_in(&text);
        assert_eq!(problems.len(), 1, "{to}: {problems:?}");
        let shown = problems[0].to_string();
        assert!(shown.contains(message), "{shown}");
    }
    // SQPOLL on with an I/O path that has none.
    let dma_on = good
        .replace("io = \"uring\"", "io = \"dma\"")
        .replace("sqpoll = \"auto\"", "sqpoll = \"on\"");
    let problems = problems_in(&dma_on);
    assert_eq!(problems, [Problem::SqpollNeedsUring { io: IoMode::Dma }]);
    assert!(problems[0].to_string().contains("needs io = \"uring\""));
    // No executors at all.
    let start = good.find("# One [[executor]]").unwrap();
    let end = good.find("# How every executor reads").unwrap();
    let empty = format!("{}{}", &good[..start], &good[end..]);
    assert_eq!(problems_in(&empty), [Problem::NoExecutors]);
    // SQPOLL on but an executor has no poll CPU.
    let on = good
        .replace("sqpoll = \"auto\"", "sqpoll = \"on\"")
        .replace("sqpoll_cpu = 17\n", "");
    let problems = problems_in(&on);
    assert_eq!(problems, [Problem::SqpollCpuMissing { executors: vec![1] }]);
    // Without a machine, only the file's own consistency is checked.
    let t = Topology::parse(
        &good.replacen("cpu = 16\n", "cpu = 99\n", 1),
        Path::new("t.toml"),
    );
    assert_eq!(t.unwrap().check(None), []);
}

#[test]
fn load_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = valid_file();
    let cases = [
        (
            "unknown key",
            good.replace("readahead = 1024", "readahed = 1024"),
            "line",
        ),
        (
            "negative cpu",
            good.replacen("cpu = 0\n", "cpu = -1\n", 1),
            "line",
        ),
        ("missing cpu", good.replacen("cpu = 0\n", "", 1), "cpu"),
        ("not toml", "this is not [toml".to_string(), "line 1"),
        (
            "no machine",
            "[scan]\nio = \"dma\"\n".to_string(),
            "machine",
        ),
        (
            "wrong type",
            good.replace("weight = 100", "weight = \"heavy\""),
            "line",
        ),
    ];
    for (what, text, expect) in cases {
        let path = dir.path().join(format!("{}.toml", what.replace(' ', "-")));
        std::fs::write(&path, text).unwrap();
        let e = Topology::load(&path).unwrap_err();
        let shown = e.to_string();
        assert!(matches!(e, TopologyError::Parse { .. }), "{what}: {shown}");
        assert!(
            shown.starts_with(&path.display().to_string()),
            "{what}: {shown}"
        );
        assert!(shown.contains(expect), "{what}: {shown}");
        assert!(!shown.contains('\n'), "{what}: {shown}");
    }
    let missing = dir.path().join("missing.toml");
    let e = Topology::load(&missing).unwrap_err().to_string();
    assert!(e.contains("missing.toml: read:"), "{e}");
    // load_checked refuses a file with problems and lists them all.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        good.replace("io = \"uring\"", "io = \"x\"")
            .replace("readahead = 1024", "readahead = 99999"),
    )
    .unwrap();
    let e = Topology::load_checked(&bad, Some(&machine(BIG)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("io = \"x\"") && e.contains("readahead = 99999"),
        "{e}"
    );
}

#[test]
fn committed_topology_file_is_valid_for_a_two_cpu_machine() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topology.toml");
    let t = Topology::load(&path).unwrap();
    assert!(t.check(None).is_empty(), "{:?}", t.check(None));
    // It was written for the 2-CPU reference machine (one package, one NUMA node, two cores
    // without SMT): it is valid against that machine, built by hwloc from its description.
    let reference = machine("pack:1 numa:1 core:2 pu:1");
    assert_eq!(t.check(Some(&reference)), []);
    // And against this one, when this one is that kind of machine.
    let this = Machine::detect().unwrap();
    if this.pus.len() == t.machine.pus && this.cores == t.machine.cores {
        assert_eq!(t.check(Some(&this)), []);
    }
}
