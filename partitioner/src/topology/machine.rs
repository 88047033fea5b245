//! The machine's facts, read by hwloc (through `hwlocality`) from this machine, a synthetic
//! description or an XML export, plus memory and CPU model from `sysinfo` for this machine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use hwlocality::errors::RawHwlocError;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::Topology as HwlocTopology;

use super::error::{cpu_list, Result, TopologyError};

/// Largest synthetic topology accepted, in PUs: hwloc builds them in time quadratic in the PUs
/// (8192 take seconds), and real machines have a few thousand at most.
const MAX_SYNTHETIC_PUS: u64 = 1 << 13;
/// Largest hwloc XML file read, in bytes (real exports of big machines are a few MiB).
const MAX_XML_BYTES: u64 = 256 << 20;

/// Where a machine's facts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineSource {
    /// The machine this program runs on.
    ThisMachine,
    /// An hwloc synthetic description, e.g. `"pack:2 numa:2 core:4 pu:2"`.
    Synthetic(String),
    /// An hwloc XML file, as `lstopo --of xml` writes it.
    Xml(PathBuf),
}

impl MachineSource {
    /// How `topology.toml`'s `source` field names it: `hwloc: this machine`,
    /// `hwloc synthetic: DESC` or `hwloc xml: FILE`.
    pub fn describe(&self) -> String {
        match self {
            MachineSource::ThisMachine => "hwloc: this machine".to_string(),
            MachineSource::Synthetic(d) => format!("hwloc synthetic: {d}"),
            MachineSource::Xml(p) => format!("hwloc xml: {}", p.display()),
        }
    }

    /// The source a `source` field names, if it is one [`describe`](Self::describe) writes.
    pub fn from_described(text: &str) -> Option<MachineSource> {
        let text = text.trim();
        if text == "hwloc: this machine" {
            Some(MachineSource::ThisMachine)
        } else if let Some(d) = text.strip_prefix("hwloc synthetic:") {
            Some(MachineSource::Synthetic(d.trim().to_string()))
        } else {
            text.strip_prefix("hwloc xml:")
                .map(|p| MachineSource::Xml(PathBuf::from(p.trim())))
        }
    }

    /// Reads the machine from this source.
    pub fn load(&self) -> Result<Machine> {
        match self {
            MachineSource::ThisMachine => Machine::detect(),
            MachineSource::Synthetic(d) => Machine::from_synthetic(d),
            MachineSource::Xml(p) => Machine::from_xml_file(p),
        }
    }

    /// The source's topology as hwloc XML (what `lstopo --of xml` prints), for planning on
    /// another machine with [`Machine::from_xml_file`].
    pub fn export_xml(&self) -> Result<String> {
        let topology = self.hwloc()?;
        topology
            .export_xml(XMLExportFlags::empty())
            .map(|xml| xml.as_str().to_string())
            .map_err(|e| self.error(format!("XML export failed: {e}")))
    }

    fn hwloc(&self) -> Result<HwlocTopology> {
        match self {
            MachineSource::ThisMachine => HwlocTopology::new().map_err(|e| TopologyError::Detect {
                what: hwloc_failure(&e),
            }),
            MachineSource::Synthetic(description) => {
                check_synthetic(description)?;
                HwlocTopology::builder()
                    .from_synthetic(description)
                    .map_err(|e| self.error(e.to_string()))?
                    .build()
                    .map_err(|e| self.error(hwloc_failure(&e)))
            }
            MachineSource::Xml(path) => {
                // hwloc reads the file itself (its in-memory path refuses large exports), after
                // we have made sure it is there and looks like XML: hwlocality panics on
                // unexpected errors from `hwloc_topology_set_xml`.
                precheck_xml(path)?;
                HwlocTopology::builder()
                    .from_xml_file(path)
                    .map_err(|e| self.error(format!("not an hwloc topology: {e}")))?
                    .build()
                    .map_err(|e| {
                        self.error(format!("not an hwloc topology: {}", hwloc_failure(&e)))
                    })
            }
        }
    }

    fn error(&self, what: String) -> TopologyError {
        match self {
            MachineSource::ThisMachine => TopologyError::Detect { what },
            MachineSource::Synthetic(description) => TopologyError::Synthetic {
                description: description.clone(),
                what,
            },
            MachineSource::Xml(path) => TopologyError::Xml {
                path: path.clone(),
                what,
            },
        }
    }
}

/// `hwloc_topology_load failed: Invalid argument (os error 22)`.
fn hwloc_failure(e: &RawHwlocError) -> String {
    match e.errno {
        Some(errno) => format!(
            "{} failed: {}",
            e.api,
            std::io::Error::from_raw_os_error(errno.0)
        ),
        None => format!("{} failed", e.api),
    }
}

/// Refuses descriptions hwloc would choke on or take ages to build: empty, NUL bytes, or more
/// than [`MAX_SYNTHETIC_PUS`] PUs (the product of the `type:N` arities).
fn check_synthetic(description: &str) -> Result<()> {
    let refuse = |what: &str| {
        Err(TopologyError::Synthetic {
            description: description.to_string(),
            what: what.to_string(),
        })
    };
    if description.trim().is_empty() {
        return refuse("empty description");
    }
    if description.contains('\0') {
        return refuse("contains a NUL byte");
    }
    let mut pus: u64 = 1;
    for token in description.split_whitespace() {
        let Some((_, arity)) = token.split_once(':') else {
            continue;
        };
        let digits: String = arity.chars().take_while(char::is_ascii_digit).collect();
        let n = digits.parse::<u64>().unwrap_or(u64::MAX);
        pus = pus.saturating_mul(n.max(1));
    }
    if pus > MAX_SYNTHETIC_PUS {
        return refuse(&format!("more than {MAX_SYNTHETIC_PUS} PUs"));
    }
    Ok(())
}

fn precheck_xml(path: &Path) -> Result<()> {
    use std::io::Read;
    let read_error = |source| TopologyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    let xml_error = |what: &str| TopologyError::Xml {
        path: path.to_path_buf(),
        what: what.to_string(),
    };
    if !meta.is_file() {
        return Err(xml_error("not a regular file"));
    }
    if meta.len() > MAX_XML_BYTES {
        return Err(xml_error("larger than any hwloc topology export"));
    }
    let mut head = Vec::new();
    file.take(4096).read_to_end(&mut head).map_err(read_error)?;
    let text = String::from_utf8_lossy(&head);
    if !text.trim_start().starts_with('<') || head.contains(&0) {
        return Err(xml_error("not an XML file"));
    }
    Ok(())
}

/// One processing unit (hardware thread): a CPU the kernel can schedule on, and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pu {
    /// The kernel's CPU number (hwloc PU OS index).
    pub cpu: usize,
    /// The physical core: hwloc's logical core index, unique across the machine.
    pub core: usize,
    /// The package (socket), by OS index.
    pub package: usize,
    /// The NUMA node whose memory is local to this PU, by OS index.
    pub numa_node: usize,
}

/// A machine's processing units and how they group into cores, NUMA nodes and packages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Where the facts come from, as `topology.toml` records it (see
    /// [`MachineSource::describe`]).
    pub source: String,
    /// Every PU, sorted by CPU number.
    pub pus: Vec<Pu>,
    /// Packages (sockets) with at least one PU.
    pub packages: usize,
    /// NUMA nodes with at least one PU (memory-only nodes are not counted).
    pub numa_nodes: usize,
    /// Physical cores.
    pub cores: usize,
    /// The CPU model, from `sysinfo` (this machine only).
    pub cpu_brand: Option<String>,
    /// Total memory in bytes, from `sysinfo` (this machine only).
    pub memory_bytes: Option<u64>,
}

/// Moves the calling thread off CPU `busy` when the process may run on another one.
///
/// The background discovery ([`Machine::detect_in_background`]) is milliseconds of work a
/// short command (an index seek: a few milliseconds in all) does not wait for, but a new
/// thread starts on its parent's CPU, and the scheduler left the command's thread waiting
/// behind it there while the other CPU was idle (seen with `perf`: the main thread off-CPU for
/// the whole discovery). What hwloc reports does not depend on the thread's affinity (it reads
/// the allowed CPUs from the cgroup), and the x86 backend binds to each PU in turn and then
/// back to every allowed one: the affinity set here holds only until then.
fn keep_off_cpu(busy: usize) {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed cpu_set_t is an empty set; both calls read or write only `set`, whose
    // size is passed, and act on the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut set) != 0
            || busy >= libc::CPU_SETSIZE as usize
            || !libc::CPU_ISSET(busy, &set)
            || libc::CPU_COUNT(&set) < 2
        {
            return;
        }
        libc::CPU_CLR(busy, &mut set);
        libc::sched_setaffinity(0, size, &set);
    }
}

/// This machine, once detected.
static DETECTED: OnceLock<Machine> = OnceLock::new();

/// The discovery [`Machine::detect_in_background`] started, until someone waits for it.
static PENDING: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

impl Machine {
    /// Reads this machine's topology with hwloc (the PUs this process may use), and its CPU
    /// model and memory with `sysinfo`. The first success is kept for the life of the process
    /// (hwloc's discovery takes milliseconds: it loads its plugins and reads sysfs); if
    /// [`Machine::detect_in_background`] started the discovery, this waits for it.
    pub fn detect() -> Result<Machine> {
        let pending = PENDING.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = pending {
            let _ = handle.join();
        }
        if let Some(machine) = DETECTED.get() {
            return Ok(machine.clone());
        }
        let machine = Machine::detect_uncached()?;
        let _ = DETECTED.set(machine.clone());
        Ok(machine)
    }

    /// Starts [`Machine::detect`]'s discovery on a thread of its own, so that it overlaps with
    /// other start-up work (opening and planning the table); a later `detect` waits for it.
    pub fn detect_in_background() {
        if DETECTED.get().is_some() {
            return;
        }
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        if pending.is_none() {
            // SAFETY: sched_getcpu takes no arguments and only returns a number or -1.
            let caller = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
            *pending = std::thread::Builder::new()
                .name("corescan-hwloc".into())
                .spawn(move || {
                    if let Some(cpu) = caller {
                        keep_off_cpu(cpu);
                    }
                    if let Ok(machine) = Machine::detect_uncached() {
                        let _ = DETECTED.set(machine);
                    }
                })
                .ok();
        }
    }

    fn detect_uncached() -> Result<Machine> {
        let source = MachineSource::ThisMachine;
        let mut machine = Machine::from_hwloc(&source.hwloc()?, source.describe());
        // sysinfo's facts are extras: without them the topology is still complete.
        if let Ok(mut sys) = sysinfo::System::new() {
            sys.refresh_memory();
            sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            machine.memory_bytes = Some(sys.total_memory()).filter(|&m| m > 0);
            machine.cpu_brand = sys
                .cpus()
                .first()
                .map(|c| c.brand().trim().to_string())
                .filter(|b| !b.is_empty());
        }
        Ok(machine)
    }

    /// Builds the machine an hwloc synthetic description describes, e.g.
    /// `"pack:2 numa:2 core:4 pu:2"` (2 packages, each of 2 NUMA nodes of 4 cores of 2 PUs).
    /// hwloc numbers the PUs 0, 1, 2, ... in that nesting order: core 0 has PUs 0 and 1. At
    /// most 8192 PUs.
    pub fn from_synthetic(description: &str) -> Result<Machine> {
        let source = MachineSource::Synthetic(description.trim().to_string());
        Ok(Machine::from_hwloc(&source.hwloc()?, source.describe()))
    }

    /// Reads an hwloc XML export (`lstopo --of xml FILE`, or [`MachineSource::export_xml`]).
    pub fn from_xml_file(path: &Path) -> Result<Machine> {
        let source = MachineSource::Xml(path.to_path_buf());
        Ok(Machine::from_hwloc(&source.hwloc()?, source.describe()))
    }

    /// A machine from a list of PUs (duplicates by CPU number are dropped); the counts are
    /// the distinct cores, packages and NUMA nodes among them.
    pub fn from_pus(source: impl Into<String>, pus: impl IntoIterator<Item = Pu>) -> Machine {
        let mut pus: Vec<Pu> = pus.into_iter().collect();
        pus.sort_by_key(|p| p.cpu);
        pus.dedup_by_key(|p| p.cpu);
        let distinct = |f: fn(&Pu) -> usize| pus.iter().map(f).collect::<BTreeSet<_>>().len();
        Machine {
            source: source.into(),
            packages: distinct(|p| p.package),
            numa_nodes: distinct(|p| p.numa_node),
            cores: distinct(|p| p.core),
            pus,
            cpu_brand: None,
            memory_bytes: None,
        }
    }

    fn from_hwloc(topology: &HwlocTopology, source: String) -> Machine {
        let index = |o: &TopologyObject| o.os_index().unwrap_or_else(|| o.logical_index());
        let pus = topology.objects_with_type(ObjectType::PU).map(|pu| {
            let cpu = index(pu);
            // Without Core objects (e.g. synthetic "pu:2") each PU is its own core; core
            // numbers then follow the PU's logical index.
            let core = pu
                .first_ancestor_with_type(ObjectType::Core)
                .map_or_else(|| pu.logical_index(), TopologyObject::logical_index);
            let package = pu
                .first_ancestor_with_type(ObjectType::Package)
                .map_or(0, index);
            // A PU's nodeset holds the NUMA nodes local to it (by OS index): one, or none
            // when hwloc knows no NUMA node for it.
            let numa_node = pu
                .nodeset()
                .and_then(|set| set.first_set())
                .map_or(0, usize::from);
            Pu {
                cpu,
                core,
                package,
                numa_node,
            }
        });
        Machine::from_pus(source, pus.collect::<Vec<_>>())
    }

    /// The PU with CPU number `cpu`, if the machine has it.
    pub fn pu(&self, cpu: usize) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&cpu, |p| p.cpu)
            .ok()
            .and_then(|i| self.pus.get(i))
    }

    /// Every CPU number, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        self.pus.iter().map(|p| p.cpu).collect()
    }

    /// One line: `hwloc: this machine: 1 package, 1 NUMA node, 2 cores, 2 PUs (CPUs 0-1)`.
    pub fn describe(&self) -> String {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}: {}, {}, {}, {} (CPUs {})",
            self.source,
            plural(self.packages, "package"),
            plural(self.numa_nodes, "NUMA node"),
            plural(self.cores, "core"),
            plural(self.pus.len(), "PU"),
            cpu_list(&self.cpus())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_guards() {
        assert!(check_synthetic("pack:2 core:2 pu:2").is_ok());
        assert!(check_synthetic("").is_err());
        assert!(check_synthetic("pu:1\0").is_err());
        assert!(check_synthetic("pack:1000 core:1000 pu:2").is_err());
        assert!(check_synthetic("pu:99999999999999999999999").is_err());
    }

    #[test]
    fn sources_round_trip_through_their_description() {
        for s in [
            MachineSource::ThisMachine,
            MachineSource::Synthetic("pack:2 numa:2 core:4 pu:2".into()),
            MachineSource::Xml(PathBuf::from("/tmp/m.xml")),
        ] {
            assert_eq!(MachineSource::from_described(&s.describe()), Some(s));
        }
        assert_eq!(MachineSource::from_described("hand-written"), None);
    }
}
